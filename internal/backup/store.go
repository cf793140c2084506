package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// ErrExists means something is already stored under the final name; backups never overwrite.
var ErrExists = errors.New("destination already exists")

// ErrDestination wraps a destination that cannot be used at all (unreachable, refused credentials or
// certificate), found before any snapshot byte was read: trying another member would not help.
var ErrDestination = errors.New("destination unusable")

// Store is where snapshots are written and deleted.
type Store interface {
	// Put streams r to the store under the store's name and commits it only when r ends with io.EOF; any
	// error from r (ErrChecksumMismatch included) leaves nothing under the name. It returns the location.
	Put(ctx context.Context, r io.Reader) (string, error)
	// Delete removes the stored snapshot; a missing one is not an error.
	Delete(ctx context.Context) error
	// Open streams the stored snapshot back.
	Open(ctx context.Context) (io.ReadCloser, error)
	// Location names the snapshot: pvc://<claim>/<path> or s3://<bucket>/<key>.
	Location() string
}

// FileStore is a file on a mounted volume.
type FileStore struct {
	// Root is the mount point of the volume, Path the file's path relative to it, Claim the PVC (for Location).
	Root, Path, Claim string
}

// Location implements Store.
func (f FileStore) Location() string { return "pvc://" + f.Claim + "/" + f.Path }

// Put writes to a hidden temporary file next to the target, fsyncs it, and renames it into place only after
// the stream verified; the directory is fsynced so that the rename survives a crash.
func (f FileStore) Put(_ context.Context, r io.Reader) (string, error) {
	if err := CheckRelativePath(f.Path); err != nil {
		return "", err
	}
	final := filepath.Join(f.Root, filepath.FromSlash(f.Path))
	if _, err := os.Lstat(final); err == nil {
		return "", fmt.Errorf("%s: %w", f.Location(), ErrExists)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o750); err != nil {
		return "", fmt.Errorf("create directory of %s: %w", f.Location(), err)
	}
	tmp := filepath.Join(f.Root, filepath.FromSlash(TempName(f.Path, nonce())))
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640) //nolint:gosec // the path is the backup's destination by design (CEL keeps it relative, without "..")
	if err != nil {
		return "", fmt.Errorf("create %s: %w", tmp, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = out.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err := io.Copy(out, r); err != nil {
		return "", fmt.Errorf("write %s: %w", f.Location(), err)
	}
	if err := out.Sync(); err != nil {
		return "", fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := out.Close(); err != nil {
		return "", fmt.Errorf("close %s: %w", tmp, err)
	}
	// Link, not rename: link fails if the target appeared meanwhile, so a concurrent backup is never overwritten.
	if err := os.Link(tmp, final); err != nil {
		if errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("%s: %w", f.Location(), ErrExists)
		}
		return "", fmt.Errorf("commit %s: %w", f.Location(), err)
	}
	committed = true
	_ = os.Remove(tmp)
	SyncDir(filepath.Dir(final))
	return f.Location(), nil
}

// Delete implements Store.
func (f FileStore) Delete(context.Context) error {
	if err := CheckRelativePath(f.Path); err != nil {
		return err
	}
	err := os.Remove(filepath.Join(f.Root, filepath.FromSlash(f.Path)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", f.Location(), err)
	}
	return nil
}

// Open implements Store.
func (f FileStore) Open(context.Context) (io.ReadCloser, error) {
	if err := CheckRelativePath(f.Path); err != nil {
		return nil, err
	}
	r, err := os.Open(filepath.Join(f.Root, filepath.FromSlash(f.Path))) //nolint:gosec // the path is the backup's destination by design (CEL keeps it relative, without "..")
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", f.Location(), err)
	}
	return r, nil
}

// CheckRelativePath refuses a snapshot path that could leave the destination volume: absolute, with a ".."
// element, or with characters outside [A-Za-z0-9._/-]. Admission refuses such paths already (the CRD's CEL
// rule); the agent checks again because it must not trust its arguments, whoever wrote them.
func CheckRelativePath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q: must be relative and not empty", p)
	}
	for _, c := range p {
		if !pathChar(c) {
			return fmt.Errorf("path %q: character %q not allowed", p, c)
		}
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return fmt.Errorf("path %q: must not contain '..'", p)
		}
	}
	return nil
}

// pathChar: the characters the CRD allows in a path.
func pathChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._/-", c)
}

// S3Config addresses one object of an S3-compatible bucket.
type S3Config struct {
	Endpoint, Bucket, Key, Region string
	ForcePathStyle, Insecure      bool
	AccessKeyID, SecretAccessKey  string
	// CABundle is PEM CA certificates trusted for HTTPS in addition to the system's.
	CABundle string
}

// S3Store is an object in an S3-compatible bucket.
type S3Store struct {
	cfg    S3Config
	client *minio.Client
}

// PartSize is the multipart upload part size: the most of a snapshot the agent holds in memory at once.
const PartSize = 16 << 20

// NewS3Store returns a store for cfg's object.
func NewS3Store(cfg S3Config) (*S3Store, error) {
	lookup := minio.BucketLookupDNS
	if cfg.ForcePathStyle {
		lookup = minio.BucketLookupPath
	}
	opts := &minio.Options{
		Creds:        s3Credentials(cfg),
		Secure:       !cfg.Insecure,
		Region:       cfg.Region,
		BucketLookup: lookup,
	}
	if cfg.CABundle != "" {
		tr, err := transportTrusting(cfg.CABundle)
		if err != nil {
			return nil, fmt.Errorf("s3 client for %s: %w", cfg.Endpoint, err)
		}
		opts.Transport = tr
	}
	c, err := minio.New(cfg.Endpoint, opts)
	if err != nil {
		return nil, fmt.Errorf("s3 client for %s: %w", cfg.Endpoint, err)
	}
	return &S3Store{cfg: cfg, client: c}, nil
}

// s3Credentials are cfg's static keys, or without them (no credentials Secret) the AWS default chain of the
// Pod: keys in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, then IAM, which covers IAM Roles for Service Accounts
// (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, exchanged at the region's STS, or at AWS_ENDPOINT_URL_STS when
// set), EKS Pod Identity and ECS (AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI) and the node's instance
// profile.
func s3Credentials(cfg S3Config) *credentials.Credentials {
	if cfg.AccessKeyID != "" || cfg.SecretAccessKey != "" {
		return credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, "")
	}
	iam := &credentials.IAM{}
	if os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != "" {
		// The AWS SDKs' variable for a private (VPC) or FIPS STS endpoint, which minio's provider does not read
		// itself. Only for the web identity: the same field would redirect the instance profile's requests too.
		iam.Endpoint = os.Getenv("AWS_ENDPOINT_URL_STS")
	}
	return credentials.NewChainCredentials([]credentials.Provider{&credentials.EnvAWS{}, iam})
}

// transportTrusting is minio's default HTTPS transport trusting the system's CAs and those in bundle.
func transportTrusting(bundle string) (*http.Transport, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM([]byte(bundle)) {
		return nil, errors.New("caBundle holds no PEM certificate")
	}
	tr, err := minio.DefaultTransport(true)
	if err != nil {
		return nil, fmt.Errorf("https transport: %w", err)
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tr.TLSClientConfig.RootCAs = pool
	return tr, nil
}

// Location implements Store.
func (s *S3Store) Location() string { return "s3://" + s.cfg.Bucket + "/" + s.cfg.Key }

// Put streams r as a multipart upload (parts of PartSize). S3 makes an object visible only when its upload
// completes, which happens only after r returned io.EOF; on any error the upload is aborted.
//
// The completion is a conditional write (If-None-Match: *): the server commits the object only if no object
// has the key by then, so of two writers racing for one key (two schedules of one cluster firing in the same
// second) exactly one succeeds and the other gets ErrExists. The existence check before the upload only saves
// sending a snapshot that would be refused, and finds an unusable destination before a byte is read.
// (minio-go's PutObject drops custom headers from the completion request, hence the upload by hand.)
func (s *S3Store) Put(ctx context.Context, r io.Reader) (string, error) {
	if _, err := s.client.StatObject(ctx, s.cfg.Bucket, s.cfg.Key, minio.StatObjectOptions{}); err == nil {
		return "", fmt.Errorf("%s: %w", s.Location(), ErrExists)
	} else if minio.ToErrorResponse(err).StatusCode != http.StatusNotFound {
		return "", fmt.Errorf("%w: check %s: %w", ErrDestination, s.Location(), err)
	}
	core := minio.Core{Client: s.client}
	id, err := core.NewMultipartUpload(ctx, s.cfg.Bucket, s.cfg.Key, minio.PutObjectOptions{
		ContentType:  "application/octet-stream",
		UserMetadata: map[string]string{"steward-snapshot": "etcd"},
	})
	if err != nil {
		return "", fmt.Errorf("%w: start upload of %s: %w", ErrDestination, s.Location(), err)
	}
	committed := false
	defer func() {
		if !committed {
			// Also after the agent was told to stop: an aborted upload leaves no parts behind to pay for.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = core.AbortMultipartUpload(actx, s.cfg.Bucket, s.cfg.Key, id)
		}
	}()
	buf := make([]byte, PartSize)
	var parts []minio.CompletePart
	for n := 1; ; n++ {
		size, rerr := fill(r, buf)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return "", fmt.Errorf("upload %s: %w", s.Location(), rerr)
		}
		if size > 0 || n == 1 {
			p, err := core.PutObjectPart(ctx, s.cfg.Bucket, s.cfg.Key, id, n, bytes.NewReader(buf[:size]), int64(size), minio.PutObjectPartOptions{})
			if err != nil {
				return "", fmt.Errorf("upload part %d of %s: %w", n, s.Location(), err)
			}
			parts = append(parts, minio.CompletePart{PartNumber: n, ETag: p.ETag})
		}
		if rerr != nil {
			break
		}
	}
	opts := minio.PutObjectOptions{}
	opts.SetMatchETagExcept("*")
	if _, err := core.CompleteMultipartUpload(ctx, s.cfg.Bucket, s.cfg.Key, id, parts, opts); err != nil {
		if lostRace(err) {
			return "", fmt.Errorf("%s: another writer committed an object under this key first: %w", s.Location(), ErrExists)
		}
		return "", fmt.Errorf("complete upload of %s: %w", s.Location(), err)
	}
	committed = true
	return s.Location(), nil
}

// fill reads r until buf is full or r fails or ends, and returns that error (io.EOF at the end) unchanged:
// unlike io.ReadFull it never drops an error that came with the last bytes (a checksum mismatch).
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// lostRace: the server refused a conditional write because an object with the key appeared (412
// PreconditionFailed), or because a concurrent write of the key was under way (409
// ConditionalRequestConflict, which AWS returns to all but one of racing writers).
func lostRace(err error) bool {
	e := minio.ToErrorResponse(err)
	return e.StatusCode == http.StatusPreconditionFailed || e.Code == "PreconditionFailed" ||
		e.StatusCode == http.StatusConflict && e.Code == "ConditionalRequestConflict"
}

// Delete implements Store.
func (s *S3Store) Delete(ctx context.Context) error {
	if err := s.client.RemoveObject(ctx, s.cfg.Bucket, s.cfg.Key, minio.RemoveObjectOptions{}); err != nil {
		if minio.ToErrorResponse(err).StatusCode == http.StatusNotFound {
			return nil
		}
		return fmt.Errorf("delete %s: %w", s.Location(), err)
	}
	return nil
}

// Open implements Store. The object is streamed: the reader fetches it as it is read.
func (s *S3Store) Open(ctx context.Context) (io.ReadCloser, error) {
	obj, err := s.client.GetObject(ctx, s.cfg.Bucket, s.cfg.Key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", s.Location(), err)
	}
	// GetObject is lazy; Stat surfaces a missing object or refused credentials before any byte is read.
	if _, err := obj.Stat(); err != nil {
		_ = obj.Close()
		return nil, fmt.Errorf("get %s: %w", s.Location(), err)
	}
	return obj, nil
}

func nonce() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// SyncDir fsyncs a directory, so that a file created or renamed into it survives a crash. Best effort: a file
// system that cannot sync a directory still has the file.
func SyncDir(dir string) {
	if d, err := os.Open(dir); err == nil { //nolint:gosec // a directory of the destination or data volume
		_ = d.Sync()
		_ = d.Close()
	}
}
