package backup

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// Expected is what a backup's record says of its stored snapshot: the stored object as a whole (after
// compression and encryption) and, when the record has it, the snapshot inside it.
type Expected struct {
	SizeBytes int64
	SHA256    string
	// SnapshotSizeBytes is the size of etcd's snapshot inside the object; 0 when the record predates it (the
	// object is then the snapshot itself).
	SnapshotSizeBytes int64
}

// ErrUnreadable wraps a failure to open or read the stored snapshot (as opposed to reading one that is wrong).
var ErrUnreadable = errors.New("snapshot unreadable")

// ErrCorrupt wraps every way a readable snapshot can be wrong.
var ErrCorrupt = errors.New("snapshot corrupt")

// Checked is what CopyVerified read: the stored object's size and sha256, and the snapshot's size.
type Checked struct {
	SizeBytes         int64
	SHA256            string
	SnapshotSizeBytes int64
	Layers
}

// CopyVerified streams the snapshot in store to w and checks it on the way: the stored object's size and sha256
// must be the record's, and the snapshot inside it (decrypted with codec's keys and decompressed) must end with
// etcd's sha256 of its content and have the recorded size. A snapshot that was truncated, damaged, or replaced
// by another (even a valid one of another cluster) fails with ErrCorrupt; one that cannot be read with
// ErrUnreadable; an encrypted one without a matching key with ErrNoKey or ErrWrongKey, before a byte is written
// to w. Memory use is constant. On error, what was written to w must be discarded.
func CopyVerified(ctx context.Context, store Store, want Expected, codec Codec, w io.Writer) (Checked, error) {
	return copyChecked(ctx, store, &want, codec, w)
}

// CopyMeasured is CopyVerified for a stored snapshot no backup recorded (a standby's seed, found in its source):
// etcd's own checksum is checked, and the size and sha256 it measures are what a record of it then holds.
func CopyMeasured(ctx context.Context, store Store, codec Codec, w io.Writer) (Checked, error) {
	return copyChecked(ctx, store, nil, codec, w)
}

// copyChecked is CopyVerified, comparing with a record only when want is not nil.
func copyChecked(ctx context.Context, store Store, want *Expected, codec Codec, w io.Writer) (Checked, error) {
	r, err := store.Open(ctx)
	if err != nil {
		return Checked{}, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	defer func() { _ = r.Close() }()
	stored := &countingHash{h: sha256.New()}
	var c Checked
	src := &tagged{r: io.TeeReader(r, stored), tag: errSource}
	content, layers, err := codec.Reader(src)
	c.Layers = layers
	if err != nil {
		return c, fmt.Errorf("%s: %w", store.Location(), err)
	}
	defer func() { _ = content.Close() }()
	v := NewVerifier(&tagged{r: content, tag: errDecode})
	_, err = io.Copy(w, v)
	// The layers may end before the object does (bytes appended after a zstd frame): the record's size and
	// sha256 are of the whole object, so read it to the end.
	if err == nil {
		_, err = io.Copy(io.Discard, src)
	}
	c.SizeBytes, c.SHA256, c.SnapshotSizeBytes = stored.n, stored.sum(), v.Size()
	switch {
	case v.Mismatch():
		return c, fmt.Errorf("%w: %s does not end with etcd's sha256 of its content after %d bytes (truncated or damaged)", ErrCorrupt, store.Location(), v.Size())
	case errors.Is(err, errSource):
		return c, fmt.Errorf("%w: read %s: %w", ErrUnreadable, store.Location(), err)
	case errors.Is(err, errDecode):
		return c, fmt.Errorf("%w: %s (damaged): %w", ErrCorrupt, store.Location(), err)
	case err != nil:
		return c, fmt.Errorf("write copy of %s: %w", store.Location(), err)
	case want == nil:
	case c.SizeBytes != want.SizeBytes:
		return c, fmt.Errorf("%w: %s is %d bytes, the backup recorded %d", ErrCorrupt, store.Location(), c.SizeBytes, want.SizeBytes)
	case c.SHA256 != want.SHA256:
		return c, fmt.Errorf("%w: %s has sha256 %s, the backup recorded %s (replaced or damaged)", ErrCorrupt, store.Location(), c.SHA256, want.SHA256)
	case want.SnapshotSizeBytes != 0 && c.SnapshotSizeBytes != want.SnapshotSizeBytes:
		return c, fmt.Errorf("%w: the snapshot in %s is %d bytes, the backup recorded %d", ErrCorrupt, store.Location(), c.SnapshotSizeBytes, want.SnapshotSizeBytes)
	}
	return c, nil
}

var (
	errSource = errors.New("read from the store")
	errDecode = errors.New("decrypt or decompress")
)

// tagged marks the errors of one reader, so that a failure to read the store (unreadable), to decode what
// it returned (corrupt) and to write the copy are told apart. An error already tagged keeps its tag.
type tagged struct {
	r   io.Reader
	tag error
}

func (t *tagged) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, errSource) && !errors.Is(err, errDecode) && !errors.Is(err, ErrChecksumMismatch) {
		err = fmt.Errorf("%w: %w", t.tag, err)
	}
	return n, err
}
