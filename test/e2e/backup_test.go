package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
)

// verifySnapshot checks a copied-out snapshot file independently of Steward: size and sha256 as recorded,
// a standard zstd frame holding a snapshot of the recorded size (unless the backup asked for no compression),
// and the snapshot passes verifySnapshotFile.
func verifySnapshot(t *testing.T, file string, b *etcdv1alpha1.EtcdBackup, keys map[string]string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != b.Status.SizeBytes || hex.EncodeToString(sum[:]) != b.Status.SHA256 {
		t.Fatalf("stored snapshot is %d bytes sha256 %x; status says %d bytes sha256 %s", len(data), sum, b.Status.SizeBytes, b.Status.SHA256)
	}
	if b.Spec.Compression == etcdv1alpha1.CompressionNone {
		if b.Status.Compression != etcdv1alpha1.CompressionNone || b.Status.SnapshotSizeBytes != b.Status.SizeBytes {
			t.Fatalf("uncompressed backup: status says compression %q, a snapshot of %d bytes", b.Status.Compression, b.Status.SnapshotSizeBytes)
		}
		verifySnapshotFile(t, file, b, keys)
		return
	}
	// Compressed by default: a standard zstd frame, read here with the zstd library, not Steward's reader.
	if b.Status.Compression != etcdv1alpha1.CompressionZstd || !bytes.HasPrefix(data, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		t.Fatalf("status says compression %q; the stored file begins with %x", b.Status.Compression, data[:min(8, len(data))])
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := dec.DecodeAll(data, nil)
	dec.Close()
	if err != nil {
		t.Fatalf("zstd: %v", err)
	}
	if int64(len(snap)) != b.Status.SnapshotSizeBytes {
		t.Fatalf("the snapshot is %d bytes; status says %d", len(snap), b.Status.SnapshotSizeBytes)
	}
	t.Logf("%s: snapshot of %d bytes stored as %d (ratio %.2f)", b.Name, len(snap), len(data), float64(len(snap))/float64(len(data)))
	file += ".decompressed"
	if err := os.WriteFile(file, snap, 0o600); err != nil { //nolint:gosec // next to the test's own copy
		t.Fatal(err)
	}
	verifySnapshotFile(t, file, b, keys)
}

// verifySnapshotFile checks an etcd snapshot file with etcd's own tools: `etcdutl snapshot status` agrees on the
// revision, and a restore into a throwaway etcd serves every key.
func verifySnapshotFile(t *testing.T, file string, b *etcdv1alpha1.EtcdBackup, keys map[string]string) {
	t.Helper()
	bin := framework.Bed.EtcdBinDir(testbed.EtcdVersions[0])
	out, err := exec.Command(filepath.Join(bin, "etcdutl"), "snapshot", "status", file, "--write-out=json").Output()
	if err != nil {
		t.Fatalf("etcdutl snapshot status: %v", err)
	}
	var status struct {
		Revision  int64 `json:"revision"`
		TotalKey  int   `json:"totalKey"`
		TotalSize int64 `json:"totalSize"`
	}
	if err := json.Unmarshal(out, &status); err != nil {
		t.Fatalf("parse %s: %v", out, err)
	}
	if status.Revision != b.Status.Revision {
		t.Fatalf("etcdutl says revision %d, status says %d", status.Revision, b.Status.Revision)
	}

	dir := t.TempDir()
	peer, clientURL := "http://"+freeLoopback(t), "http://"+freeLoopback(t)
	restore := exec.Command(filepath.Join(bin, "etcdutl"), "snapshot", "restore", file, "--data-dir", filepath.Join(dir, "data"),
		"--name", "verify", "--initial-cluster", "verify="+peer, "--initial-advertise-peer-urls", peer)
	if out, err := restore.CombinedOutput(); err != nil {
		t.Fatalf("etcdutl snapshot restore: %v\n%s", err, out)
	}
	logFile, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	etcd := exec.Command(filepath.Join(bin, "etcd"), "--name", "verify", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL, "--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer, "--initial-cluster", "verify="+peer, "--listen-metrics-urls", "http://"+freeLoopback(t))
	etcd.Stdout, etcd.Stderr = logFile, logFile
	if err := etcd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = etcd.Process.Kill(); _ = etcd.Wait() }()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	var got map[string]string
	framework.Poll(t, "restored etcd serves the keys", 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, framework.BackupKeyPrefix, clientv3.WithPrefix())
		if err != nil {
			return err
		}
		got = map[string]string{}
		for _, kv := range resp.Kvs {
			got[string(kv.Key)] = string(kv.Value)
		}
		return nil
	})
	if len(got) != len(keys) {
		t.Fatalf("restored snapshot has %d keys under %s, want %d", len(got), framework.BackupKeyPrefix, len(keys))
	}
	for k, v := range keys {
		if got[k] != v {
			t.Fatalf("restored %s differs (%d bytes, want %d)", k, len(got[k]), len(v))
		}
	}
	t.Logf("verified %s: %d bytes stored, revision %d, %d keys restored and matched", b.Status.Location, b.Status.SizeBytes, status.Revision, len(keys))
}

func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// TestBackup takes snapshots of a 3-member cluster with known keys to a PVC and to S3 and verifies each stored
// artifact independently (etcdutl, restore, every key); runs a schedule with retention and checks that pruned
// backups' objects are deleted; and checks that a backup of a missing cluster fails without starting anything.
func TestBackup(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "backup")
	framework.StartOperator(t, ns)
	framework.CreateS3Secret(t, ns)
	// A cluster whose members can never start (their image does not exist), and a backup of it: it waits for a
	// healthy member for backup.UnavailableGrace, then fails. Created first, checked last, so the wait overlaps
	// the other cases.
	unreachable := framework.NewCluster(ns, "never-up", 1)
	unreachable.Spec.Image = "steward.local/etcd:v0.0.0-missing"
	if err := framework.K8s.Create(ctx, unreachable); err != nil {
		t.Fatal(err)
	}
	ofUnreachable := framework.NewBackup(ns, "of-never-up", unreachable.Name, framework.S3Destination(ns+"/never-up/x.db"))
	if err := framework.K8s.Create(ctx, ofUnreachable); err != nil {
		t.Fatal(err)
	}
	c := framework.NewCluster(ns, "backed", 3)
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	c = framework.WaitSettled(t, client.ObjectKeyFromObject(c), 3*time.Minute)
	keys := framework.WriteBackupKeys(t, c)

	t.Run("PVC", func(t *testing.T) {
		pvc := framework.CreateBackupClaim(t, ns, "256Mi")
		start := time.Now()
		b := framework.NewBackup(ns, "to-pvc", c.Name, etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "etcd/backed-1.db"}})
		if err := framework.K8s.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		b = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 2*time.Minute)
		t.Logf("PVC backup finished in %s", time.Since(start).Round(100*time.Millisecond))
		framework.RequireComplete(t, b, c)
		if b.Status.Location != "pvc://backups/etcd/backed-1.db" {
			t.Fatalf("location %s", b.Status.Location)
		}
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
			t.Fatal(err)
		}
		var pv corev1.PersistentVolume
		if err := framework.K8s.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(pv.Spec.Local.Path, "etcd", "backed-1.db")
		copied := filepath.Join(t.TempDir(), "snapshot.db")
		copyFile(t, file, copied)
		verifySnapshot(t, copied, b, keys)
		entries, err := os.ReadDir(filepath.Dir(file))
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			t.Fatalf("backup directory holds %d entries, want only the snapshot (no temporary file left)", len(entries))
		}
		var cl etcdv1alpha1.EtcdCluster
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(c), &cl); err != nil {
			t.Fatal(err)
		}
		if cl.Status.LastBackup == nil || cl.Status.LastBackup.Name != b.Name {
			t.Fatalf("cluster's lastBackup is %+v, want %s", cl.Status.LastBackup, b.Name)
		}

		// A second backup to the same path refuses to overwrite.
		again := framework.NewBackup(ns, "to-pvc-again", c.Name, b.Spec.Destination)
		if err := framework.K8s.Create(ctx, again); err != nil {
			t.Fatal(err)
		}
		again = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(again), 2*time.Minute)
		if cond := meta.FindStatusCondition(again.Status.Conditions, etcdv1alpha1.ConditionFailed); cond.Status != metav1.ConditionTrue ||
			cond.Reason != etcdv1alpha1.ReasonDestinationExists {
			t.Fatalf("second backup to the same path: %+v", cond)
		}
		copyFile(t, file, copied+".after")
		requireSameContent(t, copied, copied+".after")

		// Deleting a backup with the default policy (Retain) keeps its file.
		if err := framework.K8s.Delete(ctx, b); err != nil {
			t.Fatal(err)
		}
		framework.Poll(t, "EtcdBackup to-pvc gone", 30*time.Second, func() error {
			if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(b), b); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%w)", err)
			}
			return nil
		})
		if _, err := os.Stat(file); err != nil {
			t.Fatalf("the snapshot of a Retain backup was deleted: %v", err)
		}
	})

	t.Run("S3", func(t *testing.T) {
		start := time.Now()
		b := framework.NewBackup(ns, "to-s3", c.Name, framework.S3Destination(ns+"/manual/backed.db"))
		// Uncompressed, so that the snapshot (about 21 MB) spans two multipart parts of 16 MiB; compressed it
		// takes 12 KB (TestRestore stores compressed and encrypted objects in S3).
		b.Spec.Compression = etcdv1alpha1.CompressionNone
		if err := framework.K8s.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		b = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 2*time.Minute)
		t.Logf("S3 backup finished in %s", time.Since(start).Round(100*time.Millisecond))
		framework.RequireComplete(t, b, c)
		if b.Status.Location != "s3://"+framework.Bed.S3.Bucket+"/"+ns+"/manual/backed.db" {
			t.Fatalf("location %s", b.Status.Location)
		}
		obj, err := framework.S3Client(t).GetObject(ctx, framework.Bed.S3.Bucket, ns+"/manual/backed.db", minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		copied := filepath.Join(t.TempDir(), "snapshot.db")
		f, err := os.Create(copied)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, obj); err != nil {
			t.Fatalf("GET the snapshot through the S3 API: %v", err)
		}
		_ = f.Close()
		verifySnapshot(t, copied, b, keys)
		if got := framework.S3Keys(t, ns+"/manual/"); len(got) != 1 {
			t.Fatalf("objects under manual/: %v, want only the snapshot", got)
		}
	})

	t.Run("ScheduleWithRetention", func(t *testing.T) {
		s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every-10s"},
			Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: c.Name, Schedule: "@every 10s", Destination: framework.S3Destination(ns + "/scheduled"),
				Retention: etcdv1alpha1.Retention{MaxCount: ptr.To[int32](2)}}}
		if err := framework.K8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		current, taken := waitFourTakenTwoKept(t, s, 4*time.Minute)
		// Stop the schedule before looking at the bucket, so that no new backup races the check.
		if err := framework.K8s.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
		// The bucket holds exactly the objects of the backups that remain (two, or three if one more started
		// just before the schedule went), and none of the pruned ones.
		var want []string
		framework.Poll(t, "only the kept backups' objects are in the bucket", time.Minute, func() error {
			var list etcdv1alpha1.EtcdBackupList
			if err := framework.K8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{resources.LabelSchedule: s.Name}); err != nil {
				return err
			}
			want = nil
			for _, b := range list.Items {
				if !meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) || !b.DeletionTimestamp.IsZero() {
					return fmt.Errorf("backup %s not settled", b.Name)
				}
				want = append(want, strings.TrimPrefix(b.Status.Location, "s3://"+framework.Bed.S3.Bucket+"/"))
			}
			sort.Strings(want)
			if got := framework.S3Keys(t, ns+"/scheduled/"); strings.Join(got, ",") != strings.Join(want, ",") {
				return fmt.Errorf("objects %v, want %v", got, want)
			}
			current = list.Items
			return nil
		})
		t.Logf("schedule took %d backups, kept %v", taken, want)

		// Deleting the kept backups (deletionPolicy Delete) deletes their objects.
		for i := range current {
			if err := framework.K8s.Delete(ctx, &current[i]); err != nil {
				t.Fatal(err)
			}
		}
		framework.Poll(t, "kept backups and their objects deleted", 2*time.Minute, func() error {
			var list etcdv1alpha1.EtcdBackupList
			if err := framework.K8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{resources.LabelSchedule: s.Name}); err != nil {
				return err
			}
			if got := framework.S3Keys(t, ns+"/scheduled/"); len(list.Items) > 0 || len(got) > 0 {
				return fmt.Errorf("%d backups, objects %v", len(list.Items), got)
			}
			return nil
		})
	})

	t.Run("MissingClusterFails", func(t *testing.T) {
		b := framework.NewBackup(ns, "of-nothing", "no-such-cluster", framework.S3Destination(ns+"/missing/x.db"))
		if err := framework.K8s.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		b = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), time.Minute)
		cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionFailed)
		if cond.Status != metav1.ConditionTrue || cond.Reason != etcdv1alpha1.ReasonClusterNotFound {
			t.Fatalf("Failed condition %+v, want True/%s", cond, etcdv1alpha1.ReasonClusterNotFound)
		}
		requireNothingStarted(t, b, ns+"/missing/")
	})

	t.Run("UnavailableClusterFails", func(t *testing.T) {
		b := framework.WaitBackupFinished(t, client.ObjectKeyFromObject(ofUnreachable), 2*time.Minute)
		cond := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionFailed)
		if cond.Status != metav1.ConditionTrue || cond.Reason != etcdv1alpha1.ReasonClusterUnavailable {
			t.Fatalf("Failed condition %+v, want True/%s", cond, etcdv1alpha1.ReasonClusterUnavailable)
		}
		t.Logf("backup of a cluster without a healthy member: %s: %s", cond.Reason, cond.Message)
		requireNothingStarted(t, b, ns+"/never-up/")
	})

	framework.DeleteAndCheckNothingLeft(t, c)
	framework.DeleteAndCheckNothingLeft(t, unreachable)
}

// requireNothingStarted checks that a refused backup started no Job and stored nothing under prefix.
func requireNothingStarted(t *testing.T, b *etcdv1alpha1.EtcdBackup, prefix string) {
	t.Helper()
	var jobs batchv1.JobList
	if err := framework.K8s.List(context.Background(), &jobs, client.InNamespace(b.Namespace), client.MatchingLabels{resources.LabelBackup: b.Name}); err != nil {
		t.Fatal(err)
	}
	if keys := framework.S3Keys(t, prefix); len(jobs.Items) != 0 || len(keys) != 0 {
		t.Fatalf("refused backup %s started %d Jobs and stored %v", b.Name, len(jobs.Items), keys)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil { //nolint:gosec // a temporary file of the test
		t.Fatal(err)
	}
}

// requireSameContent fails the test unless a and b have the same content.
func requireSameContent(t *testing.T, a, b string) {
	t.Helper()
	da, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(da) != string(db) {
		t.Fatalf("%s changed: a refused backup overwrote it", a)
	}
}

// waitFourTakenTwoKept waits until schedule s (retention maxCount 2) has taken at least four backups and keeps
// exactly two, both Complete, and returns those two and how many it took.
func waitFourTakenTwoKept(t *testing.T, s *etcdv1alpha1.EtcdBackupSchedule, timeout time.Duration) (kept []etcdv1alpha1.EtcdBackup, taken int) {
	t.Helper()
	seen := map[string]bool{}
	framework.Poll(t, "four scheduled backups taken, two kept", timeout, func() error {
		var list etcdv1alpha1.EtcdBackupList
		if err := framework.K8s.List(context.Background(), &list, client.InNamespace(s.Namespace), client.MatchingLabels{resources.LabelSchedule: s.Name}); err != nil {
			return err
		}
		complete := 0
		for _, b := range list.Items {
			seen[b.Name] = true
			if meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) && b.DeletionTimestamp.IsZero() {
				complete++
			}
		}
		if len(seen) < 4 || len(list.Items) != 2 || complete != 2 {
			return fmt.Errorf("%d backups seen, %d now, %d complete", len(seen), len(list.Items), complete)
		}
		kept = list.Items
		return nil
	})
	return kept, len(seen)
}
