package backup

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// startFakeGCS runs fake-gcs-server in the test's process over plain HTTP on loopback, with bucket bkt, and
// returns the bucket through the endpoint as the agent addresses an emulator (a URL without a path).
func startFakeGCS(t *testing.T) *GCSBucket {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", Port: 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "bkt"})
	b, err := NewGCSBucket(context.Background(), GCSConfig{Bucket: "bkt", Endpoint: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestGCSStoreCommitsOnlyVerifiedSnapshots: checkStoreCommitsOnlyVerifiedSnapshots through a resumable upload in
// chunks.
func TestGCSStoreCommitsOnlyVerifiedSnapshots(t *testing.T) {
	b := startFakeGCS(t)
	checkStoreCommitsOnlyVerifiedSnapshots(t, func(k string) Store { return b.Store(k) }, func(p string) ObjectDir { return b.Dir(p) }, "gs://bkt/")
}

// TestGCSStoreConcurrentWritersOneKey: checkStoreConcurrentWritersOneKey through the generation precondition.
func TestGCSStoreConcurrentWritersOneKey(t *testing.T) {
	b := startFakeGCS(t)
	checkStoreConcurrentWritersOneKey(t, func(k string) Store { return b.Store(k) })
}

// TestGCSDir: checkDir.
func TestGCSDir(t *testing.T) {
	b := startFakeGCS(t)
	checkDir(t, func(p string) ObjectDir { return b.Dir(p) }, "gs://bkt/")
}

// TestGCSOptions: credentials are never sent to an http:// endpoint; an endpoint without a path gets the JSON
// API's; a malformed endpoint is refused as an unusable destination.
func TestGCSOptions(t *testing.T) {
	if _, err := gcsOptions(GCSConfig{Endpoint: "http://emu:4443", CredentialsJSON: []byte("{}")}); err == nil {
		t.Error("a key file with an http:// endpoint was accepted")
	}
	for _, e := range []string{"emu:4443", "ftp://emu", "http://"} {
		if _, err := NewGCSBucket(context.Background(), GCSConfig{Bucket: "b", Endpoint: e}); !errors.Is(err, ErrDestination) {
			t.Errorf("endpoint %q: %v", e, err)
		}
	}
	if _, err := NewGCSBucket(context.Background(), GCSConfig{Bucket: "b", CredentialsJSON: []byte(`{"type":"authorized_user"}`)}); !errors.Is(err, ErrDestination) {
		t.Errorf("a key file of another type: %v", err)
	}
}

// TestGCSWorkloadIdentity: without a key file the client takes the default chain, which on GKE with Workload
// Identity is the metadata server's token for the Pod's Kubernetes service account (GCE_METADATA_HOST here, a
// fake one); with a key file it never asks the metadata server. The fake bucket's TLS certificate is not trusted,
// so the requests themselves fail: the token is fetched before a request is sent, which is what is checked.
func TestGCSWorkloadIdentity(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	metadata := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		if r.Header.Get("Metadata-Flavor") != "Google" {
			http.Error(w, "no Metadata-Flavor", http.StatusForbidden)
			return
		}
		w.Header().Set("Metadata-Flavor", "Google")
		switch {
		case strings.HasSuffix(r.URL.Path, "/service-accounts/default/token"):
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"access_token":"ya29.workload-identity","expires_in":3600,"token_type":"Bearer"}`)
		case strings.HasSuffix(r.URL.Path, "/universe/universe-domain"):
			_, _ = io.WriteString(w, "googleapis.com")
		case strings.HasSuffix(r.URL.Path, "/project/project-id"):
			_, _ = io.WriteString(w, "steward-test")
		default:
			_, _ = io.WriteString(w, "")
		}
	}))
	defer metadata.Close()
	bucket := httptest.NewTLSServer(http.NotFoundHandler())
	defer bucket.Close()
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(metadata.URL, "http://"))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("HOME", t.TempDir()) // no gcloud application default credentials file
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())

	tokenAsked := func(cfg GCSConfig) bool {
		t.Helper()
		mu.Lock()
		asked = nil
		mu.Unlock()
		b, err := NewGCSBucket(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = b.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := b.Store("k").Delete(ctx); err == nil {
			t.Fatal("a delete through an untrusted certificate succeeded")
		}
		mu.Lock()
		defer mu.Unlock()
		for _, p := range asked {
			if strings.HasSuffix(p, "/service-accounts/default/token") {
				return true
			}
		}
		return false
	}
	if !tokenAsked(GCSConfig{Bucket: "bkt", Endpoint: bucket.URL}) {
		t.Errorf("without a key file no token was asked of the metadata server (asked %v)", asked)
	}
	if tokenAsked(GCSConfig{Bucket: "bkt", Endpoint: bucket.URL, CredentialsJSON: testServiceAccountJSON(t)}) {
		t.Errorf("with a key file the metadata server was asked for a token (%v)", asked)
	}
}

// testServiceAccountJSON is a service account key file with a real (throwaway) RSA key, whose token endpoint
// answers nothing.
func testServiceAccountJSON(t *testing.T) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	//nolint:gosec // G101: a throwaway key generated above, for a token endpoint that answers nothing
	out, err := json.Marshal(map[string]string{"type": "service_account", "project_id": "p", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "etcd@p.iam.gserviceaccount.com", "token_uri": "https://127.0.0.1:1/token"})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
