package pitr

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// FuzzParse: no input makes Parse panic, and whatever it accepts encodes back to a segment it accepts again
// with the same header and events.
func FuzzParse(f *testing.F) {
	good, _ := Encode(testSegment())
	f.Add(good)
	empty, _ := Encode(Segment{Header: Header{ClusterID: "1", First: 5, Last: 4, FirstTime: t0, LastTime: t0}})
	f.Add(empty)
	f.Add([]byte("{}\n{}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			return
		}
		again, err := Encode(s)
		if err != nil {
			t.Fatalf("Parse accepted what Encode refuses: %v", err)
		}
		s2, err := Parse(again)
		if err != nil || s2.Header.First != s.Header.First || s2.Header.Last != s.Header.Last || len(s2.Events) != len(s.Events) {
			t.Fatalf("round trip: %v %+v", err, s2.Header)
		}
		for i := range s.Events {
			if !bytes.Equal(s.Events[i].Key, s2.Events[i].Key) || !bytes.Equal(s.Events[i].Value, s2.Events[i].Value) {
				t.Fatalf("event %d changed in a round trip", i)
			}
		}
	})
}

// FuzzParseName: names either parse into a Ref whose own name parses back the same, or are refused.
func FuzzParseName(f *testing.F) {
	f.Add(Name(testSegment().Header))
	f.Add("seg-00000000000000000001-00000000000000000000-20261125T120000.000000000Z.seg")
	f.Add(".seg-x.partial")
	f.Fuzz(func(t *testing.T, name string) {
		r, ok := ParseName(name)
		if !ok {
			return
		}
		back, ok := ParseName(Name(Header{First: r.First, Last: r.Last, LastTime: r.LastTime}))
		if !ok || back.First != r.First || back.Last != r.Last || !back.LastTime.Equal(r.LastTime) {
			t.Fatalf("%q -> %+v -> %+v", name, r, back)
		}
	})
}

// FuzzPlan: whatever segments and snapshots there are, every chain Plan returns reaches the target, starts at a
// snapshot at or before it, and its segments are gap-free from the snapshot.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{1, 5, 6, 9, 10, 20}, int64(100), int64(7))
	f.Fuzz(func(t *testing.T, spans []byte, snapRev int64, target int64) {
		if snapRev < 0 || snapRev > 1<<40 || target < 0 {
			return
		}
		var refs []Ref
		next := snapRev + 1
		for i := 0; i+1 < len(spans); i += 2 {
			first := next + int64(spans[i]%4) - 1 // overlaps, continues, or leaves gaps
			if first < 1 {
				first = 1
			}
			last := first + int64(spans[i+1]%8) - 1
			refs = append(refs, Ref{First: first, Last: last, LastTime: t0.Add(time.Duration(i) * time.Second)})
			next = last + 1
		}
		chains, err := Plan([]Snapshot{{Revision: snapRev, Time: t0}}, refs, Target{Revision: target})
		if err != nil {
			return
		}
		for _, c := range chains {
			covered := c.Snapshot.Revision
			if covered > target && target > 0 {
				t.Fatalf("snapshot %d past target %d", covered, target)
			}
			for _, r := range c.Segments {
				if r.First > covered+1 {
					t.Fatalf("gap before %+v (covered %d)", r, covered)
				}
				covered = max(covered, r.Last)
			}
			if target > 0 && covered < target {
				t.Fatalf("chain ends at %d before target %d", covered, target)
			}
		}
	})
}

// FuzzNextSegments: whatever segments are stored, the ones a standby applies next continue its revision without a
// gap and each adds revisions; a gap is reported exactly when a stored segment beyond them starts past the
// covered revision + 1, and it names the first missing revision.
func FuzzNextSegments(f *testing.F) {
	f.Add([]byte{1, 5, 6, 9, 10, 20, 3, 3}, int64(100))
	f.Fuzz(func(t *testing.T, spans []byte, applied int64) {
		if applied < 0 || applied > 1<<40 {
			return
		}
		var refs []Ref
		next := applied - 3
		for i := 0; i+1 < len(spans); i += 2 {
			first := max(next+int64(spans[i]%5)-2, 1) // overlaps, continues, or leaves gaps
			last := first + int64(spans[i+1]%8) - 1
			refs = append(refs, Ref{First: first, Last: last, LastTime: t0.Add(time.Duration(i) * time.Second)})
			next = last + 1
		}
		segs, err := NextSegments(applied, refs)
		covered := applied
		for _, r := range segs {
			if r.First > covered+1 || r.Last <= covered {
				t.Fatalf("segment %+v does not continue revision %d", r, covered)
			}
			covered = r.Last
		}
		var gap *GapError
		beyond := false
		for _, r := range refs {
			beyond = beyond || r.Last > covered
		}
		switch {
		case err == nil && beyond:
			t.Fatalf("stored segments reach past %d, but no gap was reported and none applied", covered)
		case err != nil && (!errors.As(err, &gap) || gap.From != covered+1 || gap.Next.First <= covered+1):
			t.Fatalf("gap %v after covered revision %d", err, covered)
		}
	})
}
