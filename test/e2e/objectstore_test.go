package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// TestGCSBackups runs every kind of backup against Google Cloud Storage (the test bed's fake-gcs-server, reached
// over plain HTTP without credentials): testObjectStore.
func TestGCSBackups(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "gcs")
	testObjectStore(t, ns, objectStore{name: "GCS", location: "gs://" + framework.Bed.GCS.Bucket + "/",
		destination: framework.GCSDestination, keys: framework.GCSKeys, object: framework.GCSObject})
}

// TestAzureBackups runs every kind of backup against Azure Blob Storage (the test bed's Azurite, reached over
// plain HTTP with the development account's published shared key from a Secret): testObjectStore.
func TestAzureBackups(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "azure")
	framework.CreateAzureSecret(t, ns)
	testObjectStore(t, ns, objectStore{name: "Azure",
		location:    "azure://" + framework.Bed.Azure.Account + "/" + framework.Bed.Azure.Container + "/",
		destination: framework.AzureDestination, keys: framework.AzureKeys, object: framework.AzureObject})
}

// objectStore is a kind of bucket destination on the test bed, as testObjectStore uses it.
type objectStore struct {
	name string
	// location is what status.location of an object starts with, before its key.
	location    string
	destination func(key string) etcdv1alpha1.BackupDestination
	// keys lists the object names under a prefix (all depths), sorted; object reads one whole.
	keys   func(t *testing.T, prefix string) []string
	object func(t *testing.T, key string) []byte
}

// testObjectStore runs every kind of backup against store on one 1-member cluster (which member a snapshot comes
// from is TestBackup's): a one-shot backup (uncompressed, two upload chunks or blocks), verified independently from
// the object read back (etcdutl, a restore, every key), and a second one to the same object refused; a schedule
// with retention and continuous backup to a prefix, compressed and encrypted (its snapshots are age files), whose
// pruned backups' objects go; and a new cluster bootstrapped from the schedule at a revision, holding exactly the
// key space the source had then (read through the schedule's key).
func testObjectStore(t *testing.T, ns string, store objectStore) {
	ctx := context.Background()
	framework.StartOperator(t, ns)
	framework.CreateEncryptionKeySecret(t, ns, "backup-key")
	src := framework.NewCluster(ns, "src", 1)
	if err := framework.K8s.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	src = framework.WaitSettled(t, client.ObjectKeyFromObject(src), 3*time.Minute)
	keys := framework.WriteBackupKeys(t, src)

	// The schedule first: its backups and its follower's segments accumulate while the one-shot backup runs.
	prefix := ns + "/scheduled"
	sched := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "every-10s"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: src.Name, Schedule: "@every 10s", Destination: store.destination(prefix),
			Retention: etcdv1alpha1.Retention{MaxCount: ptr.To[int32](2)}, Encryption: framework.EncryptedTo("backup-key"),
			Continuous: &etcdv1alpha1.ContinuousBackup{Enabled: true, SegmentInterval: &metav1.Duration{Duration: time.Second}}}}
	if err := framework.K8s.Create(ctx, sched); err != nil {
		t.Fatal(err)
	}

	// One-shot: the object is the snapshot, whole and verified; the same object again is refused.
	start := time.Now()
	one := framework.NewBackup(ns, "one-shot", src.Name, store.destination(ns+"/manual/src.db"))
	// Uncompressed, so that the 24 MB snapshot spans two chunks or blocks of the upload (compressed it fits in
	// one); the schedule's backups are compressed, the default, and encrypted.
	one.Spec.Compression = etcdv1alpha1.CompressionNone
	if err := framework.K8s.Create(ctx, one); err != nil {
		t.Fatal(err)
	}
	one = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(one), 2*time.Minute)
	t.Logf("%s backup finished in %s", store.name, time.Since(start).Round(100*time.Millisecond))
	framework.RequireComplete(t, one, src)
	if want := store.location + ns + "/manual/src.db"; one.Status.Location != want {
		t.Fatalf("location %s, want %s", one.Status.Location, want)
	}
	copied := filepath.Join(t.TempDir(), "snapshot.db")
	if err := os.WriteFile(copied, store.object(t, ns+"/manual/src.db"), 0o600); err != nil {
		t.Fatal(err)
	}
	verifySnapshot(t, copied, one, keys)
	again := framework.NewBackup(ns, "one-shot-again", src.Name, one.Spec.Destination)
	if err := framework.K8s.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	again = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(again), 2*time.Minute)
	if c := meta.FindStatusCondition(again.Status.Conditions, etcdv1alpha1.ConditionFailed); c == nil || c.Status != metav1.ConditionTrue ||
		c.Reason != etcdv1alpha1.ReasonDestinationExists {
		t.Fatalf("second backup to the same object: %+v", again.Status.Conditions)
	}
	if got := store.keys(t, ns+"/manual/"); strings.Join(got, ",") != ns+"/manual/src.db" {
		t.Fatalf("objects under manual/: %v, want only the snapshot", got)
	}
	if b := store.object(t, ns+"/manual/src.db"); int64(len(b)) != one.Status.SizeBytes {
		t.Fatalf("the refused backup changed the object: %d bytes, recorded %d", len(b), one.Status.SizeBytes)
	}

	// Continuous backup: a known history, followed into segments in the store.
	got := framework.WaitContinuous(t, client.ObjectKeyFromObject(sched), "following with a window", func(s *etcdv1alpha1.EtcdBackupSchedule) bool {
		return s.Status.Continuous.RecoverableFrom != nil
	})
	if !strings.HasPrefix(got.Status.Continuous.Location, store.location+prefix+"/") {
		t.Fatalf("segments at %s", got.Status.Continuous.Location)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{framework.ClientServiceURL(t, src)}, DialTimeout: 5 * time.Second, TLS: framework.ClusterTLS(t, src)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	for i := range 20 {
		framework.Poll(t, "write", 30*time.Second, func() error {
			_, err := cli.Put(ctx, fmt.Sprintf("h/%02d", i), fmt.Sprintf("first %d", i))
			return err
		})
	}
	del, err := cli.Delete(ctx, "h/1", clientv3.WithPrefix())
	if err != nil || del.Deleted != 10 {
		t.Fatalf("range delete: %v, %+v", err, del)
	}
	target := del.Header.Revision
	for i := 20; i < 25; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("h/%02d", i), "after the target"); err != nil {
			t.Fatal(err)
		}
	}
	framework.WaitContinuous(t, client.ObjectKeyFromObject(sched), fmt.Sprintf("segments through revision %d", target), reachesRevision(target))
	if segs := store.keys(t, resources.SegmentsBase(sched)+"/"); len(segs) == 0 {
		t.Fatal("no segment objects in the store")
	} else {
		t.Logf("%d segment objects under %s%s/", len(segs), store.location, resources.SegmentsBase(sched))
	}

	// Point-in-time restore from the store into a new cluster, through the schedule's key: exactly the key space at
	// the target revision.
	start = time.Now()
	atTarget := framework.NewCluster(ns, "at-target", 1)
	atTarget.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{FromBackup: &etcdv1alpha1.BackupSource{
		PointInTime: &etcdv1alpha1.PointInTimeSource{ScheduleName: sched.Name, Revision: target}}}
	if err := framework.K8s.Create(ctx, atTarget); err != nil {
		t.Fatal(err)
	}
	atTarget = framework.WaitSettled(t, client.ObjectKeyFromObject(atTarget), 5*time.Minute)
	t.Logf("cluster restored to revision %d from %s in %s", target, store.name, time.Since(start).Round(100*time.Millisecond))
	requireSameStates(t, "at-target", keyStates(t, atTarget, "h/", 0), keyStates(t, src, "h/", target))
	if b := framework.WaitBackupFinished(t, client.ObjectKey{Namespace: ns, Name: etcdv1alpha1.BootstrapBackupName(atTarget)}, time.Minute); !strings.HasPrefix(b.Status.Location, store.location) {
		t.Fatalf("the point-in-time backup is at %s, want the schedule's store", b.Status.Location)
	}

	// Retention: at least four scheduled backups taken, two kept, and the prefix holds only the snapshots of the
	// backups that remain (the kept ones and the point-in-time backup, which goes next to them; the segments
	// live under their own prefix).
	kept, taken := waitFourTakenTwoKept(t, sched, 3*time.Minute)
	if b := store.object(t, strings.TrimPrefix(kept[0].Status.Location, store.location)); !bytes.HasPrefix(b, []byte("age-encryption.org/v1\n")) {
		t.Fatalf("scheduled backup %s is not an age file: %.40q", kept[0].Name, b)
	}
	if err := framework.K8s.Delete(ctx, sched); err != nil {
		t.Fatal(err)
	}
	framework.Poll(t, "only the kept backups' objects are in the store", time.Minute, func() error {
		var list etcdv1alpha1.EtcdBackupList
		if err := framework.K8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var want []string
		for _, b := range list.Items {
			if !strings.HasPrefix(b.Status.Location, store.location+prefix+"/") {
				continue
			}
			if !meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) || !b.DeletionTimestamp.IsZero() {
				return fmt.Errorf("backup %s not settled", b.Name)
			}
			want = append(want, strings.TrimPrefix(b.Status.Location, store.location))
		}
		sort.Strings(want)
		var snaps []string
		for _, k := range store.keys(t, prefix+"/") {
			if !strings.HasPrefix(k, resources.SegmentsBase(sched)+"/") {
				snaps = append(snaps, k)
			}
		}
		if strings.Join(snaps, ",") != strings.Join(want, ",") {
			return fmt.Errorf("objects %v, want %v", snaps, want)
		}
		return nil
	})
	t.Logf("schedule took %d backups, kept 2, pruned the others' objects", taken)
}
