package backup

import (
	"strings"
	"testing"

	"steward.dev/steward/internal/pitr"
)

func TestDecidePointInTime(t *testing.T) {
	snap := func(name string, rev int64, id string) SnapshotRecord {
		return SnapshotRecord{ClusterID: id, Candidate: pitr.Candidate{Name: name, Path: "d/" + name + ".db", SHA256: "ab", Revision: rev}}
	}
	ok := PointInTimeInput{ClusterFound: true, ClusterID: "c1", ClusterName: "db", ScheduleCluster: "db", Continuous: true, SameStorage: true,
		Snapshots: []SnapshotRecord{snap("a", 100, "c1"), snap("b", 300, "c1"), snap("before-reseed", 500, "c0"), snap("c", 200, "c1")}}
	with := func(f func(*PointInTimeInput)) PointInTimeInput {
		in := ok
		f(&in)
		return in
	}
	for name, tc := range map[string]struct {
		in      PointInTimeInput
		verdict Verdict
		reason  string
		says    string
	}{
		"admitted":            {ok, Admit, "", ""},
		"no cluster":          {with(func(in *PointInTimeInput) { in.ClusterFound = false }), Refuse, ReasonClusterNotFound, "does not exist"},
		"no schedule":         {with(func(in *PointInTimeInput) { in.ScheduleCluster = "" }), Refuse, ReasonScheduleNotFound, "does not exist"},
		"another's schedule":  {with(func(in *PointInTimeInput) { in.ScheduleCluster = "other" }), Refuse, ReasonScheduleNotFound, "backs up cluster other"},
		"not continuous":      {with(func(in *PointInTimeInput) { in.Continuous = false }), Refuse, ReasonNotContinuous, "continuous.enabled"},
		"elsewhere":           {with(func(in *PointInTimeInput) { in.SameStorage = false }), Refuse, ReasonDestinationMismatch, "schedule's"},
		"missing claim":       {with(func(in *PointInTimeInput) { in.DestinationProblem = "PersistentVolumeClaim x does not exist" }), Refuse, ReasonDestinationNotFound, "x does not exist"},
		"no cluster ID yet":   {with(func(in *PointInTimeInput) { in.ClusterID = "" }), Wait, ReasonClusterUnavailable, "cluster ID"},
		"no snapshot":         {with(func(in *PointInTimeInput) { in.Snapshots = nil }), Refuse, ReasonOutsideWindow, "no Complete snapshot"},
		"only older identity": {with(func(in *PointInTimeInput) { in.Snapshots = in.Snapshots[2:3] }), Refuse, ReasonOutsideWindow, "of etcd cluster c1"},
	} {
		d := DecidePointInTime(tc.in)
		if d.Verdict != tc.verdict || d.Reason != tc.reason || !strings.Contains(d.Message, tc.says) {
			t.Errorf("%s: %+v, want verdict %d reason %q saying %q", name, d, tc.verdict, tc.reason, tc.says)
		}
	}
	d := DecidePointInTime(ok)
	var names []string
	for _, c := range d.Candidates {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "b,c,a" {
		t.Fatalf("candidates %v, want the current identity's, newest first", names)
	}
}
