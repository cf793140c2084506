package backup

import (
	"strings"
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pitr"
)

func TestDecidePointInTime(t *testing.T) {
	snap := func(name string, rev int64, id string) SnapshotRecord {
		return SnapshotRecord{ClusterID: id, Candidate: pitr.Candidate{Name: name, Path: "d/" + name + ".db", SHA256: "ab", Revision: rev}}
	}
	ok := PointInTimeInput{ClusterFound: true, ClusterID: "c1", Version: "3.6.16", ClusterName: "db", ScheduleCluster: "db", Continuous: true, SameStorage: true,
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
		"admitted":                        {ok, Admit, "", ""},
		"deleted cluster, never followed": {with(func(in *PointInTimeInput) { in.ClusterFound, in.ClusterID = false, "" }), Refuse, etcdv1alpha1.ReasonClusterNotFound, "has not followed it"},
		"deleted cluster, no version":     {with(func(in *PointInTimeInput) { in.ClusterFound, in.Version = false, "" }), Refuse, etcdv1alpha1.ReasonClusterNotFound, "no etcd version"},
		"no schedule":                     {with(func(in *PointInTimeInput) { in.ScheduleCluster = "" }), Refuse, etcdv1alpha1.ReasonScheduleNotFound, "does not exist"},
		"another's schedule":              {with(func(in *PointInTimeInput) { in.ScheduleCluster = "other" }), Refuse, etcdv1alpha1.ReasonScheduleNotFound, "backs up cluster other"},
		"not continuous":                  {with(func(in *PointInTimeInput) { in.Continuous = false }), Refuse, etcdv1alpha1.ReasonNotContinuous, "continuous.enabled"},
		"elsewhere":                       {with(func(in *PointInTimeInput) { in.SameStorage = false }), Refuse, etcdv1alpha1.ReasonDestinationMismatch, "schedule's"},
		"missing claim":                   {with(func(in *PointInTimeInput) { in.DestinationProblem = "PersistentVolumeClaim x does not exist" }), Refuse, etcdv1alpha1.ReasonDestinationNotFound, "x does not exist"},
		"no cluster ID yet":               {with(func(in *PointInTimeInput) { in.ClusterID = "" }), Wait, etcdv1alpha1.ReasonClusterUnavailable, "cluster ID"},
		"no snapshot":                     {with(func(in *PointInTimeInput) { in.Snapshots = nil }), Refuse, etcdv1alpha1.ReasonOutsideWindow, "no Complete snapshot"},
		"only older identity":             {with(func(in *PointInTimeInput) { in.Snapshots = in.Snapshots[2:3] }), Refuse, etcdv1alpha1.ReasonOutsideWindow, "of etcd cluster c1"},
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
	if strings.Join(names, ",") != "b,c,a" || d.Version != "3.6.16" {
		t.Fatalf("candidates %v (version %s), want the current identity's, newest first", names, d.Version)
	}
	// A deleted cluster: the identity the schedule followed last, the newest snapshot's release.
	gone := ok
	gone.ClusterFound, gone.Version = false, ""
	gone.Snapshots = append([]SnapshotRecord(nil), ok.Snapshots...)
	gone.Snapshots[1].EtcdVersion = "3.6.15"
	if d := DecidePointInTime(gone); d.Verdict != Admit || d.Version != "3.6.15" || d.Candidates[0].Name != "b" {
		t.Fatalf("deleted cluster: %+v", d)
	}
}
