package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pitr"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// keyStates is the key space under prefix at revision rev (0: now), each key with its value and its create and
// mod revisions and version: what a point-in-time restore must reproduce exactly.
func keyStates(t *testing.T, c *etcdv1alpha1.EtcdCluster, prefix string, rev int64) map[string]string {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{framework.ClientServiceURL(t, c)}, DialTimeout: 5 * time.Second, TLS: framework.ClusterTLS(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	var resp *clientv3.GetResponse
	framework.Poll(t, "read "+prefix+" from "+c.Name, time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err = cli.Get(ctx, prefix, opts...)
		return err
	})
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = fmt.Sprintf("%s@c%d/m%d/v%d", kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version)
	}
	return out
}

func requireSameStates(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: key space differs:\n got  %v\n want %v", what, got, want)
	}
	t.Logf("%s: %d keys identical (values, create and mod revisions, versions)", what, len(got))
}

func reachesRevision(rev int64) func(*etcdv1alpha1.EtcdBackupSchedule) bool {
	return func(s *etcdv1alpha1.EtcdBackupSchedule) bool {
		return s.Status.Continuous.RecoverableTo != nil && s.Status.Continuous.RecoverableTo.Revision >= rev
	}
}

func pointInTimeBackup(ns, name, cluster, schedule string, d etcdv1alpha1.BackupDestination, rev int64, at time.Time) *etcdv1alpha1.EtcdBackup {
	b := framework.NewBackup(ns, name, cluster, d)
	b.Spec.PointInTime = &etcdv1alpha1.PointInTimeSource{ScheduleName: schedule, Revision: rev}
	if !at.IsZero() {
		b.Spec.PointInTime.Time = at.UTC().Format(time.RFC3339Nano)
	}
	return b
}

// TestContinuousBackupPointInTime follows a 3-member cluster with continuous backup to a PVC and to S3 while it
// takes a known history (puts, overwrites, a transaction, a range delete), through a restart of the follower and
// the loss of the leader's Pod; a point-in-time backup to a revision (PVC), bootstrapped into a new cluster, and a
// new cluster straight from spec.bootstrap.FromBackup.pointInTime at a time (S3) each hold exactly the key space
// the source had at that point; a target past the window, a destination off the schedule's claim and a corrupted
// segment are refused with nothing written. Then, under a steady writer, the cluster loses quorum and an
// EtcdRestore with pointInTime re-seeds it from the latest point; the follower moves to the new cluster identity
// with a snapshot of its own; and, under a steady writer again, the whole cluster is deleted (every member and
// volume) and a new one starts from the deleted one's latest point. Each time the restored writes are a prefix
// of the acknowledged ones, and the number missing is the RPO.
func TestContinuousBackupPointInTime(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "pitr")
	framework.StartOperator(t, ns)
	framework.CreateS3Secret(t, ns)
	pvc := framework.CreateBackupClaim(t, ns, "512Mi")
	src := framework.NewCluster(ns, "src", 3)
	if err := framework.K8s.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	src = framework.WaitSettled(t, client.ObjectKeyFromObject(src), 3*time.Minute)
	continuous := &etcdv1alpha1.ContinuousBackup{Enabled: true, SegmentInterval: &metav1.Duration{Duration: time.Second}}
	schedule := func(name string, d etcdv1alpha1.BackupDestination, enc *etcdv1alpha1.BackupEncryption) *etcdv1alpha1.EtcdBackupSchedule {
		s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: src.Name, Schedule: "@every 6h", Destination: d, Continuous: continuous, Encryption: enc}}
		if err := framework.K8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	begin := time.Now()
	onPVC := schedule("on-pvc", etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "src"}}, nil)
	// The S3 schedule encrypts its snapshots and segments: the point-in-time restores from it read both with the
	// key, and its point-in-time backups are encrypted to it too.
	framework.CreateEncryptionKeySecret(t, ns, "pitr-key")
	onS3 := schedule("on-s3", framework.S3Destination(ns+"/src"), framework.EncryptedTo("pitr-key"))
	// No scheduled time is due for hours: the first snapshot is the one continuous backup takes to start its window.
	for _, s := range []*etcdv1alpha1.EtcdBackupSchedule{onPVC, onS3} {
		got := framework.WaitContinuous(t, client.ObjectKeyFromObject(s), "following with a window", func(s *etcdv1alpha1.EtcdBackupSchedule) bool {
			return s.Status.Continuous.RecoverableFrom != nil
		})
		t.Logf("schedule %s: following %s %.1fs after creation, window from backup %s at revision %d", s.Name,
			got.Status.Continuous.Location, time.Since(begin).Seconds(), got.Status.Continuous.RecoverableFrom.Backup, got.Status.Continuous.RecoverableFrom.Revision)
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{framework.ClientServiceURL(t, src)}, DialTimeout: 5 * time.Second, TLS: framework.ClusterTLS(t, src)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	var last int64
	put := func(k, v string) {
		t.Helper()
		framework.Poll(t, "write "+k, 30*time.Second, func() error {
			r, err := cli.Put(ctx, k, v)
			if err == nil {
				last = r.Header.Revision
			}
			return err
		})
	}
	for i := range 20 {
		put(fmt.Sprintf("h/%02d", i), fmt.Sprintf("first %d", i))
	}
	r1 := last
	tx, err := cli.Txn(ctx).Then(clientv3.OpPut("h/00", "overwritten"), clientv3.OpPut("h/01", "overwritten"), clientv3.OpDelete("h/02")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	del, err := cli.Delete(ctx, "h/1", clientv3.WithPrefix())
	if err != nil || del.Deleted != 10 {
		t.Fatalf("range delete: %v, %+v", err, del)
	}
	r2 := del.Header.Revision
	time.Sleep(300 * time.Millisecond)
	t2 := time.Now()
	time.Sleep(300 * time.Millisecond)
	for i := 20; i < 30; i++ {
		put(fmt.Sprintf("h/%02d", i), "after t2")
	}
	t.Logf("history: revision %d after the first puts, %d after the transaction (%d) and the range delete, %s between, then %d",
		r1, r2, tx.Header.Revision, t2.UTC().Format(time.RFC3339Nano), last)

	// The follower restarts while writes go on: it resumes from its last segment.
	var pods corev1.PodList
	if err := framework.K8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(resources.FollowerLabels(onPVC))); err != nil || len(pods.Items) != 1 {
		t.Fatalf("follower Pods: %v %d", err, len(pods.Items))
	}
	if err := framework.K8s.Delete(ctx, &pods.Items[0]); err != nil {
		t.Fatal(err)
	}
	for i := 30; i < 40; i++ {
		put(fmt.Sprintf("h/%02d", i), "during the follower's restart")
	}
	// The leader's Pod is lost while continuous backup runs: a leader change, and a member away and back; the
	// follower reaches the cluster through its Service.
	if err := framework.K8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: src.Status.Leader}}); err != nil {
		t.Fatal(err)
	}
	for i := 40; i < 45; i++ {
		put(fmt.Sprintf("h/%02d", i), "during a member's loss")
	}
	r5 := last
	for _, s := range []*etcdv1alpha1.EtcdBackupSchedule{onPVC, onS3} {
		framework.WaitContinuous(t, client.ObjectKeyFromObject(s), fmt.Sprintf("segments through revision %d", r5), reachesRevision(r5))
	}
	src = framework.WaitSettled(t, client.ObjectKeyFromObject(src), 3*time.Minute)
	requireEncryptedSegments(t, ns+"/src")

	// Point-in-time backups, each restored into a new cluster: exactly the key space at that point.
	restoreAt := func(name string, b *etcdv1alpha1.EtcdBackup, wantRev int64) {
		t.Helper()
		start := time.Now()
		if err := framework.K8s.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		b = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 3*time.Minute)
		c := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionComplete)
		if c == nil || c.Status != metav1.ConditionTrue || b.Status.Revision != wantRev || b.Status.ClusterID != src.Status.ClusterID {
			t.Fatalf("point-in-time backup %s: %+v, status revision %d (want %d), cluster ID %s", b.Name, b.Status.Conditions, b.Status.Revision, wantRev, b.Status.ClusterID)
		}
		t.Logf("point-in-time backup %s Complete in %.1fs: %s", b.Name, time.Since(start).Seconds(), c.Message)
		restored := framework.FromBackup(ns, name, 1, b.Name)
		if err := framework.K8s.Create(ctx, restored); err != nil {
			t.Fatal(err)
		}
		restored = framework.WaitSettled(t, client.ObjectKeyFromObject(restored), 4*time.Minute)
		requireSameStates(t, name, keyStates(t, restored, "h/", 0), keyStates(t, src, "h/", wantRev))
	}
	restoreAt("at-r1", pointInTimeBackup(ns, "pit-r1", src.Name, onPVC.Name,
		etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "pit/r1.db"}}, r1, time.Time{}), r1)
	// Straight from spec.bootstrap.FromBackup.pointInTime, to a time, from the S3 schedule.
	atT2 := framework.NewCluster(ns, "at-t2", 1)
	atT2.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{FromBackup: &etcdv1alpha1.BackupSource{
		PointInTime: &etcdv1alpha1.PointInTimeSource{ScheduleName: onS3.Name, Time: t2.UTC().Format(time.RFC3339Nano)}}}
	if err := framework.K8s.Create(ctx, atT2); err != nil {
		t.Fatal(err)
	}
	atT2 = framework.WaitSettled(t, client.ObjectKeyFromObject(atT2), 5*time.Minute)
	requireSameStates(t, "at-t2", keyStates(t, atT2, "h/", 0), keyStates(t, src, "h/", r2))
	if b := framework.WaitBackupFinished(t, client.ObjectKey{Namespace: ns, Name: etcdv1alpha1.BootstrapBackupName(atT2)}, time.Minute); b.Status.Revision != r2 {
		t.Fatalf("the point-in-time backup of at-t2 is at revision %d, want %d", b.Status.Revision, r2)
	}

	refused := func(b *etcdv1alpha1.EtcdBackup, reason, says string) *etcdv1alpha1.EtcdBackup {
		t.Helper()
		if err := framework.K8s.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		b = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 3*time.Minute)
		c := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionFailed)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason || !strings.Contains(c.Message, says) {
			t.Fatalf("backup %s: %+v, want Failed/%s saying %q", b.Name, b.Status.Conditions, reason, says)
		}
		t.Logf("backup %s refused: %s: %s", b.Name, c.Reason, c.Message)
		return b
	}
	refused(pointInTimeBackup(ns, "pit-future", src.Name, onPVC.Name,
		etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "pit/future.db"}}, r5+1_000_000, time.Time{}),
		etcdv1alpha1.ReasonOutsideWindow, "is not in the recoverable window revisions")
	refused(pointInTimeBackup(ns, "pit-elsewhere", src.Name, onPVC.Name, framework.S3Destination(ns+"/pit/elsewhere.db"), r1, time.Time{}),
		etcdv1alpha1.ReasonDestinationMismatch, "schedule's PersistentVolumeClaim")

	// One bit flipped in a segment the chain needs: refused before anything is written, naming the segment.
	if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	var pv corev1.PersistentVolume
	if err := framework.K8s.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
		t.Fatal(err)
	}
	segDir := filepath.Join(pv.Spec.Local.Path, pitr.SegmentsDir(resources.SegmentsBase(onPVC), src.Status.ClusterID))
	entries, err := os.ReadDir(segDir)
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, e := range entries {
		if r, ok := pitr.ParseName(e.Name()); ok && r.First <= r2 && r2 <= r.Last {
			victim = filepath.Join(segDir, e.Name())
		}
	}
	if victim == "" {
		t.Fatalf("no segment in %s holds revision %d: %v", segDir, r2, entries)
	}
	good, err := os.ReadFile(victim) //nolint:gosec // the test's own volume
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), good...)
	bad[len(bad)/2] ^= 0x01
	if err := os.WriteFile(victim, bad, 0o640); err != nil { //nolint:gosec // the test's own volume
		t.Fatal(err)
	}
	refused(pointInTimeBackup(ns, "pit-corrupt", src.Name, onPVC.Name,
		etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "pit/corrupt.db"}}, r5, time.Time{}),
		etcdv1alpha1.ReasonSegmentCorrupt, strings.TrimSuffix(filepath.Base(victim), ".seg"))
	if _, err := os.Stat(filepath.Join(pv.Spec.Local.Path, "pit", "corrupt.db")); !os.IsNotExist(err) {
		t.Fatalf("a refused point-in-time backup left a file: %v", err)
	}
	if err := os.WriteFile(victim, good, 0o640); err != nil { //nolint:gosec // the test's own volume
		t.Fatal(err)
	}

	// RPO: a steady writer, then the cluster loses quorum; the latest point is restored into it.
	expect := keyStates(t, src, "h/", 0)
	var lostAt time.Time
	acked := steadyWriter(ctx, cli, "rpo/", func() {
		src = framework.BreakQuorum(t, src)
		lostAt = time.Now()
	})
	rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "back-to-latest"},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: src.Name, Confirm: src.Name,
			PointInTime: &etcdv1alpha1.PointInTimeSource{ScheduleName: onPVC.Name}}}
	if err := framework.K8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	rs = framework.WaitRestoreFinished(t, client.ObjectKeyFromObject(rs), 6*time.Minute)
	framework.RequireRestoreReason(t, rs, etcdv1alpha1.ConditionComplete, etcdv1alpha1.ReasonRestoreSucceeded)
	took := time.Since(lostAt)
	got := framework.WaitSettled(t, client.ObjectKeyFromObject(src), 3*time.Minute)
	n := requirePrefix(t, keyStates(t, got, "rpo/", 0), "rpo/", acked)
	hs := keyStates(t, got, "h/", 0)
	if len(hs) != len(expect) {
		t.Fatalf("after the re-seed: %d h/ keys, want %d", len(hs), len(expect))
	}
	for k, v := range expect {
		if strings.SplitN(hs[k], "@", 2)[0] != strings.SplitN(v, "@", 2)[0] {
			t.Fatalf("after the re-seed: %s is %q, want %q", k, hs[k], v)
		}
	}
	t.Logf("RPO: %d of %d acknowledged writes missing after the loss of quorum (the changes not yet in a stored segment); "+
		"quorum lost to restored from the latest point in %.1fs",
		acked-n, acked, took.Seconds())

	// The re-seeded cluster is a new etcd identity: the follower starts a chain for it, with a snapshot of its own.
	after := framework.WaitContinuous(t, client.ObjectKeyFromObject(onPVC), "following the new cluster ID", func(s *etcdv1alpha1.EtcdBackupSchedule) bool {
		return s.Status.Continuous.ClusterID == got.Status.ClusterID && s.Status.Continuous.RecoverableFrom != nil
	})
	t.Logf("following the re-seeded cluster %s from backup %s", after.Status.Continuous.ClusterID, after.Status.Continuous.RecoverableFrom.Backup)

	// The whole cluster is deleted (every member and volume) under a steady writer; a new cluster starts from the
	// latest point of the deleted one's continuous backup.
	cli2, err := clientv3.New(clientv3.Config{Endpoints: []string{framework.ClientServiceURL(t, got)}, DialTimeout: 5 * time.Second, TLS: framework.ClusterTLS(t, got)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli2.Close() }()
	acked2 := steadyWriter(ctx, cli2, "gone/", func() {
		if err := framework.K8s.Delete(ctx, got); err != nil {
			t.Error(err)
		}
	})
	framework.Poll(t, "cluster "+got.Name+" deleted", 3*time.Minute, func() error {
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(got), &etcdv1alpha1.EtcdCluster{}); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	deletedAt := time.Now()
	again := framework.NewCluster(ns, "src-again", 3)
	again.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{FromBackup: &etcdv1alpha1.BackupSource{
		PointInTime: &etcdv1alpha1.PointInTimeSource{ScheduleName: onPVC.Name}}}
	if err := framework.K8s.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	again = framework.WaitSettled(t, client.ObjectKeyFromObject(again), 5*time.Minute)
	gone := requirePrefix(t, keyStates(t, again, "gone/", 0), "gone/", acked2)
	t.Logf("RPO after deleting the whole cluster: %d of %d acknowledged writes missing; deleted to a new cluster Available from the latest point in %.1fs",
		acked2-gone, acked2, time.Since(deletedAt).Seconds())
}

// steadyWriter puts keys prefix000000, prefix000001, ... one after the other; after 5 s it calls fault, and it
// stops at its first refused write (later keys would not be a prefix). It returns how many writes etcd
// acknowledged.
func steadyWriter(ctx context.Context, cli *clientv3.Client, prefix string, fault func()) int64 {
	var acked atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := cli.Put(wctx, fmt.Sprintf("%s%06d", prefix, i), "x")
			cancel()
			if err != nil {
				return
			}
			acked.Store(int64(i + 1))
		}
	}()
	time.Sleep(5 * time.Second)
	fault()
	<-done
	return acked.Load()
}

// requirePrefix checks that the keys restored under prefix are exactly prefix000000..prefix<n-1> for some n no
// larger than the acknowledged writes (plus one whose acknowledgement may have been lost), and returns n.
func requirePrefix(t *testing.T, restored map[string]string, prefix string, acked int64) int64 {
	t.Helper()
	n := int64(len(restored))
	for i := range n {
		if _, ok := restored[fmt.Sprintf("%s%06d", prefix, i)]; !ok {
			t.Fatalf("restored writes are not a prefix of the acknowledged ones: %s%06d missing among %d", prefix, i, n)
		}
	}
	if n > acked+1 {
		t.Fatalf("%d writes restored, only %d acknowledged", n, acked)
	}
	return min(n, acked)
}

// requireEncryptedSegments checks, through the S3 API, that the segments under prefix written since the
// schedule asked for encryption are age files: at least one, and the newest.
func requireEncryptedSegments(t *testing.T, prefix string) {
	t.Helper()
	var segs []string
	for _, k := range framework.S3Keys(t, prefix) {
		if strings.HasSuffix(k, ".seg") {
			segs = append(segs, k)
		}
	}
	if len(segs) == 0 {
		t.Fatalf("no segment under %s", prefix)
	}
	slices.Sort(segs)
	obj, err := framework.S3Client(t).GetObject(context.Background(), framework.Bed.S3.Bucket, segs[len(segs)-1], minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = obj.Close() }()
	head := make([]byte, 22)
	if _, err := io.ReadFull(obj, head); err != nil || string(head) != "age-encryption.org/v1\n" {
		t.Fatalf("segment %s begins with %q (%v), want an age file", segs[len(segs)-1], head, err)
	}
	t.Logf("%d segments under %s, the newest encrypted", len(segs), prefix)
}
