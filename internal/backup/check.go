package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Expected is what a backup's record says of its stored snapshot: the file as a whole.
type Expected struct {
	SizeBytes int64
	SHA256    string
}

// ErrUnreadable wraps a failure to open or read the stored snapshot (as opposed to reading one that is wrong).
var ErrUnreadable = errors.New("snapshot unreadable")

// ErrCorrupt wraps every way a readable snapshot can be wrong.
var ErrCorrupt = errors.New("snapshot corrupt")

// CopyVerified streams the snapshot in store to w and checks it on the way: it must end with etcd's sha256 of
// its content, and its size and sha256 must be the record's. A snapshot that was truncated, damaged, or replaced
// by another (even a valid one of another cluster) fails with ErrCorrupt; one that cannot be read with
// ErrUnreadable. Memory use is constant. On error, what was written to w must be discarded.
func CopyVerified(ctx context.Context, store Store, want Expected, w io.Writer) (size int64, sha string, err error) {
	r, err := store.Open(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	defer func() { _ = r.Close() }()
	v := NewVerifier(r)
	_, err = io.Copy(w, v)
	size, sha = v.Size(), v.SHA256()
	switch {
	case v.Mismatch():
		return size, sha, fmt.Errorf("%w: %s does not end with etcd's sha256 of its content after %d bytes (truncated or damaged)", ErrCorrupt, store.Location(), size)
	case err != nil && !v.Verified():
		return size, sha, fmt.Errorf("%w: read %s: %w", ErrUnreadable, store.Location(), err)
	case err != nil:
		return size, sha, fmt.Errorf("write copy of %s: %w", store.Location(), err)
	case size != want.SizeBytes:
		return size, sha, fmt.Errorf("%w: %s is %d bytes, the backup recorded %d", ErrCorrupt, store.Location(), size, want.SizeBytes)
	case sha != want.SHA256:
		return size, sha, fmt.Errorf("%w: %s has sha256 %s, the backup recorded %s (replaced or damaged)", ErrCorrupt, store.Location(), sha, want.SHA256)
	}
	return size, sha, nil
}
