package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/etcdauth"
	"steward.dev/steward/internal/pitr"
	"steward.dev/steward/internal/testbed"
)

// etcdBin finds a release the test bed cached (under ~/.cache/steward/bin).
func etcdBin(t *testing.T) string {
	t.Helper()
	return filepath.Dir(testbed.NewestCachedEtcd(t, testing.Short()))
}

func port(t *testing.T) string { return testbed.FreeLoopbackPort(t) }

// startEtcd runs one etcd member on loopback, from dataDir (restored or new), until the test ends.
func startEtcd(t *testing.T, bin, dataDir string, as ...etcd.Password) (*clientv3.Client, string) {
	t.Helper()
	client := testbed.StartLoopbackEtcd(t, filepath.Join(bin, "etcd"), dataDir)
	cfg := clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	for _, pw := range as {
		cfg.Username, cfg.Password = pw.User, pw.Password
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, "x")
		cancel()
		if err == nil {
			return c, client
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not start: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// state is a key space at one revision: key -> value@create/mod/version/lease?.
func state(t *testing.T, c *clientv3.Client, rev int64) map[string]string {
	t.Helper()
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	r, err := c.Get(context.Background(), "", opts...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range r.Kvs {
		out[string(kv.Key)] = fmt.Sprintf("%s@c%d/m%d/v%d/leased=%v", kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease != 0)
	}
	return out
}

func sameState(a, b map[string]string) string {
	var diffs []string
	for k, v := range a {
		if b[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s: want %q, got %q", k, v, b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: unexpected %q", k, v))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("... %d more", len(diffs)-5))
	}
	return strings.Join(diffs, "; ")
}

// storeSnapshot takes a snapshot of the member at url as a scheduled backup would, stores it as
// backups/<name>.db under root and returns it as a point-in-time candidate, with the source's cluster ID.
func storeSnapshot(ctx context.Context, t *testing.T, root, name, url string, pw etcd.Password) (Candidate, string) {
	t.Helper()
	store := backup.FileStore{Root: root, Path: "backups/" + name + ".db", Claim: "c"}
	snap, err := etcd.OpenSnapshot(ctx, url, nil, pw)
	if err != nil {
		t.Fatal(err)
	}
	v := backup.NewVerifier(snap.Data)
	if _, err := store.Put(ctx, v); err != nil {
		t.Fatal(err)
	}
	_ = snap.Data.Close()
	return Candidate{Name: name, Path: store.Path, SizeBytes: v.Size(), SHA256: v.SHA256(), Revision: snap.Revision, Time: time.Now().Add(-time.Second)},
		etcd.FormatID(snap.ClusterID)
}

// TestContinuousBackupAndPointInTime: a follower records a known history (puts, overwrites, deletes, a range
// delete, a multi-key transaction, lease-bound keys) across a snapshot and its own restart; point-in-time
// snapshots for several revisions and times each hold exactly the key space (values, create and mod revisions,
// versions) the source had at that point. A target outside the window and a corrupted segment are refused
// without writing anything.
func TestContinuousBackupAndPointInTime(t *testing.T) {
	bin := etcdBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, srcURL := startEtcd(t, bin, filepath.Join(t.TempDir(), "src"))
	root := t.TempDir()
	base := "backups/main-segments"
	dirOf := segmentDirs(root, base)
	startFollower := func() (stop func(), f *follower) {
		return runFollower(ctx, followConfig{endpoints: []string{srcURL}, dir: dirOf})
	}
	put := func(k, v string, opts ...clientv3.OpOption) int64 {
		r, err := src.Put(ctx, k, v, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	stop, _ := startFollower()
	waitFor(t, func() bool { return len(listSegments(t, root, base)) > 0 }, "a first (heartbeat) segment")

	for i := range 20 {
		put(fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d", i))
	}
	// The snapshot a point-in-time backup starts from, as a scheduled backup takes it.
	cand, clusterID := storeSnapshot(ctx, t, root, "main-1", srcURL, etcd.Password{})

	points := map[string]int64{}
	times := map[string]time.Time{}
	mark := func(name string, rev int64) {
		points[name] = rev
		time.Sleep(50 * time.Millisecond)
		times[name] = time.Now()
		time.Sleep(50 * time.Millisecond)
	}
	mark("after snapshot", put("k00", "overwritten"))
	if _, err := src.Delete(ctx, "k01"); err != nil {
		t.Fatal(err)
	}
	r, err := src.Delete(ctx, "k1", clientv3.WithPrefix()) // k10..k19 at one revision
	if err != nil {
		t.Fatal(err)
	}
	mark("after range delete", r.Header.Revision)
	tx, err := src.Txn(ctx).Then(clientv3.OpPut("t1", "a"), clientv3.OpPut("t2", "b"), clientv3.OpDelete("k02")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	mark("after txn", tx.Header.Revision)
	lease, err := src.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	put("leased", "x", clientv3.WithLease(lease.ID))
	// The follower restarts mid-history: it resumes from its last segment, without a gap.
	stop()
	for i := range 15 {
		put(fmt.Sprintf("r%02d", i), "during restart")
	}
	stop, f := startFollower()
	for i := range 30 {
		put(fmt.Sprintf("k%02d", i%5), fmt.Sprintf("late %d", i))
	}
	mark("latest", put("last", "write"))
	waitFor(t, func() bool { return f.status().LastRevision >= points["latest"] }, "the follower to store the latest revision")
	stop()

	segDir := dirOf(clusterID)
	run := func(tg pitr.Target, out string) backup.Result {
		return pointInTime(ctx, backup.FileStore{Root: root, Path: out, Claim: "c"}, pointInTimeConfig{
			candidates: []Candidate{cand}, segments: segDir, target: tg, clusterID: clusterID,
			open: func(p string) (backup.Store, error) { return backup.FileStore{Root: root, Path: p, Claim: "c"}, nil },
			etcd: filepath.Join(bin, "etcd"), etcdutl: filepath.Join(bin, "etcdutl"), workDir: t.TempDir(),
			readyTimeout: time.Minute, maxRequestBytes: 8 << 20,
		})
	}
	check := func(name string, tg pitr.Target, wantRev int64) {
		t.Helper()
		out := "backups/pit-" + strings.ReplaceAll(name, " ", "-") + ".db"
		res := run(tg, out)
		if !res.Succeeded || res.Revision != wantRev || res.ClusterID != clusterID {
			t.Fatalf("%s: %+v, want revision %d", name, res, wantRev)
		}
		t.Logf("%s: %s", name, res.Message)
		restored := filepath.Join(t.TempDir(), "restored")
		cmd := exec.Command(filepath.Join(bin, "etcdutl"), "snapshot", "restore", readBackStored(t, root, out, res), "--data-dir="+restored) //nolint:gosec // the test's own files
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: restore the point-in-time snapshot: %v: %s", name, err, b)
		}
		c, _ := startEtcd(t, bin, restored)
		if d := sameState(state(t, src, wantRev), state(t, c, 0)); d != "" {
			t.Fatalf("%s: restored key space differs from the source at revision %d: %s", name, wantRev, d)
		}
	}
	for _, p := range []string{"after snapshot", "after range delete", "after txn"} {
		check("revision "+p, pitr.Target{Revision: points[p]}, points[p])
	}
	check("time after range delete", pitr.Target{Time: times["after range delete"]}, points["after range delete"])
	check("latest", pitr.Target{}, points["latest"])

	if res := run(pitr.Target{Revision: points["latest"] + 1000}, "backups/refused.db"); res.Succeeded || res.Reason != etcdv1alpha1.ReasonOutsideWindow ||
		!strings.Contains(res.Message, fmt.Sprintf("revisions %d..%d", cand.Revision, points["latest"])) {
		t.Fatalf("target past the end: %+v", res)
	}
	// The follower is away while etcd compacts past what it stored: it says so and starts a new chain; a target
	// in the gap is refused naming the window that ends before it, and so is "the latest point", which lies
	// beyond the gap, naming the gap.
	gapRev := put("gap", "lost to compaction")
	end := put("gap", "compacted away")
	if _, err := src.Compact(ctx, end); err != nil {
		t.Fatal(err)
	}
	stop, f = startFollower()
	waitFor(t, func() bool { return f.status().CompactedAt != nil && f.status().ChainStart == end+1 }, "the follower to report the compaction")
	after := put("after", "the gap")
	waitFor(t, func() bool { return f.status().LastRevision >= after }, "the follower to store the new chain")
	stop()
	if st := f.status(); st.CompactedRevision != end || st.Error != "" {
		t.Fatalf("status after compaction: %+v", st)
	}
	if res := run(pitr.Target{Revision: gapRev}, "backups/gap.db"); res.Succeeded || res.Reason != etcdv1alpha1.ReasonOutsideWindow ||
		!strings.Contains(res.Message, fmt.Sprintf("revisions %d..%d", cand.Revision, points["latest"])) {
		t.Fatalf("target in the gap: %+v", res)
	}
	if res := run(pitr.Target{}, "backups/latest-past-gap.db"); res.Succeeded || res.Reason != etcdv1alpha1.ReasonOutsideWindow ||
		!strings.Contains(res.Message, fmt.Sprintf("no snapshot reaches past %d (revisions %d..%d are missing)", points["latest"], points["latest"]+1, end)) {
		t.Fatalf("the latest point beyond a gap: %+v", res)
	}

	// A segment missing from the middle of the chain: a gap, refused with the window before it.
	var missing string
	var missingRef pitr.Ref
	for _, n := range listSegments(t, root, base) {
		if r, ok := pitr.ParseName(n); ok && r.First <= points["after range delete"] && points["after range delete"] <= r.Last {
			missing, missingRef = filepath.Join(root, pitr.SegmentsDir(base, clusterID), n), r
		}
	}
	kept, err := os.ReadFile(missing) //nolint:gosec // a file the test made
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(missing); err != nil {
		t.Fatal(err)
	}
	if res := run(pitr.Target{Revision: points["latest"]}, "backups/missing.db"); res.Succeeded || res.Reason != etcdv1alpha1.ReasonOutsideWindow ||
		!strings.Contains(res.Message, fmt.Sprintf("recoverable window revisions %d..%d", cand.Revision, missingRef.First-1)) {
		t.Fatalf("a missing segment: %+v", res)
	}
	if err := os.WriteFile(missing, kept, 0o600); err != nil { //nolint:gosec // a file the test made
		t.Fatal(err)
	}

	// One bit flipped in a segment the chain needs: refused before anything is written.
	names := listSegments(t, root, base)
	var victim string
	for _, n := range names {
		if r, ok := pitr.ParseName(n); ok && r.First <= points["after txn"] && points["after txn"] <= r.Last {
			victim = n
		}
	}
	p := filepath.Join(root, pitr.SegmentsDir(base, clusterID), victim)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 1
	if err := os.WriteFile(p, b, 0o600); err != nil { //nolint:gosec // a file the test made
		t.Fatal(err)
	}
	res := run(pitr.Target{Revision: points["latest"]}, "backups/corrupt.db")
	if res.Succeeded || res.Reason != etcdv1alpha1.ReasonSegmentCorrupt || !strings.Contains(res.Message, strings.TrimSuffix(victim, ".seg")) {
		t.Fatalf("corrupt segment: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(root, "backups/corrupt.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused point-in-time backup left a file: %v", err)
	}

	// Retention: the follower deletes the segments that end before the revision in its prune file (the oldest
	// snapshot kept), and only those.
	pruneFile := filepath.Join(t.TempDir(), "prune-before")
	keep := points["after txn"]
	if err := os.WriteFile(pruneFile, []byte(fmt.Sprintf("%d\n", keep)), 0o600); err != nil {
		t.Fatal(err)
	}
	before := listSegments(t, root, base)
	stop, _ = runFollower(ctx, followConfig{endpoints: []string{srcURL}, dir: dirOf, pruneFile: pruneFile})
	waitFor(t, func() bool { return len(listSegments(t, root, base)) < len(before) }, "the follower to prune")
	stop()
	for _, n := range listSegments(t, root, base) {
		if r, ok := pitr.ParseName(n); ok && r.Last < keep {
			t.Fatalf("segment %s ends before %d and was kept", n, keep)
		}
	}
	for _, n := range before {
		if r, ok := pitr.ParseName(n); ok && r.Last >= keep && !slices.Contains(listSegments(t, root, base), n) {
			t.Fatalf("segment %s (needed from %d) was pruned", n, keep)
		}
	}
}

// segmentDirs is where the integration tests' followers store segments: base under root, a directory per etcd
// cluster ID.
func segmentDirs(root, base string) func(id string) backup.ObjectDir {
	return func(id string) backup.ObjectDir {
		return backup.FileDir{Root: root, Dir: pitr.SegmentsDir(base, id), Claim: "c"}
	}
}

// runFollower runs a follower with short intervals (a segment every 100 ms, or 7 changes; a heartbeat every
// 500 ms) until stop, which waits for it to store what it holds.
func runFollower(ctx context.Context, cfg followConfig) (stop func(), f *follower) {
	cfg.interval, cfg.heartbeat, cfg.maxEvents = 100*time.Millisecond, 500*time.Millisecond, 7
	f = &follower{cfg: cfg}
	fctx, fcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = f.run(fctx); close(done) }()
	return func() { fcancel(); <-done }, f
}

func listSegments(t *testing.T, root, base string) []string {
	t.Helper()
	var out []string
	_ = filepath.Walk(filepath.Join(root, base), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			out = append(out, filepath.Base(p))
		}
		return nil
	})
	return out
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPointInTimeWithAuth: on a source that enforces authentication, where the agent acts as Steward's password
// user (as on a plaintext cluster), the follower records the history, the snapshot is taken, and a point-in-time
// backup replays it: the throwaway member holds the snapshot's auth store, and the replay acts as root through a
// certificate of its own. A wrong password is refused by name, not taken for an empty cluster.
func TestPointInTimeWithAuth(t *testing.T) {
	bin := etcdBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src, srcURL := startEtcd(t, bin, filepath.Join(t.TempDir(), "src"))
	pw := etcd.Password{User: etcdauth.OperatorUser, Password: "s3cret-of-steward"}
	if _, err := src.UserAddWithOptions(ctx, etcdauth.RootUser, "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{etcdauth.RootUser, pw.User} {
		if u == pw.User {
			if _, err := src.UserAdd(ctx, pw.User, pw.Password); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := src.UserGrantRole(ctx, u, etcdauth.RootRole); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	authed, err := clientv3.New(clientv3.Config{Endpoints: []string{srcURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: pw.User, Password: pw.Password})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = authed.Close() }()
	if _, err := src.Put(ctx, "anonymous", "x"); err == nil {
		t.Fatal("the source took a write without a user: auth is not on")
	}

	if _, err := etcd.NewFollower(ctx, []string{srcURL}, nil, etcd.Password{User: pw.User, Password: "wrong"}); !errors.Is(err, etcd.ErrPasswordRejected) {
		t.Fatalf("a wrong password: %v, want ErrPasswordRejected", err)
	}
	if _, err := etcd.OpenSnapshot(ctx, srcURL, nil, etcd.Password{}); err == nil {
		t.Fatal("a snapshot without a user was served with auth on")
	}

	root := t.TempDir()
	base := "backups/auth-segments"
	dirOf := segmentDirs(root, base)
	stop, f := runFollower(ctx, followConfig{endpoints: []string{srcURL}, password: pw, dir: dirOf})
	defer stop()
	put := func(k, v string) int64 {
		r, err := authed.Put(ctx, k, v)
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	for i := range 10 {
		put(fmt.Sprintf("a%02d", i), "before the snapshot")
	}
	cand, clusterID := storeSnapshot(ctx, t, root, "auth-1", srcURL, pw)
	if _, err := authed.Delete(ctx, "a0", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	lease, err := authed.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := authed.Put(ctx, "leased", "x", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	latest := put("last", "after the snapshot")
	waitFor(t, func() bool { return f.status().LastRevision >= latest }, "the follower to store the latest revision")

	res := pointInTime(ctx, backup.FileStore{Root: root, Path: "backups/auth-pit.db", Claim: "c"}, pointInTimeConfig{
		candidates: []Candidate{cand},
		segments:   dirOf(clusterID), clusterID: clusterID,
		open: func(p string) (backup.Store, error) { return backup.FileStore{Root: root, Path: p, Claim: "c"}, nil },
		etcd: filepath.Join(bin, "etcd"), etcdutl: filepath.Join(bin, "etcdutl"), workDir: t.TempDir(),
		readyTimeout: time.Minute, maxRequestBytes: 8 << 20,
	})
	if !res.Succeeded || res.Revision != latest {
		t.Fatalf("point-in-time backup of an auth-enabled cluster: %+v, want revision %d", res, latest)
	}
	snapFile := readBackStored(t, root, "backups/auth-pit.db", res)
	restored := filepath.Join(t.TempDir(), "restored")
	if b, err := exec.Command(filepath.Join(bin, "etcdutl"), "snapshot", "restore", snapFile, //nolint:gosec // the test's own files
		"--data-dir="+restored).CombinedOutput(); err != nil {
		t.Fatalf("restore the point-in-time snapshot: %v: %s", err, b)
	}
	// The restored store takes the operator's password, as the source did.
	rc, _ := startEtcd(t, bin, restored, pw)
	if d := sameState(state(t, authed, latest), state(t, rc, 0)); d != "" {
		t.Fatalf("restored key space differs from the source at revision %d: %s", latest, d)
	}
	if st, err := rc.AuthStatus(ctx); err != nil || !st.Enabled {
		t.Fatalf("the restored store's auth: %+v, %v; want it on, as in the source", st, err)
	}
}

// readBackStored reads the snapshot a point-in-time backup stored at root/path (compressed: the default) as a
// restore reads it, checked against the result's record, into a file of its own, and returns that file.
func readBackStored(t *testing.T, root, path string, res backup.Result) string {
	t.Helper()
	snapFile := filepath.Join(t.TempDir(), "snapshot.db")
	out, err := os.Create(snapFile) //nolint:gosec // the test's own file
	if err != nil {
		t.Fatal(err)
	}
	c, err := backup.CopyVerified(context.Background(), backup.FileStore{Root: root, Path: path, Claim: "c"},
		backup.Expected{SizeBytes: res.SizeBytes, SHA256: res.SHA256, SnapshotSizeBytes: res.SnapshotSizeBytes}, backup.Codec{}, out)
	_ = out.Close()
	if err != nil || !c.Compressed || res.Compression != "Zstd" {
		t.Fatalf("read back the point-in-time snapshot %s: %v (layers %+v, result says %q)", path, err, c.Layers, res.Compression)
	}
	return snapFile
}
