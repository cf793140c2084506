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
	"strings"
	"testing"
	"testing/iotest"

	"filippo.io/age"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func newKey(t testing.TB) (string, *age.X25519Identity) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return "# created: by the test\n# public key: " + id.Recipient().String() + "\n" + id.String() + "\n", id
}

func mustKeys(t testing.TB, text string) Codec {
	t.Helper()
	c, err := ParseKeys(text)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// compressible is a snapshot whose database compresses, as etcd's do (free pages, repeated keys).
func compressible(n int) []byte {
	db := bytes.Repeat([]byte("/registry/pods/default/web-"), n/27+1)[:n-n%512]
	sum := sha256.Sum256(db)
	return append(db, sum[:]...)
}

// TestStoredFormats stores one snapshot in every format and reads it back through CopyVerified with the keys a
// reader may hold: each format reads back to the same snapshot with the right key, the record's size and sha256
// are of the stored object, and compression makes the object smaller. Backups from before compression (the
// snapshot itself) read with or without keys.
func TestStoredFormats(t *testing.T) {
	snap := compressible(1 << 20)
	keyText, _ := newKey(t)
	otherText, _ := newKey(t)
	withKey := mustKeys(t, keyText)
	formats := map[string]Codec{
		"zstd (the default)": {},
		"none":               {Compression: etcdv1alpha1.CompressionNone},
		"zstd, encrypted":    {Recipient: withKey.Recipient, RecipientName: withKey.RecipientName},
		"none, encrypted":    {Compression: etcdv1alpha1.CompressionNone, Recipient: withKey.Recipient, RecipientName: withKey.RecipientName},
	}
	for name, write := range formats {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			store := FileStore{Root: root, Path: "b/s.db", Claim: "c"}
			v := NewVerifier(bytes.NewReader(snap))
			st, err := PutEncoded(context.Background(), store, write, v)
			if err != nil || !v.Verified() {
				t.Fatalf("PutEncoded: %v (verified %v)", err, v.Verified())
			}
			raw, err := os.ReadFile(filepath.Join(root, "b/s.db"))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(raw)
			if st.SizeBytes != int64(len(raw)) || st.SHA256 != hex.EncodeToString(sum[:]) {
				t.Fatalf("recorded %d bytes %s, stored %d bytes %x", st.SizeBytes, st.SHA256, len(raw), sum)
			}
			if write.compressed() && st.SizeBytes*10 > int64(len(snap)) {
				t.Fatalf("compressed to %d of %d bytes", st.SizeBytes, len(snap))
			}
			if bytes.Contains(raw, []byte("/registry/pods")) == write.Encrypted() {
				t.Fatalf("stored bytes hold the keys in the clear: %v, encrypted: %v", !write.Encrypted(), write.Encrypted())
			}
			want := Expected{SizeBytes: st.SizeBytes, SHA256: st.SHA256, SnapshotSizeBytes: int64(len(snap))}
			readers := map[string]struct {
				codec Codec
				err   error
			}{
				"the key":                   {codec: withKey},
				"no key":                    {codec: Codec{}, err: ErrNoKey},
				"another key":               {codec: mustKeys(t, otherText), err: ErrWrongKey},
				"the key after a rotation":  {codec: mustKeys(t, otherText+keyText)},
				"the key and its successor": {codec: mustKeys(t, keyText+otherText)},
			}
			for rname, rd := range readers {
				err := rd.err
				if !write.Encrypted() {
					err = nil
				}
				var out bytes.Buffer
				c, gotErr := CopyVerified(context.Background(), store, want, rd.codec, &out)
				if !errors.Is(gotErr, err) || (err == nil) != (gotErr == nil) {
					t.Fatalf("read with %s: %v, want %v", rname, gotErr, err)
				}
				if gotErr != nil {
					if out.Len() != 0 {
						t.Fatalf("read with %s: %d bytes written before the refusal", rname, out.Len())
					}
					continue
				}
				if !bytes.Equal(out.Bytes(), snap) || c.SnapshotSizeBytes != int64(len(snap)) || c.Compressed != write.compressed() || c.Encrypted != write.Encrypted() {
					t.Fatalf("read with %s: %d bytes, layers %+v", rname, out.Len(), c.Layers)
				}
			}
		})
	}
	t.Run("stored before compression existed", func(t *testing.T) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "old.db"), snap, 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(snap)
		var out bytes.Buffer
		_, err := CopyVerified(context.Background(), FileStore{Root: root, Path: "old.db", Claim: "c"},
			Expected{SizeBytes: int64(len(snap)), SHA256: hex.EncodeToString(sum[:])}, withKey, &out)
		if err != nil || !bytes.Equal(out.Bytes(), snap) {
			t.Fatalf("old backup: %v", err)
		}
	})
}

// TestDamagedStoredObjects: a stored object damaged inside its layers is corrupt, never restored: a flipped
// byte of the encrypted or compressed stream, a truncation, and a record that disagrees with the snapshot's size.
func TestDamagedStoredObjects(t *testing.T) {
	snap := compressible(256 << 10)
	keyText, _ := newKey(t)
	key := mustKeys(t, keyText)
	for _, write := range []Codec{{}, key} {
		var buf bytes.Buffer
		w, err := write.Writer(&buf)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(snap)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		good := buf.Bytes()
		cases := map[string][]byte{
			"flipped byte": func() []byte { b := bytes.Clone(good); b[len(b)/2] ^= 0x40; return b }(),
			"truncated":    good[:len(good)-20],
			"cut in half":  good[:len(good)/2],
		}
		for name, stored := range cases {
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "s"), stored, 0o600); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(stored)
			// The record matches the damaged object, as when it was damaged before the record (in the Job).
			want := Expected{SizeBytes: int64(len(stored)), SHA256: hex.EncodeToString(sum[:])}
			_, err := CopyVerified(context.Background(), FileStore{Root: root, Path: "s", Claim: "c"}, want, key, io.Discard)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("encrypted %v, %s: %v, want ErrCorrupt", write.Encrypted(), name, err)
			}
		}
		root := t.TempDir()
		_ = os.WriteFile(filepath.Join(root, "s"), good, 0o600)
		sum := sha256.Sum256(good)
		want := Expected{SizeBytes: int64(len(good)), SHA256: hex.EncodeToString(sum[:]), SnapshotSizeBytes: int64(len(snap)) + 512}
		if _, err := CopyVerified(context.Background(), FileStore{Root: root, Path: "s", Claim: "c"}, want, key, io.Discard); !errors.Is(err, ErrCorrupt) {
			t.Errorf("encrypted %v, recorded snapshot size differs: %v, want ErrCorrupt", write.Encrypted(), err)
		}
	}
}

// TestPutEncodedLeavesNothingOnFailure: a snapshot stream that fails its checksum or breaks off is never
// committed, compressed and encrypted or not.
func TestPutEncodedLeavesNothingOnFailure(t *testing.T) {
	good := compressible(64 << 10)
	bad := bytes.Clone(good)
	bad[10] ^= 1
	keyText, _ := newKey(t)
	for _, c := range []Codec{{}, mustKeys(t, keyText), {Compression: etcdv1alpha1.CompressionNone}} {
		for name, src := range map[string]io.Reader{
			"checksum mismatch": NewVerifier(bytes.NewReader(bad)),
			"broken stream":     NewVerifier(io.MultiReader(bytes.NewReader(good[:5000]), iotest.ErrReader(io.ErrUnexpectedEOF))),
		} {
			root := t.TempDir()
			if _, err := PutEncoded(context.Background(), FileStore{Root: root, Path: "s.db", Claim: "c"}, c, src); err == nil {
				t.Fatalf("%s: stored", name)
			}
			entries, _ := os.ReadDir(root)
			if len(entries) != 0 {
				t.Fatalf("%s: left %v", name, entries)
			}
		}
	}
}

// TestEncodedDir: segments are stored in the codec's format and read in any, so a follower whose settings
// changed still reads the segments it wrote before.
func TestEncodedDir(t *testing.T) {
	keyText, _ := newKey(t)
	key := mustKeys(t, keyText)
	root := t.TempDir()
	plain := FileDir{Root: root, Dir: "segs", Claim: "c"}
	seg := []byte(strings.Repeat(`{"rev":1,"type":"PUT","key":"a2V5"}`+"\n", 100))
	if err := (EncodedDir{ObjectDir: plain, Codec: Codec{Compression: etcdv1alpha1.CompressionNone}}).Put(context.Background(), "old", seg); err != nil {
		t.Fatal(err)
	}
	enc := EncodedDir{ObjectDir: plain, Codec: key}
	if err := enc.Put(context.Background(), "new", seg); err != nil {
		t.Fatal(err)
	}
	raw, _ := plain.Get(context.Background(), "new")
	if bytes.Contains(raw, []byte("PUT")) || len(raw) >= len(seg) {
		t.Fatalf("stored segment of %d bytes is not compressed and encrypted", len(raw))
	}
	for _, n := range []string{"old", "new"} {
		if got, err := enc.Get(context.Background(), n); err != nil || !bytes.Equal(got, seg) {
			t.Fatalf("segment %s: %v", n, err)
		}
	}
	if _, err := (EncodedDir{ObjectDir: plain}).Get(context.Background(), "new"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("read without the key: %v", err)
	}
}

// TestParseKeys: the key Secret must hold an X25519 identity first; anything else is refused with the reason.
func TestParseKeys(t *testing.T) {
	keyText, id := newKey(t)
	c, err := ParseKeys(keyText)
	if err != nil || c.RecipientName != id.Recipient().String() || len(c.Identities) != 1 {
		t.Fatalf("ParseKeys: %+v, %v", c, err)
	}
	for name, text := range map[string]string{
		"empty":           "",
		"only comments":   "# nothing\n",
		"a public key":    id.Recipient().String() + "\n",
		"a password":      "hunter2\n",
		"a damaged key":   strings.Replace(id.String(), "1", "2", 1)[:40] + "\n",
		"a PEM block":     "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI\n-----END PRIVATE KEY-----\n",
		"a key and junk":  id.String() + "\njunk\n",
		"a scrypt recipe": "age-encryption.org/v1\n",
	} {
		if _, err := ParseKeys(text); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
