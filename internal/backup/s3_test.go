package backup

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"steward.dev/steward/internal/testbed"
)

// startVersityGW runs the S3 gateway the test bed builds (cached under ~/.cache/steward/bin) on loopback.
func startVersityGW(t *testing.T) S3Config {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the test bed's versitygw build")
	}
	bins := testbed.CachedBinaries("versitygw-*/versitygw")
	if len(bins) == 0 {
		t.Skip("versitygw not built yet (start the test bed once)")
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "bkt"), 0o750); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(bins[0], "--port", addr, "--quiet", "posix", root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID=test", "ROOT_SECRET_ACCESS_KEY=testsecret")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw does not listen: %v", err)
		}
		<-time.After(50 * time.Millisecond)
	}
	return S3Config{Endpoint: addr, Bucket: "bkt", Region: "us-east-1", ForcePathStyle: true, Insecure: true,
		AccessKeyID: "test", SecretAccessKey: "testsecret"}
}

// TestS3StoreCommitsOnlyVerifiedSnapshots: a snapshot larger than one part is uploaded in parts and appears
// only whole; a corrupt one (detected at the very end, after parts were sent) leaves no object and no
// incomplete upload; an existing object is never overwritten; delete is idempotent.
func TestS3StoreCommitsOnlyVerifiedSnapshots(t *testing.T) {
	cfg := startVersityGW(t)
	ctx := context.Background()
	good := snapshotBytes(PartSize + 3*4096)

	cfg.Key = "p/good.db"
	s, err := NewS3Store(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(bytes.NewReader(good))
	if loc, err := s.Put(ctx, v); err != nil || loc != "s3://bkt/p/good.db" || !v.Verified() {
		t.Fatalf("Put: %s %v", loc, err)
	}
	obj, err := s.client.GetObject(ctx, "bkt", "p/good.db", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := got.ReadFrom(obj); err != nil || !bytes.Equal(got.Bytes(), good) {
		t.Fatalf("stored object differs (%d bytes, %v)", got.Len(), err)
	}
	if _, err := s.Put(ctx, NewVerifier(bytes.NewReader(good))); !errors.Is(err, ErrExists) {
		t.Fatalf("overwrite: %v", err)
	}

	bad := append([]byte(nil), good...)
	bad[len(bad)-40] ^= 1 // in the last part: the first part is already uploaded when the mismatch shows
	cfg.Key = "p/bad.db"
	sb, err := NewS3Store(cfg)
	if err != nil {
		t.Fatal(err)
	}
	vb := NewVerifier(bytes.NewReader(bad))
	if _, err := sb.Put(ctx, vb); err == nil || !vb.Mismatch() {
		t.Fatalf("corrupt snapshot stored: %v", err)
	}
	if _, err := s.client.StatObject(ctx, "bkt", "p/bad.db", minio.StatObjectOptions{}); err == nil {
		t.Fatal("corrupt snapshot visible under its name")
	}
	for u := range s.client.ListIncompleteUploads(ctx, "bkt", "p/", true) {
		if u.Err == nil {
			t.Fatalf("incomplete upload left: %s", u.Key)
		}
	}

	if err := s.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := s.client.StatObject(ctx, "bkt", "p/good.db", minio.StatObjectOptions{}); err == nil {
		t.Fatal("deleted object still there")
	}
}
