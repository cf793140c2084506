package resources

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func standbyCluster() *etcdv1alpha1.EtcdCluster {
	c := testCluster()
	c.Name, c.Namespace = "dr", "dr-ns"
	c.Spec.Standby = &etcdv1alpha1.StandbySpec{Source: etcdv1alpha1.StandbySource{ClusterName: "main",
		Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "shared", Path: "prod/main"}},
		Encryption:  &etcdv1alpha1.BackupEncryption{KeySecret: etcdv1alpha1.SecretReference{Name: "backup-key"}}}}
	return c
}

// TestStandbyApplierDeployment: the applier reads the primary's segment directory of the source cluster ID, read
// only, decrypting with the source's key and writing with nothing; it applies through the standby's client Service
// as Steward; its Pods are not taken for members; the cluster owns it.
func TestStandbyApplierDeployment(t *testing.T) {
	c := standbyCluster()
	d := StandbyApplierDeployment(c, "87afdd7b6dce50e8", AgentAccessFor(c), opts)
	if d.Name != "dr-standby" || d.Namespace != "dr-ns" || !metav1.IsControlledBy(d, c) || *d.Spec.Replicas != 1 {
		t.Fatalf("deployment %s/%s, replicas %d, owners %v", d.Namespace, d.Name, *d.Spec.Replicas, d.OwnerReferences)
	}
	pod := d.Spec.Template
	if _, ok := pod.Labels[LabelCluster]; ok {
		t.Fatalf("applier Pod labels %v carry %s: it would be observed as a member", pod.Labels, LabelCluster)
	}
	for k, v := range StandbyApplierLabels(c) {
		if pod.Labels[k] != v || d.Spec.Selector.MatchLabels[k] != v {
			t.Fatalf("labels %v, selector %v, want %s=%s", pod.Labels, d.Spec.Selector.MatchLabels, k, v)
		}
	}
	ctr := pod.Spec.Containers[0]
	args := strings.Join(ctr.Args, " ")
	for _, want := range []string{"standby ", "--endpoints=https://dr.dr-ns.svc.cluster.local:2379", "--segments=prod/main/main-segments/87afdd7b6dce50e8",
		"--cluster-id=87afdd7b6dce50e8", "--pvc-claim=shared", "--decryption-key-file=", "--cert-file="} {
		if !strings.Contains(args, want) {
			t.Errorf("args %s: want %s", args, want)
		}
	}
	if strings.Contains(args, "--encryption-key-file") {
		t.Errorf("args %s: the applier writes nothing to the source, it needs no key to encrypt with", args)
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && !v.PersistentVolumeClaim.ReadOnly {
			t.Errorf("the source's claim %s is mounted read-write", v.PersistentVolumeClaim.ClaimName)
		}
	}
}

// TestStoredDestination: a backup that found its snapshot (a standby seed) is read where it found it, by the
// restore's verify Job as by a member's restore; any other backup where its spec says.
func TestStoredDestination(t *testing.T) {
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "dr-ns", Name: "dr-standby-seed"},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "dr", StandbySeed: &etcdv1alpha1.StandbySeedSource{ClusterName: "main"},
			Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Endpoint: "minio:9000", Bucket: "etcd", Key: "prod/main"}}}}
	rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "dr-ns", Name: "dr-from-backup"}}
	if args := strings.Join(VerifyJob(rs, b, "agent").Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--path=prod/main ") &&
		!strings.HasSuffix(args, "--path=prod/main") {
		t.Fatalf("before the seed is found: %s", args)
	}
	b.Status.Path = "prod/main/main-20261129T110000Z.db"
	if args := strings.Join(VerifyJob(rs, b, "agent").Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--path=prod/main/main-20261129T110000Z.db") {
		t.Fatalf("verify Job args %s", args)
	}
	if d := StoredDestination(b); d.S3.Key != b.Status.Path || b.Spec.Destination.S3.Key != "prod/main" {
		t.Fatalf("stored at %+v, spec changed to %+v", d.S3, b.Spec.Destination.S3)
	}
}
