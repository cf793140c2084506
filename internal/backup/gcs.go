package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
)

// GCSConfig addresses a Google Cloud Storage bucket.
type GCSConfig struct {
	Bucket string
	// Endpoint is the JSON API's URL (an emulator's or a private endpoint's); empty: Google's. A URL without a
	// path gets the API's path /storage/v1/. An http:// endpoint is sent no credentials.
	Endpoint string
	// CredentialsJSON is a service account key file; empty: the client's default chain (Workload Identity, the
	// metadata server, GOOGLE_APPLICATION_CREDENTIALS).
	CredentialsJSON []byte
}

// GCSBucket is a bucket of Google Cloud Storage: Store addresses one object, Dir a prefix of objects.
type GCSBucket struct {
	cfg    GCSConfig
	client *storage.Client
}

// NewGCSBucket returns a client of cfg's bucket. An error means the destination cannot be used at all
// (ErrDestination): a malformed endpoint or key file, or no credentials found in the default chain.
func NewGCSBucket(ctx context.Context, cfg GCSConfig) (*GCSBucket, error) {
	opts, err := gcsOptions(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: gcs client for gs://%s: %w", ErrDestination, cfg.Bucket, err)
	}
	c, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: gcs client for gs://%s: %w", ErrDestination, cfg.Bucket, err)
	}
	return &GCSBucket{cfg: cfg, client: c}, nil
}

func gcsOptions(cfg GCSConfig) ([]option.ClientOption, error) {
	// The agent is a short-lived Job: no client metrics exported to Cloud Monitoring.
	opts := []option.ClientOption{storage.WithDisabledClientMetrics()}
	insecure := false
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("endpoint %q: want an http:// or https:// URL", cfg.Endpoint)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/storage/v1/"
		}
		insecure = u.Scheme == "http"
		// Reads through the JSON API too: the XML API's host would be derived from the endpoint's, which
		// emulators and private endpoints do not all serve.
		opts = append(opts, option.WithEndpoint(u.String()), storage.WithJSONReads())
	}
	switch {
	case insecure:
		// A token over plain HTTP would travel readable; admission refuses a key with such an endpoint.
		if len(cfg.CredentialsJSON) > 0 {
			return nil, errors.New("credentials are never sent to an http:// endpoint")
		}
		opts = append(opts, option.WithoutAuthentication())
	case len(cfg.CredentialsJSON) > 0:
		opts = append(opts, option.WithAuthCredentialsJSON(option.ServiceAccount, cfg.CredentialsJSON))
	}
	return opts, nil
}

// Close releases the client.
func (b *GCSBucket) Close() error { return b.client.Close() }

// Store addresses the object key of the bucket.
func (b *GCSBucket) Store(key string) *GCSStore { return &GCSStore{b: b, key: key} }

// GCSStore is one object of a GCS bucket.
type GCSStore struct {
	b   *GCSBucket
	key string
}

// Location implements Store.
func (s *GCSStore) Location() string { return "gs://" + s.b.cfg.Bucket + "/" + s.key }

func (s *GCSStore) object() *storage.ObjectHandle {
	return s.b.client.Bucket(s.b.cfg.Bucket).Object(s.key)
}

// Put streams r as a resumable upload (chunks of PartSize). GCS creates the object only when the upload is
// finalized, which the writer does only on Close, after r returned io.EOF; any error from r cancels the upload's
// context, which abandons the upload, so nothing appears under the key.
//
// The upload carries the precondition ifGenerationMatch=0 (DoesNotExist): GCS commits it only if no live
// object has the key by then, so of two writers racing for one key exactly one succeeds and the other gets
// ErrExists. The existence check before the upload only saves sending a snapshot that would be refused, and
// finds an unusable destination (bucket, credentials) before a byte is read.
func (s *GCSStore) Put(ctx context.Context, r io.Reader) (string, error) {
	if _, err := s.object().Attrs(ctx); err == nil {
		return "", fmt.Errorf("%s: %w", s.Location(), ErrExists)
	} else if !errors.Is(err, storage.ErrObjectNotExist) {
		return "", fmt.Errorf("%w: check %s: %w", ErrDestination, s.Location(), err)
	}
	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := s.object().If(storage.Conditions{DoesNotExist: true}).NewWriter(uctx)
	w.ChunkSize = PartSize
	w.ContentType = "application/octet-stream"
	w.Metadata = map[string]string{"steward-snapshot": "etcd"}
	// The writer holds one chunk; io.Copy writes the bytes that came with an error before returning it, and
	// returns r's error as it is (ErrChecksumMismatch included).
	if _, err := io.Copy(w, r); err != nil {
		// Cancel before Close: Close would finalize the upload with what was written so far.
		cancel()
		_ = w.Close()
		if preconditionFailed(err) {
			return "", s.uploadError(err)
		}
		return "", fmt.Errorf("upload %s: %w", s.Location(), err)
	}
	if err := w.Close(); err != nil {
		return "", s.uploadError(err)
	}
	return s.Location(), nil
}

func (s *GCSStore) uploadError(err error) error {
	if preconditionFailed(err) {
		return fmt.Errorf("%s: another writer committed an object under this key first: %w", s.Location(), ErrExists)
	}
	return fmt.Errorf("upload %s: %w", s.Location(), err)
}

// preconditionFailed: GCS refused a conditional write because an object with the key exists (412).
func preconditionFailed(err error) bool {
	var e *googleapi.Error
	return errors.As(err, &e) && e.Code == http.StatusPreconditionFailed
}

// Delete implements Store.
func (s *GCSStore) Delete(ctx context.Context) error {
	if err := s.object().Delete(ctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("delete %s: %w", s.Location(), err)
	}
	return nil
}

// Open implements Store. The object is streamed: the reader fetches it as it is read. A missing object or
// refused credentials show here, before any byte is read.
func (s *GCSStore) Open(ctx context.Context) (io.ReadCloser, error) {
	r, err := s.object().NewReader(ctx)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", s.Location(), err)
	}
	return r, nil
}

// GCSDir is an object name prefix in a bucket: objects are <prefix>/<name>.
type GCSDir struct {
	b      *GCSBucket
	prefix string
}

// Dir is the prefix of the bucket.
func (b *GCSBucket) Dir(prefix string) GCSDir { return GCSDir{b: b, prefix: strings.Trim(prefix, "/")} }

// Location implements ObjectDir.
func (d GCSDir) Location() string { return "gs://" + d.b.cfg.Bucket + "/" + d.prefix }

func (d GCSDir) object(name string) (*storage.ObjectHandle, error) {
	if name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("object %q in %s: not a plain name", name, d.Location())
	}
	return d.b.client.Bucket(d.b.cfg.Bucket).Object(path.Join(d.prefix, name)), nil
}

// List implements ObjectDir: the objects directly under the prefix (the delimiter leaves deeper ones out).
func (d GCSDir) List(ctx context.Context) ([]string, error) {
	names, _, err := d.listing(ctx)
	return names, err
}

// Dirs implements ObjectDir.
func (d GCSDir) Dirs(ctx context.Context) ([]string, error) {
	_, dirs, err := d.listing(ctx)
	return dirs, err
}

// listing is the objects directly under the prefix and the deeper prefixes: with a delimiter, GCS lists each
// deeper prefix once, as an entry with only Prefix set.
func (d GCSDir) listing(ctx context.Context) (names, dirs []string, err error) {
	it := d.b.client.Bucket(d.b.cfg.Bucket).Objects(ctx, &storage.Query{Prefix: d.prefix + "/", Delimiter: "/"})
	for {
		o, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return names, dirs, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("list %s: %w", d.Location(), err)
		}
		entry := o.Name
		if entry == "" {
			entry = o.Prefix
		}
		names, dirs = sortEntry(strings.TrimPrefix(entry, d.prefix+"/"), names, dirs)
	}
}

// Put implements ObjectDir: a single-request upload (ChunkSize 0), which GCS makes visible whole or not at all.
func (d GCSDir) Put(ctx context.Context, name string, b []byte) error {
	o, err := d.object(name)
	if err != nil {
		return err
	}
	w := o.NewWriter(ctx)
	w.ChunkSize = 0
	w.ContentType = "application/x-ndjson"
	if _, err := io.Copy(w, bytes.NewReader(b)); err != nil {
		_ = w.Close()
		return fmt.Errorf("upload %s/%s: %w", d.Location(), name, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("upload %s/%s: %w", d.Location(), name, err)
	}
	return nil
}

// Get implements ObjectDir.
func (d GCSDir) Get(ctx context.Context, name string) ([]byte, error) {
	o, err := d.object(name)
	if err != nil {
		return nil, err
	}
	r, err := o.NewReader(ctx)
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", d.Location(), name, err)
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", d.Location(), name, err)
	}
	return b, nil
}

// Delete implements ObjectDir.
func (d GCSDir) Delete(ctx context.Context, name string) error {
	o, err := d.object(name)
	if err != nil {
		return err
	}
	if err := o.Delete(ctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("delete %s/%s: %w", d.Location(), name, err)
	}
	return nil
}
