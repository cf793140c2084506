package backup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"testing/iotest"
)

// The contract every bucket destination keeps, checked for each by its own tests (TestGCS..., TestAzure...).

func readAll(t *testing.T, s Store) ([]byte, error) {
	t.Helper()
	r, err := s.Open(context.Background())
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	return io.ReadAll(r)
}

// checkStoreCommitsOnlyVerifiedSnapshots: a snapshot larger than one part is uploaded in parts and appears only
// whole; a corrupt one (detected at the very end, after a part was sent) and one whose source fails leave no
// object; an existing object is never overwritten; delete is idempotent. store and dir address the bucket under
// test, whose locations start with location.
func checkStoreCommitsOnlyVerifiedSnapshots(t *testing.T, store func(key string) Store, dir func(prefix string) ObjectDir, location string) {
	ctx := context.Background()
	good := snapshotBytes(PartSize + 3*4096)

	s := store("p/good.db")
	v := NewVerifier(bytes.NewReader(good))
	if loc, err := s.Put(ctx, v); err != nil || loc != location+"p/good.db" || !v.Verified() {
		t.Fatalf("Put: %s %v", loc, err)
	}
	if got, err := readAll(t, s); err != nil || !bytes.Equal(got, good) {
		t.Fatalf("stored object differs (%d bytes, %v)", len(got), err)
	}
	if _, err := s.Put(ctx, NewVerifier(bytes.NewReader(good))); !errors.Is(err, ErrExists) {
		t.Fatalf("overwrite: %v", err)
	}
	if got, err := readAll(t, s); err != nil || !bytes.Equal(got, good) {
		t.Fatalf("object changed by a refused overwrite (%d bytes, %v)", len(got), err)
	}

	bad := append([]byte(nil), good...)
	bad[len(bad)-40] ^= 1 // in the last chunk: the first is already uploaded when the mismatch shows
	sb := store("p/bad.db")
	vb := NewVerifier(bytes.NewReader(bad))
	if _, err := sb.Put(ctx, vb); err == nil || !vb.Mismatch() {
		t.Fatalf("corrupt snapshot stored: %v", err)
	}
	if _, err := readAll(t, sb); err == nil {
		t.Fatal("corrupt snapshot visible under its name")
	}
	small := store("p/small-bad.db") // one chunk: the mismatch shows with the only bytes
	sbad := snapshotBytes(8192)
	sbad[10] ^= 1
	if _, err := small.Put(ctx, NewVerifier(bytes.NewReader(sbad))); !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("corrupt small snapshot: %v", err)
	}
	if _, err := readAll(t, small); err == nil {
		t.Fatal("corrupt small snapshot visible under its name")
	}
	failing := store("p/failing.db")
	src := io.MultiReader(bytes.NewReader(good[:PartSize+100]), iotest.ErrReader(io.ErrUnexpectedEOF))
	if _, err := failing.Put(ctx, src); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("failing source: %v", err)
	}
	if _, err := readAll(t, failing); err == nil {
		t.Fatal("a snapshot whose source failed is visible under its name")
	}
	names, err := dir("p").List(ctx)
	if err != nil || !slices.Equal(names, []string{"good.db"}) {
		t.Fatalf("objects under p/: %v %v", names, err)
	}

	if err := s.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := readAll(t, s); err == nil {
		t.Fatal("deleted object still there")
	}
}

// checkStoreConcurrentWritersOneKey: two writers of one key, both past the existence check before either commits.
// The store's precondition lets exactly one commit; the other fails with ErrExists, and the object is the
// winner's, whole.
func checkStoreConcurrentWritersOneKey(t *testing.T, store func(key string) Store) {
	ctx := context.Background()
	const key = "race/c-20261128T030000Z.db"
	snaps := [][]byte{snapshotBytes(PartSize + 4096), snapshotBytes(8192)}
	started, open := make(chan struct{}), make(chan struct{})
	errs := make([]error, len(snaps))
	var wg sync.WaitGroup
	for i, snap := range snaps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = store(key).Put(ctx, NewVerifier(&gated{data: bytes.NewReader(snap), started: started, open: open}))
		}()
	}
	for range snaps {
		<-started
	}
	close(open)
	wg.Wait()
	var want []byte
	for i, err := range errs {
		switch {
		case err == nil && want == nil:
			want = snaps[i]
		case err == nil:
			t.Fatalf("both writers committed %s: one overwrote the other", key)
		case !errors.Is(err, ErrExists):
			t.Fatalf("writer %d failed without ErrExists: %v", i, err)
		default:
			t.Logf("writer %d: %v", i, err)
		}
	}
	if want == nil {
		t.Fatalf("no writer committed: %v", errs)
	}
	if got, err := readAll(t, store(key)); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("stored object is not the winner's (%d bytes, want %d; %v)", len(got), len(want), err)
	}
}

// checkDir: continuous backup's segments under a prefix: put (overwriting, as a rewritten segment does), list only
// the direct children, get, delete (idempotent), plain names only.
func checkDir(t *testing.T, dir func(prefix string) ObjectDir, location string) {
	ctx := context.Background()
	d := dir("/segments/c1/")
	if d.Location() != location+"segments/c1" {
		t.Fatalf("location %s", d.Location())
	}
	if names, err := d.List(ctx); err != nil || len(names) != 0 {
		t.Fatalf("empty dir: %v %v", names, err)
	}
	for _, n := range []string{"a.ndjson", "b.ndjson"} {
		if err := d.Put(ctx, n, []byte("first "+n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Put(ctx, "a.ndjson", []byte("second")); err != nil {
		t.Fatal(err)
	}
	if err := dir("segments/c1/deeper").Put(ctx, "x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := dir("segments").Put(ctx, "c1x", []byte("x")); err != nil { // a sibling sharing the prefix's text
		t.Fatal(err)
	}
	names, err := d.List(ctx)
	slices.Sort(names)
	if err != nil || !slices.Equal(names, []string{"a.ndjson", "b.ndjson"}) {
		t.Fatalf("list: %v %v", names, err)
	}
	if err := dir("segments/c2").Put(ctx, "y", []byte("y")); err != nil {
		t.Fatal(err)
	}
	dirs, err := dir("segments").Dirs(ctx)
	slices.Sort(dirs)
	if err != nil || !slices.Equal(dirs, []string{"c1", "c2"}) {
		t.Fatalf("dirs of segments: %v %v", dirs, err)
	}
	if dirs, err := d.Dirs(ctx); err != nil || !slices.Equal(dirs, []string{"deeper"}) {
		t.Fatalf("dirs of segments/c1: %v %v", dirs, err)
	}
	if dirs, err := dir("segments/c1/deeper").Dirs(ctx); err != nil || len(dirs) != 0 {
		t.Fatalf("dirs of a directory with only objects: %v %v", dirs, err)
	}
	if got, err := d.Get(ctx, "a.ndjson"); err != nil || string(got) != "second" {
		t.Fatalf("get: %q %v", got, err)
	}
	if _, err := d.Get(ctx, "missing"); err == nil {
		t.Fatal("get of a missing object succeeded")
	}
	for range 2 {
		if err := d.Delete(ctx, "a.ndjson"); err != nil {
			t.Fatal(err)
		}
	}
	if names, err := d.List(ctx); err != nil || !slices.Equal(names, []string{"b.ndjson"}) {
		t.Fatalf("after delete: %v %v", names, err)
	}
	if err := d.Put(ctx, "../escape", nil); err == nil {
		t.Fatal("a name with a slash was accepted")
	}
}
