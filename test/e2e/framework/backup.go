package framework

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/testbed"
)

// CreateBackupClaim creates the ReadWriteOnce claim "backups" of the given size in ns, of the default class: its
// volume shares the host's disk, whatever the size says.
func CreateBackupClaim(t *testing.T, ns, size string) *corev1.PersistentVolumeClaim {
	t.Helper()
	return createClaim(t, ns, "backups", size, "")
}

// CreateSizedClaim creates a ReadWriteOnce claim whose volume has the size asked for, and fills up (the test
// bed's sized class, in memory: keep it small).
func CreateSizedClaim(t *testing.T, ns, name, size string) *corev1.PersistentVolumeClaim {
	t.Helper()
	return createClaim(t, ns, name, size, testbed.SizedStorageClassName)
}

func createClaim(t *testing.T, ns, name, size, class string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
	if class != "" {
		pvc.Spec.StorageClassName = &class
	}
	if err := K8s.Create(context.Background(), pvc); err != nil {
		t.Fatal(err)
	}
	return pvc
}

// CreateS3Secret creates the test bed's S3 credentials as S3SecretName in ns.
func CreateS3Secret(t *testing.T, ns string) {
	t.Helper()
	if err := K8s.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: S3SecretName}, Data: map[string][]byte{
		etcdv1alpha1.S3AccessKeyIDKey: []byte(Bed.S3.AccessKeyID), etcdv1alpha1.S3SecretAccessKeyKey: []byte(Bed.S3.SecretAccessKey)}}); err != nil {
		t.Fatal(err)
	}
}

// NewBackup is an EtcdBackup ns/name of cluster to d; the caller creates it.
func NewBackup(ns, name, cluster string, d etcdv1alpha1.BackupDestination) *etcdv1alpha1.EtcdBackup {
	return &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: cluster, Destination: d}}
}

// RequireComplete fails t unless backup b of c is Complete with every field of its status filled in and matching c.
func RequireComplete(t *testing.T, b *etcdv1alpha1.EtcdBackup, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	if !meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) {
		t.Fatalf("backup %s did not complete: %+v", b.Name, b.Status.Conditions)
	}
	st := b.Status
	if st.SizeBytes <= 0 || len(st.SHA256) != 64 || st.Revision <= 0 || st.Location == "" || st.Member == "" || st.SnapshotSizeBytes <= 0 ||
		st.Compression != b.Spec.Compression && (b.Spec.Compression != "" || st.Compression != etcdv1alpha1.CompressionZstd) ||
		(b.Spec.Encryption != nil) != (st.EncryptionRecipient != "") ||
		st.EtcdVersion != c.Spec.Version || st.ClusterID != c.Status.ClusterID || st.StartTime == nil || st.CompletionTime == nil {
		t.Fatalf("backup %s status incomplete: %+v (cluster ID %s)", b.Name, st, c.Status.ClusterID)
	}
}

// S3Client is a client of the test bed's S3 server with its credentials.
func S3Client(t *testing.T) *minio.Client {
	t.Helper()
	c, err := minio.New(Bed.S3.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(Bed.S3.AccessKeyID, Bed.S3.SecretAccessKey, ""),
		Secure: false, BucketLookup: minio.BucketLookupPath, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// S3Destination is key in the test bed's S3 bucket (plain HTTP), with the credentials of S3SecretName.
func S3Destination(key string) etcdv1alpha1.BackupDestination {
	return etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{
		Endpoint: Bed.S3.Endpoint, Bucket: Bed.S3.Bucket, Key: key, Region: "us-east-1", ForcePathStyle: true, Insecure: true,
		CredentialsSecret: &etcdv1alpha1.SecretReference{Name: S3SecretName}}}
}

// S3Keys lists the object keys under prefix.
func S3Keys(t *testing.T, prefix string) []string {
	t.Helper()
	var keys []string
	for o := range S3Client(t).ListObjects(context.Background(), Bed.S3.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	sort.Strings(keys)
	return keys
}

// S3SecretName is the Secret of the test bed's S3 credentials that CreateS3Secret creates and S3Destination names.
const S3SecretName = "s3-credentials"

// S3TLSDestination is key on the test bed's HTTPS gateway, whose certificate only the test bed's CA vouches for.
func S3TLSDestination(key string, trustCA bool) etcdv1alpha1.BackupDestination {
	d := etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{
		Endpoint: Bed.S3.TLSEndpoint, Bucket: Bed.S3.Bucket, Key: key, Region: "us-east-1", ForcePathStyle: true,
		CredentialsSecret: &etcdv1alpha1.SecretReference{Name: S3SecretName}}}
	if trustCA {
		d.S3.CABundle = Bed.S3.CABundle
	}
	return d
}

// WaitBackupFinished waits for Complete or Failed and returns the backup.
func WaitBackupFinished(t *testing.T, key client.ObjectKey, timeout time.Duration) *etcdv1alpha1.EtcdBackup {
	t.Helper()
	var b etcdv1alpha1.EtcdBackup
	Poll(t, "EtcdBackup "+key.String()+" finished", timeout, func() error {
		if err := K8s.Get(context.Background(), key, &b); err != nil {
			return err
		}
		if meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) ||
			meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionFailed) {
			return nil
		}
		return fmt.Errorf("conditions %v", b.Status.Conditions)
	})
	return &b
}

// WaitContinuous waits until the EtcdBackupSchedule key's continuous backup runs (its condition True) and ok
// accepts it, and returns the schedule.
func WaitContinuous(t *testing.T, key client.ObjectKey, what string, ok func(*etcdv1alpha1.EtcdBackupSchedule) bool) *etcdv1alpha1.EtcdBackupSchedule {
	t.Helper()
	var s etcdv1alpha1.EtcdBackupSchedule
	Poll(t, "schedule "+key.Name+": "+what, 3*time.Minute, func() error {
		if err := K8s.Get(context.Background(), key, &s); err != nil {
			return err
		}
		c := meta.FindStatusCondition(s.Status.Conditions, etcdv1alpha1.ConditionContinuousBackup)
		if c == nil || c.Status != metav1.ConditionTrue || s.Status.Continuous == nil || !ok(&s) {
			return fmt.Errorf("condition %+v, status %+v", c, s.Status.Continuous)
		}
		return nil
	})
	return &s
}

// CreateEncryptionKeySecret creates Secret ns/name holding a new age identity under age.key, as age-keygen
// writes it, and returns the identity.
func CreateEncryptionKeySecret(t *testing.T, ns, name string) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("# created: %s\n# public key: %s\n%s\n", time.Now().UTC().Format(time.RFC3339), id.Recipient(), id)
	if err := K8s.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string][]byte{etcdv1alpha1.EncryptionKeySecretKey: []byte(key)}}); err != nil {
		t.Fatal(err)
	}
	return id
}

// EncryptedTo is spec.encryption with the key in Secret name.
func EncryptedTo(name string) *etcdv1alpha1.BackupEncryption {
	return &etcdv1alpha1.BackupEncryption{KeySecret: etcdv1alpha1.SecretReference{Name: name}}
}
