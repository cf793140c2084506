package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"
	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/etcdcluster"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// TestRestore backs up a cluster with known keys to a PVC and to S3 and restores each into a new cluster
// (bootstrap.FromBackup), reading back every key; refuses a bit-flipped and a truncated snapshot without
// creating a member; then breaks the source cluster's quorum (two of three members wiped and crashed) and
// re-seeds it: not without confirmation, not from another cluster's backup, and then from its own backup once
// confirmed; finally the quorum-loss policy re-seeds it by itself after a second loss.
func TestRestore(t *testing.T) {
	parallel(t)
	parent := t
	ctx := context.Background()
	ns := framework.NewNamespace(t, "restore")
	stopOperator := framework.StartOperator(t, ns)
	framework.CreateS3Secret(t, ns)
	pvc := framework.CreateBackupClaim(t, ns, "512Mi")
	origin := framework.NewCluster(ns, "origin", 3)
	if err := framework.K8s.Create(ctx, origin); err != nil {
		t.Fatal(err)
	}
	origin = framework.WaitSettled(t, client.ObjectKeyFromObject(origin), 3*time.Minute)
	keys := framework.WriteBackupKeys(t, origin)

	createBackup := func(t *testing.T, b *etcdv1alpha1.EtcdBackup) *etcdv1alpha1.EtcdBackup {
		t.Helper()
		if err := framework.K8s.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	startBackup := func(t *testing.T, name string, d etcdv1alpha1.BackupDestination) *etcdv1alpha1.EtcdBackup {
		t.Helper()
		return createBackup(t, framework.NewBackup(ns, name, origin.Name, d))
	}
	finished := func(t *testing.T, b *etcdv1alpha1.EtcdBackup) *etcdv1alpha1.EtcdBackup {
		t.Helper()
		b = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 2*time.Minute)
		framework.RequireComplete(t, b, origin)
		return b
	}
	backupTo := func(t *testing.T, name string, d etcdv1alpha1.BackupDestination) *etcdv1alpha1.EtcdBackup {
		t.Helper()
		return finished(t, startBackup(t, name, d))
	}
	// The backups the restores start from are all created before the test waits for the first, so that their
	// Jobs run side by side as far as Steward lets them. to-s3 is compressed (the default) and encrypted;
	// truncated is stored as backups were before compression existed (None: the snapshot as etcd wrote it);
	// rotated-away is encrypted to a key its Secret no longer holds by the time it is restored.
	key := framework.CreateEncryptionKeySecret(t, ns, "backup-key")
	framework.CreateEncryptionKeySecret(t, ns, "rotated-key")
	encrypted := func(b *etcdv1alpha1.EtcdBackup, secret string) *etcdv1alpha1.EtcdBackup {
		b.Spec.Encryption = framework.EncryptedTo(secret)
		return b
	}
	toPVC := startBackup(t, "to-pvc", etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "origin/1.db"}})
	toS3 := createBackup(t, encrypted(framework.NewBackup(ns, "to-s3", origin.Name, framework.S3Destination(ns+"/origin-1.db")), "backup-key"))
	damaged := startBackup(t, "damaged", etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "origin/damaged.db"}})
	uncompressed := framework.NewBackup(ns, "truncated", origin.Name, framework.S3Destination(ns+"/truncated.db"))
	uncompressed.Spec.Compression = etcdv1alpha1.CompressionNone
	truncated := createBackup(t, uncompressed)
	rotatedAway := createBackup(t, encrypted(framework.NewBackup(ns, "rotated-away", origin.Name, framework.S3Destination(ns+"/rotated-away.db")), "rotated-key"))
	// A key Secret that does not exist: refused before a Job starts, nothing written.
	noKey := createBackup(t, encrypted(framework.NewBackup(ns, "no-key", origin.Name, framework.S3Destination(ns+"/no-key.db")), "missing-key"))
	// A ServiceAccount for the Jobs that does not exist: refused the same way (the Job would get no Pod).
	noIdentity := framework.NewBackup(ns, "no-identity", origin.Name, framework.S3Destination(ns+"/no-identity.db"))
	noIdentity.Spec.Destination.S3.ServiceAccountName = "missing-sa"
	noIdentity = createBackup(t, noIdentity)
	toPVC, toS3, damaged, truncated, rotatedAway = finished(t, toPVC), finished(t, toS3), finished(t, damaged), finished(t, truncated), finished(t, rotatedAway)
	noKey = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(noKey), time.Minute)
	if c := meta.FindStatusCondition(noKey.Status.Conditions, etcdv1alpha1.ConditionFailed); c == nil || c.Status != metav1.ConditionTrue ||
		c.Reason != etcdv1alpha1.ReasonEncryptionKeyNotFound || noKey.Status.JobName != "" {
		t.Fatalf("backup encrypted to a missing key Secret: %+v, Job %q", c, noKey.Status.JobName)
	}
	if got := framework.S3Keys(t, ns+"/no-key"); len(got) != 0 {
		t.Fatalf("a backup refused for its key wrote %v", got)
	}
	noIdentity = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(noIdentity), time.Minute)
	if c := meta.FindStatusCondition(noIdentity.Status.Conditions, etcdv1alpha1.ConditionFailed); c == nil || c.Status != metav1.ConditionTrue ||
		c.Reason != etcdv1alpha1.ReasonDestinationNotFound || !strings.Contains(c.Message, "ServiceAccount missing-sa") || noIdentity.Status.JobName != "" {
		t.Fatalf("backup whose Jobs' ServiceAccount does not exist: %+v, Job %q", c, noIdentity.Status.JobName)
	}
	if toS3.Status.EncryptionRecipient != key.Recipient().String() || toS3.Status.Compression != etcdv1alpha1.CompressionZstd {
		t.Fatalf("encrypted backup's status: recipient %q (want %s), compression %q", toS3.Status.EncryptionRecipient, key.Recipient(), toS3.Status.Compression)
	}
	requireEncryptedObject(t, ns+"/origin-1.db", key, toS3)
	if truncated.Status.Compression != etcdv1alpha1.CompressionNone || truncated.Status.SizeBytes != truncated.Status.SnapshotSizeBytes {
		t.Fatalf("uncompressed backup: compression %q, %d bytes stored for a snapshot of %d", truncated.Status.Compression, truncated.Status.SizeBytes, truncated.Status.SnapshotSizeBytes)
	}
	// The key rotated the wrong way: the Secret now holds only a new key, none that opens rotated-away.
	var rotated corev1.Secret
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rotated-key"}, &rotated); err != nil {
		t.Fatal(err)
	}
	newID, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	rotated.Data[etcdv1alpha1.EncryptionKeySecretKey] = []byte(newID.String() + "\n")
	if err := framework.K8s.Update(ctx, &rotated); err != nil {
		t.Fatal(err)
	}

	restoreInto := func(t *testing.T, c *etcdv1alpha1.EtcdCluster, b *etcdv1alpha1.EtcdBackup) {
		t.Helper()
		start := time.Now()
		if err := framework.K8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		got := framework.WaitSettled(t, client.ObjectKeyFromObject(c), 4*time.Minute)
		t.Logf("cluster %s restored from %s (%d bytes) and settled in %s", c.Name, b.Status.Location, b.Status.SizeBytes, time.Since(start).Round(100*time.Millisecond))
		read, rev := framework.ReadKeys(t, got, framework.BackupKeyPrefix)
		framework.RequireSameKeys(t, c.Name, read, keys)
		if rev < b.Status.Revision {
			t.Fatalf("restored revision %d is below the backup's %d", rev, b.Status.Revision)
		}
		if got.Status.ClusterID == origin.Status.ClusterID {
			t.Fatalf("restored cluster has the origin's cluster ID %s; it must be a new identity", got.Status.ClusterID)
		}
		r := framework.WaitRestoreFinished(t, client.ObjectKey{Namespace: ns, Name: etcdcluster.FromBackupRestoreName(c)}, time.Minute)
		framework.RequireRestoreReason(t, r, etcdv1alpha1.ConditionComplete, etcdv1alpha1.ReasonRestoreSucceeded)
		// A ReadWriteOnce claim seeds one member; the others join it as learners once the restore is done.
		seeds := int(c.Spec.Replicas)
		if b.Spec.Destination.PVC != nil {
			seeds = 1
		}
		if r.Status.Mode != etcdv1alpha1.RestoreNewCluster || len(r.Status.Members) != seeds || r.Status.SHA256 != b.Status.SHA256 {
			t.Fatalf("restore status %+v", r.Status)
		}
		framework.CheckStatusMatchesEtcd(t, got)
	}
	// The restores into new clusters and the refused ones are independent of each other: they run side by side.
	t.Run("NewClusters", func(t *testing.T) {
		t.Run("NewClusterFromPVC", func(t *testing.T) {
			t.Parallel()
			restoreInto(t, framework.FromBackup(ns, "from-pvc", 3, toPVC.Name), toPVC)
		})
		t.Run("NewClusterFromS3", func(t *testing.T) {
			t.Parallel()
			restoreInto(t, framework.FromBackup(ns, "from-s3", 1, toS3.Name), toS3)
		})

		t.Run("S3OverHTTPSWithPrivateCA", func(t *testing.T) {
			t.Parallel()
			untrusted := framework.NewBackup(ns, "https-untrusted", origin.Name, framework.S3TLSDestination(ns+"/https-untrusted.db", false))
			if err := framework.K8s.Create(ctx, untrusted); err != nil {
				t.Fatal(err)
			}
			untrusted = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(untrusted), 2*time.Minute)
			c := meta.FindStatusCondition(untrusted.Status.Conditions, etcdv1alpha1.ConditionFailed)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != etcdv1alpha1.ReasonUploadFailed || !strings.Contains(c.Message, "certificate") {
				t.Fatalf("backup to an HTTPS endpoint whose CA is not trusted: %+v", c)
			}
			t.Logf("without caBundle: %s: %s", c.Reason, c.Message)
			b := backupTo(t, "https-trusted", framework.S3TLSDestination(ns+"/https-trusted.db", true))
			restoreInto(t, framework.FromBackup(ns, "from-https", 1, b.Name), b)
		})

		refused := func(t *testing.T, name string, b *etcdv1alpha1.EtcdBackup, reason string) {
			t.Helper()
			c := framework.FromBackup(ns, name, 3, b.Name)
			if err := framework.K8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			r := framework.WaitRestoreFinished(t, client.ObjectKey{Namespace: ns, Name: etcdcluster.FromBackupRestoreName(c)}, 2*time.Minute)
			framework.RequireRestoreReason(t, r, etcdv1alpha1.ConditionFailed, reason)
			t.Logf("%s refused: %s", name, meta.FindStatusCondition(r.Status.Conditions, etcdv1alpha1.ConditionFailed).Message)
			var got etcdv1alpha1.EtcdCluster
			framework.Poll(t, name+" reports the refused restore", time.Minute, func() error {
				if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(c), &got); err != nil {
					return err
				}
				if d := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionDegraded); d == nil || d.Status != metav1.ConditionTrue || d.Reason != "RestoreFailed" {
					return fmt.Errorf("status: %s", framework.Describe(&got))
				}
				return nil
			})
			if objs := framework.PodAndVolumeUIDs(t, &got); len(objs) != 0 {
				t.Fatalf("a refused restore created members: %v", objs)
			}
		}
		t.Run("BitFlipRefused", func(t *testing.T) {
			t.Parallel()
			if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
				t.Fatal(err)
			}
			var pv corev1.PersistentVolume
			if err := framework.K8s.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(pv.Spec.Local.Path, "origin", "damaged.db")
			data, err := os.ReadFile(file) //nolint:gosec // the test's own volume
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0x01
			if err := os.WriteFile(file, data, 0o640); err != nil { //nolint:gosec // the test's own volume
				t.Fatal(err)
			}
			refused(t, "from-damaged", damaged, etcdv1alpha1.ReasonSnapshotCorrupt)
		})
		t.Run("TruncatedRefused", func(t *testing.T) {
			t.Parallel()
			s3 := framework.S3Client(t)
			obj, err := s3.GetObject(ctx, framework.Bed.S3.Bucket, ns+"/truncated.db", minio.GetObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			half := truncated.Status.SizeBytes / 2
			if _, err := s3.PutObject(ctx, framework.Bed.S3.Bucket, ns+"/truncated.db", io.LimitReader(obj, half), half, minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			_ = obj.Close()
			refused(t, "from-truncated", truncated, etcdv1alpha1.ReasonSnapshotCorrupt)
		})
		t.Run("KeyRotatedAwayRefused", func(t *testing.T) {
			t.Parallel()
			refused(t, "from-rotated-away", rotatedAway, etcdv1alpha1.ReasonEncryptionKeyMismatch)
		})
	})

	// Writes after the backup: a re-seed loses them, by design and with the user's confirmation.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{framework.ClientServiceURL(t, origin)}, DialTimeout: 5 * time.Second, TLS: framework.ClusterTLS(t, origin)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, framework.BackupKeyPrefix+"zz-after-backup", "lost"); err != nil {
		t.Fatal(err)
	}
	_ = cli.Close()

	t.Run("QuorumLossReseed", func(t *testing.T) {
		broken := framework.BreakQuorum(t, origin)
		before := framework.PodAndVolumeUIDs(t, broken)

		// Without confirmation: nothing happens.
		r := framework.NewRestore(ns, "reseed-origin", origin.Name, toPVC.Name)
		if err := framework.K8s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		framework.Poll(t, "restore waits for confirmation", time.Minute, func() error {
			if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(r.Status.Conditions, etcdv1alpha1.ConditionComplete); c == nil || c.Reason != etcdv1alpha1.ReasonConfirmationRequired {
				return fmt.Errorf("conditions %v", r.Status.Conditions)
			}
			return nil
		})
		t.Logf("unconfirmed: %s", meta.FindStatusCondition(r.Status.Conditions, etcdv1alpha1.ConditionComplete).Message)
		time.Sleep(15 * time.Second)
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(r.Status.Conditions, etcdv1alpha1.ConditionComplete); c.Reason != etcdv1alpha1.ReasonConfirmationRequired {
			t.Fatalf("unconfirmed restore moved on: %v", r.Status.Conditions)
		}
		if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.VerifyJobName(r)}, &batchv1.Job{}); err == nil {
			t.Fatal("an unconfirmed restore started its verify Job")
		}
		framework.RequireUnchanged(t, "an unconfirmed restore", before, framework.PodAndVolumeUIDs(t, broken))

		// Another cluster's backup, confirmed: refused (taken while this one waits: the older restore goes first,
		// so the unconfirmed one is deleted).
		if err := framework.K8s.Delete(ctx, r); err != nil {
			t.Fatal(err)
		}
		var fromPVC etcdv1alpha1.EtcdCluster
		if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "from-pvc"}, &fromPVC); err != nil {
			t.Fatal(err)
		}
		other := framework.NewBackup(ns, "of-from-pvc", fromPVC.Name, framework.S3Destination(ns+"/from-pvc.db"))
		if err := framework.K8s.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		other = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(other), 2*time.Minute)
		wrong := framework.NewRestore(ns, "reseed-wrong", origin.Name, other.Name)
		wrong.Spec.Confirm = origin.Name
		if err := framework.K8s.Create(ctx, wrong); err != nil {
			t.Fatal(err)
		}
		wrong = framework.WaitRestoreFinished(t, client.ObjectKeyFromObject(wrong), time.Minute)
		framework.RequireRestoreReason(t, wrong, etcdv1alpha1.ConditionFailed, etcdv1alpha1.ReasonWrongCluster)
		framework.RequireUnchanged(t, "a restore of another cluster's backup", before, framework.PodAndVolumeUIDs(t, broken))

		// Confirmed, from its own backup. The operator is stopped right after it began replacing members (the
		// old members' volumes set aside), and restarted: it resumes from what it observes.
		start := time.Now()
		ok := framework.NewRestore(ns, "reseed-confirmed", origin.Name, toPVC.Name)
		ok.Spec.Confirm = origin.Name
		if err := framework.K8s.Create(ctx, ok); err != nil {
			t.Fatal(err)
		}
		framework.Poll(t, "old members' volumes set aside", 2*time.Minute, func() error {
			var retired corev1.PersistentVolumeClaimList
			if err := framework.K8s.List(ctx, &retired, client.InNamespace(ns), client.MatchingLabels{resources.LabelRetiredFrom: origin.Name}); err != nil {
				return err
			}
			if len(retired.Items) == 0 {
				return fmt.Errorf("none yet")
			}
			return nil
		})
		stopOperator()
		t.Logf("operator stopped mid re-seed after %s", time.Since(start).Round(100*time.Millisecond))
		time.Sleep(3 * time.Second)
		framework.StartOperator(parent, ns) // runs for the rest of the test, stopped by its cleanup
		ok = framework.WaitRestoreFinished(t, client.ObjectKeyFromObject(ok), 4*time.Minute)
		framework.RequireRestoreReason(t, ok, etcdv1alpha1.ConditionComplete, etcdv1alpha1.ReasonRestoreSucceeded)
		got := framework.WaitSettled(t, client.ObjectKeyFromObject(origin), 2*time.Minute)
		t.Logf("re-seeded from %s in %s: members %v, retired volumes %v", toPVC.Status.Location, time.Since(start).Round(100*time.Millisecond), ok.Status.Members, ok.Status.RetiredVolumes)
		read, rev := framework.ReadKeys(t, got, framework.BackupKeyPrefix)
		framework.RequireSameKeys(t, "re-seeded origin", read, keys)
		if rev < toPVC.Status.Revision+resources.ReseedBumpRevision {
			t.Fatalf("re-seeded revision %d, want above the backup's %d + %d: clients must never see revisions go back", rev, toPVC.Status.Revision, resources.ReseedBumpRevision)
		}
		for name := range before {
			if strings.HasPrefix(name, "pod/") && framework.MemberIn(got, strings.TrimPrefix(name, "pod/")) {
				t.Fatalf("old member %s still in the re-seeded cluster", name)
			}
		}
		if len(ok.Status.RetiredVolumes) != 3 || ok.Status.PreviousClusterID != origin.Status.ClusterID || ok.Status.ClusterID != got.Status.ClusterID ||
			got.Status.ClusterID == origin.Status.ClusterID || len(got.Status.FormerClusterIDs) != 1 || got.Status.FormerClusterIDs[0] != origin.Status.ClusterID {
			t.Fatalf("restore status %+v, cluster IDs %s (former %v)", ok.Status, got.Status.ClusterID, got.Status.FormerClusterIDs)
		}
		var retired corev1.PersistentVolumeClaimList
		if err := framework.K8s.List(ctx, &retired, client.InNamespace(ns), client.MatchingLabels{resources.LabelRetiredFrom: origin.Name}); err != nil {
			t.Fatal(err)
		}
		if len(retired.Items) != 3 {
			t.Fatalf("%d retired volumes, want the 3 old members'", len(retired.Items))
		}
		framework.CheckStatusMatchesEtcd(t, got)
		origin = got
	})

	t.Run("QuorumLossPolicy", func(t *testing.T) {
		// A backup of the re-seeded cluster (its new cluster ID), then the policy, then a second loss.
		again := backupTo(t, "after-reseed", framework.S3Destination(ns+"/origin-2.db"))
		framework.PatchSpec(t, client.ObjectKeyFromObject(origin), func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.QuorumLossRecovery = &etcdv1alpha1.QuorumLossRecovery{Policy: etcdv1alpha1.QuorumLossRestoreLatestBackup, After: &metav1.Duration{Duration: 30 * time.Second}}
		})
		origin = framework.WaitSettled(t, client.ObjectKeyFromObject(origin), time.Minute)
		start := time.Now()
		broken := framework.BreakQuorum(t, origin)
		var auto *etcdv1alpha1.EtcdRestore
		framework.Poll(t, "the policy's restore", 3*time.Minute, func() error {
			var list etcdv1alpha1.EtcdRestoreList
			if err := framework.K8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{etcdcluster.LabelAutoRestore: origin.Name}); err != nil {
				return err
			}
			if len(list.Items) != 1 {
				return fmt.Errorf("%d automatic restores", len(list.Items))
			}
			auto = &list.Items[0]
			return nil
		})
		lostFor := auto.CreationTimestamp.Sub(broken.Status.QuorumLostSince.Time)
		t.Logf("automatic restore %s of %s created %s after quorum was lost", auto.Name, auto.Spec.BackupName, lostFor.Round(time.Second))
		if auto.Spec.BackupName != again.Name || lostFor < 29*time.Second {
			t.Fatalf("automatic restore of %s after %s; want %s after at least 30s", auto.Spec.BackupName, lostFor, again.Name)
		}
		auto = framework.WaitRestoreFinished(t, client.ObjectKeyFromObject(auto), 4*time.Minute)
		framework.RequireRestoreReason(t, auto, etcdv1alpha1.ConditionComplete, etcdv1alpha1.ReasonRestoreSucceeded)
		got := framework.WaitSettled(t, client.ObjectKeyFromObject(origin), 2*time.Minute)
		t.Logf("re-seeded by the policy %s after the loss", time.Since(start).Round(time.Second))
		read, _ := framework.ReadKeys(t, got, framework.BackupKeyPrefix)
		framework.RequireSameKeys(t, "origin re-seeded by the policy", read, keys)
		framework.DeleteAndCheckNothingLeft(t, got)
	})
}

// requireEncryptedObject checks object key of the test bed's bucket independently of Steward: the size and
// sha256 the backup recorded, an age file that the age library opens with id, holding a standard zstd frame
// that holds a snapshot of the recorded size, and no key of the cluster readable in the clear.
func requireEncryptedObject(t *testing.T, key string, id age.Identity, b *etcdv1alpha1.EtcdBackup) {
	t.Helper()
	obj, err := framework.S3Client(t).GetObject(context.Background(), framework.Bed.S3.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = obj.Close() }()
	stored, err := io.ReadAll(obj)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(stored)
	if int64(len(stored)) != b.Status.SizeBytes || hex.EncodeToString(sum[:]) != b.Status.SHA256 {
		t.Fatalf("%s: %d bytes sha256 %x stored; status says %d bytes sha256 %s", key, len(stored), sum, b.Status.SizeBytes, b.Status.SHA256)
	}
	if bytes.Contains(stored, []byte(framework.BackupKeyPrefix)) {
		t.Fatalf("%s holds the cluster's keys in the clear", key)
	}
	plain, err := age.Decrypt(bytes.NewReader(stored), id)
	if err != nil {
		t.Fatalf("age: %v", err)
	}
	dec, err := zstd.NewReader(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	n, err := io.Copy(io.Discard, dec)
	if err != nil || n != b.Status.SnapshotSizeBytes {
		t.Fatalf("%s: decrypted and decompressed %d bytes (%v); status says a snapshot of %d", key, n, err, b.Status.SnapshotSizeBytes)
	}
	t.Logf("%s: age(zstd(snapshot of %d bytes)) stored as %d bytes", key, n, len(stored))
}
