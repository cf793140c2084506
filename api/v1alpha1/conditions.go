package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of EtcdCluster status. Every condition is written on the first reconcile (Unknown until
// known), with a CamelCase reason.
const (
	// ConditionAvailable is True when the cluster has quorum and serves clients.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while Steward works toward the spec (bootstrap, scaling, upgrade); its
	// message names the step under way.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when members are unhealthy or Steward cannot act safely; its reason says why.
	ConditionDegraded = "Degraded"
)

// Finished reports whether a one-shot object (EtcdBackup, EtcdRestore) has ended: Complete or Failed is True.
func Finished(conditions []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conditions, ConditionComplete) || meta.IsStatusConditionTrue(conditions, ConditionFailed)
}

// Condition types of EtcdBackup status. Both are written on the first reconcile (False until the backup ends);
// once one is True the backup is finished and never runs again.
const (
	// ConditionComplete is True when the snapshot is stored and verified.
	ConditionComplete = "Complete"
	// ConditionFailed is True when the backup ended without a stored snapshot; its reason says why.
	ConditionFailed = "Failed"
)

// Reasons of EtcdBackup conditions.
const (
	// ReasonBackupPending: the backup has not started yet (admission checks under way).
	ReasonBackupPending = "Pending"
	// ReasonBackupRunning: the backup Job is running.
	ReasonBackupRunning = "Running"
	// ReasonBackupSucceeded: the snapshot was streamed, its etcd checksum verified and the file or object
	// committed under its final name.
	ReasonBackupSucceeded = "Succeeded"
	// ReasonClusterNotFound: spec.clusterName names no EtcdCluster in the namespace.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonClusterUnavailable: the cluster has no healthy member to take a snapshot from.
	ReasonClusterUnavailable = "ClusterUnavailable"
	// ReasonDestinationNotFound: the PVC or the S3 credentials Secret does not exist (or lacks a key).
	ReasonDestinationNotFound = "DestinationNotFound"
	// ReasonDestinationExists: a file or object already exists at the destination; backups never overwrite.
	ReasonDestinationExists = "DestinationExists"
	// ReasonSnapshotFailed: no member delivered a complete snapshot.
	ReasonSnapshotFailed = "SnapshotFailed"
	// ReasonChecksumMismatch: the snapshot stream did not match etcd's trailing sha256; nothing was stored.
	ReasonChecksumMismatch = "ChecksumMismatch"
	// ReasonUploadFailed: writing to the destination failed; nothing was stored under the final name.
	ReasonUploadFailed = "UploadFailed"
	// ReasonJobFailed: the backup Job failed without reporting a result (killed, deadline exceeded, image
	// missing); the Job's own condition message says more.
	ReasonJobFailed = "JobFailed"

	// Point-in-time backups (spec.pointInTime).
	// ReasonScheduleNotFound: spec.pointInTime.scheduleName names no EtcdBackupSchedule of the cluster.
	ReasonScheduleNotFound = "ScheduleNotFound"
	// ReasonNotContinuous: the schedule does not have continuous backup enabled.
	ReasonNotContinuous = "NotContinuous"
	// ReasonDestinationMismatch: the backup's destination is not on the schedule's claim or bucket, where the
	// snapshots and segments it reads are.
	ReasonDestinationMismatch = "DestinationMismatch"
	// ReasonOutsideWindow: no snapshot and unbroken chain of segments reaches the target; the message names the
	// recoverable window(s).
	ReasonOutsideWindow = "OutsideWindow"
	// ReasonSegmentCorrupt: a segment the target needs failed its checksum or does not match its name; nothing was
	// written.
	ReasonSegmentCorrupt = "SegmentCorrupt"
	// ReasonReplayFailed: replaying the segments onto the snapshot failed (they were not one history).
	ReasonReplayFailed = "ReplayFailed"
	// ReasonInvalidTarget: spec.pointInTime.time is not an RFC 3339 time.
	ReasonInvalidTarget = "InvalidTarget"
)

// Condition types and reasons of EtcdBackupSchedule status.
const (
	// ConditionReady is True when the schedule is valid and creating backups.
	ConditionReady = "Ready"
	// ReasonScheduled: the schedule is valid and backups are created on it.
	ReasonScheduled = "Scheduled"
	// ReasonSuspended: spec.suspend is set.
	ReasonSuspended = "Suspended"
	// ReasonInvalidSchedule: spec.schedule does not parse.
	ReasonInvalidSchedule = "InvalidSchedule"

	// ConditionContinuousBackup is True while continuous backup follows the cluster and every change is being
	// stored; absent when it is not enabled.
	ConditionContinuousBackup = "ContinuousBackup"
	// ReasonFollowing: the follower watches the cluster and stores segments; a snapshot starts its chain.
	ReasonFollowing = "Following"
	// ReasonFollowerStarting: the follower's Pod is not ready yet, or has not reported.
	ReasonFollowerStarting = "FollowerStarting"
	// ReasonFollowerFailing: the follower reports an error (connecting, watching, storing).
	ReasonFollowerFailing = "FollowerFailing"
	// ReasonWaitingForSnapshot: the follower's chain starts after every Complete snapshot (it just started, or
	// etcd compacted revisions it had not read): Steward takes a snapshot at once.
	ReasonWaitingForSnapshot = "WaitingForSnapshot"
)

// Condition types and reasons of EtcdRestore status. Complete and Failed are as for EtcdBackup.
const (
	// ConditionVerified is True once the stored snapshot matched the backup's size and sha256 and etcd's own
	// trailing checksum; only then is anything of the cluster touched.
	ConditionVerified = "Verified"

	// ReasonRestorePending: admission checks under way.
	ReasonRestorePending = "Pending"
	// ReasonConfirmationRequired: re-seeding a formed cluster needs spec.confirm set to the cluster's name.
	ReasonConfirmationRequired = "ConfirmationRequired"
	// ReasonVerifying: the verify Job is reading the stored snapshot.
	ReasonVerifying = "Verifying"
	// ReasonRestoring: the cluster's controller is replacing members with ones started from the snapshot.
	ReasonRestoring = "Restoring"
	// ReasonRestoreSucceeded: every member started from the snapshot and the cluster has quorum.
	ReasonRestoreSucceeded = "Succeeded"
	// ReasonBackupNotFound: spec.backupName names no EtcdBackup in the namespace.
	ReasonBackupNotFound = "BackupNotFound"
	// ReasonBackupNotComplete: the EtcdBackup failed, or has no complete record (location, size, sha256).
	ReasonBackupNotComplete = "BackupNotComplete"
	// ReasonWrongCluster: the backup was taken of another cluster than the one to re-seed.
	ReasonWrongCluster = "WrongCluster"
	// ReasonIncompatibleVersion: the snapshot's etcd version cannot be restored by the cluster's release.
	ReasonIncompatibleVersion = "IncompatibleVersion"
	// ReasonClusterHasQuorum: the cluster to re-seed has quorum and spec.allowRollbackOfHealthyCluster is not set;
	// the message names the revisions a rollback would discard.
	ReasonClusterHasQuorum = "ClusterHasQuorum"
	// ReasonMembersServing: Steward does not see the cluster's quorum through etcd (the cluster is not
	// Available: a NetworkPolicy, the operator cut off from the members), but a quorum of its member Pods are
	// Ready (etcd's /readyz, which passes only with a leader). The cluster serves: it is not re-seeded.
	ReasonMembersServing = "MembersServing"
	// ReasonTakingSafetyBackup: a healthy cluster is about to be rolled back; its safety backup is being taken.
	ReasonTakingSafetyBackup = "TakingSafetyBackup"
	// ReasonSafetyBackupFailed: the safety backup before a rollback failed; nothing of the cluster was touched.
	ReasonSafetyBackupFailed = "SafetyBackupFailed"
	// ReasonClusterNotFormed: the cluster has not formed and does not name this backup in bootstrap.fromBackup.
	ReasonClusterNotFormed = "ClusterNotFormed"
	// ReasonRestoreInProgress: another restore of the same cluster is under way.
	ReasonRestoreInProgress = "RestoreInProgress"
	// ReasonSnapshotCorrupt: the stored snapshot does not match the backup's size or sha256, or etcd's own
	// trailing checksum: it was truncated, damaged or replaced. Nothing of the cluster was touched.
	ReasonSnapshotCorrupt = "SnapshotCorrupt"
	// ReasonSnapshotUnreadable: the stored snapshot could not be read (missing file or object, credentials).
	ReasonSnapshotUnreadable = "SnapshotUnreadable"
	// ReasonRestoreFailed: a member failed to restore the snapshot into its data dir.
	ReasonRestoreFailed = "RestoreFailed"
)

// Reasons of the Ready condition of an EtcdUser in conflict. Such a user conflicts with what somebody else owns
// in etcd: Steward changes nothing in etcd for it until the conflict is gone, and never deletes what it does not
// own.
const (
	// ReasonUserNameConflict: an older EtcdUser of the same cluster declares the same etcd user (spec.userName,
	// or the object's name): that one owns it; this one waits, and takes over once that one is deleted.
	ReasonUserNameConflict = "UserNameConflict"
	// ReasonRoleConflict: spec.permissions needs a role named like the user, and etcd holds a role of that name
	// that Steward did not create (made by hand): Steward neither changes nor deletes it.
	ReasonRoleConflict = "RoleConflict"
)
