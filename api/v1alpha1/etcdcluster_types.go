package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdClusterSpec is the desired state of an etcd cluster.
// +kubebuilder:validation:XValidation:rule="!has(self.etcd) || !has(self.etcd.quotaBackendBytes) || !has(self.storage) || !has(self.storage.size) || quantity(string(self.etcd.quotaBackendBytes)).add(quantity(string(self.etcd.quotaBackendBytes))).add(quantity('448Mi')).compareTo(quantity(string(self.storage.size))) <= 0",message="etcd.quotaBackendBytes does not fit storage.size: the volume must hold twice the quota (a defragmentation, or a snapshot from the leader, writes a second copy of the database) plus 448Mi for WAL segments and snapshots; raise storage.size or lower the quota (or leave it unset: Steward derives it from the size)"
// +kubebuilder:validation:XValidation:rule="has(self.bootstrap) == has(oldSelf.bootstrap) && (!has(self.bootstrap) || (has(self.bootstrap.fromBackup) == has(oldSelf.bootstrap.fromBackup) && (!has(self.bootstrap.fromBackup) || self.bootstrap.fromBackup == oldSelf.bootstrap.fromBackup) && has(self.bootstrap.fromExisting) == has(oldSelf.bootstrap.fromExisting)))",message="bootstrap is immutable: it only applies when the cluster is created (of fromExisting, only handover may change)"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.bootstrap.fromExisting) || !has(self.hibernation) || !self.hibernation.enabled",message="a cluster adopting a running etcd (bootstrap.fromExisting) cannot hibernate: the source's members are not Steward's to stop"
// +kubebuilder:validation:XValidation:rule="!has(self.image) || !self.version.matches('^3[.][0-9]+[.][0-9]+$') || !oldSelf.version.matches('^3[.][0-9]+[.][0-9]+$') || int(self.version.split('.')[1]) - int(oldSelf.version.split('.')[1]) <= 1",message="with spec.image set, version may go up by at most one minor version at a time: Steward cannot know the image of the releases in between; set the next minor's release and its image first, or unset image"
// +kubebuilder:validation:XValidation:rule="!has(self.maintenance) || !has(self.maintenance.recoverFromNoSpace) || !has(self.maintenance.recoverFromNoSpace.maxQuotaBackendBytes) || !has(self.storage) || !has(self.storage.size) || quantity(string(self.maintenance.recoverFromNoSpace.maxQuotaBackendBytes)).add(quantity(string(self.maintenance.recoverFromNoSpace.maxQuotaBackendBytes))).add(quantity('448Mi')).compareTo(quantity(string(self.storage.size))) <= 0",message="maintenance.recoverFromNoSpace.maxQuotaBackendBytes does not fit storage.size: a raised quota must fit the volume as any quota (twice the quota plus 448Mi); raise storage.size or lower the maximum"
// +kubebuilder:validation:XValidation:rule="!has(self.hibernation) || !self.hibernation.enabled || !has(self.storage) || !self.storage.ephemeral",message="hibernation.enabled needs volumes: an ephemeral cluster (storage.ephemeral) keeps its data in emptyDirs, which go with its Pods; it cannot hibernate"
// +kubebuilder:validation:XValidation:rule="!has(self.maintenance) || !has(self.maintenance.recoverFromNoSpace) || !has(self.maintenance.recoverFromNoSpace.maxQuotaBackendBytes) || !has(self.etcd) || !has(self.etcd.quotaBackendBytes) || quantity(string(self.maintenance.recoverFromNoSpace.maxQuotaBackendBytes)).compareTo(quantity(string(self.etcd.quotaBackendBytes))) >= 0",message="maintenance.recoverFromNoSpace.maxQuotaBackendBytes is below etcd.quotaBackendBytes: the maximum Steward may raise the quota to cannot be below the quota itself"
// +kubebuilder:validation:XValidation:rule="has(self.standby) == has(oldSelf.standby)",message="standby can only be set when the cluster is created (a running cluster's history cannot be continued by another's segments), and stays after promotion as its record"
// +kubebuilder:validation:XValidation:rule="!has(self.standby) || !has(self.bootstrap)",message="a standby bootstraps from its source's newest snapshot: bootstrap cannot be combined with standby"
// +kubebuilder:validation:XValidation:rule="!has(self.standby) || self.standby.promote || (has(self.auth) && self.auth.enabled)",message="a standby needs auth.enabled: etcd's authentication is how its writes are refused (every user but root is read-only until promotion)"
type EtcdClusterSpec struct {
	// Replicas is the number of voting members. Odd, because an even count tolerates no more failures than the
	// odd count below it and makes quorum harder to keep.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	// +kubebuilder:validation:XValidation:rule="self % 2 == 1",message="replicas must be odd: 1, 3, 5, 7 or 9"
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// Version is the etcd version the members run: a 3.5, 3.6 or 3.7 release, for example "3.6.16". Changing it
	// rolls the members one at a time (followers first, the leader last after handing leadership over). Upgrades
	// go one minor at a time and only from a patch release etcd's upgrade guide allows (3.5.26+ to 3.6, 3.6.11+
	// to 3.7); a version several minors ahead is reached through the operator's release of each minor in between
	// (--upgrade-via), each stage finished before the next starts. Downgrades move one minor version per change
	// through etcd's downgrade API (from 3.6 or later). Rules that depend on what members run are checked
	// against etcd and reported in status.
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^3[.][5-7][.](0|[1-9][0-9]{0,3})$')",message="version must be an etcd release Steward supports: 3.5.x, 3.6.x or 3.7.x (for example 3.6.16)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^3[.][0-9]+[.][0-9]+$') || !oldSelf.matches('^3[.][0-9]+[.][0-9]+$') || int(oldSelf.split('.')[1]) - int(self.split('.')[1]) <= 1",message="version may go down by at most one minor version at a time (for example 3.7.x -> 3.6.x, then 3.6.x -> 3.5.x): etcd's downgrade API moves one minor version per step"
	// +required
	Version string `json:"version"`

	// Image overrides the etcd image. By default Steward uses <operator's --etcd-image-repository>:v<version>.
	// The image must run etcd at Version and contain /usr/local/bin/etcd.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s]+$`
	// +optional
	Image string `json:"image,omitempty"`

	// Storage is where members keep their data.
	// +kubebuilder:default={size: "1Gi", ephemeral: false}
	// +optional
	Storage StorageSpec `json:"storage,omitempty"`

	// Resources of the etcd container. Without memory in it, a member requests what its settings may need: 128Mi
	// and 2.5 times the raft log it may keep in memory, min(quota, (etcd.snapshotCount + 5000) x
	// etcd.maxRequestBytes), at least 256Mi (docs/user/clusters.md, "Sizing"); without anything in it, cpu 50m
	// besides. Steward reports a memory limit below that need, and members whose nodes cannot give it (Degraded).
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Pod is metadata and scheduling for member Pods.
	// +optional
	Pod PodTemplate `json:"pod,omitempty"`

	// Service shapes the client Service, through which clients reach the members: its type (ClusterIP by
	// default; NodePort or LoadBalancer for clients outside the Kubernetes cluster), its annotations and labels
	// (a cloud's load balancer settings, an external DNS name) and its traffic policy. Changes apply to the
	// running Service in place, without restarting a member. A client outside the cluster that verifies the
	// members' certificates needs the name or address it dials in spec.tls.extraSANs.
	// +optional
	Service *ClientServiceTemplate `json:"service,omitempty"`

	// Etcd tunes the etcd server.
	// +optional
	Etcd EtcdTuning `json:"etcd,omitempty"`

	// TLS secures peer and client traffic. On by default: without a tls field Steward creates a CA and
	// certificates for the members and for itself (provider Steward). provider None runs plaintext.
	// +kubebuilder:default={provider: "Steward"}
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// Auth turns on etcd's authentication: clients must then present a client certificate or a password of an
	// etcd user (see EtcdUser), and may do only what that user's roles allow. Off by default: every client that
	// reaches the cluster (and, with TLS, presents a certificate of the cluster's CA) may do anything.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// Bootstrap says how a new cluster gets its first data: empty (the default), from a backup, or by adopting a
	// running etcd (fromExisting). Immutable, except fromExisting.handover.
	// +optional
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`

	// QuorumLossRecovery says what Steward does when the cluster has lost quorum: by default nothing but report
	// it (re-seeding from a backup takes an EtcdRestore with confirmation); with policy RestoreLatestBackup it
	// re-seeds the cluster from its newest Complete backup by itself once quorum has been lost for `after`.
	// +optional
	QuorumLossRecovery *QuorumLossRecovery `json:"quorumLossRecovery,omitempty"`

	// ReplaceUnhealthyAfter is how long a member may stay unhealthy (unreachable, not answering, erroring) before
	// Steward replaces it: removes it from etcd, deletes its Pod and volume, and adds a new member. Replacement
	// only happens while the other members keep a healthy quorum. Long enough to ride out a node reboot.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="replaceUnhealthyAfter must be at least 10s"
	// +optional
	ReplaceUnhealthyAfter *metav1.Duration `json:"replaceUnhealthyAfter,omitempty"`

	// Maintenance is what Steward does by itself to keep etcd's data compact and sound: defragmentation and the
	// way out of a NOSPACE alarm (nothing by default), and corruption checks (on by default, report only).
	// +optional
	Maintenance *Maintenance `json:"maintenance,omitempty"`

	// Paused stops Steward from changing anything of the cluster; it still observes and reports status.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// Hibernation stops the cluster and keeps everything it needs to come back: with enabled set, Steward stops
	// every member's Pod, one at a time, the leader last, and keeps their volumes, member identities,
	// certificates and users; backups of the cluster pause. Unset (or enabled false) again, the same members come
	// back on their volumes with every key, the same cluster ID and the same revisions. Changes made to the spec
	// meanwhile (version, replicas, storage) are applied once the members are back. Not for ephemeral storage,
	// whose data goes with its Pods.
	// +optional
	Hibernation *Hibernation `json:"hibernation,omitempty"`

	// Standby makes the cluster a standby of a primary whose continuous backup it reads from an object store:
	// it starts from the source's newest snapshot, keeps replaying its segments with the primary's revisions,
	// refuses client writes (every etcd user but root is read-only), reports its lag, stops with the reason on
	// a gap, and becomes an ordinary cluster when promoted. Set only at creation.
	// +optional
	Standby *StandbySpec `json:"standby,omitempty"`
}

// Hibernation is whether the cluster is to be stopped, keeping its data.
type Hibernation struct {
	// Enabled stops the cluster's members (their volumes stay); false brings them back.
	Enabled bool `json:"enabled"`
}

// HibernationPhase is where a cluster is in hibernating or resuming.
// +kubebuilder:validation:Enum=Hibernating;Hibernated;Resuming
type HibernationPhase string

// Phases of a cluster's hibernation.
const (
	// HibernationHibernating: members' Pods are being stopped.
	HibernationHibernating HibernationPhase = "Hibernating"
	// HibernationHibernated: no member runs; their volumes are kept.
	HibernationHibernated HibernationPhase = "Hibernated"
	// HibernationResuming: spec.hibernation.enabled was unset and the members are coming back on their volumes,
	// until the cluster is Available again.
	HibernationResuming HibernationPhase = "Resuming"
)

// HibernationStatus is what Steward reports of a hibernation, from the moment it is asked for until the cluster
// is Available again after resuming.
type HibernationStatus struct {
	// Phase is Hibernating, Hibernated or Resuming.
	Phase HibernationPhase `json:"phase"`
	// Since is when the phase began.
	Since metav1.Time `json:"since"`
	// Members are the members whose volumes are kept, to come back.
	// +optional
	Members []string `json:"members,omitempty"`
	// DataSizeBytes is the size of the largest member's database when Steward last read it before the members
	// stopped: what each member's volume keeps.
	// +optional
	DataSizeBytes int64 `json:"dataSizeBytes,omitempty"`
	// Revision is the cluster's revision when the members stopped: the members come back at it.
	// +optional
	Revision int64 `json:"revision,omitempty"`
}

// HibernationRequested reports whether c's spec asks for it to hibernate.
func HibernationRequested(c *EtcdCluster) bool {
	return c.Spec.Hibernation != nil && c.Spec.Hibernation.Enabled
}

// Hibernating reports whether c is hibernated or on its way in or out of it: its spec asks for hibernation, or it
// has not been Available since it resumed. Its backups wait, and alerts meant for running clusters keep quiet.
func Hibernating(c *EtcdCluster) bool {
	return HibernationRequested(c) || c.Status.Hibernation != nil
}

// Maintenance is what Steward does by itself to keep etcd's data compact and sound.
type Maintenance struct {
	// Defragmentation defragments a member's database once enough of its file is free pages (etcd reuses them,
	// but never gives them back to the disk), one member at a time, followers first, the leader last after
	// handing leadership over, only while every member is healthy, no other step is under way and no backup of
	// the cluster is running.
	// +optional
	Defragmentation *Defragmentation `json:"defragmentation,omitempty"`

	// RecoverFromNoSpace takes the cluster out of a NOSPACE alarm by itself: it compacts the key space (keeping
	// the newest revisionMargin revisions), defragments every member as above, and disarms the alarm once the
	// data in use is below 90% of the quota. Without it, the alarm is only reported (Degraded NoSpaceAlarm).
	// +optional
	RecoverFromNoSpace *NoSpaceRecovery `json:"recoverFromNoSpace,omitempty"`

	// CorruptionCheck is how members' data is checked for silent divergence. On without the field: members run
	// etcd's own checks and Steward compares members' key-space hashes every hour; it only reports what it
	// finds unless replaceMismatchedMembers is set.
	// +optional
	CorruptionCheck *CorruptionCheck `json:"corruptionCheck,omitempty"`

	// Window is when optional disruptive work may run: defragmentation by threshold, moves that rebalance members
	// across nodes and zones, member restarts for a quota or client or peer authentication change, and (with
	// versionChanges) version changes. Outside it that work waits (status.maintenanceWindow lists it) and goes on
	// when the next window opens; work that does not finish in a window stops after the member it is on and goes
	// on in the next. What keeps data safe never waits: replacing a failed member, re-creating lost Pods, NOSPACE
	// recovery (its restarts included), certificate renewal. Without a window, optional work runs when it is due.
	// +optional
	Window *MaintenanceWindow `json:"window,omitempty"`
}

// MaintenanceWindow is a recurring time when Steward may do optional disruptive work.
type MaintenanceWindow struct {
	// Schedule is when each window opens: five-field cron syntax ("0 2 * * 6": Saturdays at 02:00) or a
	// descriptor (@daily, @weekly), in timeZone.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Schedule string `json:"schedule"`

	// Duration is how long each window stays open.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('168h')",message="maintenance.window.duration must be between 1m and 168h"
	Duration metav1.Duration `json:"duration"`

	// TimeZone is the IANA time zone the schedule is read in ("Europe/Berlin"); UTC when empty. Windows follow
	// the zone's daylight saving changes.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`

	// VersionChanges makes version changes (upgrades, downgrades, image changes) wait for the window too; off,
	// a change of spec.version rolls the members at once.
	// +optional
	VersionChanges bool `json:"versionChanges,omitempty"`
}

// MaintenanceWindowStatus is the maintenance window as Steward last computed it, and the work waiting for it.
type MaintenanceWindowStatus struct {
	// Open is whether a window is open now.
	Open bool `json:"open"`
	// Closes is when the open window closes; empty while none is open.
	// +optional
	Closes *metav1.Time `json:"closes,omitempty"`
	// NextOpens is when the next window opens.
	// +optional
	NextOpens *metav1.Time `json:"nextOpens,omitempty"`
	// Deferred is the optional work waiting for a window, one entry per kind of work with the step it would take.
	// +optional
	Deferred []string `json:"deferred,omitempty"`
	// Error says why spec.maintenance.window cannot be read (a bad schedule or time zone): optional work then
	// waits, as outside a window.
	// +optional
	Error string `json:"error,omitempty"`
}

// CorruptionCheck is how members' data is checked for silent divergence: a member whose key space differs from
// its peers' at the same revision serves wrong data to the clients that read from it.
type CorruptionCheck struct {
	// EtcdChecks starts members with etcd's own corruption checks: the initial check (a member whose data
	// differs from its peers' refuses to start) and the compaction hash check (the leader compares followers'
	// hashes after each compaction and raises a CORRUPT alarm, which stops the cluster from serving until a human
	// disarms it). Each release gets the flags it knows (--experimental-* on 3.5, --feature-gates on 3.6 and
	// later). Takes effect as members' Pods are next created; not for ephemeral storage, whose members start
	// empty.
	// +kubebuilder:default=true
	// +optional
	EtcdChecks *bool `json:"etcdChecks,omitempty"`

	// Interval is how often Steward compares the hash of every member's key space at one revision (etcd's
	// HashKV, which reads each member's whole database). 0s turns Steward's comparison off.
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration('0s') || duration(self) >= duration('10s')",message="interval must be 0s (off) or at least 10s"
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`

	// ReplaceMismatchedMembers lets Steward replace a member whose hash differs from the one a majority of the
	// members agree on: it is removed from etcd (leadership handed over first), and a new member joins with the
	// majority's data. Only while the others keep a healthy quorum; never when no majority agrees.
	// +optional
	ReplaceMismatchedMembers bool `json:"replaceMismatchedMembers,omitempty"`
}

// Defragmentation is when a member's database is defragmented: when at least minFreeBytes and minFreePercent of
// its file are free.
type Defragmentation struct {
	// MinFreeBytes is the least free space in a member's database file worth a defragmentation.
	// +kubebuilder:default="64Mi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="minFreeBytes must be greater than zero"
	// +optional
	MinFreeBytes *resource.Quantity `json:"minFreeBytes,omitempty"`

	// MinFreePercent is the least share of a member's database file, in percent, that must be free.
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	// +optional
	MinFreePercent *int32 `json:"minFreePercent,omitempty"`
}

// NoSpaceRecovery is how Steward takes a cluster out of a NOSPACE alarm.
type NoSpaceRecovery struct {
	// RevisionMargin is how many of the newest revisions the compaction keeps (clients watching from a recent
	// revision can resume). The compaction takes back the space of older revisions.
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=0
	// +optional
	RevisionMargin *int64 `json:"revisionMargin,omitempty"`

	// MaxQuotaBackendBytes lets Steward raise the database quota when compaction and defragmentation leave the
	// data in use filling it: to twice the quota (or more, so that the data is below 90% of it), at most this.
	// Members restart one at a time with the raised quota (status.raisedQuotaBackendBytes), then the alarm is
	// disarmed. Must fit the volume as the quota must (2 x max + 448Mi <= storage.size). Without it, or once the
	// quota is at it, Steward stops with NoSpaceQuotaTooSmall.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0')) && quantity(string(self)).compareTo(quantity('100Gi')) <= 0",message="maxQuotaBackendBytes must be between 1 byte and 100Gi"
	// +optional
	MaxQuotaBackendBytes *resource.Quantity `json:"maxQuotaBackendBytes,omitempty"`
}

// StorageSpec is members' data storage: one PersistentVolumeClaim per member, or (only when chosen explicitly)
// an emptyDir, which loses a member's data whenever its Pod goes away. Size and storageClassName may change on a
// running cluster: where only the size grows and the volumes' StorageClass allows expansion, Steward expands
// each member's PVC in place, one at a time; otherwise (another class, a smaller size, a class without
// expansion) it replaces members one at a time onto new volumes, as in a rolling replacement (a learner on the
// new storage joins, is promoted, and an old member leaves; the leader last, after handing leadership over).
// +kubebuilder:validation:XValidation:rule="!(has(self.ephemeral) && self.ephemeral) || (has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName))",message="storageClassName cannot change on an ephemeral cluster: its members have no volumes"
// +kubebuilder:validation:XValidation:rule="(has(self.ephemeral) && self.ephemeral) == (has(oldSelf.ephemeral) && oldSelf.ephemeral)",message="ephemeral is immutable"
// +kubebuilder:validation:XValidation:rule="!has(self.size) || quantity(string(self.size)).isGreaterThan(quantity('0'))",message="size must be greater than zero"
// +kubebuilder:validation:XValidation:rule="!has(self.size) || !quantity(string(self.size)).isGreaterThan(quantity('0')) || quantity(string(self.size)).compareTo(quantity('512Mi')) >= 0",message="size must be at least 512Mi: etcd keeps up to 384Mi of WAL segments and needs room for a second copy of its database beside a quota of at least 32Mi"
type StorageSpec struct {
	// Size of each member's volume (or the emptyDir size limit), at least 512Mi; it also sets the default of
	// etcd.quotaBackendBytes. A larger size expands volumes in place where their StorageClass allows expansion; a
	// smaller one (PVCs never shrink) replaces members onto new volumes.
	// +kubebuilder:default="1Gi"
	// +optional
	Size resource.Quantity `json:"size,omitempty"`

	// StorageClassName of members' PersistentVolumeClaims; empty means the cluster's default class. Setting it to
	// another class than members' volumes have moves every member onto a new volume of that class, one at a time;
	// removing it moves nothing (members keep the class their volumes were given).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// Ephemeral keeps member data in an emptyDir instead of a PersistentVolumeClaim. For tests and caches only:
	// a member whose Pod is deleted loses its data.
	// +kubebuilder:default=false
	// +optional
	Ephemeral bool `json:"ephemeral"`
}

// ClientServiceTemplate is what users control of the client Service (<cluster>, port 2379). Steward owns the
// rest: its name, selector and port, and the fields Kubernetes allocates (cluster IP, a node port not asked for)
// stay as the API server set them. Fields a cloud's controller adds to the Service (its own annotations, a load
// balancer's status) are left alone, and a key removed from the template is removed from the Service.
// +kubebuilder:validation:XValidation:rule="!has(self.nodePort) || self.type != 'ClusterIP'",message="service.nodePort needs service.type NodePort or LoadBalancer"
// +kubebuilder:validation:XValidation:rule="!has(self.externalTrafficPolicy) || self.type != 'ClusterIP'",message="service.externalTrafficPolicy needs service.type NodePort or LoadBalancer: a ClusterIP Service has no external traffic"
// +kubebuilder:validation:XValidation:rule="(!has(self.loadBalancerClass) && !has(self.loadBalancerSourceRanges)) || self.type == 'LoadBalancer'",message="service.loadBalancerClass and service.loadBalancerSourceRanges need service.type LoadBalancer"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.loadBalancerClass) || !has(self.loadBalancerClass) || self.loadBalancerClass == oldSelf.loadBalancerClass",message="service.loadBalancerClass cannot change while set: Kubernetes keeps a load balancer's class for its life (unset it, or change the type, first)"
type ClientServiceTemplate struct {
	// Type of the client Service: ClusterIP (the default; in-cluster clients only), NodePort (the client port on
	// every node's address) or LoadBalancer (an address from the cloud's or the cluster's load balancer).
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +kubebuilder:default=ClusterIP
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`
	// Labels added to the client Service (Steward's own labels win on conflict). Keys under etcd.steward.dev/ are
	// Steward's: refused.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('etcd.steward.dev/'))",message="service labels under etcd.steward.dev/ are Steward's own"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations added to the client Service, for example a cloud's load balancer settings
	// (service.beta.kubernetes.io/aws-load-balancer-scheme) or external-dns's hostname. Keys under
	// etcd.steward.dev/ are Steward's: refused.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('etcd.steward.dev/'))",message="service annotations under etcd.steward.dev/ are Steward's own"
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// NodePort is the node port of the client port (types NodePort and LoadBalancer), within the cluster's
	// node port range (30000-32767 by default); unset, Kubernetes picks one and Steward keeps it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	NodePort *int32 `json:"nodePort,omitempty"`
	// ExternalTrafficPolicy (types NodePort and LoadBalancer): Cluster (Kubernetes' default) spreads connections
	// over every ready member from any node; Local routes only to members on the node a connection arrives at,
	// keeping the client's source address (for a load balancer's source ranges or etcd's logs).
	// +kubebuilder:validation:Enum=Cluster;Local
	// +optional
	ExternalTrafficPolicy corev1.ServiceExternalTrafficPolicy `json:"externalTrafficPolicy,omitempty"`
	// LoadBalancerClass selects the load balancer implementation (type LoadBalancer); unset, the cluster's
	// default one. Kubernetes does not let it change once set.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	LoadBalancerClass *string `json:"loadBalancerClass,omitempty"`
	// LoadBalancerSourceRanges are the client CIDRs a load balancer admits (type LoadBalancer), where the load
	// balancer implementation supports it.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="self.all(r, isCIDR(r))",message="service.loadBalancerSourceRanges must be CIDRs, such as 10.0.0.0/8 or 2001:db8::/32"
	// +listType=set
	// +optional
	LoadBalancerSourceRanges []string `json:"loadBalancerSourceRanges,omitempty"`
}

// PodTemplate is what users control of member Pods.
type PodTemplate struct {
	// Labels added to member Pods (Steward's own labels win on conflict). Keys under etcd.steward.dev/ are
	// Steward's: refused.
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('etcd.steward.dev/'))",message="labels under etcd.steward.dev/ are Steward's own: Steward reads them back as facts about the member"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations added to member Pods. Keys under etcd.steward.dev/ are Steward's: refused.
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('etcd.steward.dev/'))",message="annotations under etcd.steward.dev/ are Steward's own: Steward reads them back as facts about the member (how it was started, its version, its TLS mode)"
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// EtcdTuning are etcd server settings. Unset fields keep etcd's defaults.
// etcd's defaults (heartbeat 100ms, election timeout 1000ms) stand in for an unset field: a heartbeat of 500ms
// alone is refused too, because etcd would refuse to start with its default election timeout.
// +kubebuilder:validation:XValidation:rule="(has(self.electionTimeoutMillis) ? self.electionTimeoutMillis : 1000) >= 5 * (has(self.heartbeatIntervalMillis) ? self.heartbeatIntervalMillis : 100)",message="electionTimeoutMillis must be at least 5 times heartbeatIntervalMillis (etcd's defaults: 1000 and 100; etcd refuses to start otherwise)"
// +kubebuilder:validation:XValidation:rule="!has(self.autoCompactionRetention) || !has(self.autoCompactionMode) || self.autoCompactionMode != 'revision' || self.autoCompactionRetention.matches('^[0-9]+$')",message="autoCompactionRetention must be a number of revisions (for example 1000) when autoCompactionMode is revision"
type EtcdTuning struct {
	// QuotaBackendBytes is the database size at which etcd raises a NOSPACE alarm and refuses writes. Unset,
	// Steward derives it from storage.size: (size - 448Mi) / 2, at most 8Gi, so that the disk never fills before
	// etcd can raise its alarm (status.quotaBackendBytes shows the value members run with).
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0')) && quantity(string(self)).compareTo(quantity('100Gi')) <= 0",message="quotaBackendBytes must be between 1 byte and 100Gi"
	// +optional
	QuotaBackendBytes *resource.Quantity `json:"quotaBackendBytes,omitempty"`
	// AutoCompactionMode is "periodic" (retention is a duration) or "revision" (retention is a revision count).
	// +kubebuilder:validation:Enum=periodic;revision
	// +optional
	AutoCompactionMode string `json:"autoCompactionMode,omitempty"`
	// AutoCompactionRetention, for example "1h" (periodic) or "1000" (revision).
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+|([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+)$`
	// +optional
	AutoCompactionRetention string `json:"autoCompactionRetention,omitempty"`
	// HeartbeatIntervalMillis is the raft heartbeat interval.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=5000
	// +optional
	HeartbeatIntervalMillis *int32 `json:"heartbeatIntervalMillis,omitempty"`
	// ElectionTimeoutMillis is the raft election timeout.
	// +kubebuilder:validation:Minimum=50
	// +kubebuilder:validation:Maximum=50000
	// +optional
	ElectionTimeoutMillis *int32 `json:"electionTimeoutMillis,omitempty"`
	// SnapshotCount is the number of committed transactions that trigger a raft snapshot.
	// +kubebuilder:validation:Minimum=1
	// +optional
	SnapshotCount *int64 `json:"snapshotCount,omitempty"`
	// MaxRequestBytes is the largest client request a member accepts (etcd's --max-request-bytes; unset, etcd's
	// 1.5Mi): so the largest value clients can write, and the largest entry of the raft log a member keeps in
	// memory. Setting it to what clients really write (a kube-apiserver's objects stay below 1.5Mi; most
	// applications' values below 100Ki) lowers the memory members are given when spec.resources sets none: see
	// docs/user/clusters.md "Sizing". Members start with a changed value when their Pods are next created.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('4Ki')) >= 0 && quantity(string(self)).compareTo(quantity('64Mi')) <= 0",message="maxRequestBytes must be between 4Ki and 64Mi"
	// +optional
	MaxRequestBytes *resource.Quantity `json:"maxRequestBytes,omitempty"`
}

// AuthSpec is etcd's authentication on the cluster.
type AuthSpec struct {
	// Enabled turns authentication on (true) or off (false) on a running cluster. Before turning it on, Steward
	// makes sure the root user exists (without a password: nobody logs in as root) and that its own identity
	// holds the root role, so that Steward, its backup Jobs and members joining later keep working. With TLS
	// that identity is the common name of Steward's client certificate. Without TLS (tls.provider None)
	// members verify no certificates: Steward then acts as the password user steward:operator, whose generated
	// password it keeps in the Secret <cluster>-operator-credentials (status.operatorCredentialsSecret), and
	// clients authenticate with EtcdUser passwords, which cross the network unencrypted.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// RemoveUndeclaredUsers makes Steward delete etcd users that no EtcdUser of the cluster declares (root and
	// Steward's own identity excepted), with their roles left alone. Off by default: such users are only
	// reported in status.undeclaredUsers, since they may be an administrator's made by hand.
	// +optional
	RemoveUndeclaredUsers bool `json:"removeUndeclaredUsers,omitempty"`
}

// TLSSpec secures etcd's traffic: client (port 2379) and peer (2380) connections use TLS with client
// certificates on both. Metrics and health (2381) stay plain HTTP so that kubelet probes work.
// +kubebuilder:validation:XValidation:rule="self.provider == 'Secrets' ? has(self.secrets) : (self.provider == 'None' || !has(self.secrets))",message="tls.secrets (memberSecretName and clientSecretName) is required when tls.provider is Secrets, and refused with another TLS provider (with None it may stay while the members switch to plaintext)"
// +kubebuilder:validation:XValidation:rule="self.provider == 'CertManager' ? has(self.certManager) : (self.provider == 'None' || !has(self.certManager))",message="tls.certManager (issuerRef) is required when tls.provider is CertManager, and refused with another TLS provider (with None it may stay while the members switch to plaintext)"
// +kubebuilder:validation:XValidation:rule="self.provider == oldSelf.provider || self.provider == 'None' || oldSelf.provider == 'None'",message="tls.provider can change between None and a TLS provider (a rolling switch), not from one TLS provider to another: members trust only the CA they started with"
// +kubebuilder:validation:XValidation:rule="!has(self.clientAuth) || self.clientAuth != 'Password' || self.provider != 'None'",message="tls.clientAuth Password needs a TLS provider: a plaintext cluster (tls.provider None) verifies no certificates anyway, and clients authenticate with passwords already"
type TLSSpec struct {
	// Provider of certificates: Steward (the default: a CA and certificates Steward creates and renews), None
	// (plaintext), Secrets (Secrets the user provides and renews, see secrets) or CertManager (certificates
	// from a cert-manager Issuer or ClusterIssuer, see certManager). Changing it between None and a TLS provider
	// on a running cluster switches the members one at a time, keeping quorum; from one TLS provider to another
	// is refused.
	// +kubebuilder:validation:Enum=None;Steward;Secrets;CertManager
	// +kubebuilder:default=Steward
	// +optional
	Provider string `json:"provider,omitempty"`

	// ClientAuth is how clients authenticate to members on the client port. Certificate (the default): members
	// require a client certificate of the cluster's CA (--client-cert-auth); with auth.enabled, etcd takes the
	// certificate's common name as the user, or the user of a password the client sends as well. Password:
	// members serve TLS without asking for a client certificate, so an application needs only the CA (to check
	// the members) and, with auth.enabled, an EtcdUser's password; EtcdUsers with a certificate are not
	// supported, and Steward acts as the password user steward:operator (Secret <cluster>-operator-credentials).
	// Without auth.enabled, Password lets every client that reaches the client port do anything. Changing it on
	// a running cluster restarts the members one at a time; the peer port always requires certificates.
	// +kubebuilder:validation:Enum=Certificate;Password
	// +kubebuilder:default=Certificate
	// +optional
	ClientAuth string `json:"clientAuth,omitempty"`

	// PeerAuth is which certificates members accept on the peer port (2380), where they replicate every write.
	// MemberIdentity (the default): only certificates that carry the cluster's peer identity, the DNS name
	// <cluster>-peer.<namespace>.svc.<cluster domain>, which Steward (and cert-manager for it) puts into member
	// certificates and never into a client's (etcd's --peer-cert-allowed-hostname): an application's or Steward's
	// client certificate, of the same CA, is refused there. With provider Secrets the member Secret's certificate
	// must carry that name, and the client Secret's must not. AnyCertificate: any certificate of the cluster's CA,
	// as before Steward checked the identity; only for user-provided certificates that cannot carry the name.
	// Changing it on a running cluster restarts the members one at a time, once every member's certificate
	// carries the identity.
	// +kubebuilder:validation:Enum=MemberIdentity;AnyCertificate
	// +kubebuilder:default=MemberIdentity
	// +optional
	PeerAuth string `json:"peerAuth,omitempty"`

	// ExtraSANs are DNS names and IP addresses added to every member's certificate besides the cluster's own
	// in-cluster names, for clients that dial the members by another name: a load balancer's address or DNS
	// name, a name in an external DNS zone, node addresses of a NodePort Service. Providers Steward and
	// CertManager issue them: a change re-issues every member's certificate, which members pick up without a
	// restart. With provider Secrets Steward checks that the member Secret's certificate covers them, and
	// creates no member while it does not.
	// +optional
	ExtraSANs *ExtraSANs `json:"extraSANs,omitempty"`

	// CertificateLifetime is how long the member and client certificates are valid (providers Steward and
	// CertManager, whose Certificates ask for it as their duration; ignored for Secrets; Steward's CA is valid
	// for 10 years). Steward (or cert-manager) renews each certificate once two thirds of its lifetime have
	// passed, and re-issues every certificate when this field changes. Default 2160h (90 days).
	// +kubebuilder:default="2160h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h') && duration(self) <= duration('87600h')",message="certificateLifetime must be between 1h and 87600h (10 years, the CA's lifetime)"
	// +optional
	CertificateLifetime *metav1.Duration `json:"certificateLifetime,omitempty"`

	// Secrets names the Secrets of provider Secrets. Required with it, refused with the other TLS providers.
	// When switching such a cluster to plaintext (provider None), keep it until every member runs plaintext:
	// the members use these Secrets until then.
	// +optional
	Secrets *TLSSecrets `json:"secrets,omitempty"`

	// CertManager says which cert-manager issuer signs the certificates of provider CertManager. Required with
	// it, refused with the other TLS providers. When switching such a cluster to plaintext (provider None), keep
	// it until every member runs plaintext.
	// +optional
	CertManager *TLSCertManager `json:"certManager,omitempty"`
}

// ExtraSANs are subject alternative names added to member certificates (spec.tls.extraSANs).
type ExtraSANs struct {
	// DNSNames, each a DNS name or a wildcard of one label (*.etcd.example.com).
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +listType=set
	// +optional
	DNSNames []string `json:"dnsNames,omitempty"`
	// IPAddresses, IPv4 or IPv6.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="self.all(a, isIP(a))",message="tls.extraSANs.ipAddresses must be IP addresses, such as 192.0.2.10 or 2001:db8::10"
	// +listType=set
	// +optional
	IPAddresses []string `json:"ipAddresses,omitempty"`
}

// TLSSecrets are the user's own Secrets (provider Secrets), in the cluster's namespace, each of type
// kubernetes.io/tls with the keys ca.crt, tls.crt and tls.key. Steward reads them (never caches, changes or owns
// them) before it creates any member and on every pass, and acts only while both are valid. Rotate by updating
// the Secrets in place, from the same CA: members and Steward pick the new certificates up without restarts.
type TLSSecrets struct {
	// MemberSecretName is the Secret every member mounts: a certificate usable for server and client auth whose
	// DNS names cover *.<cluster>-peer.<namespace>.svc.<cluster domain> (every member, whatever its generated
	// name) and <cluster>.<namespace>.svc.<cluster domain> (the client Service, which Steward checks members
	// against), and in ca.crt the CA that issued the member and client certificates. Immutable: running members
	// mount it by name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tls.secrets.memberSecretName cannot change: running members mount it by name; update the Secret's content instead"
	// +required
	MemberSecretName string `json:"memberSecretName"`
	// ClientSecretName is the Secret Steward and its backup Jobs authenticate with: a certificate usable for
	// client auth, issued by a CA in the member Secret's ca.crt, and in ca.crt the CA that issued the members'
	// certificates. It may name the member Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	ClientSecretName string `json:"clientSecretName"`
}

// TLSCertManager is provider CertManager: Steward creates a cert-manager Certificate per member and one for
// itself, owned by the cluster, and cert-manager issues and renews them into Secrets. Needs cert-manager's CRDs
// (cert-manager.io/v1) and an issuer that writes ca.crt (CA, self-signed, Vault, ...).
type TLSCertManager struct {
	// IssuerRef is the issuer of every certificate of the cluster. Immutable: another issuer may sign with
	// another CA, which running members would not trust.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tls.certManager.issuerRef cannot change: another issuer may sign with another CA, which the running members do not trust"
	// +required
	IssuerRef IssuerRef `json:"issuerRef"`
}

// IssuerRef names a cert-manager issuer, as cert-manager's Certificate.spec.issuerRef does.
type IssuerRef struct {
	// Name of the Issuer (in the cluster's namespace) or ClusterIssuer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// Kind is Issuer (the default) or ClusterIssuer.
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	// +kubebuilder:default=Issuer
	// +optional
	Kind string `json:"kind,omitempty"`
	// Group of the issuer's API, cert-manager.io unless an external issuer says otherwise.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=cert-manager.io
	// +optional
	Group string `json:"group,omitempty"`
}

// TLS providers.
const (
	TLSProviderNone        = "None"
	TLSProviderSteward     = "Steward"
	TLSProviderSecrets     = "Secrets"
	TLSProviderCertManager = "CertManager"
)

// How clients authenticate to members on the client port (spec.tls.clientAuth).
const (
	ClientAuthCertificate = "Certificate"
	ClientAuthPassword    = "Password"
)

// Which certificates members accept on the peer port (spec.tls.peerAuth).
const (
	PeerAuthMemberIdentity = "MemberIdentity"
	PeerAuthAnyCertificate = "AnyCertificate"
)

// TLSStatus names the Secrets of a cluster's TLS and when its certificates expire. Never key material.
type TLSStatus struct {
	// CASecret is the Secret with the cluster's CA (key ca.crt, and the CA's key tls.key); provider Steward.
	// +optional
	CASecret string `json:"caSecret,omitempty"`
	// MemberSecret is the Secret every member mounts (provider Secrets; with the other providers each member
	// has its own <member>-tls).
	// +optional
	MemberSecret string `json:"memberSecret,omitempty"`
	// ClientSecret is the Secret with the client certificate Steward and its backup Jobs use (ca.crt,
	// tls.crt, tls.key); users may mount it to reach the members.
	// +optional
	ClientSecret string `json:"clientSecret,omitempty"`
	// CANotAfter is when the CA expires (the first to expire of the CA certificates members trust).
	// +optional
	CANotAfter *metav1.Time `json:"caNotAfter,omitempty"`
	// NotAfter is when the first of the member and client certificates expires (each is renewed well before).
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`
	// MemberNotAfter is when the first of the member certificates (those of running members) expires.
	// +optional
	MemberNotAfter *metav1.Time `json:"memberNotAfter,omitempty"`
	// ClientNotAfter is when the client certificate Steward and its backup Jobs use expires.
	// +optional
	ClientNotAfter *metav1.Time `json:"clientNotAfter,omitempty"`
}

// BootstrapSpec is where a new cluster's data comes from.
// +kubebuilder:validation:XValidation:rule="!(has(self.fromBackup) && has(self.fromExisting))",message="set at most one of fromBackup or fromExisting: a cluster starts from a backup or adopts a running etcd"
type BootstrapSpec struct {
	// FromBackup seeds every member from one snapshot: Steward creates an EtcdRestore named
	// <cluster>-from-backup, which verifies the stored snapshot before any member is created, and each first
	// member restores it into its data dir before etcd starts.
	// +optional
	FromBackup *BackupSource `json:"fromBackup,omitempty"`
	// FromExisting adopts an etcd cluster that already runs outside Steward, without downtime and keeping its
	// cluster ID, data and revisions: Steward checks the source (reading only), then its members join the running
	// cluster one at a time as learners and are promoted once caught up; the source's members leave, one at a
	// time and the leader last, when handover says so. Steward never stops a process it did not start: it removes
	// a source member from etcd and says which process to stop. See docs/user/adoption.md.
	// +optional
	FromExisting *ExistingSource `json:"fromExisting,omitempty"`
}

// ExistingSource is a running etcd cluster Steward is to adopt.
// +kubebuilder:validation:XValidation:rule="self.endpoints == oldSelf.endpoints && has(self.credentialsSecret) == has(oldSelf.credentialsSecret) && (!has(self.credentialsSecret) || self.credentialsSecret == oldSelf.credentialsSecret)",message="fromExisting is immutable except handover: the source is chosen when the cluster is created"
type ExistingSource struct {
	// Endpoints are client URLs of the source's members (http:// or https://host:port): Steward reads the member
	// list and every member's status through them, and must reach them from where it runs. One is enough; the
	// member list names the rest.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=9
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^https?://[^\s/?#]+$`
	// +listType=set
	// +required
	Endpoints []string `json:"endpoints"`
	// CredentialsSecret is a Secret in the cluster's namespace with the user (keys username and password) Steward
	// acts as on a source with etcd's authentication on: a user with the root role. Steward reads the source and
	// changes its membership as that user until it has added its own, steward:operator (status.adoption
	// .operatorUser); keep the Secret valid until then. Not needed for a source without authentication. A TLS
	// source is read with Steward's own client certificate (spec.tls, issued by the source's CA), not with
	// certificate keys of this Secret; a TLS source with authentication on is refused (docs/user/adoption.md).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	CredentialsSecret string `json:"credentialsSecret,omitempty"`
	// Handover says what happens to the source's members: Keep (the default) keeps them while Steward's members
	// join; Retire removes them from etcd one at a time, followers first and the leader last after moving
	// leadership to one of Steward's members, once Steward's members are all voters and healthy; Abort, only
	// before the first source member left, removes Steward's members again and leaves the source as Steward
	// found it.
	// +kubebuilder:default=Keep
	// +optional
	Handover Handover `json:"handover,omitempty"`
}

// Handover is what Steward does with the source's members of an adoption.
// +kubebuilder:validation:Enum=Keep;Retire;Abort
type Handover string

// Handovers.
const (
	// HandoverKeep: Steward's members join and the source's stay.
	HandoverKeep Handover = "Keep"
	// HandoverRetire: the source's members leave once Steward's are in place.
	HandoverRetire Handover = "Retire"
	// HandoverAbort: Steward's members leave again (only before the first source member left).
	HandoverAbort Handover = "Abort"
)

// AdoptionPhase is where an adoption is.
// +kubebuilder:validation:Enum=Checking;Migrating;Retiring;Complete;Aborting;Aborted
type AdoptionPhase string

// Adoption phases.
const (
	// AdoptionChecking: the preflight has not admitted the source yet (Progressing says why).
	AdoptionChecking AdoptionPhase = "Checking"
	// AdoptionMigrating: the source is admitted; Steward's members join, the source's stay.
	AdoptionMigrating AdoptionPhase = "Migrating"
	// AdoptionRetiring: the source's members leave one at a time.
	AdoptionRetiring AdoptionPhase = "Retiring"
	// AdoptionComplete: no source member is left; the cluster is Steward's.
	AdoptionComplete AdoptionPhase = "Complete"
	// AdoptionAborting: Steward's members leave again.
	AdoptionAborting AdoptionPhase = "Aborting"
	// AdoptionAborted: Steward's members have left; the source is as Steward found it.
	AdoptionAborted AdoptionPhase = "Aborted"
)

// AdoptionStatus is an adoption of a running etcd (spec.bootstrap.fromExisting).
type AdoptionStatus struct {
	// Phase is where the adoption is.
	Phase AdoptionPhase `json:"phase"`
	// ClusterID is the source's etcd cluster ID (hex) as the preflight admitted it: the controller's memory, so
	// that endpoints answering for another cluster later stop the adoption instead of joining members to it.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// AdmittedTime is when the preflight admitted the source.
	// +optional
	AdmittedTime *metav1.Time `json:"admittedTime,omitempty"`
	// ExternalMembers are the source's members, recorded when the preflight admitted it (the controller's memory:
	// a member etcd lists under one of these IDs is the source's, never a stray Steward removes), with what the
	// last pass observed of those still in etcd.
	// +listType=map
	// +listMapKey=id
	// +optional
	ExternalMembers []ExternalMember `json:"externalMembers,omitempty"`
	// Retired are the source's members Steward removed from etcd (the controller's memory: after an abort is too
	// late). Their processes still run until someone stops them: Steward never stops a process it did not
	// start.
	// +listType=map
	// +listMapKey=id
	// +optional
	Retired []ExternalMember `json:"retired,omitempty"`
	// OperatorUser is the etcd user Steward added to a source with authentication on (steward:operator, with the
	// root role and the password of status.operatorCredentialsSecret) and acts as from then on, instead of
	// spec.bootstrap.fromExisting.credentialsSecret's user. The controller's memory: an abort deletes it again,
	// so that the source ends as Steward found it.
	// +optional
	OperatorUser string `json:"operatorUser,omitempty"`
}

// ExternalMember is a member of an adopted cluster that Steward did not create.
type ExternalMember struct {
	// ID is etcd's member ID in hex.
	ID string `json:"id"`
	// Name is the member's etcd name.
	// +optional
	Name string `json:"name,omitempty"`
	// PeerURLs and ClientURLs are the URLs etcd lists for the member.
	// +optional
	PeerURLs []string `json:"peerURLs,omitempty"`
	// +optional
	ClientURLs []string `json:"clientURLs,omitempty"`
	// Role of the member in raft, as last observed.
	// +optional
	Role MemberRole `json:"role,omitempty"`
	// Version of etcd the member runs, as last observed.
	// +optional
	Version string `json:"version,omitempty"`
	// Healthy: the member answered its last status request healthy.
	// +optional
	Healthy bool `json:"healthy,omitempty"`
}

// BackupSource names a backup to restore from, or a point of a schedule's continuous backup.
// +kubebuilder:validation:XValidation:rule="has(self.backupName) != has(self.pointInTime)",message="set exactly one of backupName or pointInTime"
type BackupSource struct {
	// BackupName is a Complete EtcdBackup in the cluster's namespace (of any cluster).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	BackupName string `json:"backupName,omitempty"`
	// PointInTime starts the cluster from a revision or time of a schedule's continuous backup (of any cluster,
	// also one that no longer exists): Steward makes the point-in-time EtcdBackup <cluster>-from-backup-pit on the
	// schedule's destination first.
	// +optional
	PointInTime *PointInTimeSource `json:"pointInTime,omitempty"`
}

// BootstrapRestoreName is the EtcdRestore Steward creates for cluster with spec.bootstrap.fromBackup.
func BootstrapRestoreName(cluster string) string { return DerivedName(cluster, "-from-backup") }

// BootstrapBackupName is the EtcdBackup a new cluster starts from: spec.bootstrap.fromBackup.backupName, the
// point-in-time backup its EtcdRestore (<cluster>-from-backup) makes, or a standby's seed (StandbySeedName); ""
// without spec.bootstrap.fromBackup or spec.standby.
func BootstrapBackupName(c *EtcdCluster) string {
	b := c.Spec.Bootstrap
	switch {
	case c.Spec.Standby != nil:
		return StandbySeedName(c.Name)
	case b == nil || b.FromBackup == nil:
		return ""
	case b.FromBackup.PointInTime != nil:
		return PointInTimeBackupName(BootstrapRestoreName(c.Name))
	}
	return b.FromBackup.BackupName
}

// QuorumLossPolicy is what Steward does about a cluster without quorum.
// +kubebuilder:validation:Enum=Manual;RestoreLatestBackup
type QuorumLossPolicy string

// Quorum-loss policies.
const (
	// QuorumLossManual: report it (Available=False, Degraded=True/QuorumLost) and wait for a human.
	QuorumLossManual QuorumLossPolicy = "Manual"
	// QuorumLossRestoreLatestBackup: re-seed from the newest Complete backup of the cluster after `after`.
	QuorumLossRestoreLatestBackup QuorumLossPolicy = "RestoreLatestBackup"
)

// QuorumLossRecovery is the opt-in automatic re-seed of a cluster that lost quorum.
type QuorumLossRecovery struct {
	// Policy is Manual (the default) or RestoreLatestBackup. With RestoreLatestBackup, once quorum has been
	// lost for `after` (as seen by Steward through etcd's API and by the kubelet's readiness probes alike),
	// Steward creates a confirmed EtcdRestore from the newest Complete EtcdBackup of this cluster. Writes
	// acknowledged after that backup are lost. It does so once per loss of quorum: if that restore fails, it
	// waits for a human.
	// +kubebuilder:default=Manual
	// +optional
	Policy QuorumLossPolicy `json:"policy,omitempty"`
	// After is how long the cluster must have been without quorum before Steward re-seeds it: long enough for
	// members to come back by themselves (a node reboot).
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="after must be at least 30s"
	// +optional
	After *metav1.Duration `json:"after,omitempty"`
}

// MemberRole is a member's raft role as etcd reports it.
// +kubebuilder:validation:Enum=Leader;Follower;Learner;Unknown
type MemberRole string

// Member roles.
const (
	RoleLeader   MemberRole = "Leader"
	RoleFollower MemberRole = "Follower"
	RoleLearner  MemberRole = "Learner"
	RoleUnknown  MemberRole = "Unknown"
)

// MemberStatus is one member as observed through etcd's API and Kubernetes.
type MemberStatus struct {
	// Name is the member's name: its Pod, PVC and etcd member name.
	Name string `json:"name"`
	// ID is etcd's member ID in hex; empty until the member has joined.
	// +optional
	ID string `json:"id,omitempty"`
	// Role of the member in raft.
	// +optional
	Role MemberRole `json:"role,omitempty"`
	// Version of etcd the member runs, as it reports.
	// +optional
	Version string `json:"version,omitempty"`
	// StorageVersion is the version of the member's data format (etcd 3.6+); during a downgrade a member is
	// restarted on the older release only once this has come down to it.
	// +optional
	StorageVersion string `json:"storageVersion,omitempty"`
	// Healthy is true when the member answered its status request without errors.
	Healthy bool `json:"healthy"`
	// DBSizeBytes is the size of the member's backend database.
	// +optional
	DBSizeBytes int64 `json:"dbSizeBytes,omitempty"`
	// DBSizeInUseBytes is the part of the backend database in use: DBSizeBytes less the free pages a
	// defragmentation would return.
	// +optional
	DBSizeInUseBytes int64 `json:"dbSizeInUseBytes,omitempty"`
	// Node is the node the member's Pod is scheduled to; empty while it is not scheduled.
	// +optional
	Node string `json:"node,omitempty"`
	// ClientURL is the member's advertised client URL.
	// +optional
	ClientURL string `json:"clientURL,omitempty"`
	// TLS is how the member's Pod runs TLS: TLS (https, client certificates required), Plaintext, or Bridge
	// (plaintext listeners, holding the cluster's certificates to reach TLS peers: a member in the middle of a
	// switch between plaintext and TLS).
	// +optional
	TLS string `json:"tls,omitempty"`
	// UnhealthySince is when the member was first seen unhealthy in its current run of failures: the
	// controller's memory for replacing members that stay unhealthy longer than spec.replaceUnhealthyAfter.
	// +optional
	UnhealthySince *metav1.Time `json:"unhealthySince,omitempty"`
	// LastDefragmentation is when Steward last defragmented the member's database and what it gave back
	// (recorded on the member's volume).
	// +optional
	LastDefragmentation *Defragmented `json:"lastDefragmentation,omitempty"`
}

// Defragmented records one defragmentation of a member.
type Defragmented struct {
	// Time is when it ended.
	Time metav1.Time `json:"time"`
	// ReclaimedBytes is by how much the database file shrank.
	ReclaimedBytes int64 `json:"reclaimedBytes"`
}

// MemberAlarm is an alarm etcd raised on a member and keeps until it is disarmed.
type MemberAlarm struct {
	// Member is the member's name ("unknown:<id>" for a member Steward cannot name).
	Member string `json:"member"`
	// MemberID is etcd's member ID in hex.
	MemberID string `json:"memberID"`
	// Alarm is etcd's alarm type: NOSPACE (the database reached its quota; writes are refused) or CORRUPT (a
	// corruption check found the member's data differs from the others').
	Alarm string `json:"alarm"`
}

// ClusterVersionMark is a cluster version and the raft index from which the cluster ran it.
type ClusterVersionMark struct {
	// Version is the cluster version ("3.6.0").
	Version string `json:"version"`
	// RaftIndex is the raft index from which the cluster ran Version (0: from its start).
	RaftIndex int64 `json:"raftIndex"`
}

// EtcdClusterStatus is the observed state of an etcd cluster.
type EtcdClusterStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Available, Progressing and Degraded (see conditions.go).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Replicas is the number of members Steward manages (Pods), for `kubectl get`.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of healthy voting members (during an adoption, the source's too: the count
	// etcd's quorum and Steward's metrics and alerts go by).
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Voters is the number of voting members in etcd's member list. While etcd gives no member list (no quorum,
	// no member reachable), it keeps the count of the last list read: membership does not change without one.
	// +optional
	Voters int32 `json:"voters,omitempty"`

	// Learners is the number of learners in etcd's member list (the last list read, as for Voters).
	// +optional
	Learners int32 `json:"learners,omitempty"`

	// StepSince is when the step under way began: when the Progressing condition took its current reason (a
	// step and its waits, such as ScalingUp or WaitingForMembers, each count as a step). Empty while Progressing
	// is False. Kept in status so that how long a step has lasted survives an operator restart.
	// +optional
	StepSince *metav1.Time `json:"stepSince,omitempty"`

	// Alarms are the alarms etcd has raised and not disarmed, per member (read when a member's status reports
	// errors; none while no member does). While etcd does not answer the alarm list, the last list read stays.
	// +listType=atomic
	// +optional
	Alarms []MemberAlarm `json:"alarms,omitempty"`

	// QuotaBackendBytes is the database quota members are started with (--quota-backend-bytes):
	// spec.etcd.quotaBackendBytes, else derived from spec.storage.size.
	// +optional
	QuotaBackendBytes int64 `json:"quotaBackendBytes,omitempty"`

	// AuthEnabled is whether etcd enforces authentication, as Steward last read or set it (spec.auth.enabled).
	// +optional
	AuthEnabled *bool `json:"authEnabled,omitempty"`

	// OperatorCredentialsSecret is the Secret with the password of steward:operator, the etcd user Steward acts as
	// on a cluster with authentication and without TLS (it holds the root role); empty while Steward has needed
	// none. Whoever can read it can do anything in the cluster's etcd.
	// +optional
	OperatorCredentialsSecret string `json:"operatorCredentialsSecret,omitempty"`

	// UndeclaredUsers are the etcd users no EtcdUser of the cluster declares (root and Steward's own identity
	// excepted), as of UsersCheckedTime; read once a minute while authentication is on.
	// +optional
	UndeclaredUsers []string `json:"undeclaredUsers,omitempty"`

	// UsersCheckedTime is when Steward last compared etcd's users with the cluster's EtcdUsers.
	// +optional
	UsersCheckedTime *metav1.Time `json:"usersCheckedTime,omitempty"`

	// RaisedQuotaBackendBytes is the quota Steward raised to when the data in use filled the quota after a NOSPACE
	// alarm (spec.maintenance.recoverFromNoSpace.maxQuotaBackendBytes): members run with the larger of it (at
	// most that maximum) and the spec's quota. 0 when Steward raised none.
	// +optional
	RaisedQuotaBackendBytes int64 `json:"raisedQuotaBackendBytes,omitempty"`

	// CurrentVersion is the oldest etcd server version a member runs: during a rolling upgrade the version the
	// cluster is still at, afterwards spec.version.
	// +optional
	CurrentVersion string `json:"currentVersion,omitempty"`

	// ClusterVersion is the cluster version etcd reports (major.minor.0): the feature level every member must
	// speak. It moves up once every member runs the newer minor, and down as soon as a downgrade is enabled.
	// +optional
	ClusterVersion string `json:"clusterVersion,omitempty"`

	// Downgrade is etcd's downgrade in progress, if any (etcd 3.6+): the minor version the cluster is going to.
	// +optional
	DowngradeTarget string `json:"downgradeTarget,omitempty"`

	// ClusterVersionSince is the controller's memory of when the cluster reached its cluster version: the raft
	// index (the leader's commit index when Steward first saw it) at which etcd reported ClusterVersion after a
	// change Steward observed; 0 when the cluster was created at it or came down to it (a downgrade leaves only
	// entries the minor it came from can read). Before moving a member on to the next minor,
	// Steward waits until every member has applied a snapshot interval past it: members replay their log from
	// their last snapshot, and a newer release cannot read log entries the release before the last one wrote
	// (etcd 3.7 panics on entries written under 3.5).
	// +optional
	ClusterVersionSince *ClusterVersionMark `json:"clusterVersionSince,omitempty"`

	// Leader is the name of the member that leads the cluster.
	// +optional
	Leader string `json:"leader,omitempty"`

	// ClusterID is etcd's cluster ID, in hex.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`

	// Revision is the etcd revision of the cluster's key space, as its leader last reported it.
	// +optional
	Revision int64 `json:"revision,omitempty"`

	// HashCheck is the result of Steward's last comparison of members' key-space hashes.
	// +optional
	HashCheck *HashCheck `json:"hashCheck,omitempty"`

	// Members as observed.
	// +listType=map
	// +listMapKey=name
	// +optional
	Members []MemberStatus `json:"members,omitempty"`

	// Adoption is the adoption of a running etcd (spec.bootstrap.fromExisting): its phase, the source's members
	// (external members) and those Steward retired. Empty for clusters Steward created.
	// +optional
	Adoption *AdoptionStatus `json:"adoption,omitempty"`

	// Bootstrapped is the controller's memory that the cluster has formed (every bootstrap member started).
	// From then on a member without Pod and volume has lost data and is never re-created under its old
	// identity, and a cluster whose members all vanished is not silently re-created empty.
	// +optional
	Bootstrapped bool `json:"bootstrapped,omitempty"`

	// ClientEndpoint is the client Service's address clients use.
	// +optional
	ClientEndpoint string `json:"clientEndpoint,omitempty"`

	// ExternalAccess is how clients outside the Kubernetes cluster reach the client Service (spec.service of type
	// NodePort or LoadBalancer), as the Service reports it.
	// +optional
	ExternalAccess *ExternalAccess `json:"externalAccess,omitempty"`

	// FormerClusterIDs are the etcd cluster IDs the cluster had before it was re-seeded from a backup, oldest
	// first: backups taken under them are backups of this cluster.
	// +optional
	FormerClusterIDs []string `json:"formerClusterIDs,omitempty"`

	// QuorumLostSince is when Steward first saw the formed cluster without quorum in the current loss of it
	// (the controller's memory for spec.quorumLossRecovery); empty while it has quorum.
	// +optional
	QuorumLostSince *metav1.Time `json:"quorumLostSince,omitempty"`

	// TLS names the cluster's TLS Secrets and when certificates expire (every provider but None).
	// +optional
	TLS *TLSStatus `json:"tls,omitempty"`

	// MaintenanceWindow is spec.maintenance.window as Steward last computed it: whether it is open, when it next
	// opens, and the work deferred to it. Empty without a window.
	// +optional
	MaintenanceWindow *MaintenanceWindowStatus `json:"maintenanceWindow,omitempty"`

	// Hibernation is the cluster's hibernation (spec.hibernation), from the moment it is asked for until the
	// cluster is Available again after resuming; empty otherwise.
	// +optional
	Hibernation *HibernationStatus `json:"hibernation,omitempty"`

	// LastBackup is the cluster's newest Complete EtcdBackup. Written by the backup controller (only this
	// field), so that `kubectl get etcdcluster -o yaml` answers "when was this last backed up?".
	// +optional
	LastBackup *BackupRef `json:"lastBackup,omitempty"`

	// Standby is the standby's progress (spec.standby): lag, last segment applied, promotion.
	// +optional
	Standby *StandbyStatus `json:"standby,omitempty"`
}

// EtcdCluster is an etcd cluster managed by Steward.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=etcd,categories=steward
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.currentVersion`
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Hibernation",type=string,JSONPath=`.status.hibernation.phase`
// +kubebuilder:printcolumn:name="Standby",type=string,JSONPath=`.status.standby.phase`
// +kubebuilder:printcolumn:name="Adoption",type=string,JSONPath=`.status.adoption.phase`,priority=1
// +kubebuilder:printcolumn:name="TLS",type=string,JSONPath=`.spec.tls.provider`,priority=1
// +kubebuilder:printcolumn:name="Last Backup",type=date,JSONPath=`.status.lastBackup.time`,priority=1
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]{0,55}[a-z0-9])?$')",message="metadata.name must start with a letter, hold only lower-case letters, digits and '-', and be at most 57 characters: members are named <name>-xxxxx (a Pod hostname: a DNS label of at most 63 characters), Services <name> and <name>-peer (DNS-1035 labels)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EtcdClusterSpec `json:"spec"`
	// +optional
	Status EtcdClusterStatus `json:"status,omitempty"`
}

// EtcdClusterList is a list of EtcdClusters.
// +kubebuilder:object:root=true
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EtcdCluster{}, &EtcdClusterList{})
}

// HashCheck is one comparison of members' key-space hashes at one revision.
type HashCheck struct {
	// Time is when the comparison ran.
	Time metav1.Time `json:"time"`
	// Revision is the revision every member hashed its key space at.
	Revision int64 `json:"revision,omitempty"`
	// Result is Consistent, Mismatch, NoMajority or Inconclusive.
	Result string `json:"result"`
	// MismatchedMembers are the members whose hash differs from the majority's (Mismatch), or every member
	// compared (NoMajority).
	// +optional
	MismatchedMembers []string `json:"mismatchedMembers,omitempty"`
	// Message says what was compared and found.
	// +optional
	Message string `json:"message,omitempty"`
}

// ExternalAccess is the client Service's addresses outside the Kubernetes cluster.
type ExternalAccess struct {
	// Type of the client Service.
	Type corev1.ServiceType `json:"type"`
	// NodePort is the client port on every node's address (types NodePort and LoadBalancer).
	// +optional
	NodePort int32 `json:"nodePort,omitempty"`
	// LoadBalancer are the load balancer's client URLs (type LoadBalancer), empty until it has an address.
	// +optional
	LoadBalancer []string `json:"loadBalancer,omitempty"`
}
