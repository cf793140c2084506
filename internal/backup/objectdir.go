package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/minio/minio-go/v7"
)

// ObjectDir holds many small objects, written whole, under one directory of a volume or one key prefix of a
// bucket: continuous backup's segments.
type ObjectDir interface {
	// List names the objects directly in the directory (without the directory), in no particular order.
	List(ctx context.Context) ([]string, error)
	// Put stores b under name; a reader sees all of it or nothing.
	Put(ctx context.Context, name string, b []byte) error
	// Get reads an object whole.
	Get(ctx context.Context, name string) ([]byte, error)
	// Delete removes an object; a missing one is not an error.
	Delete(ctx context.Context, name string) error
	// Location names the directory: pvc://<claim>/<dir> or s3://<bucket>/<prefix>.
	Location() string
	// Dirs names the directories (key prefixes followed by a '/') directly in the directory, in no particular
	// order: a segment base's etcd cluster IDs.
	Dirs(ctx context.Context) ([]string, error)
}

// FileDir is a directory on a mounted volume.
type FileDir struct {
	// Root is the volume's mount point, Dir the directory relative to it, Claim the PVC (for Location).
	Root, Dir, Claim string
}

// Location implements ObjectDir.
func (d FileDir) Location() string { return "pvc://" + d.Claim + "/" + d.Dir }

func (d FileDir) path(name string) (string, error) {
	if err := CheckRelativePath(d.Dir + "/" + name); err != nil || strings.Contains(name, "/") {
		return "", fmt.Errorf("object %q in %s: not a plain name", name, d.Location())
	}
	return filepath.Join(d.Root, filepath.FromSlash(d.Dir), name), nil
}

// List implements ObjectDir. A missing directory is empty.
func (d FileDir) List(context.Context) ([]string, error) {
	names, _, err := d.listing()
	return names, err
}

// Dirs implements ObjectDir. A missing directory has none.
func (d FileDir) Dirs(context.Context) ([]string, error) {
	_, dirs, err := d.listing()
	return dirs, err
}

// listing is the directory's regular files and subdirectories, hidden ones (partial writes) left out.
func (d FileDir) listing() (names, dirs []string, err error) {
	if err := CheckRelativePath(d.Dir); err != nil {
		return nil, nil, err
	}
	entries, err := os.ReadDir(filepath.Join(d.Root, filepath.FromSlash(d.Dir)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", d.Location(), err)
	}
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name(), "."):
		case e.Type().IsRegular():
			names = append(names, e.Name())
		case e.IsDir():
			dirs = append(dirs, e.Name())
		}
	}
	return names, dirs, nil
}

// Put implements ObjectDir: a hidden temporary file, fsynced, renamed into place, the directory fsynced.
func (d FileDir) Put(_ context.Context, name string, b []byte) error {
	final, err := d.path(name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o750); err != nil {
		return fmt.Errorf("create %s: %w", d.Location(), err)
	}
	tmp := filepath.Join(filepath.Dir(final), "."+name+".partial-"+nonce())
	if err := writeSynced(tmp, b); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("commit %s/%s: %w", d.Location(), name, err)
	}
	SyncDir(filepath.Dir(final))
	return nil
}

func writeSynced(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640) //nolint:gosec // a temporary name in the destination
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync %s: %w", p, err)
	}
	return f.Close()
}

// Get implements ObjectDir.
func (d FileDir) Get(_ context.Context, name string) ([]byte, error) {
	p, err := d.path(name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p) //nolint:gosec // a plain name in the destination
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", d.Location(), name, err)
	}
	return b, nil
}

// Delete implements ObjectDir.
func (d FileDir) Delete(_ context.Context, name string) error {
	p, err := d.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete %s/%s: %w", d.Location(), name, err)
	}
	return nil
}

// S3Dir is a key prefix in a bucket: objects are <prefix>/<name>.
type S3Dir struct {
	s      *S3Store
	prefix string
}

// Dir is the key prefix of the store's bucket (the store's own key is not used).
func (s *S3Store) Dir(prefix string) S3Dir {
	return S3Dir{s: s, prefix: strings.Trim(prefix, "/")}
}

// Location implements ObjectDir.
func (d S3Dir) Location() string { return "s3://" + d.s.cfg.Bucket + "/" + d.prefix }

// key is the object key of name, which must be a plain name: path.Join would resolve "../x" out of the prefix.
func (d S3Dir) key(name string) (string, error) {
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("object %q in %s: not a plain name", name, d.Location())
	}
	return path.Join(d.prefix, name), nil
}

// List implements ObjectDir.
func (d S3Dir) List(ctx context.Context) ([]string, error) {
	names, _, err := d.listing(ctx)
	return names, err
}

// Dirs implements ObjectDir.
func (d S3Dir) Dirs(ctx context.Context) ([]string, error) {
	_, dirs, err := d.listing(ctx)
	return dirs, err
}

// listing is the objects directly under the prefix and the deeper prefixes: a listing without recursion returns
// each deeper prefix once, as a key ending in '/'.
func (d S3Dir) listing(ctx context.Context) (names, dirs []string, err error) {
	for obj := range d.s.client.ListObjects(ctx, d.s.cfg.Bucket, minio.ListObjectsOptions{Prefix: d.prefix + "/"}) {
		if obj.Err != nil {
			return nil, nil, fmt.Errorf("list %s: %w", d.Location(), obj.Err)
		}
		names, dirs = sortEntry(strings.TrimPrefix(obj.Key, d.prefix+"/"), names, dirs)
	}
	return names, dirs, nil
}

// sortEntry adds a listing's entry relative to its directory to names (a plain name) or dirs (a name and a
// trailing '/'); anything deeper or empty is left out.
func sortEntry(rel string, names, dirs []string) ([]string, []string) {
	if dir, ok := strings.CutSuffix(rel, "/"); ok {
		if dir != "" && !strings.Contains(dir, "/") {
			dirs = append(dirs, dir)
		}
		return names, dirs
	}
	if rel != "" && !strings.Contains(rel, "/") {
		names = append(names, rel)
	}
	return names, dirs
}

// Put implements ObjectDir: a single PUT, which S3 makes visible whole or not at all.
func (d S3Dir) Put(ctx context.Context, name string, b []byte) error {
	key, err := d.key(name)
	if err != nil {
		return err
	}
	_, err = d.s.client.PutObject(ctx, d.s.cfg.Bucket, key, bytes.NewReader(b), int64(len(b)),
		minio.PutObjectOptions{ContentType: "application/x-ndjson"})
	if err != nil {
		return fmt.Errorf("upload %s/%s: %w", d.Location(), name, err)
	}
	return nil
}

// Get implements ObjectDir.
func (d S3Dir) Get(ctx context.Context, name string) ([]byte, error) {
	key, err := d.key(name)
	if err != nil {
		return nil, err
	}
	obj, err := d.s.client.GetObject(ctx, d.s.cfg.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", d.Location(), name, err)
	}
	defer func() { _ = obj.Close() }()
	b, err := io.ReadAll(obj)
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", d.Location(), name, err)
	}
	return b, nil
}

// Delete implements ObjectDir.
func (d S3Dir) Delete(ctx context.Context, name string) error {
	key, err := d.key(name)
	if err != nil {
		return err
	}
	err = d.s.client.RemoveObject(ctx, d.s.cfg.Bucket, key, minio.RemoveObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).StatusCode != http.StatusNotFound {
		return fmt.Errorf("delete %s/%s: %w", d.Location(), name, err)
	}
	return nil
}
