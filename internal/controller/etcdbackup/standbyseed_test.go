package etcdbackup

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/resources"
)

// TestStandbySeedBackup: a standby seed runs its Job in the etcd image of the standby's release, reading the
// primary's schedule directory read only, and records what the Job found: the object's path with the snapshot's
// record and the primary's cluster ID; the standby's lastBackup is not the seed. Without the standby it is
// refused.
func TestStandbySeedBackup(t *testing.T) {
	seed := pvcBackup(etcdv1alpha1.DeletionPolicyRetain)
	seed.Spec.Destination.PVC.Path = "prod"
	seed.Spec.StandbySeed = &etcdv1alpha1.StandbySeedSource{ClusterName: "main"}
	db := cluster()
	db.Spec.Version = "3.6.16"
	r, c := newReconciler(t, db, seed, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}})
	r.Options = resources.Options{ImageRepository: "quay.io/coreos/etcd"}
	reconcile(t, r)
	job := &batchv1.Job{}
	get(t, c, job, "b1")
	spec := job.Spec.Template.Spec
	if spec.Containers[0].Image != "quay.io/coreos/etcd:v3.6.16" || len(spec.InitContainers) != 1 {
		t.Fatalf("seed Job image %s, init %+v", spec.Containers[0].Image, spec.InitContainers)
	}
	args := strings.Join(spec.Containers[0].Args, " ")
	for _, want := range []string{"standby-seed", "--source-cluster=main", "--path=prod", "--pvc-claim=backups"} {
		if !strings.Contains(args, want) {
			t.Fatalf("args %s lack %s", args, want)
		}
	}
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil && !v.PersistentVolumeClaim.ReadOnly {
			t.Fatalf("the primary's claim is mounted read-write")
		}
	}
	res := backup.Result{Succeeded: true, Member: backup.PointInTimeMember, Location: "pvc://backups/prod/main-20261129T110000Z.db",
		Path: "prod/main-20261129T110000Z.db", SizeBytes: 2048, SHA256: strings.Repeat("cd", 32), Revision: 150, ClusterID: "87afdd7b6dce50e8",
		EtcdVersion: "3.6.16", Message: "standby seed: snapshot prod/main-20261129T110000Z.db at revision 150, continued by the segments of etcd cluster 87afdd7b6dce50e8"}
	finishJob(t, c, "b1", batchv1.JobComplete, string(backup.Encode(res)))
	reconcile(t, r)
	got := &etcdv1alpha1.EtcdBackup{}
	get(t, c, got, "b1")
	done := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionComplete)
	if done == nil || done.Status != metav1.ConditionTrue || got.Status.Path != res.Path || got.Status.Revision != 150 || got.Status.ClusterID != res.ClusterID {
		t.Fatalf("completed seed: %+v %+v", got.Status, done)
	}
	if d := resources.StoredDestination(got); d.PVC.Path != res.Path || d.PVC.ClaimName != "backups" {
		t.Fatalf("stored at %+v", d.PVC)
	}
	reconcile(t, r)
	get(t, c, db, "db")
	if db.Status.LastBackup != nil {
		t.Fatalf("the standby's lastBackup is its seed: %+v", db.Status.LastBackup)
	}

	orphan := pvcBackup(etcdv1alpha1.DeletionPolicyRetain)
	orphan.Spec.StandbySeed = &etcdv1alpha1.StandbySeedSource{ClusterName: "main"}
	r, c = newReconciler(t, orphan)
	reconcile(t, r)
	get(t, c, orphan, "b1")
	if f := meta.FindStatusCondition(orphan.Status.Conditions, etcdv1alpha1.ConditionFailed); f == nil || f.Reason != etcdv1alpha1.ReasonClusterNotFound {
		t.Fatalf("a seed of no standby: %+v", orphan.Status.Conditions)
	}
}
