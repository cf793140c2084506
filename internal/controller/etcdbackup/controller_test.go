package etcdbackup

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/metrics"
	"steward.dev/steward/internal/resources"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newReconciler(t *testing.T, objs ...client.Object) (*Reconciler, client.Client) {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := etcdv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&etcdv1alpha1.EtcdBackup{}, &etcdv1alpha1.EtcdCluster{}, &batchv1.Job{}, &corev1.Pod{}).Build()
	return &Reconciler{Client: c, APIReader: c, Recorder: record.NewFakeRecorder(100), AgentImage: "agent:test", Now: func() time.Time { return now }}, c
}

func cluster() *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Status: etcdv1alpha1.EtcdClusterStatus{ClusterID: "c1", Members: []etcdv1alpha1.MemberStatus{
			{Name: "db-a", Healthy: true, Role: etcdv1alpha1.RoleLeader, ClientURL: "http://a:2379"},
			{Name: "db-b", Healthy: true, Role: etcdv1alpha1.RoleFollower, ClientURL: "http://b:2379"},
		}}}
}

func pvcBackup(policy etcdv1alpha1.DeletionPolicy) *etcdv1alpha1.EtcdBackup {
	return &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b1", CreationTimestamp: metav1.NewTime(now)},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "db", DeletionPolicy: policy,
			Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "x/b1.db"}}}}
}

func reconcile(t *testing.T, r *Reconciler) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "b1"}})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

func get(t *testing.T, c client.Client, obj client.Object, name string) {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, obj); err != nil {
		t.Fatal(err)
	}
}

// finishJob marks a Job done and gives it a Pod whose agent container left msg.
func finishJob(t *testing.T, c client.Client, name string, condition batchv1.JobConditionType, msg string) {
	t.Helper()
	ctx := context.Background()
	job := &batchv1.Job{}
	get(t, c, job, name)
	job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: condition, Status: corev1.ConditionTrue, Reason: "Done", Message: "job done"})
	if err := c.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name + "-pod", Labels: map[string]string{batchv1.JobNameLabel: name}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.AgentContainer,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func TestBackupSucceeds(t *testing.T) {
	metrics.Forget("ns", "db")
	defer metrics.Forget("ns", "db")
	r, c := newReconciler(t, cluster(), pvcBackup(etcdv1alpha1.DeletionPolicyRetain),
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}})
	if res := reconcile(t, r); res.RequeueAfter != requeueRunning {
		t.Fatalf("after starting: %+v", res)
	}
	job := &batchv1.Job{}
	get(t, c, job, "b1")
	args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--member=db-b=http://b:2379 --member=db-a=http://a:2379") || !strings.Contains(args, "--path=x/b1.db") {
		t.Fatalf("Job args %s: want the follower first, the leader last, and the path", args)
	}
	b := &etcdv1alpha1.EtcdBackup{}
	get(t, c, b, "b1")
	if cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionComplete); cond == nil || cond.Reason != etcdv1alpha1.ReasonBackupRunning || b.Status.StartTime == nil {
		t.Fatalf("running status %+v", b.Status)
	}

	res := backup.Result{Succeeded: true, Member: "db-b", Location: "pvc://backups/x/b1.db", SizeBytes: 4128, SHA256: strings.Repeat("a", 64),
		Revision: 7, EtcdVersion: "3.6.16", ClusterID: "c1", Space: backup.Space{Available: 1 << 20, Capacity: 8 << 20}}
	finishJob(t, c, "b1", batchv1.JobComplete, string(backup.Encode(res)))
	reconcile(t, r)
	get(t, c, b, "b1")
	if !meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) || b.Status.SHA256 != res.SHA256 ||
		b.Status.Revision != 7 || b.Status.Member != "db-b" || b.Status.CompletionTime == nil || b.Status.ObservedGeneration != b.Generation {
		t.Fatalf("complete status %+v", b.Status)
	}
	if sp := b.Status.ClaimSpace; sp == nil || *sp != (etcdv1alpha1.ClaimSpace{AvailableBytes: 1 << 20, CapacityBytes: 8 << 20}) {
		t.Fatalf("claim space %+v, want the Job's measurement", sp)
	}
	cl := &etcdv1alpha1.EtcdCluster{}
	get(t, c, cl, "db")
	if cl.Status.LastBackup == nil || cl.Status.LastBackup.Name != "b1" || len(cl.Status.Members) != 2 {
		t.Fatalf("cluster status %+v", cl.Status)
	}
	// Finished: further passes change nothing and start nothing, and count nothing.
	if res := reconcile(t, r); res != (ctrl.Result{}) {
		t.Fatalf("finished backup requeued: %+v", res)
	}
	if got := backupsCounted(t, "db", metrics.ResultComplete, ""); got != 1 {
		t.Errorf("steward_backups_total{result=complete} = %v, want 1", got)
	}
	// A pass that read the backup before it ended writes its end again: refused, so nothing is counted twice.
	stale := b.DeepCopy()
	stale.ResourceVersion = "1"
	before := stale.DeepCopy()
	stale.Status.SizeBytes++
	if err := c.Status().Patch(context.Background(), stale, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); !apierrors.IsConflict(err) {
		t.Errorf("stale write of the end: %v, want a conflict", err)
	}
}

// backupsCounted is the value of steward_backups_total for a cluster of namespace ns, read from the registry the
// operator serves.
func backupsCounted(t *testing.T, cluster, result, reason string) float64 {
	t.Helper()
	metrics.Register()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "steward_backups_total" {
			continue
		}
		for _, m := range mf.Metric {
			l := map[string]string{}
			for _, p := range m.Label {
				l[p.GetName()] = p.GetValue()
			}
			if l["namespace"] == "ns" && l["cluster"] == cluster && l["result"] == result && l["reason"] == reason {
				return m.Counter.GetValue()
			}
		}
	}
	return 0
}

func TestBackupFailures(t *testing.T) {
	t.Run("missing cluster", func(t *testing.T) {
		r, c := newReconciler(t, pvcBackup(""))
		reconcile(t, r)
		b := &etcdv1alpha1.EtcdBackup{}
		get(t, c, b, "b1")
		if cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionFailed); cond == nil || cond.Status != metav1.ConditionTrue ||
			cond.Reason != etcdv1alpha1.ReasonClusterNotFound {
			t.Fatalf("status %+v", b.Status)
		}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "b1"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a refused backup started a Job: %v", err)
		}
	})
	t.Run("missing PVC", func(t *testing.T) {
		r, c := newReconciler(t, cluster(), pvcBackup(""))
		reconcile(t, r)
		b := &etcdv1alpha1.EtcdBackup{}
		get(t, c, b, "b1")
		if cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionFailed); cond.Reason != etcdv1alpha1.ReasonDestinationNotFound {
			t.Fatalf("status %+v", b.Status)
		}
	})
	t.Run("missing ServiceAccount", func(t *testing.T) {
		for i, d := range []etcdv1alpha1.BackupDestination{
			{S3: &etcdv1alpha1.S3Destination{Endpoint: "s3.example", Bucket: "bkt", Key: "k", ServiceAccountName: "etcd-backup"}},
			{GCS: &etcdv1alpha1.GCSDestination{Bucket: "bkt", Key: "k", ServiceAccountName: "etcd-backup"}},
			{Azure: &etcdv1alpha1.AzureDestination{StorageAccount: "acct", Container: "bkt", Key: "k", ServiceAccountName: "etcd-backup"}},
		} {
			b := pvcBackup("")
			b.Spec.Destination = d
			r, c := newReconciler(t, cluster(), b)
			reconcile(t, r)
			get(t, c, b, "b1")
			cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionFailed)
			if cond == nil || cond.Reason != etcdv1alpha1.ReasonDestinationNotFound || !strings.Contains(cond.Message, "ServiceAccount etcd-backup") {
				t.Fatalf("destination %d: Failed %+v, want DestinationNotFound naming the ServiceAccount", i, cond)
			}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "b1"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
				t.Fatalf("a backup without its ServiceAccount started a Job: %v", err)
			}
			// With the ServiceAccount the same backup starts its Job.
			b = pvcBackup("")
			b.Spec.Destination = d
			r, c = newReconciler(t, cluster(), b, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "etcd-backup"}})
			reconcile(t, r)
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "b1"}, &batchv1.Job{}); err != nil {
				t.Fatalf("destination %d: no Job with the ServiceAccount there: %v", i, err)
			}
		}
	})
	// A claim, or a cluster, applied together with the backup: the API server has it, the cache not yet. The
	// backup starts.
	claim := func() client.Object {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}}
	}
	for name, split := range map[string]struct{ cached, live []client.Object }{
		"PVC not in the cache yet":     {cached: []client.Object{cluster(), pvcBackup("")}, live: []client.Object{claim()}},
		"cluster not in the cache yet": {cached: []client.Object{pvcBackup(""), claim()}, live: []client.Object{cluster()}},
	} {
		t.Run(name, func(t *testing.T) {
			r, c := newReconciler(t, split.cached...)
			live, _ := newReconciler(t, split.live...)
			r.APIReader = live.Client
			reconcile(t, r)
			b := &etcdv1alpha1.EtcdBackup{}
			get(t, c, b, "b1")
			if cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionFailed); cond != nil && cond.Status == metav1.ConditionTrue {
				t.Fatalf("refused a backup whose %s exists on the API server: %+v", name, b.Status)
			}
			var jobs batchv1.JobList
			if err := c.List(context.Background(), &jobs); err != nil || len(jobs.Items) != 1 {
				t.Fatalf("backup Jobs %d (%v), want 1", len(jobs.Items), err)
			}
		})
	}
	t.Run("agent reports a failure", func(t *testing.T) {
		r, c := newReconciler(t, cluster(), pvcBackup(""), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}})
		reconcile(t, r)
		finishJob(t, c, "b1", batchv1.JobFailed, string(backup.Encode(backup.Result{Reason: etcdv1alpha1.ReasonChecksumMismatch, Message: "bad"})))
		reconcile(t, r)
		b := &etcdv1alpha1.EtcdBackup{}
		get(t, c, b, "b1")
		if cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionFailed); cond.Reason != etcdv1alpha1.ReasonChecksumMismatch || b.Status.Location != "" {
			t.Fatalf("status %+v", b.Status)
		}
	})
	t.Run("claim full", func(t *testing.T) {
		r, c := newReconciler(t, cluster(), pvcBackup(""), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}})
		reconcile(t, r)
		finishJob(t, c, "b1", batchv1.JobFailed, string(backup.Encode(backup.Result{Reason: etcdv1alpha1.ReasonDestinationFull,
			Message: "snapshot from db-b: write pvc://backups/x/b1.db: no space left on device", Space: backup.Space{Available: 12288, Capacity: 8 << 20}})))
		reconcile(t, r)
		b := &etcdv1alpha1.EtcdBackup{}
		get(t, c, b, "b1")
		cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionFailed)
		if cond.Reason != etcdv1alpha1.ReasonDestinationFull || !strings.Contains(cond.Message, "12288 of 8388608 bytes free") {
			t.Fatalf("Failed condition %+v: want DestinationFull saying what was free", cond)
		}
		if sp := b.Status.ClaimSpace; sp == nil || sp.AvailableBytes != 12288 {
			t.Fatalf("claim space %+v, want the failed Job's measurement", sp)
		}
	})
	t.Run("Job killed without a result", func(t *testing.T) {
		r, c := newReconciler(t, cluster(), pvcBackup(""), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}})
		reconcile(t, r)
		finishJob(t, c, "b1", batchv1.JobFailed, "")
		reconcile(t, r)
		b := &etcdv1alpha1.EtcdBackup{}
		get(t, c, b, "b1")
		if cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionFailed); cond.Reason != etcdv1alpha1.ReasonJobFailed {
			t.Fatalf("status %+v", b.Status)
		}
	})
}

// TestBackupOfHibernatedCluster: a backup of a cluster that hibernates, or has not been Available since it
// resumed, fails at once with reason Hibernated and starts no Job; one whose Job already runs is left to it.
func TestBackupOfHibernatedCluster(t *testing.T) {
	claim := func() client.Object {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}}
	}
	for name, hibernate := range map[string]func(c *etcdv1alpha1.EtcdCluster){
		"asked for, not yet observed": func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Hibernation = &etcdv1alpha1.Hibernation{Enabled: true}
		},
		"hibernated": func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Hibernation = &etcdv1alpha1.Hibernation{Enabled: true}
			c.Status.Hibernation = &etcdv1alpha1.HibernationStatus{Phase: etcdv1alpha1.HibernationHibernated}
			c.Status.Members = nil
		},
		"resuming": func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Hibernation = &etcdv1alpha1.Hibernation{Enabled: false}
			c.Status.Hibernation = &etcdv1alpha1.HibernationStatus{Phase: etcdv1alpha1.HibernationResuming}
		},
	} {
		t.Run(name, func(t *testing.T) {
			metrics.Forget("ns", "db")
			defer metrics.Forget("ns", "db")
			cl := cluster()
			hibernate(cl)
			r, c := newReconciler(t, cl, pvcBackup(""), claim())
			if res := reconcile(t, r); res != (ctrl.Result{}) {
				t.Fatalf("a refused backup requeued: %+v", res)
			}
			b := &etcdv1alpha1.EtcdBackup{}
			get(t, c, b, "b1")
			want := "EtcdCluster db is hibernated: no member runs to take a snapshot from; resume it (spec.hibernation.enabled: false) and create the backup again"
			if cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionFailed); cond == nil || cond.Status != metav1.ConditionTrue ||
				cond.Reason != etcdv1alpha1.ReasonHibernated || cond.Message != want || b.Status.CompletionTime == nil {
				t.Fatalf("status %+v", b.Status)
			}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "b1"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
				t.Fatalf("a backup of a hibernated cluster started a Job: %v", err)
			}
			if got := backupsCounted(t, "db", metrics.ResultFailed, etcdv1alpha1.ReasonHibernated); got != 1 {
				t.Errorf("steward_backups_total{result=failed,reason=Hibernated} = %v, want 1", got)
			}
		})
	}
	t.Run("Job already running", func(t *testing.T) {
		r, c := newReconciler(t, cluster(), pvcBackup(""), claim())
		reconcile(t, r)
		cl := &etcdv1alpha1.EtcdCluster{}
		get(t, c, cl, "db")
		cl.Spec.Hibernation = &etcdv1alpha1.Hibernation{Enabled: true}
		if err := c.Update(context.Background(), cl); err != nil {
			t.Fatal(err)
		}
		if res := reconcile(t, r); res.RequeueAfter != requeueRunning {
			t.Fatalf("running backup: %+v", res)
		}
		b := &etcdv1alpha1.EtcdBackup{}
		get(t, c, b, "b1")
		if cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionComplete); cond == nil || cond.Reason != etcdv1alpha1.ReasonBackupRunning {
			t.Fatalf("a running backup was changed when its cluster began to hibernate: %+v", b.Status)
		}
	})
}

func TestDeletePolicyDeletesTheSnapshotFirst(t *testing.T) {
	r, c := newReconciler(t, cluster(), pvcBackup(etcdv1alpha1.DeletionPolicyDelete),
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}})
	ctx := context.Background()
	reconcile(t, r) // adds the finalizer
	reconcile(t, r) // starts the Job
	finishJob(t, c, "b1", batchv1.JobComplete, string(backup.Encode(backup.Result{Succeeded: true, Location: "pvc://backups/x/b1.db",
		SizeBytes: 4128, SHA256: strings.Repeat("b", 64)})))
	reconcile(t, r)
	b := &etcdv1alpha1.EtcdBackup{}
	get(t, c, b, "b1")
	if err := c.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	reconcile(t, r)
	del := &batchv1.Job{}
	get(t, c, del, "b1-delete")
	if args := strings.Join(del.Spec.Template.Spec.Containers[0].Args, " "); !strings.HasPrefix(args, "delete ") || !strings.Contains(args, "--path=x/b1.db") {
		t.Fatalf("delete Job args %s", args)
	}
	get(t, c, b, "b1") // still held by the finalizer
	finishJob(t, c, "b1-delete", batchv1.JobComplete, string(backup.Encode(backup.Result{Succeeded: true, Location: "pvc://backups/x/b1.db",
		SizeBytes: 1, SHA256: strings.Repeat("b", 64)})))
	reconcile(t, r)
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "b1"}, b); !apierrors.IsNotFound(err) {
		t.Fatalf("backup not released after its snapshot was deleted: %v", err)
	}
}

// TestDeletionWaitsForTheRestoreReadingTheBackup: a backup (deletionPolicy Delete) that a restore reads is
// deleted: no delete Job runs and the backup stays while the restore has not ended; once the restore ends
// (Failed, or deleted: a namespace's deletion takes the restore with it) the hold is released and the snapshot
// deleted as usual.
func TestDeletionWaitsForTheRestoreReadingTheBackup(t *testing.T) {
	for _, end := range []string{"failed", "deleted"} {
		t.Run(end, func(t *testing.T) {
			r, c := newReconciler(t, cluster(), pvcBackup(etcdv1alpha1.DeletionPolicyDelete),
				&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}})
			ctx := context.Background()
			reconcile(t, r) // adds the finalizer
			reconcile(t, r) // starts the Job
			finishJob(t, c, "b1", batchv1.JobComplete, string(backup.Encode(backup.Result{Succeeded: true, Location: "pvc://backups/x/b1.db",
				SizeBytes: 4128, SHA256: strings.Repeat("b", 64)})))
			reconcile(t, r)
			rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r1"},
				Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "db", BackupName: "b1", Confirm: "db"}}
			if err := c.Create(ctx, rs); err != nil {
				t.Fatal(err)
			}
			b := &etcdv1alpha1.EtcdBackup{}
			get(t, c, b, "b1")
			if err := Hold(ctx, c, b); err != nil {
				t.Fatal(err)
			}
			reconcile(t, r) // a backup held by a restore that has not ended keeps the hold
			get(t, c, b, "b1")
			if !controllerutil.ContainsFinalizer(b, HoldFinalizer) {
				t.Fatal("the hold was released while the restore runs")
			}
			if err := c.Delete(ctx, b); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				reconcile(t, r)
			}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "b1-delete"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
				t.Fatalf("a delete Job while restore r1 reads the snapshot: %v", err)
			}
			get(t, c, b, "b1")
			if ev := drain(r); !strings.Contains(ev, "SnapshotInUse") || !strings.Contains(ev, "r1") {
				t.Fatalf("no SnapshotInUse Event naming the restore: %q", ev)
			}

			switch end {
			case "failed":
				rs.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionFailed, Status: metav1.ConditionTrue, Reason: "SnapshotCorrupt", LastTransitionTime: metav1.NewTime(now)}}
				if err := c.Update(ctx, rs); err != nil {
					t.Fatal(err)
				}
			case "deleted":
				if err := c.Delete(ctx, rs); err != nil {
					t.Fatal(err)
				}
			}
			reconcile(t, r)
			get(t, c, b, "b1")
			if controllerutil.ContainsFinalizer(b, HoldFinalizer) {
				t.Fatal("the hold outlived the restore")
			}
			get(t, c, &batchv1.Job{}, "b1-delete")
		})
	}
}

// drain returns the Events recorded so far, one a line.
func drain(r *Reconciler) string {
	var out []string
	for {
		select {
		case ev := <-r.Recorder.(*record.FakeRecorder).Events:
			out = append(out, ev)
		default:
			return strings.Join(out, "\n")
		}
	}
}
