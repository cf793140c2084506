package backup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestFileStore(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s := FileStore{Root: root, Path: "a/b/snap.db", Claim: "backups"}
	good := snapshotBytes(4096)
	loc, err := s.Put(ctx, NewVerifier(bytes.NewReader(good)))
	if err != nil || loc != "pvc://backups/a/b/snap.db" {
		t.Fatalf("Put: %s %v", loc, err)
	}
	got, err := os.ReadFile(filepath.Join(root, "a", "b", "snap.db"))
	if err != nil || !bytes.Equal(got, good) {
		t.Fatalf("stored file differs: %v", err)
	}
	if _, err := s.Put(ctx, NewVerifier(bytes.NewReader(good))); !errors.Is(err, ErrExists) {
		t.Fatalf("second Put: %v, want ErrExists", err)
	}

	// A corrupt stream leaves nothing: no file under the name, no temporary file.
	bad := append([]byte(nil), good...)
	bad[10] ^= 0xff
	s2 := FileStore{Root: root, Path: "a/b/bad.db", Claim: "backups"}
	if _, err := s2.Put(ctx, NewVerifier(bytes.NewReader(bad))); !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("corrupt Put: %v", err)
	}
	// A stream that breaks off leaves nothing either.
	if _, err := s2.Put(ctx, NewVerifier(io.MultiReader(bytes.NewReader(good[:100]), errReader{}))); err == nil {
		t.Fatal("broken stream stored")
	}
	entries, err := os.ReadDir(filepath.Join(root, "a", "b"))
	if err != nil || len(entries) != 1 || entries[0].Name() != "snap.db" {
		t.Fatalf("directory holds %v (%v), want only snap.db", entries, err)
	}

	if err := s.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "a", "b", "snap.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file still there: %v", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }
