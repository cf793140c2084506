package plan

import "strings"

// dataLossSignatures are what etcd (3.5 and 3.6) writes when it crashes because its data dir was emptied or
// corrupted on a volume that is still there, each with the evidence the planner reports. Every one was seen by
// running etcd 3.6.16 on a damaged data dir; each means restarting the member cannot help. Deliberately absent:
// a corrupt snap file ("snap: crc mismatch") and a torn WAL tail, which etcd repairs itself and keeps running,
// and "failed to open database" alone, which a permission problem causes too.
var dataLossSignatures = []struct{ match, evidence string }{
	// Emptied data dir of a member that joined later (and of a bootstrap member that could not reach its peers
	// before starting): the leader's first heartbeat commits past the member's empty log and raft panics.
	{"Was the raft log corrupted, truncated, or lost?", "raft log lost: the leader's commit index is beyond the member's log"},
	// The same panic when the log tail cut the message off: this frame is only on the stack of that panic.
	{"raftLog).commitTo(", "raft log lost: the leader's commit index is beyond the member's log"},
	// Emptied data dir of a bootstrap member (--initial-cluster-state=new): its peers know it has run.
	{"has already been bootstrapped", "data dir empty, but the cluster knows this member has run"},
	// steward-agent run-etcd (the etcd container's entrypoint) refused to start etcd on a data dir that holds no
	// member although the member has run (resources.guardedEtcdCommand).
	{"etcd's data dir holds no member, but this member has run", "data dir empty, but this member has run (steward-agent refused to start etcd)"},
	// bbolt's ErrInvalid: the backend database's meta pages are garbage or the file is truncated.
	{"invalid database", "backend database corrupt (invalid database)"},
	// The backend database file is gone while the WAL and snapshots remain.
	{"failed to recover v3 backend from snapshot", "backend database missing or older than the member's snapshot"},
	// A WAL record whose checksum does not match: the log holds entries that cannot be trusted.
	{"walpb: crc mismatch", "write-ahead log corrupt (crc mismatch)"},
}

// DataLossEvidence classifies the tail of a crashed etcd's log (what Kubernetes keeps as the container's
// termination message): the evidence that the member's data dir was emptied or corrupted, or "" when the log
// shows none of the known signatures. Such a member must not rejoin under its old member ID: it would vote without
// the entries it acknowledged. Pure and total: any input, including a cut-off or binary one, is fine.
func DataLossEvidence(log string) string {
	for _, s := range dataLossSignatures {
		if strings.Contains(log, s.match) {
			return s.evidence
		}
	}
	return ""
}
