package framework

import (
	"context"
	"errors"
	"io"
	"sort"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// GCSDestination is key in the test bed's GCS emulator's bucket. No credentials: Steward sends none to an
// http:// endpoint.
func GCSDestination(key string) etcdv1alpha1.BackupDestination {
	return etcdv1alpha1.BackupDestination{GCS: &etcdv1alpha1.GCSDestination{Endpoint: Bed.GCS.Endpoint, Bucket: Bed.GCS.Bucket, Key: key}}
}

// GCSClient is a client of the test bed's GCS emulator, through its JSON API.
func GCSClient(t *testing.T) *storage.Client {
	t.Helper()
	c, err := storage.NewClient(context.Background(), option.WithEndpoint(Bed.GCS.Endpoint+"/storage/v1/"), option.WithoutAuthentication(),
		storage.WithJSONReads(), storage.WithDisabledClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// GCSKeys lists the object names under prefix (all depths), sorted.
func GCSKeys(t *testing.T, prefix string) []string {
	t.Helper()
	var keys []string
	it := GCSClient(t).Bucket(Bed.GCS.Bucket).Objects(context.Background(), &storage.Query{Prefix: prefix})
	for {
		o, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatalf("list gs://%s/%s: %v", Bed.GCS.Bucket, prefix, err)
		}
		keys = append(keys, o.Name)
	}
	sort.Strings(keys)
	return keys
}

// GCSObject reads an object of the test bed's bucket whole.
func GCSObject(t *testing.T, key string) []byte {
	t.Helper()
	r, err := GCSClient(t).Bucket(Bed.GCS.Bucket).Object(strings.TrimPrefix(key, "/")).NewReader(context.Background())
	if err != nil {
		t.Fatalf("get gs://%s/%s: %v", Bed.GCS.Bucket, key, err)
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("get gs://%s/%s: %v", Bed.GCS.Bucket, key, err)
	}
	return b
}
