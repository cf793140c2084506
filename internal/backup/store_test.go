package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
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

// TestCopyVerified reads stored snapshots back against their record: a good one passes whole; a flipped bit, a
// truncation, a replacement by another valid snapshot, and a missing file are each refused with their kind.
func TestCopyVerified(t *testing.T) {
	good := snapshotBytes(8192)
	other := snapshotBytes(4096)
	whole := sha256.Sum256(good)
	want := Expected{SizeBytes: int64(len(good)), SHA256: hex.EncodeToString(whole[:])}
	flipped := append([]byte(nil), good...)
	flipped[100] ^= 1
	tests := map[string]struct {
		content []byte // nil: no file
		err     error
	}{
		"good":                               {content: good},
		"bit flip":                           {content: flipped, err: ErrCorrupt},
		"truncated":                          {content: good[:len(good)/2], err: ErrCorrupt},
		"replaced by another valid snapshot": {content: other, err: ErrCorrupt},
		"missing":                            {err: ErrUnreadable},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			if tt.content != nil {
				if err := os.WriteFile(filepath.Join(root, "s.db"), tt.content, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			_, err := CopyVerified(context.Background(), FileStore{Root: root, Path: "s.db", Claim: "c"}, want, Codec{}, &out)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("CopyVerified: %v, want %v", err, tt.err)
			}
			if err == nil && !bytes.Equal(out.Bytes(), good) {
				t.Fatal("copy differs from the stored snapshot")
			}
		})
	}
}

// TestFileDirDirs: a directory's subdirectories, not its files or hidden entries; none for a missing directory.
func TestFileDirDirs(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"segments/c1/x", "segments/c2/y", "segments/.partial/z"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "segments", "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dirs, err := FileDir{Root: root, Dir: "segments"}.Dirs(context.Background())
	slices.Sort(dirs)
	if err != nil || !slices.Equal(dirs, []string{"c1", "c2"}) {
		t.Fatalf("dirs %v, %v", dirs, err)
	}
	if dirs, err := (FileDir{Root: root, Dir: "missing"}).Dirs(context.Background()); err != nil || len(dirs) != 0 {
		t.Fatalf("dirs of a missing directory: %v, %v", dirs, err)
	}
}
