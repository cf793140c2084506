package etcdbackupschedule

import (
	"context"
	"sort"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

type env struct {
	r   *Reconciler
	c   client.Client
	now time.Time
}

func newEnv(t *testing.T, s *etcdv1alpha1.EtcdBackupSchedule) *env {
	t.Helper()
	sch := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	if err := etcdv1alpha1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(sch).WithObjects(s).
		WithStatusSubresource(&etcdv1alpha1.EtcdBackupSchedule{}, &etcdv1alpha1.EtcdBackup{}).Build()
	e := &env{c: c, now: t0}
	e.r = &Reconciler{Client: c, Recorder: record.NewFakeRecorder(100), Now: func() time.Time { return e.now }}
	return e
}

func (e *env) pass(t *testing.T) ctrl.Result {
	t.Helper()
	res, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "nightly"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// backups lists the schedule's backups by name, oldest first.
func (e *env) backups(t *testing.T) []etcdv1alpha1.EtcdBackup {
	t.Helper()
	var l etcdv1alpha1.EtcdBackupList
	if err := e.c.List(context.Background(), &l, client.MatchingLabels{resources.LabelSchedule: "nightly"}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

// finish marks every running backup Complete (or Failed) at the current time.
func (e *env) finish(t *testing.T, condType string) {
	t.Helper()
	for _, b := range e.backups(t) {
		if len(b.Status.Conditions) > 0 {
			continue
		}
		b.Status.CompletionTime = &metav1.Time{Time: e.now}
		b.Status.Location = "s3://bkt/" + b.Spec.Destination.S3.Key
		meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: condType, Status: metav1.ConditionTrue, Reason: "X"})
		if err := e.c.Status().Update(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		// Creation times are the fake clock's, so that retention orders them.
		b.CreationTimestamp = metav1.Time{Time: e.now}
	}
}

func schedule(policy etcdv1alpha1.ConcurrencyPolicy) *etcdv1alpha1.EtcdBackupSchedule {
	return &etcdv1alpha1.EtcdBackupSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly", CreationTimestamp: metav1.NewTime(t0)},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "db", Schedule: "*/10 * * * *", ConcurrencyPolicy: policy,
			Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Endpoint: "s3:9000", Bucket: "bkt", Key: "prod/",
				CredentialsSecret: &etcdv1alpha1.SecretReference{Name: "creds"}}},
			Retention: etcdv1alpha1.Retention{MaxCount: ptr.To[int32](2)}},
	}
}

func TestScheduleCreatesDueBackupsAndPrunes(t *testing.T) {
	e := newEnv(t, schedule(etcdv1alpha1.ConcurrencyForbid))
	if res := e.pass(t); len(e.backups(t)) != 0 || res.RequeueAfter != 5*time.Minute {
		t.Fatalf("nothing due yet: %d backups, %+v", len(e.backups(t)), res)
	}
	e.now = t0.Add(10*time.Minute + time.Second)
	e.pass(t)
	bs := e.backups(t)
	if len(bs) != 1 || bs[0].Name != "nightly-20260102t031000z" || bs[0].Spec.Destination.S3.Key != "prod/db-20260102T031000Z.db" ||
		bs[0].Spec.DeletionPolicy != etcdv1alpha1.DeletionPolicyDelete || len(bs[0].OwnerReferences) != 0 {
		t.Fatalf("first backup: %+v", bs)
	}
	// Forbid: the next time comes while the first still runs; it is skipped.
	e.now = t0.Add(20*time.Minute + time.Second)
	e.pass(t)
	if len(e.backups(t)) != 1 {
		t.Fatalf("Forbid started a second backup while one runs")
	}
	e.finish(t, etcdv1alpha1.ConditionComplete)
	// Thirty minutes of downtime: only the most recent due time is taken.
	for i, at := range []time.Duration{50, 60, 70} {
		e.now = t0.Add(at*time.Minute + time.Second)
		e.pass(t)
		e.finish(t, etcdv1alpha1.ConditionComplete)
		e.pass(t) // prune sees the finished backup
		if i == 0 {
			names := []string{}
			for _, b := range e.backups(t) {
				names = append(names, b.Name)
			}
			if len(names) != 2 || names[1] != "nightly-20260102t035000z" {
				t.Fatalf("after downtime: %v", names)
			}
		}
	}
	bs = e.backups(t)
	if len(bs) != 2 || bs[0].Name != "nightly-20260102t040000z" || bs[1].Name != "nightly-20260102t041000z" {
		t.Fatalf("retention kept %d: %v", len(bs), bs)
	}
	s := &etcdv1alpha1.EtcdBackupSchedule{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "nightly"}, s); err != nil {
		t.Fatal(err)
	}
	if s.Status.LastSuccessfulBackup == nil || s.Status.LastSuccessfulBackup.Name != "nightly-20260102t041000z" ||
		!meta.IsStatusConditionTrue(s.Status.Conditions, etcdv1alpha1.ConditionReady) || s.Status.NextScheduleTime == nil {
		t.Fatalf("status %+v", s.Status)
	}
}

func TestScheduleInvalidAndSuspended(t *testing.T) {
	bad := schedule("")
	bad.Spec.Schedule = "61 * * * *"
	e := newEnv(t, bad)
	if _, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "nightly"}}); err == nil {
		t.Fatal("invalid schedule accepted")
	}
	s := &etcdv1alpha1.EtcdBackupSchedule{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "nightly"}, s); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(s.Status.Conditions, etcdv1alpha1.ConditionReady); c == nil || c.Reason != etcdv1alpha1.ReasonInvalidSchedule {
		t.Fatalf("conditions %+v", s.Status.Conditions)
	}

	suspended := schedule("")
	suspended.Spec.Suspend = true
	e = newEnv(t, suspended)
	e.now = t0.Add(time.Hour)
	e.pass(t)
	if len(e.backups(t)) != 0 {
		t.Fatal("a suspended schedule created a backup")
	}
}

// TestPruneSkipsABackupARestoreReads: retention leaves a backup an unfinished restore reads, past maxCount, and
// retires it at the first pass after the restore ended.
func TestPruneSkipsABackupARestoreReads(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, schedule(etcdv1alpha1.ConcurrencyForbid))
	e.now = t0.Add(10*time.Minute + time.Second)
	e.pass(t)
	e.finish(t, etcdv1alpha1.ConditionComplete)
	oldest := e.backups(t)[0].Name
	rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r1"},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "db", BackupName: oldest}}
	if err := e.c.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		var out []string
		for _, b := range e.backups(t) {
			out = append(out, b.Name)
		}
		return out
	}
	for _, at := range []time.Duration{20, 30, 40} {
		e.now = t0.Add(at*time.Minute + time.Second)
		e.pass(t)
		e.finish(t, etcdv1alpha1.ConditionComplete)
		e.pass(t)
	}
	if got := names(); len(got) != 3 || got[0] != oldest {
		t.Fatalf("with restore r1 reading %s, retention kept %v", oldest, got)
	}
	meta.SetStatusCondition(&rs.Status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: "Succeeded"})
	if err := e.c.Update(ctx, rs); err != nil {
		t.Fatal(err)
	}
	e.pass(t)
	if got := names(); len(got) != 2 || got[0] == oldest {
		t.Fatalf("after restore r1 ended, retention kept %v", got)
	}
}
