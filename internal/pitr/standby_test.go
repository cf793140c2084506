package pitr

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestNextSegments(t *testing.T) {
	chain := []Ref{ref(11, 20, 1), ref(21, 30, 2), ref(31, 30, 3) /* heartbeat */, ref(31, 45, 4)}
	tests := map[string]struct {
		applied int64
		refs    []Ref
		want    []Ref
		gap     *GapError
	}{
		"from the snapshot's revision":              {10, chain, []Ref{chain[0], chain[1], chain[3]}, nil},
		"unsorted input":                            {10, []Ref{chain[3], chain[1], chain[2], chain[0]}, []Ref{chain[0], chain[1], chain[3]}, nil},
		"a snapshot inside a segment":               {15, chain, []Ref{chain[0], chain[1], chain[3]}, nil},
		"caught up":                                 {45, chain, nil, nil},
		"caught up past a heartbeat":                {30, chain[:3], nil, nil},
		"ahead of the source (a new snapshot)":      {50, chain, nil, nil},
		"nothing stored":                            {10, nil, nil, nil},
		"the segment after the snapshot is missing": {10, chain[1:], nil, &GapError{From: 11, To: 20, Next: chain[1]}},
		"a segment missing in the middle": {10, []Ref{chain[0], chain[3]}, []Ref{chain[0]},
			&GapError{From: 21, To: 30, Next: chain[3]}},
		"pruned past the standby": {5, chain, nil, &GapError{From: 6, To: 10, Next: chain[0]}},
		"overlap after a follower restart": {10, []Ref{ref(11, 25, 1), ref(21, 30, 2), ref(26, 40, 3)},
			[]Ref{ref(11, 25, 1), ref(21, 30, 2), ref(26, 40, 3)}, nil},
		"a new chain after a compaction": {45, []Ref{chain[3], ref(60, 70, 9)}, nil, &GapError{From: 46, To: 59, Next: ref(60, 70, 9)}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := NextSegments(tt.applied, tt.refs)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("segments %v, want %v", got, tt.want)
			}
			var gap *GapError
			switch {
			case tt.gap == nil && err != nil:
				t.Fatalf("error %v, want none", err)
			case tt.gap != nil && (!errors.As(err, &gap) || *gap != *tt.gap || !errors.Is(err, ErrGap)):
				t.Fatalf("error %v, want %v", err, tt.gap)
			}
		})
	}
}

func TestLagOf(t *testing.T) {
	chain := []Ref{ref(11, 20, 1), ref(21, 30, 2), ref(31, 30, 13) /* heartbeat */, ref(31, 45, 24)}
	tests := map[string]struct {
		applied int64
		refs    []Ref
		want    Lag
	}{
		"caught up": {45, chain, Lag{SourceRevision: 45, SourceTime: chain[3].LastTime, Known: true}},
		"one segment behind, measured from the heartbeat": {30, chain,
			Lag{SourceRevision: 45, SourceTime: chain[3].LastTime, Revisions: 15, Behind: 11 * time.Second, Known: true}},
		"inside a segment": {25, chain,
			Lag{SourceRevision: 45, SourceTime: chain[3].LastTime, Revisions: 20, Behind: 23 * time.Second, Known: true}},
		"nothing at or before the standby's revision": {10, chain,
			Lag{SourceRevision: 45, SourceTime: chain[3].LastTime, Revisions: 35}},
		"ahead of the source": {50, chain, Lag{SourceRevision: 45, SourceTime: chain[3].LastTime, Known: true}},
		"nothing stored":      {10, nil, Lag{Known: true}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := LagOf(tt.applied, tt.refs); got != tt.want {
				t.Fatalf("%+v, want %+v", got, tt.want)
			}
		})
	}
}
