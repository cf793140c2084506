package backup

import (
	"context"
	"errors"
	"testing"

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
