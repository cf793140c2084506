package backup

import (
	"fmt"
	"sort"

	"steward.dev/steward/internal/pitr"
)

// Point-in-time admission reasons (they match the EtcdBackup condition reasons of the same name).
const (
	ReasonScheduleNotFound    = "ScheduleNotFound"
	ReasonNotContinuous       = "NotContinuous"
	ReasonDestinationMismatch = "DestinationMismatch"
)

// PointInTimeMember is the result's member of a point-in-time backup: it was not streamed from a member.
const PointInTimeMember = "point-in-time"

// PointInTimeInput is what admission of a point-in-time backup looks at.
type PointInTimeInput struct {
	ClusterFound bool
	// ClusterID is the cluster's current etcd cluster ID: segments and snapshots of earlier identities (before a
	// re-seed) do not chain with the current ones.
	ClusterID string
	// Schedule is the named schedule's cluster ("" when it does not exist) and whether continuous backup is on.
	ScheduleCluster, ClusterName string
	Continuous                   bool
	// SameStorage: the backup's destination is on the schedule's claim, or endpoint and bucket.
	SameStorage        bool
	DestinationProblem string
	// Snapshots are the schedule's Complete backups.
	Snapshots []SnapshotRecord
}

// SnapshotRecord is a Complete backup as a point-in-time backup may start from it.
type SnapshotRecord struct {
	pitr.Candidate
	ClusterID string
}

// PointInTimeDecision is the verdict and, to admit, the candidate snapshots (newest first).
type PointInTimeDecision struct {
	Verdict         Verdict
	Reason, Message string
	Candidates      []pitr.Candidate
}

// DecidePointInTime admits a point-in-time backup whose schedule has continuous backup on, whose destination is
// where the schedule's snapshots and segments are (the Job mounts one volume), and whose cluster has a Complete
// snapshot of its current identity to start from. Which snapshot and segments reach the target is decided by
// the agent, which alone can list the segments (internal/pitr.Plan).
func DecidePointInTime(in PointInTimeInput) PointInTimeDecision {
	refuse := func(reason, format string, a ...any) PointInTimeDecision {
		return PointInTimeDecision{Verdict: Refuse, Reason: reason, Message: fmt.Sprintf(format, a...)}
	}
	switch {
	case !in.ClusterFound:
		return refuse(ReasonClusterNotFound, "the EtcdCluster does not exist")
	case in.ScheduleCluster == "":
		return refuse(ReasonScheduleNotFound, "the EtcdBackupSchedule does not exist")
	case in.ScheduleCluster != in.ClusterName:
		return refuse(ReasonScheduleNotFound, "the EtcdBackupSchedule backs up cluster %s, not %s", in.ScheduleCluster, in.ClusterName)
	case !in.Continuous:
		return refuse(ReasonNotContinuous, "the EtcdBackupSchedule does not have spec.continuous.enabled")
	case !in.SameStorage:
		return refuse(ReasonDestinationMismatch, "the destination must be on the schedule's PersistentVolumeClaim, or endpoint and bucket, where its snapshots and segments are")
	case in.DestinationProblem != "":
		return refuse(ReasonDestinationNotFound, "%s", in.DestinationProblem)
	case in.ClusterID == "":
		return PointInTimeDecision{Verdict: Wait, Reason: ReasonClusterUnavailable, Message: "the cluster has not reported its etcd cluster ID yet"}
	}
	var cands []pitr.Candidate
	for _, s := range in.Snapshots {
		if s.ClusterID == in.ClusterID && s.Path != "" && s.SHA256 != "" {
			cands = append(cands, s.Candidate)
		}
	}
	if len(cands) == 0 {
		return refuse(ReasonOutsideWindow,
			"the schedule has no Complete snapshot of etcd cluster %s to start from", in.ClusterID)
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Revision > cands[j].Revision })
	return PointInTimeDecision{Verdict: Admit, Candidates: cands}
}
