package pitr

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func ref(first, last int64, sec int) Ref {
	h := Header{First: first, Last: last, LastTime: t0.Add(time.Duration(sec) * time.Second)}
	r, _ := ParseName(Name(h))
	return r
}

func TestPlan(t *testing.T) {
	snapA := Snapshot{Name: "a", Revision: 100, Time: t0}
	snapB := Snapshot{Name: "b", Revision: 200, Time: t0.Add(100 * time.Second)}
	contiguous := []Ref{ref(101, 150, 50), ref(151, 220, 120), ref(221, 220, 180), ref(221, 260, 200)}
	gapAfter220 := []Ref{ref(101, 150, 50), ref(151, 220, 120), ref(231, 260, 200)}
	tests := map[string]struct {
		snaps     []Snapshot
		refs      []Ref
		target    Target
		want      []string // snapshot names of the chains, best first
		wantSegs  int      // segments of the first chain
		wantErr   string
		wantEnd   int64
		wantEndAt int
	}{
		"revision between snapshots: the older one": {
			snaps: []Snapshot{snapA, snapB}, refs: contiguous, target: Target{Revision: 170},
			want: []string{"a"}, wantSegs: 3, wantEnd: 260, wantEndAt: 200,
		},
		"revision after both: newest first": {
			snaps: []Snapshot{snapA, snapB}, refs: contiguous, target: Target{Revision: 240},
			want: []string{"b", "a"}, wantSegs: 2, wantEnd: 260,
		},
		"the snapshot's own revision": {
			snaps: []Snapshot{snapA}, refs: nil, target: Target{Revision: 100}, want: []string{"a"}, wantSegs: 0, wantEnd: 100,
		},
		"latest: refused when a gap hides later changes": {
			snaps: []Snapshot{snapA, snapB}, refs: gapAfter220, target: Target{},
			wantErr: "the segments reach revision 260, but no snapshot reaches past 220 (revisions 221..230 are missing); give a revision or time in the recoverable window revisions 100..220",
		},
		"a revision before the gap is still fine": {
			snaps: []Snapshot{snapA, snapB}, refs: gapAfter220, target: Target{Revision: 215},
			want: []string{"b", "a"}, wantSegs: 1, wantEnd: 220,
		},
		"latest: only chains to the newest end": {
			snaps: []Snapshot{snapA, {Name: "c", Revision: 240, Time: t0.Add(190 * time.Second)}}, refs: gapAfter220, target: Target{},
			want: []string{"c"}, wantSegs: 1, wantEnd: 260,
		},
		"a gap cuts the older chain": {
			snaps: []Snapshot{snapA}, refs: gapAfter220, target: Target{Revision: 240},
			wantErr: "revision 240 is not in the recoverable window revisions 100..220",
		},
		"a gap between windows names both": {
			snaps: []Snapshot{snapA, {Name: "c", Revision: 240, Time: t0.Add(190 * time.Second)}}, refs: gapAfter220, target: Target{Revision: 225},
			wantErr: "recoverable windows revisions 100..220",
		},
		"before every snapshot": {
			snaps: []Snapshot{snapA, snapB}, refs: contiguous, target: Target{Revision: 50},
			wantErr: "revision 50 is not in",
		},
		"after the end": {
			snaps: []Snapshot{snapA}, refs: contiguous, target: Target{Revision: 261},
			wantErr: "not in the recoverable window revisions 100..260",
		},
		"time inside, extended by an empty segment": {
			snaps: []Snapshot{snapA, snapB}, refs: contiguous[:3], target: Target{Time: t0.Add(170 * time.Second)},
			want: []string{"b", "a"}, wantSegs: 1, wantEnd: 220, wantEndAt: 180,
		},
		"time after the last sign of life": {
			snaps: []Snapshot{snapA}, refs: contiguous[:3], target: Target{Time: t0.Add(181 * time.Second)},
			wantErr: "is not in the recoverable window",
		},
		"time before the snapshot": {
			snaps: []Snapshot{snapB}, refs: contiguous, target: Target{Time: t0.Add(99 * time.Second)},
			wantErr: "is not in",
		},
		"overlapping segments after a follower restart": {
			snaps: []Snapshot{snapA}, refs: []Ref{ref(101, 150, 50), ref(140, 170, 60), ref(171, 180, 70)}, target: Target{Revision: 175},
			want: []string{"a"}, wantSegs: 3, wantEnd: 180,
		},
		"no snapshot": {
			refs: contiguous, target: Target{Revision: 150}, wantErr: "no complete snapshot",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			chains, err := Plan(tc.snaps, tc.refs, tc.target)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrOutsideWindow) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range chains {
				got = append(got, c.Snapshot.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("chains %v, want %v", got, tc.want)
			}
			if len(chains[0].Segments) != tc.wantSegs || chains[0].End != tc.wantEnd {
				t.Fatalf("first chain %+v", chains[0])
			}
			if tc.wantEndAt != 0 && !chains[0].EndTime.Equal(t0.Add(time.Duration(tc.wantEndAt)*time.Second)) {
				t.Fatalf("end time %s", chains[0].EndTime)
			}
		})
	}
}

func seg(first, last int64, events ...Event) Segment {
	return Segment{Header: Header{ClusterID: "c", First: first, Last: last, Events: len(events)}, Events: events}
}

func ev(rev int64, sec int) Event {
	return Event{Revision: rev, Type: Put, Key: []byte("k"), Observed: t0.Add(time.Duration(sec) * time.Second)}
}

func TestReplayable(t *testing.T) {
	segs := []Segment{
		seg(101, 105, ev(101, 1), ev(103, 3), ev(103, 3), ev(105, 5)),
		seg(104, 110, ev(104, 4), ev(105, 5), ev(108, 8), ev(110, 10)), // overlaps the first
	}
	revs := func(es []Event) (out []int64) {
		for _, e := range es {
			out = append(out, e.Revision)
		}
		return out
	}
	for name, tc := range map[string]struct {
		from   int64
		target Target
		want   string
	}{
		"all":                        {100, Target{}, "[101 103 103 105 108 110]"},
		"from a later snapshot":      {103, Target{}, "[105 108 110]"},
		"to a revision":              {100, Target{Revision: 107}, "[101 103 103 105]"},
		"to a time, whole revisions": {100, Target{Time: t0.Add(3 * time.Second)}, "[101 103 103]"},
	} {
		if got := fmt.Sprint(revs(Replayable(segs, tc.from, tc.target))); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
	if !SnapshotPast(segs, 104, Target{Time: t0.Add(3 * time.Second)}) || SnapshotPast(segs, 103, Target{Time: t0.Add(3 * time.Second)}) {
		t.Error("SnapshotPast by time")
	}
	if !SnapshotPast(nil, 108, Target{Revision: 107}) || SnapshotPast(nil, 107, Target{Revision: 107}) || SnapshotPast(nil, 1e9, Target{}) {
		t.Error("SnapshotPast by revision")
	}
}
