package v1alpha1

// Condition types of EtcdCluster status. Every condition is written on the first reconcile (Unknown until
// known), with a CamelCase reason from the constants below.
const (
	// ConditionAvailable is True when the cluster has quorum and serves clients.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while Steward works toward the spec (bootstrap, scaling, upgrade); its
	// message names the step under way.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when members are unhealthy or Steward cannot act safely; its reason says why.
	ConditionDegraded = "Degraded"
)

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
)
