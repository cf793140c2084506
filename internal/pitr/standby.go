package pitr

import (
	"errors"
	"fmt"
	"time"
)

// A standby follows a primary by applying the primary's segments to a cluster of its own. What it has applied is
// the standby's own revision (nothing else writes to it), so what to apply next is decided from that revision and
// the stored segments alone, on every poll: the applier keeps no state that a restart could lose.

// ErrGap means the stored segments after a standby's revision do not start at the next revision: applying what
// follows would skip changes. A standby stops there.
var ErrGap = errors.New("gap in the segment chain")

// GapError names the revisions missing after what the standby has (or can have) applied, and the segment after
// them.
type GapError struct {
	// From and To are the missing revisions (inclusive).
	From, To int64
	// Next is the first segment after the gap.
	Next Ref
}

func (e *GapError) Error() string {
	return fmt.Sprintf("%s: revisions %d..%d are missing before segment %s", ErrGap, e.From, e.To, e.Next)
}

// Unwrap makes errors.Is(err, ErrGap) true.
func (e *GapError) Unwrap() error { return ErrGap }

// NextSegments are the segments that carry a standby at revision applied forward, in chain order, as far as the
// chain goes without a gap; refs need not be sorted. Segments that end at or before what is covered are left out
// (empty heartbeat segments included: they carry time, not changes). When a gap follows, the segments before it
// come with a *GapError: the caller applies those, then stops.
func NextSegments(applied int64, refs []Ref) ([]Ref, error) {
	refs = append([]Ref(nil), refs...)
	Sort(refs)
	var out []Ref
	covered := applied
	for _, r := range refs {
		if r.Last <= covered {
			continue
		}
		if r.First > covered+1 {
			return out, &GapError{From: covered + 1, To: r.First - 1, Next: r}
		}
		out = append(out, r)
		covered = r.Last
	}
	return out, nil
}

// Lag is how far a standby is behind its source.
type Lag struct {
	// SourceRevision and SourceTime are the end of the newest stored segment: the newest revision stored, and
	// the latest time the primary's follower knew the key space to be at it.
	SourceRevision int64
	SourceTime     time.Time
	// Revisions is SourceRevision minus the applied revision (0 when the standby is ahead: a snapshot taken a
	// moment after the newest segment was stored).
	Revisions int64
	// Behind is SourceTime minus the latest time a segment shows the primary at or before the applied revision:
	// how old, on the primary follower's clock, the state the standby holds is. Both times come from the same
	// clock, so no skew between the sites enters it. 0 when caught up.
	Behind time.Duration
	// Known is false when no stored segment ends at or before the applied revision, so Behind could not be
	// measured (its segments were pruned, or the standby's snapshot is newer than every segment).
	Known bool
}

// LagOf measures a standby at revision applied against the stored segments.
func LagOf(applied int64, refs []Ref) Lag {
	var l Lag
	var at time.Time
	for _, r := range refs {
		if r.Last > l.SourceRevision || r.Last == l.SourceRevision && r.LastTime.After(l.SourceTime) {
			l.SourceRevision, l.SourceTime = r.Last, r.LastTime
		}
		if r.Last <= applied && r.LastTime.After(at) {
			at, l.Known = r.LastTime, true
		}
	}
	l.Revisions = max(l.SourceRevision-applied, 0)
	switch {
	case l.Revisions == 0:
		l.Behind, l.Known = 0, true
	case l.Known:
		l.Behind = max(l.SourceTime.Sub(at), 0)
	}
	return l
}
