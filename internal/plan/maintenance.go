package plan

import (
	"fmt"
	"sort"
	"strings"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Maintenance steps: taken when nothing else is to do (every member healthy, as many voters as specified, no
// version or TLS step), one member per pass.
const (
	// Defragment defragments member Members[0]'s database: etcd rewrites it without its free pages, blocking
	// that member's reads and writes meanwhile. Never the leader while another voter can lead.
	Defragment ActionKind = "Defragment"
	// CompactForSpace compacts the key space up to Revision (physically: the freed pages exist once it returns),
	// the first step out of a NOSPACE alarm.
	CompactForSpace ActionKind = "CompactForSpace"
	// DisarmNoSpace disarms etcd's NOSPACE alarms once there is room again: the cluster takes writes again.
	DisarmNoSpace ActionKind = "DisarmNoSpace"
	// RaiseQuota records a larger database quota (Quota) for members to run with: compacted and defragmented,
	// the data in use still fills the old one. Members then restart with it one at a time.
	RaiseQuota ActionKind = "RaiseQuota"
)

// Maintenance is what spec.maintenance asks Steward to do by itself.
type Maintenance struct {
	// DefragMinFreeBytes and DefragMinFreePercent: a member is defragmented once its database file holds at
	// least that many free bytes and that share of the file is free. Zero bytes: no defragmentation by threshold.
	DefragMinFreeBytes   int64
	DefragMinFreePercent int64
	// RecoverFromNoSpace: out of a NOSPACE alarm by compaction up to RevisionMargin revisions below the current
	// one, a defragmentation of every member, and disarming the alarm.
	RecoverFromNoSpace bool
	RevisionMargin     int64
	// Quota is the --quota-backend-bytes members are to run with; MaxQuota the most Steward may raise it to after
	// a NOSPACE alarm that compaction cannot clear (0: it may not).
	Quota    int64
	MaxQuota int64
	// ReplaceMismatched: a member whose key-space hash differs from the majority's is replaced.
	ReplaceMismatched bool
	// WindowVersionChanges: version changes wait for the maintenance window too (spec.maintenance.window.versionChanges).
	WindowVersionChanges bool
}

// noSpaceDisarmPercent: the alarm is disarmed only when the data in use is below this share of the quota, or
// the first writes would raise it again at once.
const noSpaceDisarmPercent = 90

// nextMaintenanceStep returns the next defragmentation or NOSPACE recovery step of a settled cluster, and false
// when there is none.
func nextMaintenanceStep(spec Spec, obs Observation, members []Member) (Action, bool) {
	m := spec.Maintenance
	if a, ok := quotaRestart(spec, obs, members); ok {
		return a, true
	}
	if obs.NoSpaceAlarm {
		if !m.RecoverFromNoSpace {
			return Action{}, false // reported (Degraded NoSpaceAlarm); a human recovers
		}
		return noSpaceStep(spec, obs, members), true
	}
	if m.DefragMinFreeBytes <= 0 {
		return Action{}, false
	}
	var due []Member
	for _, mem := range members {
		if mem.InEtcd && !mem.IsLearner && fragmented(mem, m.DefragMinFreeBytes, m.DefragMinFreePercent) && !resting(mem) {
			due = append(due, mem)
		}
	}
	if len(due) == 0 {
		return Action{}, false
	}
	if obs.BackupRunning {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForBackup,
			Message: fmt.Sprintf("members %s are due for a defragmentation; waiting for the backup of the cluster to end", names(due))}, true
	}
	next := followerFirst(sortedByName(due), obs.LeaderID)
	if wait, ok := leaderLast(obs, members, next, m.DefragMinFreeBytes, m.DefragMinFreePercent, etcdv1alpha1.ReasonDefragmenting); ok {
		return wait, true
	}
	return defragStep(obs, members, next, etcdv1alpha1.ReasonDefragmenting, fmt.Sprintf("%s of its %s database file is free (threshold %d%% and %s)",
		byteSize(next.DBSize-next.DBSizeInUse), byteSize(next.DBSize), m.DefragMinFreePercent, byteSize(m.DefragMinFreeBytes))), true
}

// noSpaceStep is the way out of a NOSPACE alarm: compact (the old revisions become free pages), defragment every
// member that has free pages (the file shrinks), then disarm, unless the live data still fills the quota.
func noSpaceStep(spec Spec, obs Observation, members []Member) Action {
	m := spec.Maintenance
	if !obs.CompactRevisionKnown {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonRecoveringFromNoSpace, Message: "NOSPACE: reading the compacted revision before compacting"}
	}
	if target := obs.Revision - m.RevisionMargin; target > obs.CompactRevision {
		return Action{Kind: CompactForSpace, Revision: target, Reason: etcdv1alpha1.ReasonRecoveringFromNoSpace,
			Message: fmt.Sprintf("NOSPACE: compacting revisions %d..%d (the newest %d revisions kept), so that their space can be reclaimed",
				obs.CompactRevision+1, target, m.RevisionMargin)}
	}
	var due []Member
	for _, mem := range members {
		// After a compaction, any free page is worth taking back: the cluster refuses writes until then.
		if mem.InEtcd && (fragmented(mem, noSpaceMinFree, noSpaceMinFreePercent) || notDefragmentedSince(mem, obs.CompactRevision)) {
			due = append(due, mem)
		}
	}
	if len(due) > 0 {
		next := followerFirst(sortedByName(due), obs.LeaderID)
		if wait, ok := leaderLast(obs, members, next, noSpaceMinFree, noSpaceMinFreePercent, etcdv1alpha1.ReasonRecoveringFromNoSpace); ok {
			return wait
		}
		why := fmt.Sprintf("NOSPACE: %s of its %s database file is free after the compaction", byteSize(next.DBSize-next.DBSizeInUse), byteSize(next.DBSize))
		if !fragmented(next, noSpaceMinFree, noSpaceMinFreePercent) {
			why = fmt.Sprintf("NOSPACE: not defragmented since the compaction to revision %d (etcd reports %s of %s in use, which counts the pages "+
				"the compaction freed until its next write, and NOSPACE refuses writes)", obs.CompactRevision, byteSize(next.DBSizeInUse), byteSize(next.DBSize))
		}
		a := defragStep(obs, members, next, etcdv1alpha1.ReasonRecoveringFromNoSpace, why)
		if a.Kind == Defragment {
			a.Revision = obs.CompactRevision
		}
		return a
	}
	var full []string
	for _, mem := range members {
		if mem.InEtcd && m.Quota > 0 && mem.DBSizeInUse*100 >= m.Quota*noSpaceDisarmPercent {
			full = append(full, fmt.Sprintf("%s uses %s", mem.Name, byteSize(mem.DBSizeInUse)))
		}
	}
	if len(full) > 0 {
		sort.Strings(full)
		if m.MaxQuota > m.Quota {
			// Twice the quota, or enough for the data in use to be below the disarm threshold (in whole MiB), at
			// most the maximum.
			const mib = 1 << 20
			need := (inUse(members)*100/noSpaceDisarmPercent + mib) / mib * mib
			raised := min(m.MaxQuota, max(2*m.Quota, need))
			return Action{Kind: RaiseQuota, Quota: raised, Reason: etcdv1alpha1.ReasonRaisingQuota,
				Message: fmt.Sprintf("NOSPACE: compacted and defragmented, the data in use still fills the quota of %s (%s): raising the quota to %s "+
					"(spec.maintenance.recoverFromNoSpace.maxQuotaBackendBytes %s); members restart with it one at a time, then the alarm is disarmed",
					byteSize(m.Quota), strings.Join(full, ", "), byteSize(raised), byteSize(m.MaxQuota))}
		}
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonNoSpaceQuotaTooSmall,
			Message: fmt.Sprintf("NOSPACE: compacted and defragmented, the data in use still fills the quota of %s (%s)%s: delete data, or raise "+
				"spec.etcd.quotaBackendBytes (and storage.size with it) or spec.maintenance.recoverFromNoSpace.maxQuotaBackendBytes; Steward restarts the members "+
				"with a new quota one at a time and disarms the alarm once there is room",
				byteSize(m.Quota), strings.Join(full, ", "), atMax(m))}
	}
	return Action{Kind: DisarmNoSpace, Reason: etcdv1alpha1.ReasonRecoveringFromNoSpace,
		Message: "NOSPACE: compacted and defragmented, the data in use is below 90% of the quota: disarming the alarm, writes resume"}
}

// The free space that makes a member worth defragmenting after a NOSPACE compaction.
const (
	noSpaceMinFree        = 1 << 20
	noSpaceMinFreePercent = 10
)

// leaderLast holds back the defragmentation of next, the leader and the only member due, while a healthy
// follower would be due too if it had the leader's data in use: that follower has not yet applied the compaction
// the leader has (each member frees the pages of a compaction when it applies it, the leader usually first).
// Defragmenting the leader now would move leadership to a member that needs it moved again a moment later.
func leaderLast(obs Observation, members []Member, next Member, minFree, minPercent int64, reason string) (Action, bool) {
	if next.ID != obs.LeaderID {
		return Action{}, false
	}
	var behind []string
	for _, f := range members {
		if !f.InEtcd || f.IsLearner || !f.Healthy || f.ID == next.ID || fragmented(f, minFree, minPercent) {
			continue
		}
		if fragmented(Member{DBSize: f.DBSize, DBSizeInUse: next.DBSizeInUse}, minFree, minPercent) {
			behind = append(behind, fmt.Sprintf("%s has %s in use", f.Name, byteSize(f.DBSizeInUse)))
		}
	}
	if len(behind) == 0 {
		return Action{}, false
	}
	sort.Strings(behind)
	return Action{Kind: Wait, Reason: reason, Message: fmt.Sprintf("the leader %s is due for a defragmentation with %s in use, but %s: "+
		"waiting for the compaction to free their pages too, so that the followers are defragmented first and leadership moves once",
		next.Name, byteSize(next.DBSizeInUse), strings.Join(behind, ", "))}, true
}

// defragStep defragments member m, or first hands leadership away from it: a defragmentation blocks the member,
// and a blocked leader stalls the whole cluster (and may lose leadership mid-way).
func defragStep(obs Observation, members []Member, m Member, reason, why string) Action {
	voters := 0
	for _, mem := range members {
		if mem.InEtcd && !mem.IsLearner {
			voters++
		}
	}
	if m.ID == obs.LeaderID && voters > 1 {
		if to, ok := transferee(members, m, nil); ok {
			return Action{Kind: MoveLeader, Members: []string{m.Name, to.Name}, MemberID: m.ID, TargetID: to.ID, Reason: reason,
				Message: fmt.Sprintf("moving leadership from %s to %s before defragmenting %s: %s", m.Name, to.Name, m.Name, why)}
		}
		return Action{Kind: Wait, Reason: reason, Message: fmt.Sprintf("no healthy follower to take leadership from %s before defragmenting it", m.Name)}
	}
	return Action{Kind: Defragment, Members: []string{m.Name}, MemberID: m.ID, Reason: reason,
		Message: fmt.Sprintf("defragmenting member %s: %s", m.Name, why)}
}

// DefragRest is how long a member Steward defragmented by the threshold rests before the threshold may have it
// defragmented again. A large compaction goes on freeing pages in batches for a while after it was asked for, so
// a member defragmented meanwhile is soon past the threshold again: without a rest the planner, which picks the
// due members in the same order every pass, would defragment that one member again and again (each time blocking
// it) while the others waited. NOSPACE recovery does not rest: writes are refused until it ends.
const DefragRest = 5 * time.Minute

// resting reports whether member m was defragmented by Steward within DefragRest, as its volume records it.
// Members without a volume keep no record and never rest.
func resting(m Member) bool {
	return m.DefragmentRecorded && m.DefragmentedAgo >= 0 && m.DefragmentedAgo < DefragRest
}

// notDefragmentedSince reports whether member m, on a volume that records its defragmentations, was not
// defragmented by Steward since the cluster was compacted to revision compacted. Such a member's data in use
// cannot be trusted under NOSPACE: etcd counts the pages a compaction freed as in use until its backend commits
// its next write, and the alarm refuses writes, so the number can stay as high as before the compaction for as
// long as the alarm lasts. Its defragmentation rewrites the file and counts again. Members without a volume
// (ephemeral storage) keep no record, and are judged by the free pages etcd reports alone.
func notDefragmentedSince(m Member, compacted int64) bool {
	return m.HasPVC && compacted > 0 && m.DefragmentedAtCompaction < compacted
}

// fragmented reports whether at least minFree bytes and minPercent of member m's database file are free pages.
func fragmented(m Member, minFree, minPercent int64) bool {
	free := m.DBSize - m.DBSizeInUse
	return m.DBSize > 0 && m.DBSizeInUse > 0 && free >= minFree && free*100 >= minPercent*m.DBSize
}

func sortedByName(ms []Member) []Member {
	out := append([]Member(nil), ms...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func names(ms []Member) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// byteSize writes an approximate size, in MiB (KiB below one MiB), as etcdctl's status table does (bytesString
// writes exact quantities).
func byteSize(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// inUse is the most data in use any member reports.
func inUse(members []Member) int64 {
	var n int64
	for _, m := range members {
		if m.InEtcd {
			n = max(n, m.DBSizeInUse)
		}
	}
	return n
}

// quotaRestart restarts, one at a time, followers first and the leader last after handing leadership over, the
// members whose Pods run with another quota than the one in force: a quota is a start flag. Not for members on
// ephemeral storage (a restart would empty them) nor for Pods that set no quota (etcd's default, from before
// Steward set one: an operator upgrade restarts no member).
func quotaRestart(spec Spec, obs Observation, members []Member) (Action, bool) {
	q := spec.Maintenance.Quota
	if q <= 0 || spec.Storage.Size == 0 {
		return Action{}, false
	}
	var due []Member
	for _, m := range members {
		if m.InEtcd && m.HasPod && m.PodQuota > 0 && m.PodQuota != q {
			due = append(due, m)
		}
	}
	if len(due) == 0 {
		return Action{}, false
	}
	next := followerFirst(sortedByName(due), obs.LeaderID)
	return restartOne(obs, members, next, etcdv1alpha1.ReasonRestartingForQuota,
		fmt.Sprintf("its Pod runs with a quota of %s, the quota in force is %s (%d of %d members to restart)",
			byteSize(next.PodQuota), byteSize(q), len(due), len(members))), true
}

// atMax says so when the quota is at the maximum Steward may raise it to.
func atMax(m Maintenance) string {
	if m.MaxQuota > 0 && m.MaxQuota <= m.Quota {
		return fmt.Sprintf(", the most recoverFromNoSpace.maxQuotaBackendBytes (%s) allows", byteSize(m.MaxQuota))
	}
	return ""
}
