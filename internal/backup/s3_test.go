package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// TestS3StoreConcurrentWritersOneKey: checkStoreConcurrentWritersOneKey through S3's conditional write (a
// check-then-put store lets both report success, the later one's object replacing the earlier's under a record
// that no longer matches it); the loser's multipart upload is not left behind either.
func TestS3StoreConcurrentWritersOneKey(t *testing.T) {
	cfg := startVersityGW(t)
	var last *S3Store
	checkStoreConcurrentWritersOneKey(t, func(key string) Store {
		c := cfg
		c.Key = key
		s, err := NewS3Store(c)
		if err != nil {
			t.Fatal(err)
		}
		last = s
		return s
	})
	for u := range last.client.ListIncompleteUploads(context.Background(), cfg.Bucket, "race/", true) {
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

// TestS3AmbientCredentialsFromIAM signs without a Secret with what the AWS default chain gets from the Pod's
// environment on EKS, against fake credential services: IAM Roles for Service Accounts (the projected web
// identity token exchanged at STS, here the endpoint AWS_ENDPOINT_URL_STS names) and EKS Pod Identity (the
// agent's URL and its authorization token file). The request is signed with the temporary keys and carries
// their session token.
func TestS3AmbientCredentialsFromIAM(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("projected-sa-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	expiry := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	sts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "AssumeRoleWithWebIdentity" ||
			r.Form.Get("WebIdentityToken") != "projected-sa-token" || r.Form.Get("RoleArn") != "arn:aws:iam::111122223333:role/etcd-backups" {
			http.Error(w, "unexpected STS request "+r.Form.Encode(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>`+
			`<Credentials><AccessKeyId>ASIAIRSAEXAMPLE</AccessKeyId><SecretAccessKey>irsa-secret</SecretAccessKey>`+
			`<SessionToken>irsa-session</SessionToken><Expiration>%s</Expiration></Credentials>`+
			`</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`, expiry)
	}))
	defer sts.Close()
	podIdentity := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "projected-sa-token" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"AccessKeyId":"ASIAPODIDEXAMPLE","SecretAccessKey":"podid-secret","Token":"podid-session","Expiration":"%s"}`, expiry)
	}))
	defer podIdentity.Close()

	var mu sync.Mutex
	var auth, session string
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth, session = r.Header.Get("Authorization"), r.Header.Get("X-Amz-Security-Token")
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer s3.Close()

	for _, tc := range []struct {
		name                 string
		env                  map[string]string
		wantKey, wantSession string
	}{
		{"IAM Roles for Service Accounts", map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile,
			"AWS_ROLE_ARN": "arn:aws:iam::111122223333:role/etcd-backups", "AWS_ENDPOINT_URL_STS": sts.URL},
			"ASIAIRSAEXAMPLE", "irsa-session"},
		{"EKS Pod Identity", map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": podIdentity.URL,
			"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokenFile}, "ASIAPODIDEXAMPLE", "podid-session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN",
				"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ENDPOINT_URL_STS", "AWS_REGION",
				"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"} {
				t.Setenv(k, tc.env[k])
			}
			s, err := NewS3Store(S3Config{Endpoint: strings.TrimPrefix(s3.URL, "http://"), Bucket: "bkt", Key: "k", Region: "us-east-1", ForcePathStyle: true, Insecure: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(context.Background()); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !strings.Contains(auth, "Credential="+tc.wantKey+"/") || session != tc.wantSession {
				t.Errorf("signed %q with session token %q, want the key %s and the session token %s", auth, session, tc.wantKey, tc.wantSession)
			}
		})
	}
}

// TestS3Dir: checkDir, on an S3 gateway.
func TestS3Dir(t *testing.T) {
	s, err := NewS3Store(startVersityGW(t))
	if err != nil {
		t.Fatal(err)
	}
	checkDir(t, func(p string) ObjectDir { return s.Dir(p) }, "s3://bkt/")
}
