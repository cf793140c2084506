package pitr

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Format names the segment encoding; a parser refuses any other.
const Format = "steward.dev/etcd-segment/v1"

// EventType is what one change did to one key.
type EventType string

// Event types, as etcd's watch reports them.
const (
	Put    EventType = "PUT"
	Delete EventType = "DELETE"
)

// Event is one change to one key, as the follower's watch saw it. Every event of one revision came from one etcd
// transaction; a replay applies them together, in order, so that the revision numbers come out the same.
type Event struct {
	// Revision is the key-space revision the change made (the key's mod_revision for a put).
	Revision int64     `json:"rev"`
	Type     EventType `json:"type"`
	Key      []byte    `json:"key"`
	// Value is a put's value.
	Value []byte `json:"value,omitempty"`
	// Lease is the ID of the lease a put attached the key to (0: none); LeaseTTL its granted TTL in seconds
	// when the follower could still read it (0: the lease was gone by then).
	Lease    int64 `json:"lease,omitempty"`
	LeaseTTL int64 `json:"leaseTTL,omitempty"`
	// Observed is when the follower received the change: the time a point-in-time target is compared with.
	Observed time.Time `json:"observed"`
}

// Header describes a segment: the revisions it covers and when they were observed.
type Header struct {
	Format string `json:"format"`
	// ClusterID (hex) of the etcd cluster the changes came from. Revisions of different clusters never chain.
	ClusterID string `json:"clusterID"`
	// First and Last bound the revisions the segment covers: every change with a revision in [First, Last] is in
	// it. Last may be First-1: a segment with no change, written to show that nothing changed until LastTime.
	First int64 `json:"first"`
	Last  int64 `json:"last"`
	// FirstTime and LastTime: when the first change was observed (or, with none, when the segment began), and
	// the latest time the follower knew the key space was still at revision Last.
	FirstTime time.Time `json:"firstTime"`
	LastTime  time.Time `json:"lastTime"`
	// Events is how many events follow the header.
	Events int `json:"events"`
}

// Segment is a header and its events.
type Segment struct {
	Header Header
	Events []Event
}

type trailer struct {
	SHA256 string `json:"sha256"`
}

// ErrCorrupt wraps every reason a segment cannot be trusted: a checksum that does not match, a truncated or
// malformed file, events outside the header's revisions or out of order.
var ErrCorrupt = errors.New("segment corrupt")

// MaxLine bounds one encoded line (an event carries at most one etcd request's worth of data; etcd's own limit,
// --max-request-bytes, is 1.5 MiB by default and rarely raised above a few MiB).
const MaxLine = 64 << 20

// Encode writes a segment as lines of JSON: the header, one line per event, and a trailer with the sha256 of
// every byte before it. It checks what Parse checks, so that nothing unreadable is ever stored.
func Encode(s Segment) ([]byte, error) {
	s.Header.Format = Format
	s.Header.Events = len(s.Events)
	if err := check(s); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(s.Header); err != nil {
		return nil, fmt.Errorf("encode segment header: %w", err)
	}
	for i := range s.Events {
		if err := enc.Encode(&s.Events[i]); err != nil {
			return nil, fmt.Errorf("encode event %d: %w", i, err)
		}
	}
	return append(buf.Bytes(), trailerFor(buf.Bytes())...), nil
}

// Parse reads a segment Encode wrote and checks everything: the trailer's checksum first, then the format, the
// header's revisions and times, the event count, and that events are in revision order within [First, Last].
func Parse(b []byte) (Segment, error) {
	body, last, ok := cutLastLine(b)
	if !ok {
		return Segment{}, fmt.Errorf("%w: no trailer (truncated?)", ErrCorrupt)
	}
	var tr trailer
	if err := json.Unmarshal(last, &tr); err != nil || tr.SHA256 == "" {
		return Segment{}, fmt.Errorf("%w: no checksum trailer (truncated?)", ErrCorrupt)
	}
	sum := sha256.Sum256(body)
	if hex.EncodeToString(sum[:]) != tr.SHA256 {
		return Segment{}, fmt.Errorf("%w: sha256 %x, trailer says %s", ErrCorrupt, sum, tr.SHA256)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	var s Segment
	if !sc.Scan() {
		return Segment{}, fmt.Errorf("%w: no header", ErrCorrupt)
	}
	if err := strictUnmarshal(sc.Bytes(), &s.Header); err != nil {
		return Segment{}, fmt.Errorf("%w: header: %w", ErrCorrupt, err)
	}
	if s.Header.Format != Format {
		return Segment{}, fmt.Errorf("%w: format %q, want %q", ErrCorrupt, s.Header.Format, Format)
	}
	if s.Header.Events < 0 || s.Header.Events > len(body)/2 {
		return Segment{}, fmt.Errorf("%w: header claims %d events", ErrCorrupt, s.Header.Events)
	}
	s.Events = make([]Event, 0, s.Header.Events)
	for sc.Scan() {
		var e Event
		if err := strictUnmarshal(sc.Bytes(), &e); err != nil {
			return Segment{}, fmt.Errorf("%w: event %d: %w", ErrCorrupt, len(s.Events), err)
		}
		s.Events = append(s.Events, e)
	}
	if err := sc.Err(); err != nil {
		return Segment{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err := check(s); err != nil {
		return Segment{}, err
	}
	return s, nil
}

// check is the segment's inner consistency, shared by Encode and Parse.
func check(s Segment) error {
	h := s.Header
	switch {
	case h.First < 1:
		return fmt.Errorf("%w: first revision %d", ErrCorrupt, h.First)
	case h.Last < h.First-1:
		return fmt.Errorf("%w: revisions %d..%d", ErrCorrupt, h.First, h.Last)
	case h.LastTime.Before(h.FirstTime):
		return fmt.Errorf("%w: last time %s before first time %s", ErrCorrupt, h.LastTime, h.FirstTime)
	case h.Events != len(s.Events):
		return fmt.Errorf("%w: header says %d events, found %d", ErrCorrupt, h.Events, len(s.Events))
	case h.ClusterID == "":
		return fmt.Errorf("%w: no cluster ID", ErrCorrupt)
	}
	prev := h.First
	for i, e := range s.Events {
		switch {
		case e.Revision < prev || e.Revision > h.Last:
			return fmt.Errorf("%w: event %d at revision %d outside %d..%d or out of order", ErrCorrupt, i, e.Revision, prev, h.Last)
		case e.Type != Put && e.Type != Delete:
			return fmt.Errorf("%w: event %d: type %q", ErrCorrupt, i, e.Type)
		case len(e.Key) == 0:
			return fmt.Errorf("%w: event %d: empty key", ErrCorrupt, i)
		case e.Type == Delete && (len(e.Value) > 0 || e.Lease != 0):
			return fmt.Errorf("%w: event %d: a delete with a value or lease", ErrCorrupt, i)
		}
		prev = e.Revision
	}
	return nil
}

func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data")
	}
	return nil
}

// cutLastLine splits b (which must end with a newline) into everything up to and including the next-to-last
// newline, and the last line without its newline.
func cutLastLine(b []byte) (body, last []byte, ok bool) {
	if len(b) == 0 || b[len(b)-1] != '\n' {
		return nil, nil, false
	}
	i := bytes.LastIndexByte(b[:len(b)-1], '\n')
	if i < 0 {
		return nil, nil, false
	}
	return b[:i+1], b[i+1 : len(b)-1], true
}

// Revisions groups events by revision, in order: each group is one etcd transaction to replay.
func Revisions(events []Event) [][]Event {
	var out [][]Event
	for i := 0; i < len(events); {
		j := i + 1
		for j < len(events) && events[j].Revision == events[i].Revision {
			j++
		}
		out = append(out, events[i:j])
		i = j
	}
	return out
}

// trailerFor is the checksum line Encode appends to body.
func trailerFor(body []byte) []byte {
	sum := sha256.Sum256(body)
	b, _ := json.Marshal(trailer{SHA256: hex.EncodeToString(sum[:])})
	return append(b, '\n')
}
