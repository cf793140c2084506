package plan

import (
	"math"
	"strings"
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

const mi = int64(1) << 20

func TestMemberMemory(t *testing.T) {
	tests := map[string]struct {
		in         MemoryInputs
		bytes, log int64
		entries    int64
	}{
		// The default cluster: storage 1Gi, so a quota of 288Mi; 3.6's snapshot-count; 1.5Mi requests.
		"defaults, quota of a 1Gi volume": {MemoryInputs{Quota: 288 * mi, Version: "3.6.16"}, 848 * mi, 288 * mi, 15000},
		"etcd's default quota":            {MemoryInputs{Version: "3.6.16"}, 5248 * mi, 2 * gi, 15000},
		"small values bound the log below the quota": {MemoryInputs{Quota: 8 * gi, MaxRequestBytes: 64 << 10, Version: "3.6.16"},
			2472 * mi, 15000 * 64 << 10, 15000},
		"3.5's default snapshot-count keeps ten times the entries": {MemoryInputs{Quota: 8 * gi, MaxRequestBytes: 10 << 10, Version: "3.5.35"},
			2692 * mi, 105000 * 10 << 10, 105000},
		"a low snapshot-count":                       {MemoryInputs{Quota: 8 * gi, SnapshotCount: 1000, MaxRequestBytes: 10 << 10, Version: "3.6.16"}, 275 * mi, 6000 * 10 << 10, 6000},
		"a huge snapshot-count does not overflow":    {MemoryInputs{Quota: 8 * gi, SnapshotCount: math.MaxInt64 - snapshotCatchUpEntries, Version: "3.6.16"}, 20608 * mi, 8 * gi, math.MaxInt64},
		"an unknown version gets the larger default": {MemoryInputs{Quota: 8 * gi, MaxRequestBytes: 10 << 10, Version: "main"}, 2692 * mi, 105000 * 10 << 10, 105000},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := MemberMemory(tt.in)
			if got.Bytes != tt.bytes || got.RaftLogBytes != tt.log || got.LogEntries != tt.entries {
				t.Fatalf("MemberMemory(%+v) = %d MiB (log %d bytes, %d entries), want %d MiB (log %d bytes, %d entries)",
					tt.in, got.Bytes/mi, got.RaftLogBytes, got.LogEntries, tt.bytes/mi, tt.log, tt.entries)
			}
		})
	}
}

// TestMemberMemoryCoversMeasurements: the estimate is at least what single members used with the same settings
// (hack/membermemory, docs/development/benchmarks.md "Member memory": peak anonymous memory while writing), with
// the quota as large as the data written (what the database held) and max-request-bytes the request written (a
// value and its key).
func TestMemberMemoryCoversMeasurements(t *testing.T) {
	for _, m := range []struct {
		name     string
		in       MemoryInputs
		measured int64
	}{
		{"64Mi as 1Mi values", MemoryInputs{Quota: 64 * mi, MaxRequestBytes: mi + 1<<10, Version: "3.6.16"}, 239 * mi},
		{"128Mi as 1Mi values", MemoryInputs{Quota: 128 * mi, MaxRequestBytes: mi + 1<<10, Version: "3.6.16"}, 348 * mi},
		{"256Mi as 1Mi values", MemoryInputs{Quota: 256 * mi, MaxRequestBytes: mi + 1<<10, Version: "3.6.16"}, 550 * mi},
		{"256Mi as 1Mi values, snapshot-count 1000", MemoryInputs{Quota: 256 * mi, SnapshotCount: 1000, MaxRequestBytes: mi + 1<<10, Version: "3.6.16"}, 631 * mi},
		{"1Gi as 1Mi values", MemoryInputs{Quota: gi, MaxRequestBytes: mi + 1<<10, Version: "3.6.16"}, 1974 * mi},
		{"1Gi as 1Mi values, 3.5", MemoryInputs{Quota: gi, MaxRequestBytes: mi + 1<<10, Version: "3.5.35"}, 2038 * mi},
		{"1Gi as 10Ki values", MemoryInputs{Quota: gi, MaxRequestBytes: 11 << 10, Version: "3.6.16"}, 167 * mi},
		{"1Gi as 10Ki values, 3.5", MemoryInputs{Quota: gi, MaxRequestBytes: 11 << 10, Version: "3.5.35"}, 1890 * mi},
		{"2Gi as 1Mi values", MemoryInputs{Quota: 2 * gi, MaxRequestBytes: mi + 1<<10, Version: "3.6.16"}, 3906 * mi},
		{"2Gi as 100Ki values", MemoryInputs{Quota: 2 * gi, MaxRequestBytes: 101 << 10, Version: "3.6.16"}, 1113 * mi},
		{"1Gi as 1Mi values, 3.7", MemoryInputs{Quota: gi, MaxRequestBytes: mi + 1<<10, Version: "3.7.3"}, 1971 * mi},
		{"1Gi as 10Ki values, 3.7", MemoryInputs{Quota: gi, MaxRequestBytes: 11 << 10, Version: "3.7.3"}, 166 * mi},
		{"1Gi as 10Ki values, snapshot-count 1000", MemoryInputs{Quota: gi, SnapshotCount: 1000, MaxRequestBytes: 11 << 10, Version: "3.6.16"}, 165 * mi},
		{"2Gi as 256Ki values, snapshot-count 1000", MemoryInputs{Quota: 2 * gi, SnapshotCount: 1000, MaxRequestBytes: 257 << 10, Version: "3.6.16"}, 2816 * mi},
		{"2Gi as 256Ki values, snapshot-count 100", MemoryInputs{Quota: 2 * gi, SnapshotCount: 100, MaxRequestBytes: 257 << 10, Version: "3.6.16"}, 2822 * mi},
	} {
		if got := MemberMemory(m.in); got.Bytes < m.measured {
			t.Errorf("%s: estimate %d MiB, below the %d MiB measured", m.name, got.Bytes/mi, m.measured/mi)
		}
	}
}

func TestMemoryLimitProblem(t *testing.T) {
	need := MemberMemory(MemoryInputs{Quota: 288 * mi, Version: "3.6.16"}) // 848Mi
	tests := map[string]struct {
		limit  int64
		reason string
		says   []string
	}{
		"no limit":          {0, "", nil},
		"a limit as needed": {848 * mi, "", nil},
		"a limit above":     {gi, "", nil},
		"a limit below": {512 * mi, etcdv1alpha1.ReasonMemoryLimitTooLow, []string{"limits.memory 512Mi", "below the 848Mi", "288Mi",
			"at least 848Mi", "spec.etcd.maxRequestBytes", "snapshot-count 10000"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			reason, msg := MemoryLimitProblem(need, tt.limit)
			checkProblem(t, reason, msg, tt.reason, tt.says)
		})
	}
}

// checkProblem fails t unless a problem check gave reason want, with a message that says each of says.
func checkProblem(t *testing.T, reason, msg, want string, says []string) {
	t.Helper()
	if reason != want {
		t.Fatalf("reason %q, want %q (%s)", reason, want, msg)
	}
	for _, s := range says {
		if !strings.Contains(msg, s) {
			t.Errorf("message %q does not say %q", msg, s)
		}
	}
}

func TestMemoryFitProblem(t *testing.T) {
	need := MemberMemory(MemoryInputs{Quota: 2 * gi, Version: "3.6.16"}) // 5248Mi
	node := func(name string, alloc int64, eligible bool, members ...string) NodeMemory {
		return NodeMemory{Name: name, Allocatable: alloc, Eligible: eligible, Members: members}
	}
	tests := map[string]struct {
		request, limit int64
		nodes          []NodeMemory
		says           []string // empty: no problem
	}{
		"no nodes known": {request: need.Bytes},
		"one member per large node": {request: need.Bytes, nodes: []NodeMemory{node("a", 16*gi, true, "m0"), node("b", 16*gi, true, "m1"),
			node("c", 16*gi, true, "m2")}},
		"three members on one node that holds them": {request: need.Bytes, nodes: []NodeMemory{node("a", 16*gi, true, "m0", "m1", "m2")}},
		"three members on one node too small for them": {request: need.Bytes, nodes: []NodeMemory{node("a", 12*gi, true, "m2", "m0", "m1")},
			says: []string{"m0, m1, m2 on node a may need 15744Mi of its 12Gi allocatable", "each up to 5248Mi", "spec.etcd.maxRequestBytes"}},
		// A user's small request does not lower what members may grow to without a limit.
		"small requests, no limit": {request: 256 * mi, nodes: []NodeMemory{node("a", 12*gi, true, "m0", "m1", "m2")},
			says: []string{"may need 15744Mi"}},
		// With a limit, a member cannot grow past it (MemoryLimitTooLow says the rest).
		"limited members fit": {request: 256 * mi, limit: 2 * gi, nodes: []NodeMemory{node("a", 12*gi, true, "m0", "m1", "m2")}},
		"a larger request than the need counts": {request: 5 * gi, limit: 0, nodes: []NodeMemory{node("a", 14*gi, true, "m0", "m1", "m2")},
			says: []string{"may need 15744Mi"}},
		"a request no eligible node can give": {request: need.Bytes, nodes: []NodeMemory{node("big", 64*gi, false), node("a", 4*gi, true),
			node("b", 3*gi, true)}, says: []string{"requests 5248Mi", "the largest, a, has 4Gi allocatable", "stays Pending"}},
		"only nodes of unknown size": {request: need.Bytes, nodes: []NodeMemory{node("a", 0, true, "m0", "m1")}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			reason, msg := MemoryFitProblem(need, tt.request, tt.limit, tt.nodes)
			want := ""
			if len(tt.says) > 0 {
				want = etcdv1alpha1.ReasonMemberMemoryExceedsNodes
			}
			checkProblem(t, reason, msg, want, tt.says)
		})
	}
}

// FuzzMemberMemory: for any settings the estimate is at least the base, a whole number of MiB, never overflows,
// and never falls when the quota, snapshot-count or largest request grows (a larger setting never asks for less
// memory).
func FuzzMemberMemory(f *testing.F) {
	f.Add(int64(288<<20), int64(0), int64(0), "3.6.16")
	f.Add(int64(8<<30), int64(1000), int64(16<<10), "3.5.35")
	f.Add(int64(100<<30), int64(math.MaxInt64), int64(64<<20), "3.7.3")
	f.Add(int64(-1), int64(-1), int64(-1), "garbage")
	f.Fuzz(func(t *testing.T, quota, snapshotCount, maxRequest int64, version string) {
		quota, maxRequest = quota%(100<<30), maxRequest%(64<<20)
		in := MemoryInputs{Quota: quota, SnapshotCount: snapshotCount, MaxRequestBytes: maxRequest, Version: version}
		n := MemberMemory(in)
		if n.Bytes < memberBaseBytes || n.Bytes%mi != 0 || n.RaftLogBytes <= 0 || n.RaftLogBytes > n.Quota {
			t.Fatalf("MemberMemory(%+v) = %+v", in, n)
		}
		for _, more := range []MemoryInputs{
			{Quota: n.Quota + mi, SnapshotCount: n.SnapshotCount, MaxRequestBytes: n.MaxRequestBytes},
			{Quota: n.Quota, SnapshotCount: n.SnapshotCount + min(1, math.MaxInt64-n.SnapshotCount), MaxRequestBytes: n.MaxRequestBytes},
			{Quota: n.Quota, SnapshotCount: n.SnapshotCount, MaxRequestBytes: n.MaxRequestBytes + 1},
		} {
			if m := MemberMemory(more); m.Bytes < n.Bytes {
				t.Fatalf("MemberMemory(%+v) = %d, below %d for %+v", more, m.Bytes, n.Bytes, in)
			}
		}
	})
}
