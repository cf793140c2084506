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

// Reasons of EtcdCluster Available. Before the cluster forms, Available is False with reason
// Bootstrapping; while etcd refuses Steward's password it is Unknown with reason OperatorPasswordRejected.
const (
	// ReasonQuorumAvailable: Available is True: a quorum of voting members is healthy; the message counts them.
	ReasonQuorumAvailable = "QuorumAvailable"
	// ReasonQuorumLost: fewer voting members are healthy than quorum, or etcd gives no member list (the message
	// says what Kubernetes shows instead). Available is False and Degraded True with this reason.
	ReasonQuorumLost = "QuorumLost"
)

// Reasons of EtcdCluster Degraded: what Steward observes. Those of a volume being deleted, a Pod stuck
// terminating, an etcd alarm and a data mismatch also give a Warning Event of the same reason when they begin.
const (
	// ReasonAsExpected: Degraded is False: no problem found.
	ReasonAsExpected = "AsExpected"
	// ReasonMembersUnhealthy: members do not answer healthy, while the cluster keeps its quorum.
	ReasonMembersUnhealthy = "MembersUnhealthy"
	// ReasonReconcileError: the last pass failed with an error (the message); Steward tries again.
	ReasonReconcileError = "ReconcileError"
	// ReasonMemberPodsFailing: a member Pod cannot run (its image cannot be pulled, it cannot be scheduled, for
	// example because its volume's storage class does not exist, or its container cannot be created or keeps
	// crashing). Nothing CEL can check at admission; Steward reports it and changes nothing because of it.
	ReasonMemberPodsFailing = "MemberPodsFailing"
	// ReasonMemberVolumeDeleting: a member's PVC is being deleted while its Pod runs (the Pod holds it): its data
	// goes when the Pod stops. Steward replaces the member while it still serves.
	ReasonMemberVolumeDeleting = "MemberVolumeDeleting"
	// ReasonPodStuckTerminating: a deleted member Pod has outlived its grace period by a margin (its node no
	// longer answers, most likely). For a member etcd still lists, Steward cannot re-create it on its volume
	// until the Pod is gone, and cannot know whether the node will return: a human must. A removed member's Pod
	// holds nothing back (its successor joins meanwhile) but its volume, which goes with it.
	ReasonPodStuckTerminating = "PodStuckTerminating"
	// ReasonNoSpaceAlarm: etcd raised its NOSPACE alarm (a member's database reached its quota): the cluster
	// serves reads and deletes but refuses writes until space is reclaimed and the alarm disarmed.
	ReasonNoSpaceAlarm = "NoSpaceAlarm"
	// ReasonCorruptAlarm: etcd's corruption check raised a CORRUPT alarm: a member's data differs from the
	// others'. Steward never disarms it; a human decides which member to replace.
	ReasonCorruptAlarm = "CorruptAlarm"
	// ReasonMemberDataMismatch: Steward's comparison of members' key-space hashes at one revision found members
	// whose data differs from the majority's, or no majority (status.hashCheck).
	ReasonMemberDataMismatch = "MemberDataMismatch"
	// ReasonSharedIssuerTrusted: provider CertManager, and members trust the CA of the user's issuer itself (they
	// were created before Steward gave each such cluster a CA of its own): whoever else that issuer serves can
	// connect as any user. The message names the members and what to do; Steward changes nothing about it on
	// its own.
	ReasonSharedIssuerTrusted = "SharedIssuerTrusted"
	// ReasonClientServiceRefused: the API server refuses the client Service as spec.service shapes it (a node port
	// taken or out of range, a load balancer class not allowed); clients reach the members as before.
	ReasonClientServiceRefused = "ClientServiceRefused"
	// ReasonMemoryLimitTooLow: spec.resources.limits.memory is below what a member may need with its settings
	// (the raft log it keeps in memory: spec.etcd.snapshotCount, maxRequestBytes, the quota; docs/user/clusters.md
	// "Sizing"): a burst of writes of large values would get it OOM-killed. Reported before it happens; Steward
	// keeps the user's limit.
	ReasonMemoryLimitTooLow = "MemoryLimitTooLow"
	// ReasonMemberMemoryExceedsNodes: members may need more memory than their nodes can give: a member Pod
	// requests more than any node it may use has allocatable (the next one created would stay Pending), or the
	// members on one node may together grow past its allocatable memory. Reported before it happens, from the
	// Nodes' allocatable memory; Steward moves nothing because of it.
	ReasonMemberMemoryExceedsNodes = "MemberMemoryExceedsNodes"
)

// Reasons of EtcdCluster Degraded: waits for a human. Degraded is True with the reason (and Progressing False with
// the same reason), and a Warning Event of the same reason is recorded when the wait begins; Steward takes no
// step the wait holds back until the cause is gone. RestoreFailed (see EtcdRestore) is one of them too.
const (
	// ReasonMemberDataLost: every member and volume of the cluster is gone; restore it from a backup, or delete
	// and re-create the EtcdCluster.
	ReasonMemberDataLost = "MemberDataLost"
	// ReasonInconsistentBootstrap: the bootstrap members' Pods and volumes disagree on the initial cluster (which
	// Steward never creates); Steward waits.
	ReasonInconsistentBootstrap = "InconsistentBootstrap"
	// ReasonVersionChangeRefused: spec.version cannot be reached from the running version (more than one minor
	// down, a release etcd cannot move to from here); the message says why. Nothing is restarted.
	ReasonVersionChangeRefused = "VersionChangeRefused"
	// ReasonRestoreRefused: the EtcdRestore that re-seeds this cluster is not carried out (the cluster has
	// quorum again, for example); the message says why. Nothing is re-seeded.
	ReasonRestoreRefused = "RestoreRefused"
	// ReasonBackupNotMountable: no node the cluster's members may use now can mount the claim that holds the
	// snapshot; nothing is created or stopped until one can.
	ReasonBackupNotMountable = "BackupNotMountable"
	// ReasonNoBackupToRestore: spec.quorumLossRecovery would re-seed the cluster, which has lost quorum for its
	// set time, but there is no Complete backup of this cluster to restore from.
	ReasonNoBackupToRestore = "NoBackupToRestore"
	// ReasonAutoRestoreFailed: the re-seed Steward started by itself under spec.quorumLossRecovery failed; it
	// waits for a human.
	ReasonAutoRestoreFailed = "AutoRestoreFailed"
	// ReasonQuorumUnrecoverable: etcd gives no member list and too few members still hold data to form a quorum:
	// Steward cannot bring the cluster back by itself. Restore from a backup, or bring back the lost volumes.
	ReasonQuorumUnrecoverable = "QuorumUnrecoverable"
	// ReasonTLSProviderMismatch: member Pods predate TLS in Steward while the spec asks for TLS (a cluster created
	// by a Steward without TLS, whose stored spec now reads with the default provider Steward). Switching it to
	// TLS would cut off its plaintext clients without anyone having asked for it, so Steward changes nothing until
	// the spec says what is wanted.
	ReasonTLSProviderMismatch = "TLSProviderMismatch"
	// ReasonTLSSecretInvalid: a Secret of provider Secrets is missing or unusable (the message says which and
	// why). Steward changes nothing until the user fixes it.
	ReasonTLSSecretInvalid = "TLSSecretInvalid"
	// ReasonCertManagerNotInstalled: provider CertManager, but the API server does not serve
	// certificates.cert-manager.io/v1. Steward changes nothing until cert-manager is installed.
	ReasonCertManagerNotInstalled = "CertManagerNotInstalled"
	// ReasonClusterCAChanged: provider CertManager, and the certificate in the cluster's CA Secret has another
	// key than the CA its running members trust (the Secret was deleted, and cert-manager issued a new CA).
	// Members load their trusted CA once, at start, so certificates of the new key would cut them off from each
	// other and from Steward: Steward keeps trusting the old one and takes no step until a human restores the old
	// CA or restarts every member on the new one.
	ReasonClusterCAChanged = "ClusterCAChanged"
	// ReasonVolumeResizeFailed: a member's PVC reports that its expansion failed (ControllerResizeError,
	// NodeResizeError); Steward waits for a human (fix the storage, or choose a class to migrate to).
	ReasonVolumeResizeFailed = "VolumeResizeFailed"
	// ReasonNoSpaceQuotaTooSmall: compacted and defragmented, the data in use still fills the quota: only a human
	// can delete data or raise the quota.
	ReasonNoSpaceQuotaTooSmall = "NoSpaceQuotaTooSmall"
	// ReasonOperatorPasswordRejected: etcd refused Steward's password and no member verifies client certificates,
	// so Steward has no identity in etcd: it changes nothing until a human gives it one. Available is Unknown with
	// this reason: without an identity etcd reports no member's health.
	ReasonOperatorPasswordRejected = "OperatorPasswordRejected"
	// ReasonMembershipChangeRefused: etcd has refused a membership change (a learner's add, a voter's removal)
	// for over a minute, every member asked on its own answering "unhealthy cluster" (its strict reconfiguration
	// check: it has not counted its peers connected for the last 5 s) while the cluster serves. etcd can keep a
	// peer marked inactive after a failed send although their stream replicates, until one of the two restarts;
	// the message names the members, and a human restarts one of them. The change is tried again on every pass
	// and the wait ends when etcd takes it.
	ReasonMembershipChangeRefused = "MembershipChangeRefused"
)

// Reasons of EtcdCluster Progressing: lifecycle and membership. Progressing is True while Steward takes a step
// or waits for one under way, and its message names the step.
const (
	// ReasonPaused: spec.paused is true: Steward observes but changes nothing (Progressing False).
	ReasonPaused = "Paused"
	// ReasonBootstrapping: the first members of a new cluster are being created (Available is False with this
	// reason until the cluster forms; a standby's Standby condition too, until its applier starts).
	ReasonBootstrapping = "Bootstrapping"
	// ReasonWaitingForMembers: no member list from etcd; waiting for members re-created on their volumes to form
	// a quorum.
	ReasonWaitingForMembers = "WaitingForMembers"
	// ReasonReconciled: Progressing is False: all members are healthy and as specified.
	ReasonReconciled = "Reconciled"
	// ReasonPodDeleting: waiting for a member Pod to go (a removed member's, one re-created on another version, or
	// those a restore retires).
	ReasonPodDeleting = "PodDeleting"
	// ReasonRecreatingMember: member Pods whose volumes still hold their data are created again (deleted Pods, or
	// the rest of an interrupted bootstrap).
	ReasonRecreatingMember = "RecreatingMember"
	// ReasonScalingUp: a member joins the cluster (its learner is added, started, then promoted).
	ReasonScalingUp = "ScalingUp"
	// ReasonScalingDown: a member leaves the cluster (spec.replicas was lowered).
	ReasonScalingDown = "ScalingDown"
	// ReasonRemovingLeftoverMember: the Pod of a member etcd no longer lists is deleted.
	ReasonRemovingLeftoverMember = "RemovingLeftoverMember"
	// ReasonRestartingLoneBootstrapMember: the member whose Pod bootstrapped a one-member cluster is restarted
	// once the cluster has grown, so that it starts as a member of the grown cluster.
	ReasonRestartingLoneBootstrapMember = "RestartingLoneBootstrapMember"
	// ReasonUnknownMember: etcd lists a member Steward did not create: Steward removes it if it holds no data, and
	// otherwise waits.
	ReasonUnknownMember = "UnknownMember"
	// ReasonReplacingMember: a member whose volume no Pod can mount (its node is gone), or whose data is gone, is
	// removed, to be replaced by a member of a new name.
	ReasonReplacingMember = "ReplacingMember"
	// ReasonReplacingLearner: a learner whose volume is being deleted is removed, to be replaced (promoting it
	// would make a voter of a member about to lose its data).
	ReasonReplacingLearner = "ReplacingLearner"
	// ReasonReplacingMismatchedMember: a member whose key space differs from the majority's is removed, to be
	// replaced (spec.maintenance.corruptionCheck.replaceMismatchedMembers).
	ReasonReplacingMismatchedMember = "ReplacingMismatchedMember"
	// ReasonQuorumAtRisk: a step waits because taking it would leave fewer healthy voting members than quorum.
	ReasonQuorumAtRisk = "QuorumAtRisk"
	// ReasonRebalancing: a member moves off a crowded node or zone: a learner joins where members are fewest,
	// then a member on the most crowded node leaves.
	ReasonRebalancing = "Rebalancing"
	// ReasonMaintenanceDeferred: nothing else is to do, and optional disruptive work (defragmentation, rebalancing,
	// restarts for a changed quota or authentication, opted-in version changes) waits for the next maintenance
	// window (spec.maintenance.window; status.maintenanceWindow lists it). Progressing False.
	ReasonMaintenanceDeferred = "MaintenanceDeferred"
	// ReasonInvalidMaintenanceWindow: spec.maintenance.window's schedule or time zone cannot be read; optional work
	// waits as outside a window (Degraded True).
	ReasonInvalidMaintenanceWindow = "InvalidMaintenanceWindow"
	// ReasonHibernating: spec.hibernation.enabled is set and members' Pods are being stopped, one at a time, the
	// leader last (Progressing True; Available False with this reason once the members left lose quorum).
	ReasonHibernating = "Hibernating"
	// ReasonHibernated: no member runs: every member's Pod is stopped and its volume, identity and certificates
	// are kept (Available and Progressing False with this reason). Also the reason an EtcdBackup of a hibernated
	// cluster fails with, and a schedule's Ready and ContinuousBackup conditions pause with.
	ReasonHibernated = "Hibernated"
)

// Reasons of EtcdCluster Progressing: adoption of a running etcd (spec.bootstrap.fromExisting). The preflight's
// refusals (Source...) change nothing on the source; Steward checks again on its next pass.
const (
	// ReasonSourceUnreachable: no endpoint of the source answered with a member list.
	ReasonSourceUnreachable = "SourceUnreachable"
	// ReasonSourceAccessRejected: the source refused the user of spec.bootstrap.fromExisting.credentialsSecret,
	// that user lacks the root role, or the Secret is missing, lacks its keys, or is needed (the source has
	// authentication on) and not given.
	ReasonSourceAccessRejected = "SourceAccessRejected"
	// ReasonSourceMembershipChanging: a source member has not started yet, a learner is in the source (someone
	// else is changing its membership), or the source has more voters than Steward's largest cluster.
	ReasonSourceMembershipChanging = "SourceMembershipChanging"
	// ReasonSourceUnhealthy: a source member does not answer healthy, or the source keeps an alarm raised.
	ReasonSourceUnhealthy = "SourceUnhealthy"
	// ReasonSourceVersionUnsupported: the source's members run different releases, a release Steward does not
	// support, or a minor other than spec.version's.
	ReasonSourceVersionUnsupported = "SourceVersionUnsupported"
	// ReasonSourceTooBig: the source's database is larger than the quota Steward's members would run with.
	ReasonSourceTooBig = "SourceTooBig"
	// ReasonSourceTLSUnsupported: spec.tls does not match the source (a plaintext source is adopted with
	// spec.tls.provider None; a TLS source with certificates of its own CA, provider Secrets or CertManager, and
	// peerAuth AnyCertificate), the TLS handshake with the source failed, the source is half switched to TLS, or a
	// source member advertises more than one peer URL or mixes schemes.
	ReasonSourceTLSUnsupported = "SourceTLSUnsupported"
	// ReasonSourceAuthUnsupported: Steward could not tell whether the source has etcd's authentication on, or it
	// has and spec.auth.enabled is false (Steward would turn it off for the source's clients).
	ReasonSourceAuthUnsupported = "SourceAuthUnsupported"
	// ReasonSourceChanged: the source's endpoints answer for another etcd cluster than the one admitted, or a
	// member neither Steward's nor the source's appeared: Steward stops the adoption and changes nothing. On a
	// standby's Standby condition: the source holds segments of a newer etcd cluster ID than the one it follows
	// (the primary was re-seeded); the standby stops.
	ReasonSourceChanged = "SourceChanged"
	// ReasonAddingOperatorUser: Steward adds its own etcd user (steward:operator, root role) to an admitted source
	// with authentication on, through spec.bootstrap.fromExisting.credentialsSecret's user, before its first
	// member joins; the source's users and roles stay as they are.
	ReasonAddingOperatorUser = "AddingOperatorUser"
	// ReasonRemovingOperatorUser: an aborted adoption deletes the etcd user Steward added to the source, once
	// Steward's members have left.
	ReasonRemovingOperatorUser = "RemovingOperatorUser"
	// ReasonSourceAdmitted: the preflight admitted the source; its members are recorded as external members.
	ReasonSourceAdmitted = "SourceAdmitted"
	// ReasonAdopting: Steward's members join the adopted cluster (a learner added, started, promoted) while the
	// source's members stay.
	ReasonAdopting = "Adopting"
	// ReasonAdoptionWaitingForHandover: Steward's members are all voters; the source's stay until
	// spec.bootstrap.fromExisting.handover is Retire (Progressing False).
	ReasonAdoptionWaitingForHandover = "AdoptionWaitingForHandover"
	// ReasonRetiringSourceMember: a source member is removed from etcd (leadership moved off it first); its
	// process is the user's to stop (status.adoption.retired).
	ReasonRetiringSourceMember = "RetiringSourceMember"
	// ReasonAbortingAdoption: Steward's members leave the source again (spec.bootstrap.fromExisting.handover
	// Abort).
	ReasonAbortingAdoption = "AbortingAdoption"
	// ReasonAdoptionAborted: Steward's members have left; the source is as Steward found it (Progressing False).
	ReasonAdoptionAborted = "AdoptionAborted"
	// ReasonAdoptionAbortTooLate: handover Abort after a source member left: the source cannot be restored as it
	// was, so Steward refuses and changes nothing; set handover back to Retire or Keep.
	ReasonAdoptionAbortTooLate = "AdoptionAbortTooLate"
)

// Reasons of EtcdCluster Progressing: versions. WaitingForSnapshot (see EtcdBackupSchedule) is one of them too:
// the wait for members' raft snapshots before a minor step.
const (
	// ReasonUpgrading: a member restarts on a newer etcd release (one minor at a time).
	ReasonUpgrading = "Upgrading"
	// ReasonDowngrading: the cluster steps down one minor: etcd's downgrade is enabled (or cancelled when the spec
	// goes back), then members restart on the older release.
	ReasonDowngrading = "Downgrading"
	// ReasonRestartingForImage: a member restarts on the image spec.version asks for (a patch release, or a
	// member that is down).
	ReasonRestartingForImage = "RestartingForImage"
	// ReasonMovingLeader: leadership moves to another member before the leader restarts.
	ReasonMovingLeader = "MovingLeader"
	// ReasonWaitingForStorageVersion: etcd has yet to migrate a member's storage version down before the member
	// restarts on the older release.
	ReasonWaitingForStorageVersion = "WaitingForStorageVersion"
	// ReasonWaitingForRestart: waiting for a member to restart on its new release (image, container, etcd's
	// reported version: the message shows all three).
	ReasonWaitingForRestart = "WaitingForRestart"
	// ReasonWaitingForCatchUp: waiting for a member to apply what the leader has committed before the next one
	// restarts.
	ReasonWaitingForCatchUp = "WaitingForCatchUp"
	// ReasonWaitingForClusterVersion: every member runs the new release; waiting for etcd to raise the cluster
	// version before the next minor.
	ReasonWaitingForClusterVersion = "WaitingForClusterVersion"
)

// Reasons of EtcdCluster Progressing: storage and maintenance.
const (
	// ReasonExpandingVolume: a member's PVC is being expanded in place (or the next one is about to be).
	ReasonExpandingVolume = "ExpandingVolume"
	// ReasonMigratingStorage: members are replaced one at a time by members on volumes of the spec's storage
	// class and size (another class, a smaller size, or a class that cannot expand).
	ReasonMigratingStorage = "MigratingStorage"
	// ReasonDefragmenting: members are defragmented one at a time, the leader last (spec.maintenance.defrag).
	ReasonDefragmenting = "Defragmenting"
	// ReasonRecoveringFromNoSpace: recovering from a NOSPACE alarm (compact, defragment, raise the quota,
	// disarm), as spec.maintenance.recoverFromNoSpace allows.
	ReasonRecoveringFromNoSpace = "RecoveringFromNoSpace"
	// ReasonWaitingForBackup: a defragmentation waits while a backup of the cluster streams a snapshot.
	ReasonWaitingForBackup = "WaitingForBackup"
	// ReasonRaisingQuota: the quota is raised within spec.maintenance.recoverFromNoSpace.maxQuotaBackendBytes.
	ReasonRaisingQuota = "RaisingQuota"
	// ReasonRestartingForQuota: a member restarts to run with the quota in force (raised by Steward, or changed
	// in the spec or with storage.size).
	ReasonRestartingForQuota = "RestartingForQuota"
)

// Reasons of EtcdCluster Progressing: TLS and authentication.
const (
	// ReasonEnablingTLS: members restart one at a time to serve TLS (spec.tls turned on).
	ReasonEnablingTLS = "EnablingTLS"
	// ReasonDisablingTLS: members restart one at a time to serve plaintext (spec.tls turned off).
	ReasonDisablingTLS = "DisablingTLS"
	// ReasonRestartingForClientAuth: a member restarts to require client certificates on its client port, or to
	// stop requiring them, as spec.tls.clientAuth says.
	ReasonRestartingForClientAuth = "RestartingForClientAuth"
	// ReasonRestartingForPeerAuth: a member restarts to accept only member certificates on its peer port, or any
	// certificate of the cluster's CA, as spec.tls.peerAuth says.
	ReasonRestartingForPeerAuth = "RestartingForPeerAuth"
	// ReasonWaitingForPeerIdentity: spec.tls.peerAuth asks members to check the peer identity, and the
	// certificate a member holds does not carry it yet (the kubelet brings a renewed Secret into a running Pod
	// within seconds: Steward annotates the Pod, etcd.steward.dev/certificates, which makes the kubelet sync it).
	ReasonWaitingForPeerIdentity = "WaitingForPeerIdentity"
	// ReasonWaitingForCertificates: provider CertManager, and a Secret cert-manager is to write is missing or
	// not yet usable; Steward creates no member Pod before its Secret is.
	ReasonWaitingForCertificates = "WaitingForCertificates"
	// ReasonEnablingAuth: etcd's authentication is being turned on (spec.auth.enabled: true).
	ReasonEnablingAuth = "EnablingAuth"
	// ReasonDisablingAuth: etcd's authentication is being turned off (spec.auth.enabled: false).
	ReasonDisablingAuth = "DisablingAuth"
	// ReasonRestoringOperatorUser: etcd refused Steward's password; Steward makes its password user again through
	// its client certificate.
	ReasonRestoringOperatorUser = "RestoringOperatorUser"
)

// Reasons of EtcdCluster Progressing: restores. TakingSafetyBackup, RestoreFailed and the
// other reasons of an EtcdRestore can show on its cluster too.
const (
	// ReasonWaitingForRestore: waiting for the restore to verify its backup before members start from it.
	ReasonWaitingForRestore = "WaitingForRestore"
	// ReasonReseeding: a confirmed restore retires the old members (Pods, then volumes set aside) to start again
	// from the snapshot.
	ReasonReseeding = "Reseeding"
	// ReasonRestoringFromBackup: a new cluster is created from spec.bootstrap.fromBackup.
	ReasonRestoringFromBackup = "RestoringFromBackup"
	// ReasonQuorumLossRecovery: spec.quorumLossRecovery re-seeds the cluster from its newest backup after its set
	// time without quorum.
	ReasonQuorumLossRecovery = "QuorumLossRecovery"
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
	// ReasonClusterNotFound: spec.clusterName names no EtcdCluster in the namespace (EtcdBackup, EtcdRestore,
	// EtcdUser).
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonClusterUnavailable: the cluster has no healthy member to take a snapshot from.
	ReasonClusterUnavailable = "ClusterUnavailable"
	// ReasonDestinationNotFound: the PVC or the S3, GCS or Azure credentials Secret does not exist (or lacks
	// a key), or the ServiceAccount the destination names (serviceAccountName) does not exist.
	ReasonDestinationNotFound = "DestinationNotFound"
	// ReasonEncryptionKeyNotFound: spec.encryption names a Secret that does not exist, lacks the key age.key,
	// or holds no age X25519 identity there. Nothing was written.
	ReasonEncryptionKeyNotFound = "EncryptionKeyNotFound"
	// ReasonDestinationExists: a file or object already exists at the destination; backups never overwrite.
	ReasonDestinationExists = "DestinationExists"
	// ReasonSnapshotFailed: no member delivered a complete snapshot.
	ReasonSnapshotFailed = "SnapshotFailed"
	// ReasonChecksumMismatch: the snapshot stream did not match etcd's trailing sha256; nothing was stored.
	ReasonChecksumMismatch = "ChecksumMismatch"
	// ReasonUploadFailed: writing to the destination failed; nothing was stored under the final name.
	ReasonUploadFailed = "UploadFailed"
	// ReasonDestinationFull: the destination claim ran out of space (or quota) while the snapshot was written;
	// nothing was stored. status.claimSpace says how much was free; retention or a larger claim makes room.
	ReasonDestinationFull = "DestinationFull"
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
	// written. On an EtcdCluster's Standby condition: a segment the standby needs next; the standby stops.
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
	// ReasonFollowing: the follower watches the cluster and stores segments; a snapshot starts its chain. On an
	// EtcdCluster's Standby condition: the applier replays the source's segments as they arrive.
	ReasonFollowing = "Following"
	// ReasonFollowerStarting: the follower's Pod is not ready yet, or has not reported.
	ReasonFollowerStarting = "FollowerStarting"
	// ReasonFollowerFailing: the follower reports an error (connecting, watching, storing).
	ReasonFollowerFailing = "FollowerFailing"
	// ReasonWaitingForSnapshot: the follower's chain starts after every Complete snapshot (it just started, or
	// etcd compacted revisions it had not read): Steward takes a snapshot at once. On an EtcdCluster's Progressing
	// condition: a version step waits for members to take a raft snapshot past the index where the cluster reached
	// its current version, because the next release cannot replay entries written before it.
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
	// ReasonClusterHasQuorum: the cluster to re-seed has quorum and spec.allowRollbackOfHealthyCluster is not set
	// (the message names the revisions a rollback would discard), or it regained quorum before it was re-seeded.
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
	// ReasonEncryptionKeyMismatch: the stored snapshot is encrypted, and no key was given or none of the
	// identities in the backup's key Secret opens it (rotated away?). Nothing of the cluster was touched.
	ReasonEncryptionKeyMismatch = "EncryptionKeyMismatch"
	// ReasonRestoreFailed: a member failed to restore the snapshot into its data dir (etcdutl snapshot restore).
	// The EtcdCluster is Degraded with the same reason until a human acts.
	ReasonRestoreFailed = "RestoreFailed"
	// ReasonPointInTimeFailed: the point-in-time backup the restore made (spec.pointInTime) failed; the message
	// carries the backup's own reason and words (OutsideWindow names the recoverable window).
	ReasonPointInTimeFailed = "PointInTimeFailed"
)

// Reasons of EtcdUser Ready. ClusterNotFound (see EtcdBackup) is one of them too.
const (
	// ReasonApplied: Ready is True: the etcd user exists with its password or certificate and holds its roles.
	ReasonApplied = "Applied"
	// ReasonClusterNotReady: the EtcdCluster has no healthy member to apply the user to yet, its CA does not exist
	// yet, or Steward cannot connect to it; Steward retries.
	ReasonClusterNotReady = "ClusterNotReady"
	// ReasonInvalidSpec: the spec does not make a valid etcd user (the message says why).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonSecretConflict: the Secret (or cert-manager Certificate) the user is to write exists and is not this
	// EtcdUser's: Steward does not overwrite or take it over; name another Secret.
	ReasonSecretConflict = "SecretConflict"
	// ReasonCertificateNotSupported: spec.certificate, but the cluster cannot use one: it runs plaintext, its
	// members ask clients for no certificate (tls.clientAuth Password), or its provider Secrets leaves Steward no
	// CA or issuer to sign with. Declare the EtcdUser with spec.password instead.
	ReasonCertificateNotSupported = "CertificateNotSupported"
	// ReasonCertificatePending: waiting for cert-manager to issue the user's Certificate.
	ReasonCertificatePending = "CertificatePending"
	// ReasonRoleNotFound: roles of spec.roles do not exist in etcd; Steward grants them once they do (it creates
	// only the user's own role).
	ReasonRoleNotFound = "RoleNotFound"
	// ReasonEtcdError: etcd, or the API server, answered with an error (the message); Steward retries.
	ReasonEtcdError = "EtcdError"
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

// Condition type and reasons of a standby EtcdCluster (spec.standby). Standby is True while the applier replays
// the source's segments; False with the reason that holds it (Bootstrapping, starting, a stop, a refused
// promotion) or, after promotion, Promoted. Absent on a cluster that was never a standby.
const (
	// ConditionStandby is True while the standby follows its source.
	ConditionStandby = "Standby"
	// ReasonFencingWrites: the members have started from the source's snapshot, and Steward is making etcd refuse
	// every client write before the applier starts: each role but root keeps only its read permissions and no user
	// but root and Steward's own identity keeps the root role (recorded first in the ConfigMap
	// <cluster>-standby-fence, given back at promotion).
	ReasonFencingWrites = "FencingWrites"
	// ReasonApplierStarting: the applier's Pod is not ready yet, or has not reported.
	ReasonApplierStarting = "ApplierStarting"
	// ReasonSourceUnreadable: the applier cannot list or read the source (credentials, network, a missing
	// bucket); it retries, and the lag grows. Not a stop.
	ReasonSourceUnreadable = "SourceUnreadable"
	// ReasonSegmentGap: the source's segments after the applied revision do not start at the next revision (the
	// primary's follower was away past a compaction, retention pruned what the standby still needed, or a
	// segment was deleted). The standby stops: it never skips revisions. Re-create it to start from a newer
	// snapshot.
	ReasonSegmentGap = "SegmentGap"
	// ReasonDiverged: a replayed change came out at another revision than the primary's: something other than
	// the applier changed the standby's key space. The standby stops.
	ReasonDiverged = "Diverged"
	// ReasonSourceChanged (declared with the adoption's reasons, which use it too): on a standby, the source holds
	// segments of a newer etcd cluster ID than the one the standby follows (the primary was re-seeded from a
	// backup): its history does not continue the standby's. The standby stops.
	// ReasonSourceStillAdvancing: promotion was asked for, but the source's segments changed within
	// spec.standby.fencingWindow: the old primary may still take writes. Steward keeps following and promotes
	// once the source is quiet for the window (or at once with forcePromotion).
	ReasonSourceStillAdvancing = "SourceStillAdvancing"
	// ReasonPromoting: promotion is under way: applying the last complete segments, stopping the applier,
	// recording the revision reached, then opening writes (giving back what the fence took).
	ReasonPromoting = "Promoting"
	// ReasonPromoted: the standby was promoted and is an ordinary cluster (status.standby.promotedRevision).
	ReasonPromoted = "Promoted"
)
