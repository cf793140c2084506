package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdBackupScheduleSpec creates EtcdBackups on a cron schedule and prunes them by retention.
type EtcdBackupScheduleSpec struct {
	// ClusterName is the EtcdCluster in the schedule's namespace to back up.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	ClusterName string `json:"clusterName"`

	// Schedule in standard five-field cron syntax (minute hour day-of-month month day-of-week, UTC), or a
	// descriptor such as "@hourly" or "@every 6h". A missed time is not caught up: after downtime only the most
	// recent missed backup is taken.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') || self.split(' ').filter(f, f != '').size() == 5",message="schedule must have five fields (minute hour day-of-month month day-of-week) or be a descriptor like @hourly"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('@every ') || duration(self.substring(7).trim()) >= duration('10s')",message="@every interval must be a duration of at least 10s"
	// +required
	Schedule string `json:"schedule"`

	// Destination is the template of each backup's destination: for pvc, path is the directory the backup files
	// go to; for s3, gcs and azure, key is the prefix of the backup objects. Each backup is named
	// <cluster>-<UTC time of the schedule, 20060102T150405Z>.db inside it.
	// +required
	Destination BackupDestination `json:"destination"`

	// Compression of each backup's snapshot and of the continuous backup's segments: Zstd (the default) or None.
	// +kubebuilder:validation:Enum=Zstd;None
	// +optional
	Compression BackupCompression `json:"compression,omitempty"`

	// Encryption encrypts each backup's snapshot and the continuous backup's segments to the key in a Secret
	// (see EtcdBackup's spec.encryption). A change applies to the backups and segments written after it.
	// +optional
	Encryption *BackupEncryption `json:"encryption,omitempty"`

	// Retention says which successful backups to keep. The newest successful backup is always kept.
	// +optional
	Retention Retention `json:"retention,omitempty"`

	// ConcurrencyPolicy: Forbid (the default) skips a scheduled time while a backup of this schedule is still
	// running; Allow starts it anyway.
	// +kubebuilder:validation:Enum=Forbid;Allow
	// +kubebuilder:default=Forbid
	// +optional
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// Suspend stops creating backups; retention still applies.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// FailedBackupsHistoryLimit is how many failed EtcdBackups to keep for inspection (a failed backup has no
	// data). Successful ones are governed by retention.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=3
	// +optional
	FailedBackupsHistoryLimit *int32 `json:"failedBackupsHistoryLimit,omitempty"`

	// Continuous, when enabled, also records every change the cluster makes between the scheduled snapshots, as
	// segments next to them on the same destination, so that an EtcdBackup with spec.pointInTime (or an
	// EtcdRestore with spec.pointInTime) can restore the cluster to any revision or time in the recoverable
	// window (status.continuous). Retention prunes segments together with the snapshots they extend.
	// +optional
	Continuous *ContinuousBackup `json:"continuous,omitempty"`
}

// ContinuousBackup configures the follower: a Deployment that watches every change of the cluster and stores it
// in revision-ordered segments.
type ContinuousBackup struct {
	// Enabled runs the follower.
	// +required
	Enabled bool `json:"enabled"`
	// SegmentInterval is how often the changes received since the last segment are stored: under steady writes,
	// the changes a total loss of the cluster can lose. Default 5s.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('5m')",message="segmentInterval must be between 1s and 5m"
	// +optional
	SegmentInterval *metav1.Duration `json:"segmentInterval,omitempty"`
	// SegmentMaxEvents stores a segment sooner, as soon as this many changes are pending. Default 10000.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	SegmentMaxEvents *int32 `json:"segmentMaxEvents,omitempty"`
}

// Retention limits successful backups by count and age. Pruned backups are deleted together with their data.
// +kubebuilder:validation:XValidation:rule="!has(self.maxAge) || duration(self.maxAge) >= duration('1m')",message="maxAge must be at least 1m"
type Retention struct {
	// MaxCount is the most successful backups to keep.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=7
	// +optional
	MaxCount *int32 `json:"maxCount,omitempty"`
	// MaxAge deletes successful backups older than this (by the time they completed), except the newest one.
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// ConcurrencyPolicy is what a schedule does when a scheduled time comes while its previous backup still runs.
type ConcurrencyPolicy string

// Concurrency policies.
const (
	ConcurrencyForbid ConcurrencyPolicy = "Forbid"
	ConcurrencyAllow  ConcurrencyPolicy = "Allow"
)

// BackupRef is one backup and when it finished.
type BackupRef struct {
	// Name of the EtcdBackup.
	Name string `json:"name"`
	// Time it completed or failed.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// Reason it failed, for a failed backup.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// EtcdBackupScheduleStatus is the schedule's memory and its last results.
type EtcdBackupScheduleStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (see conditions.go).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastScheduleTime is the last scheduled time a backup was created for: the controller's memory, so that
	// no scheduled time is taken twice.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// NextScheduleTime is the next time a backup is due.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// Active are the schedule's backups still running.
	// +optional
	Active []string `json:"active,omitempty"`
	// LastSuccessfulBackup is the newest Complete backup of the schedule.
	// +optional
	LastSuccessfulBackup *BackupRef `json:"lastSuccessfulBackup,omitempty"`
	// LastFailure is the newest Failed backup of the schedule.
	// +optional
	LastFailure *BackupRef `json:"lastFailure,omitempty"`
	// Continuous is the state of continuous backup while it is enabled.
	// +optional
	Continuous *ContinuousBackupStatus `json:"continuous,omitempty"`
}

// ContinuousBackupStatus is what the follower reported when Steward last asked, and the window it makes
// recoverable. Positions and times only.
type ContinuousBackupStatus struct {
	// Follower is the Deployment that follows the cluster.
	Follower string `json:"follower"`
	// Location is where the segments of the current etcd cluster ID are: pvc://<claim>/<dir> or
	// s3://<bucket>/<prefix> or gs://<bucket>/<prefix>.
	// +optional
	Location string `json:"location,omitempty"`
	// ClusterID (hex) of the etcd cluster followed.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// RecoverableFrom and RecoverableTo bound the window a point-in-time backup can restore to now: from the oldest
	// Complete snapshot the stored segments carry forward without a gap, to the end of the newest stored segment.
	// +optional
	RecoverableFrom *RecoveryPoint `json:"recoverableFrom,omitempty"`
	// +optional
	RecoverableTo *RecoveryPoint `json:"recoverableTo,omitempty"`
	// ChainStart is the first revision of the unbroken run of segments the follower extends.
	// +optional
	ChainStart int64 `json:"chainStart,omitempty"`
	// PendingRevisions is the lag: revisions the follower has received but not stored yet.
	// +optional
	PendingRevisions int64 `json:"pendingRevisions,omitempty"`
	// CompactedAt is when etcd last compacted revisions the follower had not read (a gap in the segments; a
	// snapshot is taken at once to start a new window).
	// +optional
	CompactedAt *metav1.Time `json:"compactedAt,omitempty"`
	// ObservedTime is when Steward last read the follower's report.
	// +optional
	ObservedTime *metav1.Time `json:"observedTime,omitempty"`
}

// RecoveryPoint is one end of a recoverable window.
type RecoveryPoint struct {
	// Revision of the key space.
	Revision int64 `json:"revision"`
	// Time the follower observed that revision (or, at the window's start, the time the snapshot began).
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// Backup is the snapshot the window starts from.
	// +optional
	Backup string `json:"backup,omitempty"`
}

// EtcdBackupSchedule creates EtcdBackups of a cluster on a cron schedule and prunes old ones (and their data).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdbackupschedule,categories=steward
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last Success",type=date,JSONPath=`.status.lastSuccessfulBackup.time`
// +kubebuilder:printcolumn:name="Next",type=date,JSONPath=`.status.nextScheduleTime`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: Steward labels the objects it makes for the EtcdBackupSchedule with its name (a label value)"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
type EtcdBackupSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EtcdBackupScheduleSpec `json:"spec"`
	// +optional
	Status EtcdBackupScheduleStatus `json:"status,omitempty"`
}

// EtcdBackupScheduleList is a list of EtcdBackupSchedules.
// +kubebuilder:object:root=true
type EtcdBackupScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackupSchedule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdBackupSchedule{}, &EtcdBackupScheduleList{})
}
