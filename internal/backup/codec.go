package backup

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/klauspost/compress/zstd"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Stored formats are standard files, so that a human holding the key can read a backup without Steward: an
// encrypted object is an age file (age -d), a compressed one a zstd frame (zstd -d), and inside both is etcd's
// snapshot (or a segment) as etcd wrote it. Compression comes first, because encrypted bytes do not compress.
// Readers recognise each layer by its magic, so backups written before compression existed read as they are.

var (
	ageMagic  = []byte("age-encryption.org/v1\n")
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// ErrNoKey means a backup is encrypted and no key was given to read it.
var ErrNoKey = errors.New("the backup is encrypted and no encryption key was given")

// ErrWrongKey means a backup is encrypted to a key none of those given matches.
var ErrWrongKey = errors.New("none of the encryption keys given opens the backup")

// Codec is how new objects are written: compressed or not, encrypted to a recipient or not. Identities are the
// keys readers try, the current one and those kept for older backups.
type Codec struct {
	// Compression is spec.compression; empty is the default, Zstd.
	Compression etcdv1alpha1.BackupCompression
	// Recipient encrypts new objects; nil writes them in the clear.
	Recipient age.Recipient
	// RecipientName is the recipient's public form (age1...), recorded in the backup's status.
	RecipientName string
	Identities    []age.Identity
}

// ParseKeys reads an age identity file (what age-keygen writes: AGE-SECRET-KEY-1... lines, comments allowed).
// The first identity encrypts new backups; all of them decrypt, which is how a key is rotated: the new key
// first, the old ones after it for as long as backups encrypted to them are kept.
func ParseKeys(text string) (Codec, error) {
	ids, err := age.ParseIdentities(strings.NewReader(text))
	if err != nil {
		return Codec{}, fmt.Errorf("encryption key: %w", err)
	}
	first, ok := ids[0].(*age.X25519Identity)
	if !ok {
		return Codec{}, errors.New("encryption key: the first identity must be an X25519 identity (AGE-SECRET-KEY-1...)")
	}
	r := first.Recipient()
	return Codec{Recipient: r, RecipientName: r.String(), Identities: ids}, nil
}

// Encrypted reports whether new objects are encrypted.
func (c Codec) Encrypted() bool { return c.Recipient != nil }

// compressed reports whether new objects are compressed: unless compression is None, they are.
func (c Codec) compressed() bool { return c.Compression != etcdv1alpha1.CompressionNone }

// StoredCompression is what status.compression records for an object written with c.
func (c Codec) StoredCompression() etcdv1alpha1.BackupCompression {
	if c.compressed() {
		return etcdv1alpha1.CompressionZstd
	}
	return etcdv1alpha1.CompressionNone
}

// Writer wraps w so that what is written to it is stored in c's format; Close ends the format (the zstd frame,
// age's last chunk) and must be called before w is committed. It does not close w.
func (c Codec) Writer(w io.Writer) (io.WriteCloser, error) {
	var closers []io.Closer
	out := w
	if c.Encrypted() {
		ew, err := age.Encrypt(w, c.Recipient)
		if err != nil {
			return nil, fmt.Errorf("encrypt: %w", err)
		}
		closers = append(closers, ew)
		out = ew
	}
	if c.compressed() {
		// SpeedDefault (zstd level 3) keeps the Job at disk speed on one core; concurrency 1 keeps its memory small.
		zw, err := zstd.NewWriter(out, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("compress: %w", err)
		}
		closers = append([]io.Closer{zw}, closers...)
		out = zw
	}
	return &layered{w: out, closers: closers}, nil
}

type layered struct {
	w       io.Writer
	closers []io.Closer // innermost first
}

func (l *layered) Write(p []byte) (int, error) { return l.w.Write(p) }

func (l *layered) Close() error {
	for _, c := range l.closers {
		if err := c.Close(); err != nil {
			return err
		}
	}
	return nil
}

// Encode returns b in c's format: a segment, written whole.
func (c Codec) Encode(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := c.Writer(&buf)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Layers is what a reader found a stored object to be.
type Layers struct {
	Encrypted, Compressed bool
}

// Reader returns what r holds inside its layers: it decrypts an age file with c's identities (ErrNoKey without
// any, ErrWrongKey when none matches) and decompresses a zstd frame; anything else is returned as it is (a
// snapshot or segment stored before compression existed). The caller checks the content: age authenticates
// every chunk and fails on a truncated file, zstd checks its frame's checksum, and the snapshot's own sha256
// or the segment's trailer decides the rest. Close releases the decompressor.
func (c Codec) Reader(r io.Reader) (io.ReadCloser, Layers, error) {
	var l Layers
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(len(ageMagic))
	var inner io.Reader = br
	if bytes.HasPrefix(head, ageMagic) {
		l.Encrypted = true
		if len(c.Identities) == 0 {
			return nil, l, ErrNoKey
		}
		dr, err := age.Decrypt(br, c.Identities...)
		if err != nil {
			var noMatch *age.NoIdentityMatchError
			if errors.As(err, &noMatch) {
				return nil, l, ErrWrongKey
			}
			return nil, l, fmt.Errorf("%w: read the encryption header: %w", ErrCorrupt, err)
		}
		ibr := bufio.NewReaderSize(dr, 64<<10)
		head, _ = ibr.Peek(len(zstdMagic))
		inner = ibr
	}
	if !bytes.HasPrefix(head, zstdMagic) {
		return io.NopCloser(inner), l, nil
	}
	l.Compressed = true
	// The window cap bounds the decoder's memory whatever a damaged or hostile frame claims.
	zr, err := zstd.NewReader(inner, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20), zstd.WithDecoderLowmem(true))
	if err != nil {
		return nil, l, fmt.Errorf("%w: start decompression: %w", ErrCorrupt, err)
	}
	return zstdCloser{zr}, l, nil
}

type zstdCloser struct{ *zstd.Decoder }

func (z zstdCloser) Close() error { z.Decoder.Close(); return nil }

// Decode returns the content of an object read whole (a segment); maxSize bounds what it may decompress to.
func (c Codec) Decode(b []byte, maxSize int64) ([]byte, error) {
	r, _, err := c.Reader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	out, err := io.ReadAll(io.LimitReader(r, maxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if int64(len(out)) > maxSize {
		return nil, fmt.Errorf("%w: decodes to more than %d bytes", ErrCorrupt, maxSize)
	}
	return out, nil
}

// countingHash counts and hashes what passes through it: the stored object's size and sha256.
type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.h.Write(p)
	c.n += int64(len(p))
	return len(p), nil
}

func (c *countingHash) sum() string { return hex.EncodeToString(c.h.Sum(nil)) }

// Stored is what was written to a store: its location and the stored object's size and sha256 (after
// compression and encryption).
type Stored struct {
	Location  string
	SizeBytes int64
	SHA256    string
}

// PutEncoded stores what src yields in c's format. Like Store.Put it commits only when src ends with io.EOF:
// any error of src (a checksum mismatch) or of the encoding aborts the write and leaves nothing stored.
func PutEncoded(ctx context.Context, store Store, c Codec, src io.Reader) (Stored, error) {
	pr, pw := io.Pipe()
	stored := &countingHash{h: sha256.New()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w, err := c.Writer(io.MultiWriter(pw, stored))
		if err != nil {
			_ = pw.CloseWithError(err)
			return
		}
		if _, err := io.Copy(w, src); err != nil {
			_ = pw.CloseWithError(err)
			return
		}
		// Closing the format writes its last bytes; only then does the store see the end of the stream.
		_ = pw.CloseWithError(w.Close())
	}()
	loc, err := store.Put(ctx, pr)
	// Unblocks the encoder if the store stopped reading early.
	_ = pr.CloseWithError(errors.New("the store stopped reading"))
	<-done
	if err != nil {
		return Stored{}, err
	}
	return Stored{Location: loc, SizeBytes: stored.n, SHA256: stored.sum()}, nil
}

// MaxSegmentBytes bounds what one stored segment may decode to: far above what a follower writes (it stores a
// segment every few seconds or ten thousand changes), low enough that a damaged or hostile object cannot make
// a reader allocate without end.
const MaxSegmentBytes = 2 << 30

// EncodedDir is a directory whose objects are written in Codec's format and read in any (Codec.Reader): a
// continuous backup's segments.
type EncodedDir struct {
	ObjectDir
	Codec Codec
}

// Put implements ObjectDir.
func (d EncodedDir) Put(ctx context.Context, name string, b []byte) error {
	e, err := d.Codec.Encode(b)
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	return d.ObjectDir.Put(ctx, name, e)
}

// Get implements ObjectDir.
func (d EncodedDir) Get(ctx context.Context, name string) ([]byte, error) {
	b, err := d.ObjectDir.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	out, err := d.Codec.Decode(b, MaxSegmentBytes)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", d.Location(), name, err)
	}
	return out, nil
}

// Succeeded is the result of a snapshot of snapshotSize bytes stored as st with c: the fields of the stored
// object; the caller adds where the snapshot came from.
func (st Stored) Succeeded(c Codec, snapshotSize int64) Result {
	return Result{Succeeded: true, Location: st.Location, SizeBytes: st.SizeBytes, SHA256: st.SHA256,
		SnapshotSizeBytes: snapshotSize, Compression: string(c.StoredCompression()), EncryptionRecipient: c.RecipientName}
}

// Throughput says how a snapshot of snapshotSize bytes was stored as storedSize bytes in elapsed: the ratio
// and the rate the snapshot was read at.
func Throughput(snapshotSize, storedSize int64, elapsed time.Duration) string {
	const mib = 1 << 20
	ratio := 0.0
	if storedSize > 0 {
		ratio = float64(snapshotSize) / float64(storedSize)
	}
	return fmt.Sprintf("snapshot of %.1f MiB stored as %.1f MiB (ratio %.2f) in %s, %.1f MiB/s",
		float64(snapshotSize)/mib, float64(storedSize)/mib, ratio, elapsed.Round(time.Millisecond), float64(snapshotSize)/mib/max(elapsed.Seconds(), 0.001))
}

// ReadThroughput says how a stored snapshot was read back: its layers, sizes and the rate.
func ReadThroughput(c Checked, elapsed time.Duration) string {
	const mib = 1 << 20
	layers := "plain"
	switch {
	case c.Encrypted && c.Compressed:
		layers = "encrypted and compressed"
	case c.Encrypted:
		layers = "encrypted"
	case c.Compressed:
		layers = "compressed"
	}
	return fmt.Sprintf("read %.1f MiB (%s) holding a verified snapshot of %.1f MiB in %s, %.1f MiB/s of snapshot",
		float64(c.SizeBytes)/mib, layers, float64(c.SnapshotSizeBytes)/mib, elapsed.Round(time.Millisecond), float64(c.SnapshotSizeBytes)/mib/max(elapsed.Seconds(), 0.001))
}
