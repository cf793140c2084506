package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/pitr"
)

// TestStandbyFollowsAPrimary: a standby restored from a primary's snapshot follows it through the segments its
// continuous backup stores: after puts, overwrites, deletes, a range delete, a transaction and a lease-bound key,
// on both sides of the snapshot, the standby holds exactly the primary's key space (values, create and mod
// revisions, versions) at the primary's revision, with the lag reported. A restarted applier continues where the
// standby is, losing and repeating nothing; a segment missing from the chain stops it at the revision before the
// gap, naming the gap, and a write to the standby that is not the primary's stops it as Diverged.
func TestStandbyFollowsAPrimary(t *testing.T) {
	bin := etcdBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, srcURL := startEtcd(t, bin, filepath.Join(t.TempDir(), "src"))
	root := t.TempDir()
	base := "backups/main-segments"
	dirOf := segmentDirs(root, base)
	stopFollower, f := runFollower(ctx, followConfig{endpoints: []string{srcURL}, dir: dirOf})
	defer stopFollower()
	put := func(k, v string, opts ...clientv3.OpOption) int64 {
		t.Helper()
		r, err := src.Put(ctx, k, v, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	history := func(round int) int64 {
		t.Helper()
		for i := range 12 {
			put(fmt.Sprintf("r%d/k%02d", round, i), fmt.Sprintf("v%d", i))
		}
		put(fmt.Sprintf("r%d/k00", round), "overwritten")
		if _, err := src.Delete(ctx, fmt.Sprintf("r%d/k01", round)); err != nil {
			t.Fatal(err)
		}
		if _, err := src.Delete(ctx, fmt.Sprintf("r%d/k1", round), clientv3.WithPrefix()); err != nil { // k10, k11 at one revision
			t.Fatal(err)
		}
		if _, err := src.Txn(ctx).Then(clientv3.OpPut(fmt.Sprintf("r%d/t1", round), "a"), clientv3.OpDelete(fmt.Sprintf("r%d/k02", round))).Commit(); err != nil {
			t.Fatal(err)
		}
		lease, err := src.Grant(ctx, 30)
		if err != nil {
			t.Fatal(err)
		}
		return put(fmt.Sprintf("r%d/leased", round), "x", clientv3.WithLease(lease.ID))
	}
	stored := func(rev int64) {
		t.Helper()
		waitFor(t, func() bool { return f.status().LastRevision >= rev }, fmt.Sprintf("the follower to store revision %d", rev))
	}
	stored(history(0))
	cand, clusterID := storeSnapshot(ctx, t, root, "main-1", srcURL, etcd.Password{})
	stored(history(1))

	// The standby's member starts from the snapshot, as a bootstrap from a backup does.
	data := filepath.Join(t.TempDir(), "standby")
	restore := exec.Command(filepath.Join(bin, "etcdutl"), "snapshot", "restore", filepath.Join(root, cand.Path), "--data-dir="+data)
	if b, err := restore.CombinedOutput(); err != nil {
		t.Fatalf("restore the snapshot: %v: %s", err, b)
	}
	sb, sbURL := startEtcd(t, bin, data)
	fromSnapshot := map[clientv3.LeaseID]bool{}
	if ls, err := sb.Leases(ctx); err == nil {
		for _, l := range ls.Leases {
			fromSnapshot[l.ID] = true
		}
	}
	startApplier := func() (stop func(), a *applier) {
		a = &applier{cfg: standbyConfig{endpoints: []string{sbURL}, segments: dirOf(clusterID), clusterID: clusterID, poll: 50 * time.Millisecond}}
		actx, acancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { a.run(actx); close(done) }()
		return func() { acancel(); <-done }, a
	}
	caughtUp := func(a *applier, rev int64) {
		t.Helper()
		waitFor(t, func() bool {
			st := a.status()
			return st.AppliedRevision == rev && st.SourceRevision == rev || st.Stopped != ""
		},
			fmt.Sprintf("the standby to apply revision %d", rev))
		if st := a.status(); st.Stopped != "" || st.Error != "" || st.LagRevisions != 0 || st.LagSeconds != 0 || !st.LagKnown || st.LastSegment == "" {
			t.Fatalf("status when caught up: %+v", st)
		}
		if d := sameState(state(t, src, rev), state(t, sb, 0)); d != "" {
			t.Fatalf("the standby's key space differs from the primary's at revision %d: %s", rev, d)
		}
	}

	stop, a := startApplier()
	rev := history(2)
	stored(rev)
	caughtUp(a, rev)
	// Leases the applier grants get the standby's floor, so that an applier away for a while does not expire
	// them; those the snapshot brought keep the primary's TTL.
	ls, err := sb.Leases(ctx)
	if err != nil || len(ls.Leases) != 3 || len(fromSnapshot) != 1 {
		t.Fatalf("standby's leases: %v (%d from the snapshot), %v", ls, len(fromSnapshot), err)
	}
	for _, l := range ls.Leases {
		ttl, err := sb.TimeToLive(ctx, l.ID)
		if err != nil || !fromSnapshot[l.ID] && ttl.GrantedTTL < etcd.StandbyLeaseTTL || fromSnapshot[l.ID] && ttl.GrantedTTL != 30 {
			t.Fatalf("lease %x on the standby: TTL %d, granted %d, %v", l.ID, ttl.TTL, ttl.GrantedTTL, err)
		}
	}

	// The applier restarts while the primary writes: the new one continues from the standby's revision.
	stop()
	rev = history(3)
	stored(rev)
	stop, a = startApplier()
	caughtUp(a, rev)
	stop()

	// A segment missing from the chain: the applier applies what comes before it and stops there, naming the gap.
	before := rev
	rev = history(4)
	stored(rev)
	last := history(5)
	stored(last)
	var missing string
	var missingRef pitr.Ref
	for _, n := range listSegments(t, root, base) {
		if r, ok := pitr.ParseName(n); ok && r.First > before+1 && r.Last < rev && (missing == "" || r.First < missingRef.First) {
			missing, missingRef = filepath.Join(root, pitr.SegmentsDir(base, clusterID), n), r
		}
	}
	if missing == "" {
		t.Fatal("no segment in the middle of round 4 to remove")
	}
	kept, err := os.ReadFile(missing)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(missing); err != nil {
		t.Fatal(err)
	}
	stop, a = startApplier()
	waitFor(t, func() bool { return a.status().Stopped != "" }, "the applier to stop at the gap")
	st := a.status()
	want := fmt.Sprintf("revisions %d..%d are missing", missingRef.First, missingRef.Last)
	if st.Stopped != etcdv1alpha1.ReasonSegmentGap || !strings.Contains(st.Message, want) || st.AppliedRevision != missingRef.First-1 ||
		st.SourceRevision != last || st.LagRevisions != last-missingRef.First+1 {
		t.Fatalf("at the gap: %+v, want SegmentGap saying %q at revision %d", st, want, missingRef.First-1)
	}
	if d := sameState(state(t, src, st.AppliedRevision), state(t, sb, 0)); d != "" {
		t.Fatalf("the standby stopped at a gap differs from the primary at revision %d: %s", st.AppliedRevision, d)
	}
	stop()
	// The segment back, a new applier carries on from where the standby stopped.
	if err := os.WriteFile(missing, kept, 0o600); err != nil { //nolint:gosec // a file the test made
		t.Fatal(err)
	}
	stop, a = startApplier()
	caughtUp(a, last)

	// A write to the standby that is not the primary's: the applier stops as soon as a segment shows what the
	// primary did at that revision, and applies nothing on top.
	if _, err := sb.Put(ctx, "intruder", "x"); err != nil {
		t.Fatal(err)
	}
	rev = put("after", "intruder")
	stored(put("after", "more"))
	waitFor(t, func() bool { return a.status().Stopped != "" }, "the applier to notice the foreign write")
	if st := a.status(); st.Stopped != etcdv1alpha1.ReasonDiverged || st.AppliedRevision != rev || !strings.Contains(st.Message, fmt.Sprintf("revision %d", rev)) {
		t.Fatalf("after a foreign write: %+v", st)
	}
	stop()
}

// TestStandbySeed: the seed finds, in a primary's schedule directory alone, the etcd cluster ID stored last (not an
// older identity's directory) and the newest snapshot (compressed, as schedules store them) that its segments
// continue, waiting for the follower to store a segment that reaches a snapshot newer than every segment. Its
// record (path, size, sha256, revision, cluster ID) reads the snapshot back verified; a standby restored from it
// and followed by the applier holds the primary's key space at the primary's revision, until segments of a newer
// etcd cluster ID (the primary re-seeded) stop it as SourceChanged. A directory without segments is refused,
// naming it.
func TestStandbySeed(t *testing.T) {
	bin := etcdBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, srcURL := startEtcd(t, bin, filepath.Join(t.TempDir(), "src"))
	root := t.TempDir()
	dirAt := func(p string) backup.ObjectDir { return backup.FileDir{Root: root, Dir: p, Claim: "c"} }
	seedCfg := seedConfig{pointInTimeConfig: pointInTimeConfig{codec: backup.Codec{Compression: etcdv1alpha1.CompressionZstd},
		open: func(p string) (backup.Store, error) { return backup.FileStore{Root: root, Path: p, Claim: "c"}, nil },
		etcd: filepath.Join(bin, "etcd"), etcdutl: filepath.Join(bin, "etcdutl"), workDir: t.TempDir(), readyTimeout: time.Minute, maxRequestBytes: 8 << 20},
		cluster: "main", prefix: "prod", dir: dirAt, wait: 20 * time.Second, poll: 100 * time.Millisecond}
	if r := standbySeed(ctx, seedCfg); r.Succeeded || r.Reason != etcdv1alpha1.ReasonOutsideWindow || !strings.Contains(r.Message, "no segments in pvc://c/prod/main-segments") {
		t.Fatalf("seed without segments: %+v", r)
	}
	// An older identity's segments, from before a re-seed: not the one to follow.
	old := pitr.Header{ClusterID: "0ld1d", First: 1, Last: 1, FirstTime: time.Now().Add(-time.Hour), LastTime: time.Now().Add(-time.Hour)}
	b, err := pitr.Encode(pitr.Segment{Header: old, Events: []pitr.Event{{Revision: 1, Type: pitr.Put, Key: []byte("k"), Observed: old.LastTime}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := dirAt(pitr.SegmentsDir(pitr.SegmentsBase("prod", "main"), "0ld1d")).Put(ctx, pitr.Name(old), b); err != nil {
		t.Fatal(err)
	}
	stopFollower, f := runFollower(ctx, followConfig{endpoints: []string{srcURL}, dir: segmentDirs(root, pitr.SegmentsBase("prod", "main"))})
	defer stopFollower()
	var rev int64
	for i := range 30 {
		r, err := src.Put(ctx, fmt.Sprintf("k%02d", i%7), fmt.Sprintf("v%d", i))
		if err != nil {
			t.Fatal(err)
		}
		rev = r.Header.Revision
	}
	waitFor(t, func() bool { return f.status().LastRevision >= rev }, "the follower to store the writes")
	// The schedule's snapshot, as a scheduled backup stores it (compressed), newer than every segment so far.
	snap, err := etcd.OpenSnapshot(ctx, srcURL, nil, etcd.Password{})
	if err != nil {
		t.Fatal(err)
	}
	object := "prod/" + backup.ArtifactName("main", time.Now())
	if _, err := backup.PutEncoded(ctx, backup.FileStore{Root: root, Path: object, Claim: "c"}, seedCfg.codec, backup.NewVerifier(snap.Data)); err != nil {
		t.Fatal(err)
	}
	_ = snap.Data.Close()
	clusterID := etcd.FormatID(snap.ClusterID)
	r := standbySeed(ctx, seedCfg)
	if !r.Succeeded || r.Path != object || r.Revision != snap.Revision || r.ClusterID != clusterID || r.Compression != "Zstd" || r.EtcdVersion == "" {
		t.Fatalf("seed: %+v, want %s at revision %d of %s", r, object, snap.Revision, clusterID)
	}
	t.Log(r.Message)

	// The standby starts from the seed as a restore would (the record verifies it), and follows.
	restored := readBackStored(t, root, r.Path, r)
	data := filepath.Join(t.TempDir(), "standby")
	if out, err := exec.Command(filepath.Join(bin, "etcdutl"), "snapshot", "restore", restored, "--data-dir="+data).CombinedOutput(); err != nil {
		t.Fatalf("restore the seed: %v: %s", err, out)
	}
	sb, sbURL := startEtcd(t, bin, data)
	base := pitr.SegmentsBase("prod", "main")
	a := &applier{cfg: standbyConfig{endpoints: []string{sbURL}, segments: segmentDirs(root, base)(clusterID), clusterID: clusterID, poll: 50 * time.Millisecond,
		base: dirAt(base), dirOf: func(id string) backup.ObjectDir { return dirAt(pitr.SegmentsDir(base, id)) }}}
	actx, acancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { a.run(actx); close(done) }()
	defer func() { acancel(); <-done }()
	for i := range 20 {
		r, err := src.Put(ctx, fmt.Sprintf("after/%d", i), "x")
		if err != nil {
			t.Fatal(err)
		}
		rev = r.Header.Revision
	}
	waitFor(t, func() bool { st := a.status(); return st.AppliedRevision == rev || st.Stopped != "" }, "the standby to catch up")
	if st := a.status(); st.Stopped != "" {
		t.Fatalf("applier stopped: %+v", st)
	}
	if d := sameState(state(t, src, rev), state(t, sb, 0)); d != "" {
		t.Fatalf("the standby differs from the primary at revision %d: %s", rev, d)
	}

	// The primary re-seeded: segments of a new etcd cluster ID, newer than the followed one's, stop the standby.
	reseeded := pitr.Header{ClusterID: "n3w1d", First: 1, Last: 1, FirstTime: time.Now().Add(time.Minute), LastTime: time.Now().Add(time.Minute)}
	b, err = pitr.Encode(pitr.Segment{Header: reseeded, Events: []pitr.Event{{Revision: 1, Type: pitr.Put, Key: []byte("k"), Observed: reseeded.LastTime}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := dirAt(pitr.SegmentsDir(base, "n3w1d")).Put(ctx, pitr.Name(reseeded), b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return a.status().Stopped != "" }, "the standby to notice the re-seeded primary")
	if st := a.status(); st.Stopped != etcdv1alpha1.ReasonSourceChanged || !strings.Contains(st.Message, "n3w1d") || st.AppliedRevision != rev {
		t.Fatalf("after the primary was re-seeded: %+v", st)
	}
}
