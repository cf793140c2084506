package etcdrestore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/etcdbackup"
	"steward.dev/steward/internal/metrics"
	"steward.dev/steward/internal/resources"
)

// testScheme knows Kubernetes' kinds and Steward's.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := etcdv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// bootstrappedCluster is EtcdCluster c of the namespace ns: 3 members of 3.6.16, bootstrapped as etcd cluster id1,
// the cluster completeBackup was taken of. Tests add the status they need.
func bootstrappedCluster() *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Spec:   etcdv1alpha1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16"},
		Status: etcdv1alpha1.EtcdClusterStatus{Bootstrapped: true, ClusterID: "id1"}}
}

// completeBackup is EtcdBackup b1 of cluster c (etcd cluster ID id1), Complete at now: revision 100 of 3.6.16 in
// pvc://backups/c/b1.db.
func completeBackup(now metav1.Time) *etcdv1alpha1.EtcdBackup {
	return &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b1"},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "c", Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "c/b1.db"}}},
		Status: etcdv1alpha1.EtcdBackupStatus{Location: "pvc://backups/c/b1.db", SizeBytes: 4096, SHA256: strings.Repeat("ab", 32), Revision: 100,
			ClusterID: "id1", EtcdVersion: "3.6.16", StartTime: &now, CompletionTime: &now,
			Conditions: []metav1.Condition{{Type: etcdv1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: now}}}}
}

// TestEndedRestoreCountedOnce: a restore that fails is counted, and its Event recorded, on the pass that ends
// it; passes after that (the restore is finished) count nothing, and neither does a pass that read a stale copy
// of the restore (its status write conflicts and is retried from the finished object).
func TestEndedRestoreCountedOnce(t *testing.T) {
	ctx := context.Background()
	s := testScheme(t)
	rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "counted-once", BackupName: "missing"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(rs).WithStatusSubresource(rs).Build()
	rec := record.NewFakeRecorder(10)
	r := &Reconciler{Client: c, APIReader: c, Recorder: rec, Now: time.Now}
	metrics.Register()
	defer metrics.Forget("ns", "counted-once")

	var stale etcdv1alpha1.EtcdRestore
	if err := c.Get(ctx, client.ObjectKeyFromObject(rs), &stale); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rs)}
	for range 3 {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	var got etcdv1alpha1.EtcdRestore
	if err := c.Get(ctx, client.ObjectKeyFromObject(rs), &got); err != nil {
		t.Fatal(err)
	}
	if !etcdv1alpha1.Finished(got.Status.Conditions) {
		t.Fatalf("restore not finished: %+v", got.Status.Conditions)
	}
	// A status write from a pass that read the restore before it ended is refused.
	before := stale.DeepCopy()
	stale.Status.CompletionTime = &metav1.Time{Time: time.Now()}
	if err := c.Status().Patch(ctx, &stale, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err == nil {
		t.Error("a stale write that ends the restore again was accepted")
	}
	if n := len(rec.Events); n != 1 {
		t.Errorf("%d Events, want 1", n)
	}
	n, err := testutil.GatherAndCount(ctrlmetrics.Registry, "steward_restores_total")
	if err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Fatal("no restore counted")
	}
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "steward_restores_total" {
			continue
		}
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["cluster"] == "counted-once" {
				if labels["result"] != metrics.ResultFailed || labels["reason"] != "ClusterNotFound" || m.Counter.GetValue() != 1 {
					t.Errorf("counted %v = %v, want result failed, reason ClusterNotFound, 1", labels, m.Counter.GetValue())
				}
			}
		}
	}
}

// TestRollbackTakesSafetyBackupFirst: a confirmed restore of an Available cluster is refused without
// allowRollbackOfHealthyCluster (naming the revisions it would discard, no backup taken); with it, the first pass
// creates the safety backup (owned by the restore, next to the restored backup's file) and no verify Job; a
// failed safety backup fails the restore and still no verify Job exists.
func TestRollbackTakesSafetyBackupFirst(t *testing.T) {
	ctx := context.Background()
	s := testScheme(t)
	now := metav1.Now()
	cluster := bootstrappedCluster()
	cluster.Status.Revision = 250
	cluster.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "Quorum", LastTransitionTime: now}}
	b := completeBackup(now)
	refused := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "no-field", CreationTimestamp: now},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "c", BackupName: "b1", Confirm: "c"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(cluster, b, refused).WithStatusSubresource(cluster, b, refused, &etcdv1alpha1.EtcdRestore{}).Build()
	rec := record.NewFakeRecorder(10)
	r := &Reconciler{Client: c, APIReader: c, Recorder: rec, Now: time.Now}
	metrics.Register()
	defer metrics.Forget("ns", "c")
	reconcile := func(rs *etcdv1alpha1.EtcdRestore) *etcdv1alpha1.EtcdRestore {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rs)}); err != nil {
			t.Fatal(err)
		}
		var got etcdv1alpha1.EtcdRestore
		if err := c.Get(ctx, client.ObjectKeyFromObject(rs), &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}
	requireNoVerifyJob := func(rs *etcdv1alpha1.EtcdRestore) {
		t.Helper()
		var jobs batchv1.JobList
		if err := c.List(ctx, &jobs); err != nil {
			t.Fatal(err)
		}
		if len(jobs.Items) != 0 {
			t.Fatalf("restore %s started a Job before its safety backup succeeded", rs.Name)
		}
	}

	got := reconcile(refused)
	cond := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionFailed)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != etcdv1alpha1.ReasonClusterHasQuorum ||
		!strings.Contains(cond.Message, "would discard the writes of revisions 101..250 made since ") {
		t.Fatalf("without the field: %+v", cond)
	}
	if ev := <-rec.Events; !strings.Contains(ev, etcdv1alpha1.ReasonClusterHasQuorum) || !strings.Contains(ev, "101..250") {
		t.Fatalf("Event %q", ev)
	}
	var backups etcdv1alpha1.EtcdBackupList
	if err := c.List(ctx, &backups); err != nil || len(backups.Items) != 1 {
		t.Fatalf("a refused rollback created a backup: %d (%v)", len(backups.Items), err)
	}
	requireNoVerifyJob(got)

	rb := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rollback", UID: "0123456789ab", CreationTimestamp: now},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "c", BackupName: "b1", Confirm: "c", AllowRollbackOfHealthyCluster: true}}
	if err := c.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	got = reconcile(rb)
	if got.Status.SafetyBackup != "rollback-safety" {
		t.Fatalf("status.safetyBackup %q", got.Status.SafetyBackup)
	}
	var safety etcdv1alpha1.EtcdBackup
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "rollback-safety"}, &safety); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(&safety, got) || safety.Spec.ClusterName != "c" || safety.Spec.Destination.PVC.ClaimName != "backups" ||
		safety.Spec.Destination.PVC.Path != "c/rollback-safety-01234567.db" {
		t.Fatalf("safety backup %+v, owners %v", safety.Spec, safety.OwnerReferences)
	}
	requireNoVerifyJob(got)

	safety.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionFailed, Status: metav1.ConditionTrue, Reason: "DestinationExists", Message: "exists", LastTransitionTime: now}}
	if err := c.Status().Update(ctx, &safety); err != nil {
		t.Fatal(err)
	}
	got = reconcile(rb)
	if cond := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionFailed); cond == nil || cond.Status != metav1.ConditionTrue ||
		cond.Reason != etcdv1alpha1.ReasonSafetyBackupFailed || !strings.Contains(cond.Message, "DestinationExists") {
		t.Fatalf("after the safety backup failed: %+v", cond)
	}
	requireNoVerifyJob(got)
}

// TestUnreachableButServingIsNotReseeded: a confirmed re-seed of a cluster Steward reports without quorum (its
// etcd does not answer the operator) while every member Pod is Ready (etcd's /readyz, which needs a leader) is
// refused with MembersServing and an Event, before any Job; once the Pods are no longer Ready (the quorum is
// really gone), a new restore goes on to verify its snapshot.
func TestUnreachableButServingIsNotReseeded(t *testing.T) {
	ctx := context.Background()
	s := testScheme(t)
	now := metav1.Now()
	cluster := bootstrappedCluster()
	cluster.UID, cluster.Status.Revision = "cluster-uid", 250
	cluster.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: "QuorumLost", LastTransitionTime: now}}
	b := completeBackup(now)
	objs := []client.Object{cluster, b}
	controller := true
	for _, name := range []string{"c-a", "c-b", "c-c"} {
		objs = append(objs, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{resources.LabelCluster: "c"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: etcdv1alpha1.GroupVersion.String(), Kind: "EtcdCluster", Name: "c", UID: "cluster-uid", Controller: &controller}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		})
	}
	rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "reseed", CreationTimestamp: now},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "c", BackupName: "b1", Confirm: "c"}}
	objs = append(objs, rs)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(cluster, b, rs, &etcdv1alpha1.EtcdRestore{}, &corev1.Pod{}).Build()
	rec := record.NewFakeRecorder(10)
	r := &Reconciler{Client: c, APIReader: c, Recorder: rec, Now: time.Now}
	metrics.Register()
	defer metrics.Forget("ns", "c")
	reconcile := func(rs *etcdv1alpha1.EtcdRestore) *etcdv1alpha1.EtcdRestore {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rs)}); err != nil {
			t.Fatal(err)
		}
		var got etcdv1alpha1.EtcdRestore
		if err := c.Get(ctx, client.ObjectKeyFromObject(rs), &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}
	jobs := func() int {
		t.Helper()
		var list batchv1.JobList
		if err := c.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}

	got := reconcile(rs)
	cond := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionFailed)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != etcdv1alpha1.ReasonMembersServing ||
		!strings.Contains(cond.Message, "3 of 3 member Pods are Ready") {
		t.Fatalf("re-seed of a serving cluster: %+v", cond)
	}
	if ev := <-rec.Events; !strings.Contains(ev, etcdv1alpha1.ReasonMembersServing) {
		t.Fatalf("Event %q", ev)
	}
	if n := jobs(); n != 0 {
		t.Fatalf("a refused re-seed created %d Jobs", n)
	}
	held := func() bool {
		t.Helper()
		var got etcdv1alpha1.EtcdBackup
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), &got); err != nil {
			t.Fatal(err)
		}
		return controllerutil.ContainsFinalizer(&got, etcdbackup.HoldFinalizer)
	}
	if held() {
		t.Fatal("a refused restore holds its backup")
	}

	// The quorum really lost: /readyz fails on every member.
	for _, name := range []string{"c-a", "c-b", "c-c"} {
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		if err := c.Status().Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
	}
	again := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "reseed-again", CreationTimestamp: now},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "c", BackupName: "b1", Confirm: "c"}}
	if err := c.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	got = reconcile(again)
	if cond := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionComplete); cond == nil || cond.Reason != etcdv1alpha1.ReasonVerifying {
		t.Fatalf("re-seed of a cluster that lost quorum: %+v", got.Status.Conditions)
	}
	if n := jobs(); n != 1 {
		t.Fatalf("%d Jobs, want the verify Job", n)
	}
	if !held() {
		t.Fatal("a restore reading its backup does not hold it")
	}
}

// TestRestoreOfObjectsNotInTheCacheYet: a restore applied together with its cluster and its backup may be
// reconciled before the cache has them; the API server has them, so the restore is not refused as if they were
// missing (a refusal is final).
func TestRestoreOfObjectsNotInTheCacheYet(t *testing.T) {
	ctx := context.Background()
	s := testScheme(t)
	now := metav1.Now()
	cluster := bootstrappedCluster()
	b := completeBackup(now)
	rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", CreationTimestamp: now},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "c", BackupName: "b1"}}
	cached := fake.NewClientBuilder().WithScheme(s).WithObjects(rs).WithStatusSubresource(rs).Build()
	live := fake.NewClientBuilder().WithScheme(s).WithObjects(cluster, b, rs.DeepCopy()).Build()
	r := &Reconciler{Client: cached, APIReader: live, Recorder: record.NewFakeRecorder(10), Now: time.Now}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rs)}); err != nil {
		t.Fatal(err)
	}
	var got etcdv1alpha1.EtcdRestore
	if err := cached.Get(ctx, client.ObjectKeyFromObject(rs), &got); err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Status.Conditions {
		if c.Reason == etcdv1alpha1.ReasonBackupNotFound || c.Reason == etcdv1alpha1.ReasonClusterNotFound {
			t.Fatalf("refused as missing what the API server has: %+v", got.Status.Conditions)
		}
	}
}
