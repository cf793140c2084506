package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Result is what the backup agent reports in its container's termination message, and the controller copies
// into the EtcdBackup's status. Kubernetes keeps at most 4096 bytes of a termination message, so messages are
// cut to fit (see Encode).
type Result struct {
	// Succeeded is true when the snapshot is stored under its final name, verified.
	Succeeded bool `json:"succeeded"`
	// Reason is a CamelCase code when the backup failed (one of the Reason constants); Message says more.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`

	Member   string `json:"member,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	Location string `json:"location,omitempty"`
	// Path is the object's path or key in its store, when the agent chose the object (a standby's seed: the
	// source's snapshot it starts from).
	Path           string `json:"path,omitempty"`
	SizeBytes      int64  `json:"sizeBytes,omitempty"`
	SHA256         string `json:"sha256,omitempty"`
	Revision       int64  `json:"revision,omitempty"`
	EtcdVersion    string `json:"etcdVersion,omitempty"`
	StorageVersion string `json:"storageVersion,omitempty"`
	ClusterID      string `json:"clusterID,omitempty"`
	// SnapshotSizeBytes is the snapshot's size before compression and encryption (SizeBytes and SHA256 are of
	// the stored object); Compression and EncryptionRecipient how it was stored.
	SnapshotSizeBytes   int64  `json:"snapshotSizeBytes,omitempty"`
	Compression         string `json:"compression,omitempty"`
	EncryptionRecipient string `json:"encryptionRecipient,omitempty"`
	// Space is the destination volume's space after the attempt, success or failure (volume destinations).
	Space Space `json:"space,omitzero"`
}

// Space is a volume's size and what a new file may still take, in bytes.
type Space struct {
	Available int64 `json:"available"`
	Capacity  int64 `json:"capacity"`
}

// MaxResultBytes is the most of a termination message Kubernetes keeps.
const MaxResultBytes = 4096

// Encode renders r as one line of JSON no longer than MaxResultBytes, shortening the message if needed.
func Encode(r Result) []byte {
	for {
		b, err := json.Marshal(r)
		if err != nil {
			// Result holds only strings, numbers and a bool: Marshal cannot fail.
			panic(fmt.Sprintf("encode result: %v", err))
		}
		if len(b) <= MaxResultBytes || r.Message == "" {
			return b
		}
		cut := len(r.Message) - (len(b) - MaxResultBytes) - 3
		if cut < 0 {
			cut = 0
		}
		r.Message = strings.ToValidUTF8(r.Message[:cut], "") + "..."
		if cut == 0 {
			r.Message = ""
		}
	}
}

// ErrNoResult means the termination message holds no result (the container died before writing one).
var ErrNoResult = errors.New("no result in termination message")

// ParseResult reads a termination message. It is strict where a wrong answer would mislead a restore: a
// success must name its location, size and a 64-hex-digit sha256; a failure must carry a reason.
func ParseResult(msg string) (Result, error) {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return Result{}, ErrNoResult
	}
	var r Result
	dec := json.NewDecoder(strings.NewReader(msg))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Result{}, fmt.Errorf("parse termination message: %w", err)
	}
	if dec.More() {
		return Result{}, errors.New("parse termination message: trailing data after the result")
	}
	if sp := r.Space; sp != (Space{}) && (sp.Capacity <= 0 || sp.Available < 0 || sp.Available > sp.Capacity) {
		return Result{}, fmt.Errorf("result reports an impossible volume space (%d of %d bytes free): %q", sp.Available, sp.Capacity, msg)
	}
	if r.Succeeded {
		if r.Location == "" || r.SizeBytes <= 0 || !isHex(r.SHA256, 64) || r.Revision < 0 {
			return Result{}, fmt.Errorf("result claims success without location, size and sha256: %q", msg)
		}
		return r, nil
	}
	if r.Reason == "" {
		return Result{}, fmt.Errorf("result reports failure without a reason: %q", msg)
	}
	return r, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
