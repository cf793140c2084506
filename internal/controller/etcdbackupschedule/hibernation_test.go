package etcdbackupschedule

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pitr"
	"steward.dev/steward/internal/resources"
)

func dbCluster() *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16"}, Status: etcdv1alpha1.EtcdClusterStatus{ClusterID: "c1"}}
}

// hibernate puts the cluster in a phase of hibernation: "" is asked for, not yet observed (no status); "running"
// is no hibernation at all.
func (e *env) hibernate(t *testing.T, phase string) {
	t.Helper()
	c := &etcdv1alpha1.EtcdCluster{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "db"}, c); err != nil {
		t.Fatal(err)
	}
	setHibernation(c, phase)
	if err := e.c.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

func setHibernation(c *etcdv1alpha1.EtcdCluster, phase string) {
	c.Spec.Hibernation, c.Status.Hibernation = nil, nil
	switch etcdv1alpha1.HibernationPhase(phase) {
	case "":
		c.Spec.Hibernation = &etcdv1alpha1.Hibernation{Enabled: true}
	case etcdv1alpha1.HibernationHibernating, etcdv1alpha1.HibernationHibernated:
		c.Spec.Hibernation = &etcdv1alpha1.Hibernation{Enabled: true}
		c.Status.Hibernation = &etcdv1alpha1.HibernationStatus{Phase: etcdv1alpha1.HibernationPhase(phase), Since: metav1.NewTime(t0)}
	case etcdv1alpha1.HibernationResuming:
		c.Spec.Hibernation = &etcdv1alpha1.Hibernation{Enabled: false}
		c.Status.Hibernation = &etcdv1alpha1.HibernationStatus{Phase: etcdv1alpha1.HibernationResuming, Since: metav1.NewTime(t0)}
	}
}

func (e *env) ready(t *testing.T) *metav1.Condition {
	t.Helper()
	return meta.FindStatusCondition(e.schedule(t).Status.Conditions, etcdv1alpha1.ConditionReady)
}

func TestHibernationOf(t *testing.T) {
	for name, tc := range map[string]struct {
		phase     string
		want      etcdv1alpha1.HibernationPhase
		hibernate bool
	}{
		"running":                     {phase: "running"},
		"asked for, not yet observed": {phase: "", want: etcdv1alpha1.HibernationHibernating, hibernate: true},
		"members stopping":            {phase: "Hibernating", want: etcdv1alpha1.HibernationHibernating, hibernate: true},
		"hibernated":                  {phase: "Hibernated", want: etcdv1alpha1.HibernationHibernated, hibernate: true},
		"resuming, not yet Available": {phase: "Resuming", want: etcdv1alpha1.HibernationResuming, hibernate: true},
	} {
		t.Run(name, func(t *testing.T) {
			c := dbCluster()
			setHibernation(c, tc.phase)
			if got, ok := hibernationOf(c); got != tc.want || ok != tc.hibernate {
				t.Fatalf("hibernationOf = %q, %v; want %q, %v", got, ok, tc.want, tc.hibernate)
			}
		})
	}
	if _, ok := hibernationOf(nil); ok {
		t.Fatal("a missing cluster hibernates")
	}
}

// TestScheduleSkipsBackupsWhileHibernated: through every phase of a hibernation the due times pass without a
// backup and without a catch-up later, Ready says Hibernated and names the phase, and one Event marks the pause;
// once the cluster is back the next due time creates a backup again.
func TestScheduleSkipsBackupsWhileHibernated(t *testing.T) {
	e := newEnv(t, schedule(etcdv1alpha1.ConcurrencyForbid))
	if err := e.c.Create(context.Background(), dbCluster()); err != nil {
		t.Fatal(err)
	}
	e.pass(t)
	countEvents(e, "")
	for i, phase := range []string{"", "Hibernating", "Hibernated", "Resuming"} {
		e.hibernate(t, phase)
		due := t0.Add(time.Duration(i+1) * 10 * time.Minute)
		e.now = due.Add(time.Second)
		e.pass(t)
		if bs := e.backups(t); len(bs) != 0 {
			t.Fatalf("phase %q: a backup of a hibernated cluster was created: %s", phase, bs[0].Name)
		}
		wantPhase := phase
		if phase == "" {
			wantPhase = "Hibernating"
		}
		c := e.ready(t)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != etcdv1alpha1.ReasonHibernated ||
			!strings.Contains(c.Message, "EtcdCluster db is hibernated (phase "+wantPhase+")") ||
			!strings.Contains(c.Message, "the next after that at "+due.Add(10*time.Minute).Format(time.RFC3339)) {
			t.Fatalf("phase %q: Ready %+v", phase, c)
		}
		if s := e.schedule(t); s.Status.LastScheduleTime == nil || !s.Status.LastScheduleTime.Time.Equal(due) {
			t.Fatalf("phase %q: lastScheduleTime %v, want the skipped %v", phase, s.Status.LastScheduleTime, due)
		}
	}
	if n := countEvents(e, etcdv1alpha1.ReasonHibernated); n != 1 {
		t.Fatalf("%d Hibernated Events over the pause, want 1 (when it began)", n)
	}

	// Available again: nothing is caught up before the next due time, which creates a backup.
	e.hibernate(t, "running")
	e.now = t0.Add(45 * time.Minute)
	e.pass(t)
	if bs := e.backups(t); len(bs) != 0 {
		t.Fatalf("a skipped time was caught up at resume: %s", bs[0].Name)
	}
	if c := e.ready(t); c == nil || c.Status != metav1.ConditionTrue || c.Reason != etcdv1alpha1.ReasonScheduled {
		t.Fatalf("after resume: Ready %+v", c)
	}
	e.now = t0.Add(50*time.Minute + time.Second)
	e.pass(t)
	if bs := e.backups(t); len(bs) != 1 || bs[0].Name != "nightly-20260102t035000z" {
		t.Fatalf("after resume: backups %v, want the one due at 03:50", bs)
	}
}

// TestContinuousBackupPausesWhileHibernated: the follower goes while the cluster hibernates, its window stays in
// status, no snapshot is taken to start one, and the schedule does not poll; at resume the follower comes back.
func TestContinuousBackupPausesWhileHibernated(t *testing.T) {
	ctx := context.Background()
	s := schedule(etcdv1alpha1.ConcurrencyForbid)
	s.Spec.Schedule = "@every 6h"
	s.Spec.Continuous = &etcdv1alpha1.ContinuousBackup{Enabled: true}
	e := newEnv(t, s)
	if err := e.c.Create(ctx, dbCluster()); err != nil {
		t.Fatal(err)
	}
	e.r.ReadFollower = func(context.Context, string) (pitr.FollowerStatus, error) {
		return pitr.FollowerStatus{ClusterID: "c1", Watching: true, ChainStart: 101, LastRevision: 150, CurrentRevision: 150}, nil
	}
	e.r.Options = resources.Options{ClusterDomain: "cluster.local", AgentImage: "agent:test"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "follower-1", Labels: resources.FollowerLabels(s)},
		Status: corev1.PodStatus{PodIP: "10.0.0.9", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	if err := e.c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	e.pass(t) // follower started; no snapshot starts its chain, so one is taken
	bs := e.backups(t)
	if len(bs) != 1 {
		t.Fatalf("%d backups, want the snapshot that starts the window", len(bs))
	}
	bs[0].Status.Revision, bs[0].Status.ClusterID, bs[0].Status.StartTime = 120, "c1", &metav1.Time{Time: t0}
	if err := e.c.Status().Update(ctx, &bs[0]); err != nil {
		t.Fatal(err)
	}
	e.finish(t, etcdv1alpha1.ConditionComplete)
	e.pass(t)
	if c := e.condition(t); c == nil || c.Reason != etcdv1alpha1.ReasonFollowing {
		t.Fatalf("before hibernation: %+v", c)
	}
	window := e.schedule(t).Status.Continuous.DeepCopy()

	e.hibernate(t, "Hibernated")
	// Whatever a follower would report now (a chain no snapshot starts), nothing is read or taken.
	e.r.ReadFollower = func(context.Context, string) (pitr.FollowerStatus, error) {
		return pitr.FollowerStatus{ClusterID: "c1", Watching: true, ChainStart: 500, LastRevision: 510}, nil
	}
	for range 2 {
		e.now = e.now.Add(time.Minute)
		if res := e.pass(t); res.RequeueAfter == requeueContinuous {
			t.Fatalf("polls a follower that is gone: requeue %v", res.RequeueAfter)
		}
	}
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.ConfigMap{}} {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "nightly-follower"}, obj); !apierrors.IsNotFound(err) {
			t.Fatalf("follower %T while the cluster hibernates: %v", obj, err)
		}
	}
	c := e.condition(t)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != etcdv1alpha1.ReasonHibernated || !strings.Contains(c.Message, "phase Hibernated") {
		t.Fatalf("ContinuousBackup while hibernated: %+v", c)
	}
	if got := e.schedule(t).Status.Continuous; !reflect.DeepEqual(got, window) {
		t.Fatalf("status.continuous changed while hibernated:\n got %+v\nwant %+v", got, window)
	}
	if n := len(e.backups(t)); n != 1 {
		t.Fatalf("%d backups, want no snapshot taken while hibernated", n)
	}

	e.hibernate(t, "running")
	if res := e.pass(t); res.RequeueAfter != requeueContinuous {
		t.Fatalf("after resume: requeue %v, want %v", res.RequeueAfter, requeueContinuous)
	}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "nightly-follower"}, &appsv1.Deployment{}); err != nil {
		t.Fatalf("follower after resume: %v", err)
	}
	if c := e.condition(t); c == nil || c.Reason == etcdv1alpha1.ReasonHibernated {
		t.Fatalf("ContinuousBackup after resume: %+v", c)
	}
}

// TestClusterWatch: a cluster's hibernation changes wake the schedules of that cluster, and only those; its other
// status changes do not.
func TestClusterWatch(t *testing.T) {
	other := schedule("")
	other.Name, other.Spec.ClusterName = "other", "db2"
	e := newEnv(t, schedule(""))
	if err := e.c.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	got := schedulesOf(e.c)(context.Background(), dbCluster())
	if want := []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "nightly"}}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("schedules of db: %v, want %v", got, want)
	}

	for name, tc := range map[string]struct {
		from, to string
		want     bool
	}{
		"hibernation asked for":   {from: "running", to: "", want: true},
		"phase moves on":          {from: "Hibernating", to: "Hibernated", want: true},
		"resuming":                {from: "Hibernated", to: "Resuming", want: true},
		"Available again":         {from: "Resuming", to: "running", want: true},
		"running, status changes": {from: "running", to: "running"},
		"hibernated, no change":   {from: "Hibernated", to: "Hibernated"},
	} {
		t.Run(name, func(t *testing.T) {
			o, n := dbCluster(), dbCluster()
			setHibernation(o, tc.from)
			setHibernation(n, tc.to)
			n.Status.ClusterID = "changed"
			if got := clusterHibernationChanged.Update(event.UpdateEvent{ObjectOld: o, ObjectNew: n}); got != tc.want {
				t.Fatalf("passes update: %v, want %v", got, tc.want)
			}
		})
	}
}
