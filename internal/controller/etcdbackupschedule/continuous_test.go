package etcdbackupschedule

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pitr"
	"steward.dev/steward/internal/resources"
)

func (e *env) schedule(t *testing.T) *etcdv1alpha1.EtcdBackupSchedule {
	t.Helper()
	s := &etcdv1alpha1.EtcdBackupSchedule{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "nightly"}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *env) condition(t *testing.T) *metav1.Condition {
	t.Helper()
	return meta.FindStatusCondition(e.schedule(t).Status.Conditions, etcdv1alpha1.ConditionContinuousBackup)
}

// TestContinuousBackupFollower: enabling continuous backup starts the follower (Deployment and ConfigMap); its
// report becomes status; a chain no snapshot starts gets a snapshot at once; a Complete one opens the window and
// lets older segments go; an error is shown; turning it off removes the follower.
func TestContinuousBackupFollower(t *testing.T) {
	s := schedule(etcdv1alpha1.ConcurrencyForbid)
	s.Spec.Schedule = "@every 6h"
	s.Spec.Continuous = &etcdv1alpha1.ContinuousBackup{Enabled: true, SegmentInterval: &metav1.Duration{Duration: 2 * time.Second}}
	e := newEnv(t, s)
	ctx := context.Background()
	if err := e.c.Create(ctx, dbCluster()); err != nil {
		t.Fatal(err)
	}
	report := pitr.FollowerStatus{ClusterID: "c1", Watching: true, ChainStart: 101, LastRevision: 150, CurrentRevision: 153,
		LastTime: t0.Add(time.Minute), Location: "s3://bkt/prod/db-segments/c1"}
	var readErr error
	e.r.ReadFollower = func(context.Context, string) (pitr.FollowerStatus, error) { return report, readErr }
	e.r.Options = resources.Options{ClusterDomain: "cluster.local", AgentImage: "agent:test"}

	if res := e.pass(t); res.RequeueAfter != requeueContinuous {
		t.Fatalf("requeue %v, want %v while continuous backup runs", res.RequeueAfter, requeueContinuous)
	}
	dep := &appsv1.Deployment{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "nightly-follower"}, dep); err != nil {
		t.Fatal(err)
	}
	args := dep.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"follow", "--interval=2s", "--path=prod/db-segments", "--s3-bucket=bkt"} {
		if !contains(args, want) {
			t.Fatalf("follower args %v lack %s", args, want)
		}
	}
	if dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType || !metav1.IsControlledBy(dep, e.schedule(t)) {
		t.Fatalf("follower Deployment %+v", dep.Spec.Strategy)
	}
	if c := e.condition(t); c == nil || c.Reason != etcdv1alpha1.ReasonFollowerStarting {
		t.Fatalf("before the follower is ready: %+v", c)
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "follower-1", Labels: resources.FollowerLabels(s)},
		Status: corev1.PodStatus{PodIP: "10.0.0.9", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	if err := e.c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	e.pass(t)
	if c := e.condition(t); c == nil || c.Reason != etcdv1alpha1.ReasonWaitingForSnapshot {
		t.Fatalf("no snapshot starts the chain: %+v", c)
	}
	bs := e.backups(t)
	if len(bs) != 1 {
		t.Fatalf("a snapshot must be taken at once: %d backups", len(bs))
	}
	bs[0].Status.Revision, bs[0].Status.ClusterID, bs[0].Status.StartTime = 120, "c1", &metav1.Time{Time: t0}
	if err := e.c.Status().Update(ctx, &bs[0]); err != nil {
		t.Fatal(err)
	}
	e.finish(t, etcdv1alpha1.ConditionComplete)
	e.pass(t)
	st := e.schedule(t).Status.Continuous
	if c := e.condition(t); c == nil || c.Status != metav1.ConditionTrue || c.Reason != etcdv1alpha1.ReasonFollowing {
		t.Fatalf("following: %+v", c)
	}
	if st == nil || st.RecoverableFrom == nil || st.RecoverableFrom.Revision != 120 || st.RecoverableFrom.Backup != bs[0].Name ||
		st.RecoverableTo == nil || st.RecoverableTo.Revision != 150 || st.PendingRevisions != 3 || st.ObservedTime == nil {
		t.Fatalf("status.continuous %+v", st)
	}
	cm := &corev1.ConfigMap{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "nightly-follower"}, cm); err != nil || cm.Data[resources.FollowerPruneKey] != "120" {
		t.Fatalf("prune revision: %v %v", err, cm.Data)
	}

	// A follower scaled away by hand comes back.
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "nightly-follower"}, dep); err != nil {
		t.Fatal(err)
	}
	zero := int32(0)
	dep.Spec.Replicas = &zero
	if err := e.c.Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	e.pass(t)
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "nightly-follower"}, dep); err != nil || dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
		t.Fatalf("follower scaled to 0 stays at %v (%v)", dep.Spec.Replicas, err)
	}

	// etcd compacted past the follower: a Warning Event once, the gap named in the condition, a snapshot at once.
	at := t0.Add(2 * time.Minute)
	report.CompactedAt, report.CompactedRevision, report.ChainStart, report.LastRevision = &at, 180, 181, 190
	e.pass(t)
	if c := e.condition(t); c == nil || c.Reason != etcdv1alpha1.ReasonWaitingForSnapshot || !strings.Contains(c.Message, "compacted revision 180") {
		t.Fatalf("after a compaction gap: %+v", c)
	}
	if st := e.schedule(t).Status.Continuous; st.CompactedAt == nil || !st.CompactedAt.Time.Equal(at) {
		t.Fatalf("compactedAt %+v", st.CompactedAt)
	}
	e.pass(t)
	if n := countEvents(e, "ContinuousBackupGap"); n != 1 {
		t.Fatalf("%d ContinuousBackupGap Events, want 1", n)
	}
	report.CompactedAt, report.ChainStart = nil, 101

	report.Error = "upload s3://bkt/prod/db-segments/c1/seg-...: connection refused"
	e.pass(t)
	if c := e.condition(t); c == nil || c.Reason != etcdv1alpha1.ReasonFollowerFailing || c.Message != report.Error {
		t.Fatalf("a failing follower: %+v", c)
	}
	readErr = errors.New("connection refused")
	e.pass(t)
	if c := e.condition(t); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("an unreachable follower: %+v", c)
	}

	off := e.schedule(t)
	off.Spec.Continuous.Enabled = false
	if err := e.c.Update(ctx, off); err != nil {
		t.Fatal(err)
	}
	e.pass(t)
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "nightly-follower"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Fatalf("follower Deployment after disabling: %v", err)
	}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "nightly-follower"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("follower ConfigMap after disabling: %v", err)
	}
	if got := e.schedule(t); got.Status.Continuous != nil || meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionContinuousBackup) != nil {
		t.Fatalf("status after disabling: %+v", got.Status)
	}
}

// countEvents drains the fake recorder and counts the Events of one reason.
func countEvents(e *env, reason string) int {
	rec := e.r.Recorder.(*record.FakeRecorder)
	n := 0
	for {
		select {
		case ev := <-rec.Events:
			if strings.Contains(ev, " "+reason+" ") {
				n++
			}
		default:
			return n
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestWindowAndPrune(t *testing.T) {
	complete := func(name string, rev int64, id string) etcdv1alpha1.EtcdBackup {
		b := etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name}}
		b.Status.Revision, b.Status.ClusterID = rev, id
		meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: "X"})
		return b
	}
	backups := []etcdv1alpha1.EtcdBackup{complete("old", 50, "c1"), complete("a", 100, "c1"), complete("b", 200, "c1"), complete("other", 150, "c0")}
	rep := pitr.FollowerStatus{ClusterID: "c1", ChainStart: 80, LastRevision: 260}
	from, to := window(backups, rep)
	if from == nil || from.Backup != "a" || from.Revision != 100 || to == nil || to.Revision != 260 {
		t.Fatalf("window %+v..%+v", from, to)
	}
	// After a gap the chain starts past every snapshot: no window until a new one.
	if from, _ := window(backups, pitr.FollowerStatus{ClusterID: "c1", ChainStart: 300, LastRevision: 320}); from != nil {
		t.Fatalf("window after a gap: %+v", from)
	}
	if got := pruneBefore(backups, "c1"); got != 50 {
		t.Fatalf("pruneBefore %d", got)
	}
	if got := pruneBefore(backups, "c9"); got != 0 {
		t.Fatalf("pruneBefore without a snapshot of the identity: %d", got)
	}
}

// TestFollowerWithoutItsServiceAccount: a destination whose ambient identity (serviceAccountName) does not exist
// gets the follower's Deployment no Pod; the condition says so (DestinationNotFound, naming it) instead of
// "starting", and once it exists the follower is waited for as usual.
func TestFollowerWithoutItsServiceAccount(t *testing.T) {
	s := schedule(etcdv1alpha1.ConcurrencyForbid)
	s.Spec.Schedule = "@every 6h"
	s.Spec.Destination.S3.CredentialsSecret, s.Spec.Destination.S3.ServiceAccountName = nil, "backup-irsa"
	s.Spec.Continuous = &etcdv1alpha1.ContinuousBackup{Enabled: true}
	e := newEnv(t, s)
	ctx := context.Background()
	if err := e.c.Create(ctx, dbCluster()); err != nil {
		t.Fatal(err)
	}
	e.r.Options = resources.Options{ClusterDomain: "cluster.local", AgentImage: "agent:test"}
	e.pass(t)
	if c := e.condition(t); c == nil || c.Reason != etcdv1alpha1.ReasonDestinationNotFound || !strings.Contains(c.Message, "ServiceAccount backup-irsa") {
		t.Fatalf("without its ServiceAccount: %+v", c)
	}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "nightly-follower"}, &appsv1.Deployment{}); err != nil {
		t.Fatalf("the follower's Deployment is kept, to run once the ServiceAccount exists: %v", err)
	}
	if err := e.c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backup-irsa"}}); err != nil {
		t.Fatal(err)
	}
	e.pass(t)
	if c := e.condition(t); c == nil || c.Reason != etcdv1alpha1.ReasonFollowerStarting {
		t.Fatalf("with its ServiceAccount, before the follower is ready: %+v", c)
	}
}
