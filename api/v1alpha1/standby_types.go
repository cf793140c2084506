package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// StandbySpec makes a cluster a standby of a primary it shares only an object store with: it starts from the
// newest snapshot the primary's continuous backup stored there and keeps replaying its segments, revision-exact,
// until promoted.
// +kubebuilder:validation:XValidation:rule="!(has(oldSelf.promote) && oldSelf.promote) || (has(self.promote) && self.promote)",message="promote cannot be undone: a promoted cluster has written revisions of its own, which no segment of the primary continues; create a new standby instead"
type StandbySpec struct {
	// Source is where the primary's EtcdBackupSchedule with continuous backup writes its snapshots and segments.
	// Immutable: segments of another source do not continue the standby's history.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="standby.source is immutable: create a new standby to follow another source"
	// +required
	Source StandbySource `json:"source"`

	// Promote stops following and makes the standby an ordinary cluster: Steward applies every complete segment
	// the source has, stops the applier, records the revision reached (status.standby.promotedRevision) and
	// opens writes. Refused while the source still advances (fencingWindow), unless forcePromotion.
	// +optional
	Promote bool `json:"promote,omitempty"`

	// ForcePromotion promotes even while the source's segments still advance: for when the old primary has been
	// fenced in another way (its writers stopped, its store credentials revoked). Whatever the old primary
	// writes afterwards is not on the promoted cluster.
	// +optional
	ForcePromotion bool `json:"forcePromotion,omitempty"`

	// FencingWindow is how long the source's segment list must have stayed unchanged before Steward promotes: a
	// primary that still runs writes a segment at least once a minute, even when idle (a heartbeat).
	// +kubebuilder:default="3m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('2m')",message="fencingWindow must be at least 2m: the primary's follower writes a heartbeat segment once a minute on a quiet cluster, and a shorter window would take a quiet primary for a dead one"
	// +optional
	FencingWindow *metav1.Duration `json:"fencingWindow,omitempty"`
}

// StandbySource is a primary's continuous backup as its schedule stores it.
type StandbySource struct {
	// ClusterName is the primary EtcdCluster's name: its schedule stores segments under
	// <destination>/<clusterName>-segments/<etcd cluster ID>/ and snapshots as <destination>/<clusterName>-<time>.db.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	ClusterName string `json:"clusterName"`

	// Destination is the primary schedule's spec.destination (a PVC directory, or a bucket and key prefix),
	// reached with credentials in the standby's namespace. The standby only reads it.
	// +required
	Destination BackupDestination `json:"destination"`

	// Encryption names the key Secret (in the standby's namespace) the primary's schedule encrypts with, when it
	// does.
	// +optional
	Encryption *BackupEncryption `json:"encryption,omitempty"`
}

// StandbyPhase is where a standby is in its life.
// +kubebuilder:validation:Enum=Bootstrapping;Following;Stopped;Promoting;Promoted
type StandbyPhase string

// Standby phases.
const (
	// StandbyBootstrapping: the members are being created from the source's newest snapshot.
	StandbyBootstrapping StandbyPhase = "Bootstrapping"
	// StandbyFollowing: the applier replays the source's segments as they arrive.
	StandbyFollowing StandbyPhase = "Following"
	// StandbyStopped: the applier found a gap, a corrupt segment, a changed source or a write it did not make,
	// and applies nothing more (the Standby condition says which).
	StandbyStopped StandbyPhase = "Stopped"
	// StandbyPromoting: promotion was asked for and is under way (or waits for the fencing window).
	StandbyPromoting StandbyPhase = "Promoting"
	// StandbyPromoted: the cluster is an ordinary cluster now.
	StandbyPromoted StandbyPhase = "Promoted"
)

// StandbyStatus is a standby's progress, as its applier last reported it, and the controller's memory of what
// cannot be observed again.
type StandbyStatus struct {
	// Phase is Bootstrapping, Following, Stopped, Promoting or Promoted.
	// +optional
	Phase StandbyPhase `json:"phase,omitempty"`

	// SourceClusterID is the etcd cluster ID (hex) of the primary the standby follows, fixed at bootstrap. The
	// controller's memory: the standby's own etcd has an ID of its own.
	// +optional
	SourceClusterID string `json:"sourceClusterID,omitempty"`

	// AppliedRevision is the standby's revision: every change of the primary up to it is applied.
	// +optional
	AppliedRevision int64 `json:"appliedRevision,omitempty"`

	// SourceRevision is the end of the newest complete segment the source has.
	// +optional
	SourceRevision int64 `json:"sourceRevision,omitempty"`

	// LagRevisions is SourceRevision - AppliedRevision.
	// +optional
	LagRevisions int64 `json:"lagRevisions,omitempty"`

	// LagSeconds is how much older (on the primary follower's clock) the last segment applied is than the
	// source's newest: 0 when caught up.
	// +optional
	LagSeconds int64 `json:"lagSeconds,omitempty"`

	// LastSegment is the name of the last segment applied.
	// +optional
	LastSegment string `json:"lastSegment,omitempty"`

	// SourceChangedTime is when the applier (on its clock) last saw the source's segments change; the fencing
	// window counts from it.
	// +optional
	SourceChangedTime *metav1.Time `json:"sourceChangedTime,omitempty"`

	// ObservedTime is when the applier's report was read.
	// +optional
	ObservedTime *metav1.Time `json:"observedTime,omitempty"`

	// PromotedRevision is the revision the cluster had when it was promoted: every write the primary acknowledged
	// up to it is on the promoted cluster, with the same revisions. The controller's memory.
	// +optional
	PromotedRevision int64 `json:"promotedRevision,omitempty"`

	// PromotedTime is when the promotion finished. The controller's memory.
	// +optional
	PromotedTime *metav1.Time `json:"promotedTime,omitempty"`
}

// StandbySeedName is the EtcdBackup a standby's members start from: its source's newest snapshot carried to the
// newest segment, recording the source's etcd cluster ID.
func StandbySeedName(cluster string) string { return DerivedName(cluster, "-standby-seed") }

// StandbyApplierName is the Deployment that replays a standby's source into it.
func StandbyApplierName(cluster string) string { return DerivedName(cluster, "-standby") }

// StandbyFenceName is the ConfigMap that records what a standby's write fence took from etcd's roles and users,
// so that promotion gives back exactly that.
func StandbyFenceName(cluster string) string { return DerivedName(cluster, "-standby-fence") }

// StandbySeedSource names the primary whose schedule's snapshots a standby seed is found among.
type StandbySeedSource struct {
	// ClusterName is the primary EtcdCluster's name (its schedule's snapshots are <clusterName>-<time>.db).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	ClusterName string `json:"clusterName"`
}

// WritesFenced reports whether c is a standby whose promotion is not done: etcd refuses its clients' writes
// (the write fence), and EtcdUsers of it get read permissions only.
func WritesFenced(c *EtcdCluster) bool {
	return c.Spec.Standby != nil && (c.Status.Standby == nil || c.Status.Standby.Phase != StandbyPromoted)
}
