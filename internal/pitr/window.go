package pitr

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Snapshot is a full snapshot a chain can start from: a Complete backup of the cluster.
type Snapshot struct {
	// Name of the EtcdBackup.
	Name string
	// Revision the backup recorded: the snapshot holds every change up to it (and possibly a few after, which a
	// replay skips).
	Revision int64
	// Time the snapshot began.
	Time time.Time
}

// Candidate is a full snapshot a point-in-time backup may start from, as its EtcdBackup recorded it: the
// operator passes them to the agent (as JSON), which plans with them and reads the chosen one.
type Candidate struct {
	Name string `json:"name"`
	// Path of the snapshot on the destination (PVC path, S3, GCS or Azure key).
	Path      string `json:"path"`
	SizeBytes int64  `json:"size"`
	SHA256    string `json:"sha256"`
	// SnapshotSizeBytes is the snapshot's size inside the stored object (0: not recorded).
	SnapshotSizeBytes int64     `json:"snapshotSize,omitempty"`
	Revision          int64     `json:"revision"`
	Time              time.Time `json:"time"`
}

// Target is the point to restore to: a revision, a time, or (both zero) the latest point the segments reach.
type Target struct {
	Revision int64
	Time     time.Time
}

// Latest reports whether the target is the end of the recoverable window.
func (t Target) Latest() bool { return t.Revision == 0 && t.Time.IsZero() }

func (t Target) String() string {
	switch {
	case t.Revision > 0:
		return fmt.Sprintf("revision %d", t.Revision)
	case !t.Time.IsZero():
		return "time " + t.Time.UTC().Format(time.RFC3339Nano)
	}
	return "the latest point"
}

// Chain is a snapshot and the segments that carry it forward without a gap.
type Chain struct {
	Snapshot Snapshot
	// Segments to read and replay, in order. Empty segments, which only carry time forward, are left out.
	Segments []Ref
	// End is the last revision the chain covers; EndTime the latest time the key space is known to have still
	// been at End.
	End     int64
	EndTime time.Time
}

// Window is the stretch a chain makes recoverable: from its snapshot to its end.
func (c Chain) Window() Window {
	return Window{FromRevision: c.Snapshot.Revision, FromTime: c.Snapshot.Time, ToRevision: c.End, ToTime: c.EndTime}
}

// Window is a recoverable stretch: every revision and time between From and To can be restored.
type Window struct {
	FromRevision, ToRevision int64
	FromTime, ToTime         time.Time
}

func (w Window) String() string {
	return fmt.Sprintf("revisions %d..%d (%s..%s)", w.FromRevision, w.ToRevision,
		w.FromTime.UTC().Format(time.RFC3339), w.ToTime.UTC().Format(time.RFC3339))
}

// ErrOutsideWindow is a target no chain reaches.
var ErrOutsideWindow = errors.New("target outside the recoverable window")

// Sort puts segment refs in chain order.
func Sort(refs []Ref) {
	sort.Slice(refs, func(i, j int) bool {
		a, b := refs[i], refs[j]
		if a.First != b.First {
			return a.First < b.First
		}
		if a.Last != b.Last {
			return a.Last < b.Last
		}
		return a.LastTime.Before(b.LastTime)
	})
}

// ChainFrom follows segments from a snapshot as far as they go without a gap. refs must be sorted (Sort).
// Segments that overlap what is covered already are still used for what they add; a segment that starts after
// the covered revision + 1 is a gap, and the chain ends before it.
func ChainFrom(s Snapshot, refs []Ref) Chain {
	c := Chain{Snapshot: s, End: s.Revision, EndTime: s.Time}
	for _, r := range refs {
		if r.First > c.End+1 {
			break
		}
		if r.Last < c.End {
			continue
		}
		if r.Last > c.End {
			c.Segments = append(c.Segments, r)
			c.End = r.Last
			c.EndTime = r.LastTime
			continue
		}
		// r.Last == c.End: nothing new to replay, but the key space is known unchanged until r.LastTime.
		if r.LastTime.After(c.EndTime) {
			c.EndTime = r.LastTime
		}
	}
	return c
}

// Reaches reports whether the chain covers the target, and whether its snapshot is not already past it.
func (c Chain) Reaches(t Target) bool {
	switch {
	case t.Revision > 0:
		return c.Snapshot.Revision <= t.Revision && t.Revision <= c.End
	case !t.Time.IsZero():
		return !c.Snapshot.Time.After(t.Time) && !t.Time.After(c.EndTime)
	}
	return true
}

// Plan lists the chains that reach the target, the best first: the newest snapshot (least to replay), and for
// the latest point only chains that reach the newest end. A replay tries them in order, since a snapshot can
// turn out to hold changes past the target (it records the revision from just before it began). With no chain,
// the error names every recoverable window, or says there is none.
func Plan(snaps []Snapshot, refs []Ref, t Target) ([]Chain, error) {
	refs = append([]Ref(nil), refs...)
	Sort(refs)
	snaps = append([]Snapshot(nil), snaps...)
	sort.SliceStable(snaps, func(i, j int) bool { return snaps[i].Revision > snaps[j].Revision })
	var chains, ok []Chain
	var latest, stored int64
	for _, s := range snaps {
		c := ChainFrom(s, refs)
		chains = append(chains, c)
		latest = max(latest, c.End)
	}
	for _, r := range refs {
		stored = max(stored, r.Last)
	}
	if len(chains) == 0 {
		return nil, fmt.Errorf("%w: %s: no complete snapshot to start from", ErrOutsideWindow, t)
	}
	if t.Latest() && latest < stored {
		// The newest stored change lies beyond a gap: "the latest point" would silently be an older one.
		return nil, fmt.Errorf("%w: %s: the segments reach revision %d, but no snapshot reaches past %d (%s); give a revision or time in %s",
			ErrOutsideWindow, t, stored, latest, gapAfter(latest, refs), describe(Windows(chains)))
	}
	for _, c := range chains {
		if t.Latest() && c.End < latest {
			continue
		}
		if c.Reaches(t) {
			ok = append(ok, c)
		}
	}
	if len(ok) > 0 {
		return ok, nil
	}
	return nil, fmt.Errorf("%w: %s is not in %s", ErrOutsideWindow, t, describe(Windows(chains)))
}

// gapAfter describes the revisions missing after revision end (refs sorted).
func gapAfter(end int64, refs []Ref) string {
	for _, r := range refs {
		if r.First > end+1 {
			return fmt.Sprintf("revisions %d..%d are missing", end+1, r.First-1)
		}
	}
	return fmt.Sprintf("no segment starts at revision %d", end+1)
}

// Windows merges the chains' windows into the distinct recoverable stretches, oldest first.
func Windows(chains []Chain) []Window {
	ws := make([]Window, 0, len(chains))
	for _, c := range chains {
		ws = append(ws, c.Window())
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].FromRevision < ws[j].FromRevision })
	var out []Window
	for _, w := range ws {
		if n := len(out); n > 0 && w.FromRevision <= out[n-1].ToRevision {
			if w.ToRevision > out[n-1].ToRevision {
				out[n-1].ToRevision, out[n-1].ToTime = w.ToRevision, w.ToTime
			} else if w.ToRevision == out[n-1].ToRevision && w.ToTime.After(out[n-1].ToTime) {
				out[n-1].ToTime = w.ToTime
			}
			continue
		}
		out = append(out, w)
	}
	return out
}

func describe(ws []Window) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.String()
	}
	if len(parts) == 1 {
		return "the recoverable window " + parts[0]
	}
	return "the recoverable windows " + strings.Join(parts, ", ")
}

// Replayable returns the events of a chain's segments that a replay onto a snapshot at revision from applies to
// reach the target: revisions after from, up to the target's revision or observed no later than its time.
// The segments must be given in chain order.
func Replayable(segments []Segment, from int64, t Target) []Event {
	var out []Event
	covered := from
	for _, s := range segments {
		// A segment overlapping the one before it repeats revisions already taken from that one.
		before := covered
		for _, e := range s.Events {
			if e.Revision <= before {
				continue
			}
			if t.Revision > 0 && e.Revision > t.Revision || !t.Time.IsZero() && e.Observed.After(t.Time) {
				return out
			}
			out = append(out, e)
		}
		covered = max(covered, s.Header.Last)
	}
	return out
}

// SnapshotPast reports whether a snapshot restored at revision actual holds changes a time target excludes: a
// change the segments saw after the target time with a revision the snapshot already has. A revision target
// simply compares revisions.
func SnapshotPast(segments []Segment, actual int64, t Target) bool {
	if t.Revision > 0 {
		return actual > t.Revision
	}
	if t.Time.IsZero() {
		return false
	}
	for _, s := range segments {
		for _, e := range s.Events {
			if e.Revision <= actual && e.Observed.After(t.Time) {
				return true
			}
		}
	}
	return false
}
