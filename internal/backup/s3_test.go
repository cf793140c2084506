package backup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// gated delivers data only once open is closed, after telling started that its writer got past the existence
// check: two writers held this way both find the key free, as two schedules firing in the same second do.
type gated struct {
	data    io.Reader
	started chan<- struct{}
	open    <-chan struct{}
	once    sync.Once
}

func (g *gated) Read(p []byte) (int, error) {
	g.once.Do(func() { g.started <- struct{}{}; <-g.open })
	return g.data.Read(p)
}

// TestS3StoreConcurrentWritersOneKey: two writers of one key, both past the existence check before either
// commits. Exactly one commits; the other fails with ErrExists (a clear "destination exists", not an upload
// error), and the object is the winner's, whole. A check-then-put store lets both report success, the later
// one's object replacing the earlier's under a record that no longer matches it.
func TestS3StoreConcurrentWritersOneKey(t *testing.T) {
	cfg := startVersityGW(t)
	cfg.Key = "race/c-20261128T030000Z.db"
	ctx := context.Background()
	snaps := [][]byte{snapshotBytes(PartSize + 4096), snapshotBytes(8192)} // one of two parts, one of one
	started, open := make(chan struct{}), make(chan struct{})
	errs := make([]error, len(snaps))
	var wg sync.WaitGroup
	for i, snap := range snaps {
		s, err := NewS3Store(cfg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Put(ctx, NewVerifier(&gated{data: bytes.NewReader(snap), started: started, open: open}))
		}()
	}
	for range snaps {
		<-started
	}
	close(open)
	wg.Wait()

	var want []byte // the winner's snapshot
	for i, err := range errs {
		switch {
		case err == nil && want == nil:
			want = snaps[i]
		case err == nil:
			t.Fatalf("both writers committed %s: one overwrote the other", cfg.Key)
		case !errors.Is(err, ErrExists):
			t.Fatalf("writer %d failed without ErrExists: %v", i, err)
		default:
			t.Logf("writer %d: %v", i, err)
		}
	}
	if want == nil {
		t.Fatalf("no writer committed: %v", errs)
	}
	s, err := NewS3Store(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("stored object is not the winner's (%d bytes, want %d; %v)", len(got), len(want), err)
	}
	for u := range s.client.ListIncompleteUploads(ctx, cfg.Bucket, "race/", true) {
		if u.Err == nil {
			t.Fatalf("the loser's upload was left behind: %s", u.Key)
		}
	}
}

// TestS3AmbientCredentials: without keys from a Secret the store signs with the Pod's own AWS credentials (here
// the environment's, the first link of the default chain); with keys, with those, whatever the environment has.
func TestS3AmbientCredentials(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAAMBIENTEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "ambient-secret")
	endpoint := strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct {
		name, keyID, want string
	}{
		{"no Secret: the Pod's credentials", "", "Credential=AKIAAMBIENTEXAMPLE/"},
		{"a Secret's keys win", "AKIASECRETEXAMPLE", "Credential=AKIASECRETEXAMPLE/"},
	} {
		cfg := S3Config{Endpoint: endpoint, Bucket: "bkt", Key: "k", Region: "us-east-1", ForcePathStyle: true, Insecure: true, AccessKeyID: tc.keyID}
		if tc.keyID != "" {
			cfg.SecretAccessKey = "secret"
		}
		s, err := NewS3Store(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		seen = nil
		mu.Unlock()
		if err := s.Delete(context.Background()); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		mu.Lock()
		got := strings.Join(seen, " | ")
		mu.Unlock()
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: signed %q, want %s", tc.name, got, tc.want)
		}
	}
}
