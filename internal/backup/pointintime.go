package backup

import (
	"fmt"
	"sort"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pitr"
)

// PointInTimeMember is the result's member of a point-in-time backup: it was not streamed from a member.
const PointInTimeMember = "point-in-time"

// PointInTimeInput is what admission of a point-in-time backup looks at.
type PointInTimeInput struct {
	// ClusterFound: the cluster exists. A point-in-time backup of a deleted cluster is what recovering from its
	// deletion takes, so it is admitted without it, from what the schedule last followed.
	ClusterFound bool
	// ClusterID is the cluster's current etcd cluster ID, or without the cluster the one the schedule's follower
	// last followed: segments and snapshots of earlier identities (before a re-seed) do not chain with it.
	ClusterID string
	// Version is the cluster's etcd version ("" without the cluster: the newest candidate's is used).
	Version string
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
	ClusterID, EtcdVersion string
}

// PointInTimeDecision is the verdict and, to admit, the candidate snapshots (newest first) and the etcd release
// to replay them with.
type PointInTimeDecision struct {
	Verdict         Verdict
	Reason, Message string
	Candidates      []pitr.Candidate
	Version         string
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
	case in.ScheduleCluster == "":
		return refuse(etcdv1alpha1.ReasonScheduleNotFound, "the EtcdBackupSchedule does not exist")
	case in.ScheduleCluster != in.ClusterName:
		return refuse(etcdv1alpha1.ReasonScheduleNotFound, "the EtcdBackupSchedule backs up cluster %s, not %s", in.ScheduleCluster, in.ClusterName)
	case !in.Continuous:
		return refuse(etcdv1alpha1.ReasonNotContinuous, "the EtcdBackupSchedule does not have spec.continuous.enabled")
	case !in.SameStorage:
		return refuse(etcdv1alpha1.ReasonDestinationMismatch, "the destination must be on the schedule's PersistentVolumeClaim, or endpoint and bucket, where its snapshots and segments are")
	case in.DestinationProblem != "":
		return refuse(etcdv1alpha1.ReasonDestinationNotFound, "%s", in.DestinationProblem)
	case in.ClusterID == "" && !in.ClusterFound:
		return refuse(etcdv1alpha1.ReasonClusterNotFound, "the EtcdCluster does not exist and the schedule's follower has not followed it")
	case in.ClusterID == "":
		return PointInTimeDecision{Verdict: Wait, Reason: etcdv1alpha1.ReasonClusterUnavailable, Message: "the cluster has not reported its etcd cluster ID yet"}
	}
	var snaps []SnapshotRecord
	for _, s := range in.Snapshots {
		if s.ClusterID == in.ClusterID && s.Path != "" && s.SHA256 != "" {
			snaps = append(snaps, s)
		}
	}
	if len(snaps) == 0 {
		return refuse(etcdv1alpha1.ReasonOutsideWindow,
			"the schedule has no Complete snapshot of etcd cluster %s to start from", in.ClusterID)
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].Revision > snaps[j].Revision })
	d := PointInTimeDecision{Verdict: Admit, Version: in.Version}
	for _, s := range snaps {
		d.Candidates = append(d.Candidates, s.Candidate)
	}
	if d.Version == "" {
		d.Version = snaps[0].EtcdVersion
	}
	if d.Version == "" {
		return refuse(etcdv1alpha1.ReasonClusterNotFound, "the EtcdCluster does not exist and snapshot %s records no etcd version to replay with", snaps[0].Name)
	}
	return d
}
