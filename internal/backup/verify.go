package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
)

// ErrChecksumMismatch means a snapshot stream did not end with etcd's sha256 of its content: it is truncated or
// corrupt and must not be stored.
var ErrChecksumMismatch = errors.New("snapshot does not match etcd's trailing sha256")

// Verifier passes a snapshot stream through unchanged while computing the sha256 of all of it (what is
// stored) and, separately, of all but its last 32 bytes (the database), which must equal those last 32 bytes:
// etcd appends its sha256 of the database to every snapshot. At the end of the stream Read returns
// ErrChecksumMismatch instead of io.EOF when they differ, so a writer that commits only on io.EOF (a rename, a
// completed multipart upload) never commits a bad snapshot. Memory use is constant.
type Verifier struct {
	src   io.Reader
	whole hash.Hash
	db    hash.Hash
	tail  []byte // the last (up to) 32 bytes seen, not yet fed to db
	n     int64
	done  bool
	err   error
}

// NewVerifier wraps src.
func NewVerifier(src io.Reader) *Verifier {
	return &Verifier{src: src, whole: sha256.New(), db: sha256.New(), tail: make([]byte, 0, 2*sha256.Size)}
}

// Read implements io.Reader.
func (v *Verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.src.Read(p)
	if n > 0 {
		v.n += int64(n)
		v.whole.Write(p[:n])
		v.feed(p[:n])
	}
	if errors.Is(err, io.EOF) {
		v.err = v.check()
		return n, v.err
	}
	if err != nil {
		v.err = err
	}
	return n, err
}

// feed hashes everything except the most recent 32 bytes into db.
func (v *Verifier) feed(b []byte) {
	if len(b) >= sha256.Size {
		v.db.Write(v.tail)
		v.db.Write(b[:len(b)-sha256.Size])
		v.tail = append(v.tail[:0], b[len(b)-sha256.Size:]...)
		return
	}
	v.tail = append(v.tail, b...)
	if over := len(v.tail) - sha256.Size; over > 0 {
		v.db.Write(v.tail[:over])
		v.tail = append(v.tail[:0], v.tail[over:]...)
	}
}

func (v *Verifier) check() error {
	v.done = true
	// bbolt databases are whole pages; etcd's own restore treats size%512 == 32 as "has a sha256 appended".
	if v.n%512 != sha256.Size || len(v.tail) != sha256.Size {
		return ErrChecksumMismatch
	}
	if !hmacEqual(v.db.Sum(nil), v.tail) {
		return ErrChecksumMismatch
	}
	return io.EOF
}

func hmacEqual(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	var d byte
	for i := range a {
		d |= a[i] ^ b[i]
	}
	return d == 0
}

// Verified reports whether the whole stream was read and matched etcd's checksum.
func (v *Verifier) Verified() bool { return v.done && errors.Is(v.err, io.EOF) }

// Mismatch reports whether the stream ended and did not match etcd's checksum (also when a writer wrapped the
// error beyond errors.Is).
func (v *Verifier) Mismatch() bool { return v.done && errors.Is(v.err, ErrChecksumMismatch) }

// Size is the number of bytes read so far.
func (v *Verifier) Size() int64 { return v.n }

// SHA256 is the hex sha256 of everything read so far: of the stored file, once the stream is done.
func (v *Verifier) SHA256() string { return hex.EncodeToString(v.whole.Sum(nil)) }
