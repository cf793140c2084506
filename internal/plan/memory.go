package plan

import (
	"fmt"
	"math"
	"sort"
	"strings"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// What a member's memory is made of, as measured on one etcd process per case (hack/membermemory,
// docs/development/benchmarks.md "Member memory"):
//   - the raft log it keeps in memory: etcd appends every committed entry to an in-memory log and trims it only
//     when it takes a raft snapshot, every --snapshot-count entries, keeping --snapshot-catchup-entries (5000)
//     behind for followers that lag. So up to snapshot-count + 5000 entries, each as large as the request that
//     wrote it (at most --max-request-bytes). Those entries also went into the database, so the log holds at most
//     about what the database holds since the last compaction: the quota bounds it too. A 1 GiB database
//     written as 1 MiB values (1,024 entries, fewer than any snapshot-count) is all in memory;
//   - the Go heap grows to about twice what is live before the collector runs (GOGC=100), and the log is most of
//     what is live: 1 GiB of log measured 1.9-2.0 GiB of anonymous memory, 256 MiB 550-630 MiB, a log held at
//     1.25 GiB by a low snapshot-count 2.8 GiB. Between 1.9 and 2.3 times the log, and 2.5 times covers it;
//   - a base of gRPC and HTTP buffers, watchers, the backend's write buffer and the runtime: an idle member
//     measured 30 MiB resident, 7 MiB of it anonymous (the rest is its binary), but 64 MiB written as 1 MiB values
//     by 8 clients at once measured 165-240 MiB, about 100 MiB beyond twice the log: the buffers of the requests
//     in flight. 128 MiB covers that.
//
// The database file itself is mapped into memory (bbolt's mmap) but is page cache: the kernel drops those pages
// under a limit instead of killing the process, so it is not counted here (a member whose database stays in
// memory serves faster; docs/user/clusters.md "Sizing").
const (
	// DefaultMaxRequestBytes is etcd's --max-request-bytes when none is set (1.5 MiB): the largest request a
	// member accepts, so the largest raft log entry.
	DefaultMaxRequestBytes = 1536 << 10
	// snapshotCatchUpEntries is etcd's --snapshot-catchup-entries (3.5 and 3.6 alike): the entries kept in memory
	// behind a raft snapshot, for followers that lag.
	snapshotCatchUpEntries = 5000
	// memberBaseBytes is a member's memory beside its raft log.
	memberBaseBytes = 128 << 20
	// heapHeadroomPercent is a member's memory per byte of raft log, in percent: the Go heap reaches about twice
	// what is live before a collection (GOGC=100), and measured up to 2.3 times the log.
	heapHeadroomPercent = 250
)

// MemoryInputs are the settings a member's memory depends on.
type MemoryInputs struct {
	// Quota is --quota-backend-bytes; 0 is etcd's default (2 GiB).
	Quota int64
	// SnapshotCount is --snapshot-count; 0 is etcd's default for Version's minor.
	SnapshotCount int64
	// MaxRequestBytes is --max-request-bytes; 0 is etcd's default (DefaultMaxRequestBytes).
	MaxRequestBytes int64
	// Version is the members' etcd release ("3.6.16"), for the default snapshot-count.
	Version string
}

// MemoryNeed is the most memory a member may hold with its settings, and what it is made of.
type MemoryNeed struct {
	// Bytes is the member's peak: the base, and the raft log with the heap's headroom; rounded up to a MiB.
	Bytes int64
	// RaftLogBytes is the most raft log a member keeps in memory: LogEntries of up to the largest request,
	// at most the quota.
	RaftLogBytes int64
	// LogEntries is snapshot-count + the catch-up entries: how many entries a member may keep in memory.
	LogEntries int64
	// SnapshotCount, Quota and MaxRequestBytes are the settings used (etcd's defaults filled in).
	SnapshotCount, Quota, MaxRequestBytes int64
}

// MemberMemory is what a member needs with in's settings: memberBaseBytes plus 2.5 times the raft log it may
// hold (the heap's headroom), the log being min(quota, (snapshot-count + 5000) * max-request-bytes).
func MemberMemory(in MemoryInputs) MemoryNeed {
	n := MemoryNeed{Quota: in.Quota, MaxRequestBytes: in.MaxRequestBytes, SnapshotCount: in.SnapshotCount}
	if n.Quota <= 0 {
		n.Quota = defaultQuota
	}
	if n.MaxRequestBytes <= 0 {
		n.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if n.SnapshotCount <= 0 {
		// An unparsable version gets the largest default (3.5's).
		v, _ := ParseVersion(in.Version)
		n.SnapshotCount = int64(snapshotInterval(Spec{}, v)) //nolint:gosec // one of etcd's defaults, at most 100000
	}
	// Saturating: admission lets snapshotCount be as large as an int64 holds.
	n.LogEntries = min(n.SnapshotCount, math.MaxInt64-snapshotCatchUpEntries) + snapshotCatchUpEntries
	n.RaftLogBytes = n.Quota
	// Compared by division: entries * bytes overflows int64 for large snapshot-counts.
	if n.LogEntries <= n.Quota/n.MaxRequestBytes {
		n.RaftLogBytes = n.LogEntries * n.MaxRequestBytes
	}
	const mib = 1 << 20
	n.Bytes = (memberBaseBytes + n.RaftLogBytes/100*heapHeadroomPercent + mib - 1) / mib * mib
	return n
}

// explain says what need is made of and how to lower it, for condition messages.
func (n MemoryNeed) explain() string {
	return fmt.Sprintf("up to %s of raft log: %d entries (snapshot-count %d + 5000 kept for lagging followers) of up to %s each "+
		"(max-request-bytes), at most the quota %s; 2.5 times that with the heap's headroom, and 128Mi besides",
		memString(n.RaftLogBytes), n.LogEntries, n.SnapshotCount, memString(n.MaxRequestBytes), memString(n.Quota))
}

// MemoryLimitProblem compares a member's memory limit (0: none) with what its settings may need: a member whose
// raft log grows past its limit is OOM-killed, and its successor, replaying the same log, is killed again. The
// reason and a message that says what to do; empty when the limit is none or enough. A request below the need is
// no problem by itself (the need is a peak, and without a limit the member may use more than it requests): where
// it leaves a node short, MemoryFitProblem says so.
func MemoryLimitProblem(need MemoryNeed, limit int64) (string, string) {
	if limit <= 0 || limit >= need.Bytes {
		return "", ""
	}
	return etcdv1alpha1.ReasonMemoryLimitTooLow, fmt.Sprintf("members' memory limit (spec.resources.limits.memory %s) is below the %s their settings may need (%s): "+
		"a burst of writes of large values gets etcd OOM-killed. Raise the limit to at least %s or remove it, or lower what a member keeps in memory: "+
		"a smaller spec.etcd.maxRequestBytes (the largest value clients write), spec.etcd.snapshotCount, or quota",
		memString(limit), memString(need.Bytes), need.explain(), memString(need.Bytes))
}

// NodeMemory is one node as far as members' memory goes.
type NodeMemory struct {
	Name string
	// Allocatable is the node's allocatable memory (what the kubelet lets Pods use).
	Allocatable int64
	// Eligible: a member Pod of the cluster may be scheduled to the node now (Ready, not cordoned, matching the
	// spec's node selector and affinity, taints tolerated).
	Eligible bool
	// Members are the cluster's members whose Pods run on the node.
	Members []string
}

// MemoryFitProblem says when members cannot get the memory they may need from the nodes, before they run out:
//   - no node a member may be scheduled to has as much allocatable memory as a member Pod requests: the next
//     member Pod created (a replacement, a scale-up) would stay Pending;
//   - the members on one node may together grow past its allocatable memory: each member may hold its ceiling
//     (its limit where it has one, else the larger of its request and its need), and the node then runs out of
//     memory with every member on it. Other Pods' memory on the node is not counted: Steward does not read them.
//
// request is a member Pod's memory request, limit its limit (0: none). The reason and a message that says what
// to do; empty when the members fit or no node is known.
func MemoryFitProblem(need MemoryNeed, request, limit int64, nodes []NodeMemory) (string, string) {
	ceiling := max(need.Bytes, request)
	if limit > 0 {
		ceiling = limit
	}
	sorted := append([]NodeMemory(nil), nodes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var largest *NodeMemory
	for i := range sorted {
		n := &sorted[i]
		if n.Eligible && n.Allocatable > 0 && (largest == nil || n.Allocatable > largest.Allocatable) {
			largest = n
		}
	}
	if largest != nil && request > largest.Allocatable {
		return etcdv1alpha1.ReasonMemberMemoryExceedsNodes, fmt.Sprintf("a member Pod requests %s of memory, more than any node members may use "+
			"can give (the largest, %s, has %s allocatable): the next member Pod created (a replacement, a scale-up) stays Pending. Add larger "+
			"nodes, or lower spec.resources.requests.memory (members may need %s: %s)",
			memString(request), largest.Name, memString(largest.Allocatable), memString(need.Bytes), need.explain())
	}
	var over []string
	for _, n := range sorted {
		if len(n.Members) == 0 || n.Allocatable <= 0 {
			continue
		}
		if total := int64(len(n.Members)) * ceiling; total > n.Allocatable {
			members := append([]string(nil), n.Members...)
			sort.Strings(members)
			over = append(over, fmt.Sprintf("%s on node %s may need %s of its %s allocatable", strings.Join(members, ", "), n.Name,
				memString(total), memString(n.Allocatable)))
		}
	}
	if len(over) == 0 {
		return "", ""
	}
	return etcdv1alpha1.ReasonMemberMemoryExceedsNodes, fmt.Sprintf("members may need more memory than their node can give: %s (each up to %s: %s). "+
		"The node runs out of memory under a burst of writes of large values, and the kernel kills etcd. Give members more nodes (spread them), "+
		"set spec.resources memory to what a node can hold, or lower what a member keeps in memory: a smaller spec.etcd.maxRequestBytes "+
		"(the largest value clients write), spec.etcd.snapshotCount, or quota",
		strings.Join(over, "; "), memString(ceiling), need.explain())
}

// memString is a memory size as a user writes it (4Gi, 640Mi) where it is one, else in MiB.
func memString(n int64) string {
	if n%(1<<20) == 0 {
		return bytesString(n)
	}
	return byteSize(n)
}
