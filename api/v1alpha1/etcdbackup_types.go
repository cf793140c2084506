package v1alpha1

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdBackupSpec is one snapshot of one cluster to one destination. Immutable: a backup is a record of what was
// taken; to take another, create another EtcdBackup.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: create a new EtcdBackup instead"
// +kubebuilder:validation:XValidation:rule="!has(self.standbySeed) || ((!has(self.deletionPolicy) || self.deletionPolicy == 'Retain') && !has(self.pointInTime))",message="a standbySeed records a snapshot of another cluster's schedule, which Steward never deletes: it needs deletionPolicy Retain and no pointInTime"
type EtcdBackupSpec struct {
	// ClusterName is the EtcdCluster in the backup's namespace to take the snapshot of.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	ClusterName string `json:"clusterName"`

	// Destination is where the snapshot is stored.
	// +required
	Destination BackupDestination `json:"destination"`

	// DeletionPolicy says what happens to the stored snapshot when this EtcdBackup is deleted: Retain (the
	// default: the file or object stays, only the record goes) or Delete (Steward deletes the file or object
	// first, through a short Job, and only then lets the EtcdBackup go). Backups an EtcdBackupSchedule creates
	// use Delete, so that retention frees the space of the backups it prunes.
	// +kubebuilder:validation:Enum=Retain;Delete
	// +kubebuilder:default=Retain
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// PointInTime makes this backup not from the running cluster but from the continuous backup of an
	// EtcdBackupSchedule: the newest of its snapshots before the target, carried forward to the target by replaying
	// the changes its segments recorded. The result is an ordinary snapshot (restore it with an EtcdRestore or
	// bootstrap.fromBackup). The destination must be on the schedule's claim or bucket.
	// +optional
	PointInTime *PointInTimeSource `json:"pointInTime,omitempty"`
	// StandbySeed makes this backup not a snapshot Steward takes but the record of one a primary's schedule
	// stored, found by a Job: the newest snapshot in the schedule's directory (spec.destination) that the
	// primary's continuous-backup segments continue. A standby cluster starts from it (Steward creates
	// <standby>-standby-seed for spec.standby); status.path names the snapshot found. Read only: never deleted.
	// +optional
	StandbySeed *StandbySeedSource `json:"standbySeed,omitempty"`

	// Compression of the stored snapshot: Zstd (the default: a standard zstd frame, which `zstd -d` reads) or
	// None. Restores read both, and backups taken before compression existed.
	// +kubebuilder:validation:Enum=Zstd;None
	// +optional
	Compression BackupCompression `json:"compression,omitempty"`

	// Encryption encrypts the stored snapshot on the client side, before it leaves the backup Job, to the key
	// in a Secret (age, https://age-encryption.org). Without it the snapshot is stored in the clear: it holds
	// every key of the cluster (for a Kubernetes control plane, every Secret).
	// +optional
	Encryption *BackupEncryption `json:"encryption,omitempty"`
}

// BackupCompression is how a stored snapshot (and a continuous backup's segments) is compressed.
type BackupCompression string

// Backup compressions.
const (
	CompressionZstd BackupCompression = "Zstd"
	CompressionNone BackupCompression = "None"
)

// BackupEncryption names the key backups are encrypted to.
type BackupEncryption struct {
	// KeySecret is a Secret in the same namespace whose key "age.key" holds one or more age X25519 identities
	// (AGE-SECRET-KEY-1..., what `age-keygen` writes; comment lines allowed). New backups are encrypted to the
	// first; every one of them is tried to read a backup. To rotate, put the new identity first and keep the old
	// ones after it for as long as backups encrypted to them are kept. Only the Jobs that write or read the
	// backup mount the Secret; Steward reads it only to check that it holds a key.
	// +required
	KeySecret SecretReference `json:"keySecret"`
}

// EncryptionKeySecretKey is the key of an encryption key Secret that holds the age identities.
const EncryptionKeySecretKey = "age.key"

// PointInTimeSource is a schedule's continuous backup and the point to restore to: a revision, a time, or
// (neither) the latest point stored.
// +kubebuilder:validation:XValidation:rule="!(has(self.revision) && has(self.time))",message="set revision or time, not both"
type PointInTimeSource struct {
	// ScheduleName is an EtcdBackupSchedule of the cluster with continuous backup enabled.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	ScheduleName string `json:"scheduleName"`
	// Revision is the key-space revision to restore to: every change up to and including it.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// Time to restore to: every change the follower received at or before it. RFC 3339 with any fraction of a
	// second and any offset, e.g. "2026-11-25T14:03:00Z" or "2026-11-25T15:03:00.250+01:00"; fractions are kept.
	// +kubebuilder:validation:Format=date-time
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Time string `json:"time,omitempty"`
}

// TargetTime is spec.time parsed (zero when unset).
func (p *PointInTimeSource) TargetTime() (time.Time, error) {
	if p.Time == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, p.Time)
	if err != nil {
		return time.Time{}, fmt.Errorf("pointInTime.time %q: %w", p.Time, err)
	}
	return t, nil
}

// DeletionPolicy is what happens to a backup's stored snapshot when the EtcdBackup is deleted.
type DeletionPolicy string

// Deletion policies.
const (
	DeletionPolicyRetain DeletionPolicy = "Retain"
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// BackupDestination is exactly one place to store a snapshot.
// +kubebuilder:validation:XValidation:rule="(has(self.pvc) ? 1 : 0) + (has(self.s3) ? 1 : 0) + (has(self.gcs) ? 1 : 0) + (has(self.azure) ? 1 : 0) == 1",message="exactly one of pvc, s3, gcs or azure must be set"
type BackupDestination struct {
	// PVC stores the snapshot as a file on a PersistentVolumeClaim in the backup's namespace.
	// +optional
	PVC *PVCDestination `json:"pvc,omitempty"`
	// S3 stores the snapshot as an object in an S3-compatible bucket.
	// +optional
	S3 *S3Destination `json:"s3,omitempty"`
	// GCS stores the snapshot as an object in a Google Cloud Storage bucket.
	// +optional
	GCS *GCSDestination `json:"gcs,omitempty"`
	// Azure stores the snapshot as a block blob in an Azure Blob Storage container.
	// +optional
	Azure *AzureDestination `json:"azure,omitempty"`
}

// PVCDestination is a file on a PersistentVolumeClaim. The claim must exist; the backup Job mounts it.
type PVCDestination struct {
	// ClaimName is the PersistentVolumeClaim in the backup's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	ClaimName string `json:"claimName"`
	// Path of the snapshot file, relative to the volume's root, for example "backups/etcd-1.db". On an
	// EtcdBackupSchedule it is the directory each backup's file is created in. An existing file is never
	// overwritten: the backup fails instead.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.contains('..') && self.matches('^[A-Za-z0-9._/-]+$')",message="path must be relative, without '..', made of letters, digits, '.', '_', '-' and '/'"
	// +required
	Path string `json:"path"`
}

// S3Destination is an object in an S3-compatible bucket.
// +kubebuilder:validation:XValidation:rule="self.key.size() > 0 && !self.key.startsWith('/')",message="key must not be empty or start with '/'"
// +kubebuilder:validation:XValidation:rule="!(has(self.insecure) && self.insecure && has(self.caBundle))",message="caBundle is for HTTPS; it cannot be combined with insecure (plain HTTP)"
type S3Destination struct {
	// Endpoint is the S3 API's host[:port], without scheme, for example "s3.eu-central-1.amazonaws.com" or
	// "minio.storage:9000".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^([A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\\\\[[0-9A-Fa-f:.]+\\\\])(:[0-9]{1,5})?$')",message="endpoint is host[:port] without scheme or path"
	// +required
	Endpoint string `json:"endpoint"`
	// Bucket must exist.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	// +required
	Bucket string `json:"bucket"`
	// Key of the object, for example "etcd/prod-20260101T000000Z.db". On an EtcdBackupSchedule it is the prefix
	// each backup's key starts with. An existing object is never overwritten: the backup fails instead.
	// +kubebuilder:validation:MaxLength=900
	// +required
	Key string `json:"key"`
	// Region of the bucket; empty lets the client discover it (or use us-east-1 for most S3-compatible servers).
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]*$`
	// +optional
	Region string `json:"region,omitempty"`
	// ForcePathStyle addresses the bucket as endpoint/bucket instead of bucket.endpoint (most self-hosted S3
	// servers need it).
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`
	// Insecure talks plain HTTP instead of HTTPS. For tests and trusted networks only: credentials and data
	// travel unencrypted.
	// +optional
	Insecure bool `json:"insecure,omitempty"`
	// CABundle is PEM-encoded CA certificates to trust for the endpoint's HTTPS certificate, in addition to the
	// system's: for S3 servers with a certificate from a private CA. Certificates are public; no Secret needed.
	// +kubebuilder:validation:MaxLength=65536
	// +kubebuilder:validation:XValidation:rule="self.contains('-----BEGIN CERTIFICATE-----')",message="caBundle must be PEM-encoded certificates (-----BEGIN CERTIFICATE-----)"
	// +optional
	CABundle string `json:"caBundle,omitempty"`
	// CredentialsSecret is a Secret in the backup's namespace with keys accessKeyID and secretAccessKey. Only
	// the Jobs read the values (as environment variables); Steward never copies them. Absent: the AWS default
	// chain of the Pod, that is IAM Roles for Service Accounts (a web identity token the EKS webhook mounts for
	// serviceAccountName), EKS Pod Identity, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY set by an injector, or
	// the node's instance profile.
	// +optional
	CredentialsSecret *SecretReference `json:"credentialsSecret,omitempty"`
	// ServiceAccountName is the Kubernetes ServiceAccount the Jobs that reach this bucket run as (and a member's
	// Pod while it restores from it): for IAM Roles for Service Accounts, the one annotated with the role.
	// Empty: the namespace's default ServiceAccount.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// SecretReference names a Secret in the same namespace.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// GCSDestination is an object in a Google Cloud Storage bucket.
//
// Credentials: with credentialsSecret, the Jobs authenticate with the service account key in it; without, with
// the Google client's default chain, which on GKE is Workload Identity: the Jobs (and a restoring member's Pod)
// run as serviceAccountName, the Kubernetes ServiceAccount bound to a Google service account that may use the
// bucket. An http:// endpoint (an emulator) is sent no credentials at all.
// +kubebuilder:validation:XValidation:rule="self.key.size() > 0 && !self.key.startsWith('/')",message="key must not be empty or start with '/'"
// +kubebuilder:validation:XValidation:rule="!(has(self.endpoint) && self.endpoint.startsWith('http://') && has(self.credentialsSecret))",message="credentialsSecret cannot be combined with an http:// endpoint: credentials are never sent over plain HTTP"
type GCSDestination struct {
	// Bucket must exist. Google Cloud Storage's naming rules: 3-63 characters of lowercase letters, digits,
	// '-', '_' and '.', starting and ending with a letter or digit (names with dots up to 222 characters).
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=222
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9._-]*[a-z0-9]$`
	// +kubebuilder:validation:XValidation:rule="self.contains('.') || self.size() <= 63",message="a bucket name without dots has at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('goog')",message="bucket names must not start with goog"
	// +required
	Bucket string `json:"bucket"`
	// Key is the object name, for example "etcd/prod-20260101T000000Z.db". On an EtcdBackupSchedule it is the
	// prefix each backup's object name starts with. An existing object is never overwritten: the backup fails
	// instead.
	// +kubebuilder:validation:MaxLength=900
	// +required
	Key string `json:"key"`
	// Endpoint is the JSON API's base URL, for an emulator or a private endpoint: for example
	// "http://fake-gcs.test:4443" or "https://storage-example.p.googleapis.com". Empty: Google's public endpoint.
	// A plain http:// endpoint is for emulators and tests only: the Jobs send it no credentials.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?# ]+(/[^?# ]*)?$')",message="endpoint is an http:// or https:// URL without query"
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// CredentialsSecret is a Secret in the backup's namespace with key serviceAccount.json, a Google service
	// account key file. Only the Jobs read it (as an environment variable); Steward never copies it. Absent:
	// the Google client's default chain (Workload Identity through serviceAccountName).
	// +optional
	CredentialsSecret *SecretReference `json:"credentialsSecret,omitempty"`
	// ServiceAccountName is the Kubernetes ServiceAccount the Jobs that reach this bucket run as (and a member's
	// Pod while it restores from it), for Workload Identity. Empty: the namespace's default ServiceAccount.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// AzureDestination is a block blob in an Azure Blob Storage container.
//
// Credentials: with credentialsSecret, the Jobs authenticate with the storage account's shared key or a SAS token
// from it; without, with the Azure SDK's default chain, which on AKS is Azure workload identity: the Jobs (and a
// restoring member's Pod) run as serviceAccountName, the Kubernetes ServiceAccount federated with a managed
// identity or application that may use the container, and carry the label azure.workload.identity/use=true so
// that the workload identity webhook mounts its token. An http:// endpoint is sent no credentials, except those
// of Azurite's well-known development account devstoreaccount1, whose key is published.
// +kubebuilder:validation:XValidation:rule="self.key.size() > 0 && !self.key.startsWith('/')",message="key must not be empty or start with '/'"
// +kubebuilder:validation:XValidation:rule="!(has(self.endpoint) && self.endpoint.startsWith('http://') && has(self.credentialsSecret) && self.storageAccount != 'devstoreaccount1')",message="credentialsSecret cannot be combined with an http:// endpoint: credentials are never sent over plain HTTP (only Azurite's published development account devstoreaccount1 may be)"
type AzureDestination struct {
	// StorageAccount is the storage account's name: 3-24 lowercase letters and digits.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=24
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+$`
	// +required
	StorageAccount string `json:"storageAccount"`
	// Container must exist. Azure's naming rules: 3-63 lowercase letters, digits and '-', starting and ending
	// with a letter or digit, no two '-' in a row.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9](-?[a-z0-9])*$`
	// +required
	Container string `json:"container"`
	// Key is the blob name, for example "etcd/prod-20260101T000000Z.db". On an EtcdBackupSchedule it is the
	// prefix each backup's blob name starts with. An existing blob is never overwritten: the backup fails
	// instead.
	// +kubebuilder:validation:MaxLength=900
	// +required
	Key string `json:"key"`
	// Endpoint is the storage account's Blob service URL, for a private endpoint, a sovereign cloud or an
	// emulator: for example "https://prodbackups.privatelink.blob.core.windows.net" or, for Azurite (which
	// puts the account in the path), "http://azurite.test:10000/devstoreaccount1". Empty:
	// https://<storageAccount>.blob.core.windows.net. A plain http:// endpoint is for emulators and tests only.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?# ]+(/[^?# ]*)?$')",message="endpoint is an http:// or https:// URL without query"
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// CredentialsSecret is a Secret in the backup's namespace with either key accountKey (the storage account's
	// shared key, base64 as the portal shows it) or key sasToken (a shared access signature's query string,
	// with or without the leading '?', allowing at least read, create, write, list and delete on the
	// container); accountKey wins when both are set. Only the Jobs read it (as environment variables); Steward
	// never copies it. Absent: the Azure SDK's default chain (workload identity through serviceAccountName, or
	// a managed identity).
	// +optional
	CredentialsSecret *SecretReference `json:"credentialsSecret,omitempty"`
	// ServiceAccountName is the Kubernetes ServiceAccount the Jobs that reach this container run as (and a
	// member's Pod while it restores from it), for Azure workload identity. Empty: the namespace's default
	// ServiceAccount.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// Keys of an Azure credentials Secret: one of them.
const (
	AzureAccountKeyKey = "accountKey"
	AzureSASTokenKey   = "sasToken"
)

// AzureDevelopmentAccount is Azurite's well-known development storage account. Its shared key is published
// with the emulator, so sending it over plain HTTP reveals nothing.
const AzureDevelopmentAccount = "devstoreaccount1"

// GCSServiceAccountKey is the key of a GCS credentials Secret: a service account key file (JSON).
const GCSServiceAccountKey = "serviceAccount.json"

// Keys of an S3 credentials Secret.
const (
	S3AccessKeyIDKey     = "accessKeyID"
	S3SecretAccessKeyKey = "secretAccessKey"
)

// EtcdBackupStatus is what the backup took and where it is: everything a restore needs to find the snapshot and
// check it before trusting it.
type EtcdBackupStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Path is the snapshot's path or key in spec.destination's store when the backup found it rather than named
	// it (spec.standbySeed); empty: spec.destination's own.
	// +optional
	Path string `json:"path,omitempty"`
	// Conditions: Complete and Failed (see conditions.go). At most one of them is True, and once one is, the
	// backup never runs again.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// StartTime is when the backup Job was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the backup reached Complete or Failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Location is where the snapshot is: pvc://<claim>/<path>, s3://<bucket>/<key> (on spec's endpoint),
	// gs://<bucket>/<key> or azure://<storageAccount>/<container>/<key>.
	// +optional
	Location string `json:"location,omitempty"`
	// SizeBytes is the size of the stored file or object as a whole (compressed and encrypted as it is stored).
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// SHA256 is the hex sha256 of the stored file as a whole, to check a copy before restoring it. (The snapshot
	// inside also ends with etcd's own sha256 of the database, which was verified while streaming, and is again
	// after decryption and decompression before every restore.)
	// +optional
	SHA256 string `json:"sha256,omitempty"`
	// SnapshotSizeBytes is the size of etcd's snapshot inside the stored file, before compression and
	// encryption; empty for backups taken before compression existed (whose file is the snapshot itself).
	// +optional
	SnapshotSizeBytes int64 `json:"snapshotSizeBytes,omitempty"`
	// Compression is how the stored file is compressed: Zstd or None.
	// +optional
	Compression BackupCompression `json:"compression,omitempty"`
	// EncryptionRecipient is the public key (age1...) the stored file is encrypted to; empty when it is not
	// encrypted. A restore needs the identity that belongs to it.
	// +optional
	EncryptionRecipient string `json:"encryptionRecipient,omitempty"`
	// Revision is the etcd revision the member had applied when the snapshot began: the snapshot holds every
	// write up to it (and possibly later writes made while the snapshot started).
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// EtcdVersion is the server version of the member the snapshot was taken from.
	// +optional
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// StorageVersion is the snapshot's storage (data format) version as etcd reported it (3.6+).
	// +optional
	StorageVersion string `json:"storageVersion,omitempty"`
	// ClusterID is etcd's cluster ID (hex) of the cluster the snapshot came from.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// Member is the name of the member the snapshot was taken from.
	// +optional
	Member string `json:"member,omitempty"`
	// JobName is the backup Job.
	// +optional
	JobName string `json:"jobName,omitempty"`
	// ClaimSpace is the destination claim's space as the backup Job found it right after it stored the snapshot,
	// or failed to (PVC destinations only). Steward exports it per claim, and StewardBackupClaimFillingUp warns
	// when the next backups will not fit: the kubelet measures a volume only while a Pod mounts it, about once a
	// minute, which a backup Job of a few seconds mostly misses.
	// +optional
	ClaimSpace *ClaimSpace `json:"claimSpace,omitempty"`
}

// ClaimSpace is a volume's size and free space, as statfs reports them to a non-root process.
type ClaimSpace struct {
	// AvailableBytes is the space a new file may still take.
	AvailableBytes int64 `json:"availableBytes"`
	// CapacityBytes is the file system's size.
	CapacityBytes int64 `json:"capacityBytes"`
}

// EtcdBackup is one snapshot of an EtcdCluster, taken by a Job and stored on a PVC, in an S3-compatible bucket, in
// Google Cloud Storage or in Azure Blob Storage.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcdbackup,categories=steward
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterName`
// +kubebuilder:printcolumn:name="Complete",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Failed")].reason`,priority=0
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.sizeBytes`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Location",type=string,JSONPath=`.status.location`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: Steward labels the objects it makes for the EtcdBackup with its name (a label value)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EtcdBackupSpec `json:"spec"`
	// +optional
	Status EtcdBackupStatus `json:"status,omitempty"`
}

// EtcdBackupList is a list of EtcdBackups.
// +kubebuilder:object:root=true
type EtcdBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdBackup{}, &EtcdBackupList{})
}
