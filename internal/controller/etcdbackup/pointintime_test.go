package etcdbackup

import (
	"encoding/json"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/pitr"
	"steward.dev/steward/internal/resources"
)

// TestPointInTimeBackup: admitted, the Job runs the agent installed into the cluster's etcd image with the
// schedule's Complete snapshots of the current identity (newest first) and the target; its result completes
// the backup with the agent's account; a schedule without continuous backup is refused with nothing started.
func TestPointInTimeBackup(t *testing.T) {
	sched := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "db", Schedule: "@daily", Continuous: &etcdv1alpha1.ContinuousBackup{Enabled: true},
			Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "x"}}}}
	snapshot := func(name string, rev int64, id string) *etcdv1alpha1.EtcdBackup {
		b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{resources.LabelSchedule: "nightly"}},
			Spec:   etcdv1alpha1.EtcdBackupSpec{ClusterName: "db", Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "x/" + name + ".db"}}},
			Status: etcdv1alpha1.EtcdBackupStatus{Revision: rev, ClusterID: id, SHA256: strings.Repeat("ab", 32), SizeBytes: 100, StartTime: &metav1.Time{Time: now}}}
		meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: "Succeeded"})
		return b
	}
	pit := pvcBackup(etcdv1alpha1.DeletionPolicyRetain)
	pit.Spec.PointInTime = &etcdv1alpha1.PointInTimeSource{ScheduleName: "nightly", Revision: 150}
	db := cluster()
	db.Spec.Version = "3.6.16"
	r, c := newReconciler(t, db, pit, sched, snapshot("s1", 100, "c1"), snapshot("s2", 140, "c1"), snapshot("s0", 900, "c0"),
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}})
	r.Options = resources.Options{ImageRepository: "quay.io/coreos/etcd"}
	reconcile(t, r)
	job := &batchv1.Job{}
	get(t, c, job, "b1")
	spec := job.Spec.Template.Spec
	if spec.Containers[0].Image != "quay.io/coreos/etcd:v3.6.16" || len(spec.InitContainers) != 1 || spec.InitContainers[0].Image != "agent:test" {
		t.Fatalf("point-in-time Job images: %s, init %+v", spec.Containers[0].Image, spec.InitContainers)
	}
	args := strings.Join(spec.Containers[0].Args, " ")
	for _, want := range []string{"point-in-time", "--target-revision=150", "--segments=x/db-segments/c1", "--cluster-id=c1", "--path=x/b1.db"} {
		if !strings.Contains(args, want) {
			t.Fatalf("args %s lack %s", args, want)
		}
	}
	var cands []pitr.Candidate
	for _, a := range spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--candidates="); ok {
			if err := json.Unmarshal([]byte(v), &cands); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(cands) != 2 || cands[0].Name != "s2" || cands[0].Path != "x/s2.db" || cands[1].Name != "s1" {
		t.Fatalf("candidates %+v", cands)
	}
	res := backup.Result{Succeeded: true, Member: backup.PointInTimeMember, Location: "pvc://backups/x/b1.db", SizeBytes: 2048,
		SHA256: strings.Repeat("cd", 32), Revision: 150, ClusterID: "c1", EtcdVersion: "3.6.16",
		Message: "backup s2 (revision 140) carried to revision 150: 10 changes in 10 revisions replayed from 1 segments, revision 150"}
	finishJob(t, c, "b1", batchv1.JobComplete, string(backup.Encode(res)))
	reconcile(t, r)
	got := &etcdv1alpha1.EtcdBackup{}
	get(t, c, got, "b1")
	done := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionComplete)
	if done == nil || done.Status != metav1.ConditionTrue || !strings.Contains(done.Message, "backup s2 (revision 140) carried to revision 150") ||
		got.Status.Revision != 150 || got.Status.ClusterID != "c1" {
		t.Fatalf("completed point-in-time backup: %+v %+v", got.Status, done)
	}

	// The cluster was deleted: the identity the schedule followed last, the newest snapshot's release.
	gone := pvcBackup(etcdv1alpha1.DeletionPolicyRetain)
	gone.Spec.PointInTime = &etcdv1alpha1.PointInTimeSource{ScheduleName: "nightly"}
	followed := sched.DeepCopy()
	followed.Status.Continuous = &etcdv1alpha1.ContinuousBackupStatus{Follower: "nightly-follower", ClusterID: "c1"}
	newest := snapshot("s2", 140, "c1")
	newest.Status.EtcdVersion = "3.6.15"
	r, c = newReconciler(t, gone, followed, snapshot("s1", 100, "c1"), newest,
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}})
	r.Options = resources.Options{ImageRepository: "quay.io/coreos/etcd"}
	reconcile(t, r)
	get(t, c, job, "b1")
	if img := job.Spec.Template.Spec.Containers[0].Image; img != "quay.io/coreos/etcd:v3.6.15" {
		t.Fatalf("point-in-time Job of a deleted cluster runs %s", img)
	}

	sched.Spec.Continuous = nil
	plain := pvcBackup(etcdv1alpha1.DeletionPolicyRetain)
	plain.Spec.PointInTime = &etcdv1alpha1.PointInTimeSource{ScheduleName: "nightly"}
	r, c = newReconciler(t, cluster(), plain, sched, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}})
	reconcile(t, r)
	get(t, c, got, "b1")
	if f := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionFailed); f == nil || f.Status != metav1.ConditionTrue || f.Reason != etcdv1alpha1.ReasonNotContinuous {
		t.Fatalf("schedule without continuous backup: %+v", got.Status.Conditions)
	}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: "b1"}, &batchv1.Job{}); err == nil {
		t.Fatal("a refused point-in-time backup started a Job")
	}
}
