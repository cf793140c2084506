package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdRestoreSpec seeds an EtcdCluster from one EtcdBackup: every member is restored from the same snapshot,
// as a new cluster identity. Two uses:
//
//   - A cluster that has not formed yet and names the backup in spec.bootstrap.fromBackup: Steward creates this
//     EtcdRestore itself (named <cluster>-from-backup) and the cluster's first members start from the snapshot.
//   - A cluster that has formed and lost quorum: its members are stopped, their volumes set aside (kept, not
//     deleted) and new members start from the snapshot. Writes made after the backup are lost, so this needs
//     spec.confirm, and it is refused while the cluster has quorum.
//
// +kubebuilder:validation:XValidation:rule="self.clusterName == oldSelf.clusterName && has(self.backupName) == has(oldSelf.backupName) && (!has(self.backupName) || self.backupName == oldSelf.backupName) && has(self.pointInTime) == has(oldSelf.pointInTime) && (!has(self.pointInTime) || self.pointInTime == oldSelf.pointInTime)",message="clusterName, backupName and pointInTime are immutable: create a new EtcdRestore instead"
// +kubebuilder:validation:XValidation:rule="has(self.backupName) != has(self.pointInTime)",message="set exactly one of backupName or pointInTime"
type EtcdRestoreSpec struct {
	// ClusterName is the EtcdCluster in the restore's namespace to seed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	ClusterName string `json:"clusterName"`

	// BackupName is a Complete EtcdBackup in the restore's namespace. To re-seed a cluster that has formed, it
	// must be a backup of that cluster (its etcd cluster ID is checked). Exactly one of backupName and pointInTime.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	BackupName string `json:"backupName,omitempty"`

	// PointInTime restores the cluster to a revision or time of a schedule's continuous backup: Steward first
	// makes the point-in-time EtcdBackup <restore>-pit (owned by this restore, kept with the file after it) on the
	// schedule's destination, then restores it like any backup. Exactly one of backupName and pointInTime.
	// +optional
	PointInTime *PointInTimeSource `json:"pointInTime,omitempty"`

	// Confirm must equal clusterName to re-seed a cluster that has formed and lost quorum: its members are
	// replaced by new ones restored from the backup, and writes acknowledged after the backup are lost. Until it
	// does, the restore waits (reason ConfirmationRequired) and touches nothing. Not needed for a new cluster.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Confirm string `json:"confirm,omitempty"`

	// AllowRollbackOfHealthyCluster, with confirm, re-seeds a cluster that has quorum: it is rolled back to the
	// backup, and every write made after the backup's revision is discarded. Steward first takes a safety backup
	// of the cluster as it is (status.safetyBackup, to the same destination as the backup restored) and stops if
	// that fails. Without it, a restore of a cluster that has quorum is refused, saying what would be lost.
	// +optional
	AllowRollbackOfHealthyCluster bool `json:"allowRollbackOfHealthyCluster,omitempty"`
}

// RestoreMode is what a restore does to its cluster.
// +kubebuilder:validation:Enum=NewCluster;Reseed
type RestoreMode string

// Restore modes.
const (
	// RestoreNewCluster: the cluster's first members start from the snapshot (spec.bootstrap.fromBackup).
	RestoreNewCluster RestoreMode = "NewCluster"
	// RestoreReseed: a cluster that lost quorum gets new members started from the snapshot.
	RestoreReseed RestoreMode = "Reseed"
)

// EtcdRestoreStatus is the progress and outcome of a restore.
type EtcdRestoreStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Verified (the stored snapshot matched the backup's size and sha256 and etcd's own checksum),
	// Complete and Failed (at most one True; once one is, the restore is over). See conditions.go.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Mode is NewCluster or Reseed, decided when the restore is admitted.
	// +optional
	Mode RestoreMode `json:"mode,omitempty"`
	// StartTime is when the restore was admitted.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the restore reached Complete or Failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Location, SHA256, SizeBytes and Revision are the backup's, as verified.
	// +optional
	Location string `json:"location,omitempty"`
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// PreviousClusterID is the cluster's etcd cluster ID before a re-seed; ClusterID the one after the restore.
	// +optional
	PreviousClusterID string `json:"previousClusterID,omitempty"`
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// Members are the members started from the snapshot.
	// +optional
	Members []string `json:"members,omitempty"`
	// RetiredVolumes are the PersistentVolumeClaims of the members a re-seed replaced. They are kept, labelled
	// etcd.steward.dev/retired-from=<cluster>, for a human to inspect or delete.
	// +optional
	RetiredVolumes []string `json:"retiredVolumes,omitempty"`
	// SafetyBackup is the EtcdBackup of the cluster as it was, taken before a healthy cluster was rolled back
	// (spec.allowRollbackOfHealthyCluster); it is owned by this restore.
	// +optional
	SafetyBackup string `json:"safetyBackup,omitempty"`
	// PointInTimeBackup is the EtcdBackup made for spec.pointInTime.
	// +optional
	PointInTimeBackup string `json:"pointInTimeBackup,omitempty"`
	// VerifyJobName is the Job that verified the stored snapshot.
	// +optional
	VerifyJobName string `json:"verifyJobName,omitempty"`
}

// EtcdRestore seeds an EtcdCluster from an EtcdBackup.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdrestore,categories=steward
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Backup",type=string,JSONPath=`.spec.backupName`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.status.mode`
// +kubebuilder:printcolumn:name="Complete",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].reason`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: Steward labels the objects it makes for the EtcdRestore with its name (a label value)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdRestore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EtcdRestoreSpec `json:"spec"`
	// +optional
	Status EtcdRestoreStatus `json:"status,omitempty"`
}

// EtcdRestoreList is a list of EtcdRestores.
// +kubebuilder:object:root=true
type EtcdRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdRestore `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdRestore{}, &EtcdRestoreList{})
}

// PointInTimeBackupName is the EtcdBackup Steward makes for a restore of spec.pointInTime.
func PointInTimeBackupName(restore string) string { return DerivedName(restore, "-pit") }

// RestoreBackupName is the EtcdBackup a restore restores: spec.backupName, or for spec.pointInTime the backup
// Steward makes for it.
func RestoreBackupName(r *EtcdRestore) string {
	if r.Spec.PointInTime != nil {
		return PointInTimeBackupName(r.Name)
	}
	return r.Spec.BackupName
}
