package etcdrestore

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/metrics"
)

// TestPointInTimeRestoreMakesItsBackupFirst: a restore with spec.pointInTime creates its point-in-time backup
// (owned, on the schedule's destination, of the schedule's cluster, Retain) and waits for it; a failed one ends
// the restore with the backup's reason in the message; a missing schedule ends it at once.
func TestPointInTimeRestoreMakesItsBackupFirst(t *testing.T) {
	ctx := context.Background()
	s := testScheme(t)
	now := metav1.Now()
	cluster := bootstrappedCluster()
	sched := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "c", Schedule: "@daily", Continuous: &etcdv1alpha1.ContinuousBackup{Enabled: true},
			Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "c"}}}}
	rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "back", UID: "0123456789", CreationTimestamp: now},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "c", Confirm: "c", PointInTime: &etcdv1alpha1.PointInTimeSource{ScheduleName: "nightly", Revision: 42}}}
	lost := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lost", CreationTimestamp: now},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "c", Confirm: "c", PointInTime: &etcdv1alpha1.PointInTimeSource{ScheduleName: "gone"}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(cluster, sched, rs, lost).
		WithStatusSubresource(cluster, rs, lost, &etcdv1alpha1.EtcdBackup{}).Build()
	r := &Reconciler{Client: c, APIReader: c, Recorder: record.NewFakeRecorder(20), Now: time.Now}
	metrics.Register()
	defer metrics.Forget("ns", "c")
	pass := func(o *etcdv1alpha1.EtcdRestore) *etcdv1alpha1.EtcdRestore {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(o)}); err != nil {
			t.Fatal(err)
		}
		var got etcdv1alpha1.EtcdRestore
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}

	got := pass(rs)
	var b etcdv1alpha1.EtcdBackup
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "back-pit"}, &b); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(&b, got) || b.Spec.ClusterName != "c" || b.Spec.PointInTime == nil || b.Spec.PointInTime.Revision != 42 ||
		b.Spec.DeletionPolicy != etcdv1alpha1.DeletionPolicyRetain || b.Spec.Destination.PVC == nil || b.Spec.Destination.PVC.Path != "c/back-pit-01234567.db" {
		t.Fatalf("point-in-time backup %+v", b)
	}
	if got.Status.PointInTimeBackup != "back-pit" || etcdv1alpha1.Finished(got.Status.Conditions) {
		t.Fatalf("restore while its backup runs: %+v", got.Status)
	}
	// The pass that created the backup decides nothing else: the operator's cache has not seen the backup yet,
	// and reading it as missing would end the restore.
	if c := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionComplete); c == nil || c.Reason != "Pending" ||
		!strings.Contains(c.Message, "making the point-in-time backup back-pit from schedule nightly") {
		t.Fatalf("the creating pass: %+v", c)
	}
	if got = pass(rs); etcdv1alpha1.Finished(got.Status.Conditions) {
		t.Fatalf("restore while its backup runs, second pass: %+v", got.Status)
	}

	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionFailed, Status: metav1.ConditionTrue,
		Reason: etcdv1alpha1.ReasonOutsideWindow, Message: "revision 42 is not in the recoverable window revisions 50..90"})
	if err := c.Status().Update(ctx, &b); err != nil {
		t.Fatal(err)
	}
	got = pass(rs)
	f := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionFailed)
	if f == nil || f.Status != metav1.ConditionTrue || f.Reason != etcdv1alpha1.ReasonPointInTimeFailed || !strings.Contains(f.Message, "OutsideWindow: revision 42 is not in") {
		t.Fatalf("failed point-in-time backup: %+v", got.Status.Conditions)
	}

	got = pass(lost)
	f = meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionFailed)
	if f == nil || f.Status != metav1.ConditionTrue || f.Reason != etcdv1alpha1.ReasonScheduleNotFound {
		t.Fatalf("missing schedule: %+v", got.Status.Conditions)
	}
}
