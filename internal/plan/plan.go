// Package plan decides the next step for an etcd cluster from its spec and one observation of it. It is pure:
// no Kubernetes or etcd clients, no clock, no randomness — everything arrives as values (new member names
// included), so every decision is table-tested. It owns etcd's safety rules (docs/development/architecture.md);
// the controller only executes the one step returned, then observes again.
package plan

import (
	"fmt"
	"slices"
	"sort"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Spec is the part of the EtcdCluster spec the planner decides on.
type Spec struct {
	// Auth: etcd's authentication is to be on (spec.auth.enabled).
	Auth     bool
	Replicas int
	Version  string
	// Image is the image members of Version run (the spec's image, or the operator's default for Version).
	Image  string
	Paused bool
	// Hibernate: spec.hibernation.enabled is set: the members' Pods are to stop, their volumes to stay.
	Hibernate bool
	// SnapshotCount is the spec's etcd --snapshot-count; 0 means etcd's default.
	SnapshotCount int64
	// ReplaceUnhealthyAfter is how long a member may stay unhealthy before it is replaced; 0 never.
	ReplaceUnhealthyAfter time.Duration
	// FromBackup is spec.bootstrap.fromBackup's backup name: a new cluster starts from it. A standby's is its seed.
	FromBackup string
	// Standby: spec.standby is set: the cluster starts from its seed backup (FromBackup), which a standby's source
	// produces, so a missing seed is waited for rather than refused.
	Standby bool
	// QuorumLossAfter is how long the cluster may be without quorum before Steward re-seeds it from its newest
	// backup (spec.quorumLossRecovery with policy RestoreLatestBackup); 0 never.
	QuorumLossAfter time.Duration
	// TLS: the spec asks for TLS (any provider but None).
	TLS bool
	// ClientCertAuth: members serving TLS are to require client certificates on the client port (TLS, and
	// spec.tls.clientAuth Certificate).
	ClientCertAuth bool
	// PeerCheck: members serving TLS are to accept on the peer port only certificates carrying the cluster's
	// peer identity (spec.tls.peerAuth MemberIdentity), and provider's member certificates carry it.
	PeerCheck bool
	// RecoveryGrace is how long members re-created on their intact volumes get to form a quorum before a
	// re-seed from a backup may replace them: spec.quorumLossRecovery's after, else a default.
	RecoveryGrace time.Duration
	// UpgradeVia is, per minor ("3.6"), the release a cluster passes through when spec.version is more than one
	// minor above its cluster version: etcd upgrades one minor at a time, so 3.5 -> 3.7 is 3.5 -> 3.6 -> 3.7.
	// Empty when the spec pins an image (Steward cannot know the image of another release then).
	UpgradeVia map[string]Release
	// Storage is what spec.storage asks of members' volumes (see storage.go).
	Storage StorageGoal
	// Maintenance is what spec.maintenance asks Steward to do by itself (see maintenance.go).
	Maintenance Maintenance
	// Adopt is spec.bootstrap.fromExisting: the cluster adopts a running etcd (see adoption.go); nil otherwise.
	Adopt *Adopt
}

// Release is an etcd release and the image members run it from.
type Release struct {
	Version string
	Image   string
}

// Member is one member as seen through Kubernetes (its Pod and PVC) and etcd (the member list and its status
// endpoint), joined by name. A member can be known to only one side: a Pod not yet in etcd, or an etcd member
// without a Pod.
type Member struct {
	Name string

	HasPod      bool
	PodDeleting bool
	PodReady    bool
	// RunningFor is how long the member's etcd container has run since it last started (0 while it does not
	// run): a learner that started moments ago is about to have caught up, and its promotion is asked for often;
	// and the time a learner has had to catch up, which replaceUnhealthyAfter bounds.
	RunningFor time.Duration
	// PodOverdue is how long a deleted Pod has outlived its grace period (0 otherwise): a Pod that does not go
	// is held by a node that no longer answers, and only a human can tell that it is down for good.
	PodOverdue time.Duration
	// PodVersion is the etcd version the Pod is set to run, and PodImage its image; ContainerImage is the image
	// the running container was started from (the kubelet's report; differs from PodImage until it restarts).
	PodVersion     string
	PodImage       string
	ContainerImage string
	// VolumeVersion and VolumeImage are the release the member's data was last started with (recorded on its
	// PVC): a Pod re-created on the volume starts on it, whatever spec.version says by then.
	VolumeVersion string
	VolumeImage   string
	// InitialCluster is the --initial-cluster the member was created with (name to peer URL), recorded on its
	// Pod and PVC; InitialState is "new" for bootstrap members and "existing" for members that joined later.
	InitialCluster map[string]string
	InitialState   string
	// PodTLS is the TLS mode the Pod runs (TLSPlaintext, TLSBridge, TLSOn).
	PodTLS string
	// PodBootstrapsAlone: the Pod starts etcd to bootstrap a one-member cluster (--initial-cluster-state=new,
	// itself alone in --initial-cluster). Were its data dir emptied, etcd would start an empty cluster under this
	// cluster's identity, and the other members would look removed.
	PodBootstrapsAlone bool
	// PodClientCertAuth: the Pod serves TLS requiring client certificates on its client port.
	PodClientCertAuth bool
	// PodPeerCheck: the Pod serves TLS accepting on its peer port only certificates carrying the peer identity.
	PodPeerCheck bool
	// PeerIdentity: the certificate files the member's Pod holds carry the peer identity (its Pod was created
	// holding one, or the certificate it serves does).
	PeerIdentity bool

	HasPVC bool
	// VolumeDeleting: the member's PVC is being deleted while its Pod still runs (the Pod holds it): its data
	// goes when the Pod stops. HasPVC is false for it.
	VolumeDeleting bool
	// VolumeTLS is the TLS mode the member's last Pod was created in, recorded on its volume: how a Pod
	// re-created while etcd gives no member list (whose peer URL would say) must listen.
	VolumeTLS string
	// Volume is the size and class of the member's PVC (see storage.go).
	Volume Volume
	// Removed: Steward removed the member from etcd (recorded on its volume before deleting its Pod): a volume
	// left without a Pod is a leftover, not a member to bring back, even when no member list says so.
	Removed bool
	// RetiredBy is the re-seed that stopped the member (recorded on its volume before its Pod was deleted).
	RetiredBy string
	// PVC is the name of the member's volume claim (empty without one), for messages a human acts on.
	PVC string
	// VolumeHasRun: the member's volume records that the member has run (Steward saw it started): see HasRun.
	VolumeHasRun bool
	// ServedBefore: status (the controller's memory) lists the member with an ID and the version it reported,
	// which only a member whose etcd ran on its data dir answers. How Steward knows it of a volume from before it
	// recorded VolumeHasRun, while etcd gives no member list.
	ServedBefore bool
	// PodAge is how long ago the member's Pod was created (0 without one): how long a Pod re-created on its
	// volume has had to rejoin. Re-observable, so a restarted operator sees the same.
	PodAge time.Duration
	// Remembered: known only from the controller's memory in status: etcd listed it when it last answered, and
	// it has neither Pod nor volume now that etcd gives no member list.
	Remembered bool

	// InEtcd: the member is in etcd's member list (by name, or by peer URL while it has not started yet).
	InEtcd bool
	// Started: etcd lists the member with its name, which a member publishes when it first runs. A started
	// member has data that only its own volume holds.
	Started   bool
	ID        uint64
	IsLearner bool
	// PeerURL is the peer URL etcd lists for the member (its first).
	PeerURL string
	// Healthy: its status endpoint answered without errors.
	Healthy bool
	// UnhealthyFor is how long the member has been unhealthy without a break (0 when healthy).
	UnhealthyFor time.Duration
	// RunningVersion is the etcd version the member reports; StorageVersion the version of its data format
	// (etcd 3.6+); AppliedIndex the raft index it has applied and CommitIndex the one it knows committed.
	RunningVersion string
	StorageVersion string
	AppliedIndex   uint64
	CommitIndex    uint64
	// LearnerFor is how long a learner has had its Pod (0 for voters and for learners without a Pod): the time
	// its Pod has had to start etcd (its time to catch up is RunningFor). Derived from the Pod's creation time,
	// so a restarted operator sees the same.
	LearnerFor time.Duration
	// DataLoss is the evidence, from the member's last crash, that its data dir was emptied or corrupted on a
	// volume that is still there (see DataLossEvidence); empty when there is none.
	DataLoss string
	// Restore is the EtcdRestore that seeded the member from a snapshot (recorded on its Pod and volume), empty
	// for members that started empty or joined.
	Restore string
	// DBSize is the size of the member's database file and DBSizeInUse the part of it in use (the rest is free
	// pages a defragmentation gives back), as its status endpoint reports them.
	DBSize      int64
	DBSizeInUse int64
	// DefragmentedAtCompaction is the revision the cluster was compacted to when Steward last defragmented the
	// member (recorded on its volume), 0 when unknown or never.
	DefragmentedAtCompaction int64
	// DefragmentedAgo is how long ago Steward last defragmented the member, as its volume records it; meaningful
	// only with DefragmentRecorded.
	DefragmentedAgo    time.Duration
	DefragmentRecorded bool
	// PodStuck is why the member's Pod cannot start in a way that replacing the member would not fix (the
	// kubelet's reason: its image cannot be pulled, its container cannot be created); empty otherwise. A successor
	// would be built from the same spec, so such a member is not replaced however long it is down: Steward waits
	// for the spec or the image to be fixed, and loses no member's data over a typo.
	PodStuck string
	// HashMismatch: Steward's last comparison of members' key-space hashes found the member's differs from the
	// one a majority of the members agree on.
	HashMismatch bool
	// VolumeNodeGone is why the member's volume cannot be mounted by a new Pod (its node is cordoned or gone: a
	// local volume on a drained or deleted node), observed only while the member has no Pod on a node; empty
	// otherwise. Such a member is replaced on another node rather than re-created on its volume.
	VolumeNodeGone string
	// Node is the node the member's Pod is scheduled to; empty without a Pod or before it is scheduled.
	Node string
	// PodQuota is the --quota-backend-bytes the member's Pod runs with; 0 when it sets none (etcd's default, or a
	// Pod from before Steward set one: left as it is).
	PodQuota int64
	// External: a member of an adopted source (recorded in status.adoption when the preflight admitted it), which
	// Steward did not create: never started, restarted, replaced or stopped by Steward, removed from etcd only by
	// a retirement (adoption.go). Its Name is ExternalMemberName's; EtcdName is the name etcd lists it under,
	// which a joining member's --initial-cluster must carry.
	External bool
	EtcdName string
}

// PodStuckImageNotStarted is the PodStuck of a Pod switched to an image its container has not run yet, as far as
// the kubelet's last status shows (the kubelet still pulls it, or has not reported the new container yet).
const PodStuckImageNotStarted = "ImageNotStartedYet"

// Observation is everything the planner knows about the cluster at one moment.
type Observation struct {
	// TLSBlocked, when set, is the Wait the cluster's TLS imposes on every step: the TLS decision's (DecideTLS:
	// members that predate TLS in Steward, or certificates of another provider than the spec's), or the
	// controller's finding that the provider's material is not usable (a user's Secret, cert-manager's
	// certificates, a changed CA). The members' certificates are what any step would rest on.
	TLSBlocked *Action
	// AuthEnabled is whether etcd enforces authentication; nil when not known.
	AuthEnabled *bool
	// PasswordRejected: etcd refused the password Steward keeps for its password user (the operator
	// credentials), so Steward reached it only with its certificate, if any.
	PasswordRejected bool
	Members          []Member
	// EtcdReachable: a member list was read from at least one member.
	EtcdReachable bool
	// Bootstrapped: the cluster has formed once (every bootstrap member started). The controller's memory in
	// status, because after that a member without a volume is a member that lost its data, and before that it
	// may be one that was never created.
	Bootstrapped bool
	// LeaderID is the etcd member ID of the leader, 0 when unknown.
	LeaderID uint64
	// ClusterVersion is the cluster version etcd reports ("3.6.0"), empty when unknown; DowngradeTarget the
	// version of a downgrade etcd has enabled, empty when none.
	ClusterVersion  string
	DowngradeTarget string
	// NoSpaceAlarm: etcd keeps a NOSPACE alarm raised. Revision is the cluster's current revision, and
	// CompactRevision the revision it is compacted to, read only while a NOSPACE recovery needs it
	// (CompactRevisionKnown).
	NoSpaceAlarm         bool
	Revision             int64
	CompactRevision      int64
	CompactRevisionKnown bool
	// BackupRunning: a backup of the cluster is streaming a snapshot (a defragmentation waits for it).
	BackupRunning bool
	// ClusterVersionSince is the raft index from which the cluster has run ClusterVersion (the controller's
	// memory in status); 0 when it was created at it.
	ClusterVersionSince uint64
	// NewMemberNames are unused names the controller generated, more than any step needs.
	NewMemberNames []string
	// PeerURL maps a member name to the peer URL it gets.
	PeerURL func(name string) string
	// Restore is the EtcdRestore under way for the cluster (the oldest, if several), or for a new cluster with
	// spec.bootstrap.fromBackup its restore even if it failed; nil when none.
	Restore *Restore
	// StandbySeedComplete: the standby's seed backup (spec.FromBackup) is Complete.
	StandbySeedComplete bool
	// QuorumLostFor is how long the formed cluster has been without quorum (0 while it has quorum).
	QuorumLostFor time.Duration
	// LatestBackup is the newest Complete EtcdBackup of this cluster, empty when there is none.
	LatestBackup string
	// AutoRestoreTried names a restore the quorum-loss policy created during the current loss of quorum.
	AutoRestoreTried string
	// Window is spec.maintenance.window now; nil without one (optional work runs when it is due).
	Window *Window
	// Placement is where new members may go under Steward's default spread (placement.go); nil when the spec
	// places members itself or nodes cannot be read.
	Placement *Placement
	// Adoption is the adoption of a running etcd (spec.bootstrap.fromExisting) as observed; nil without one.
	Adoption *Adoption
}

// ActionKind is the kind of step.
type ActionKind string

// Steps the planner returns.
const (
	// Bootstrap creates the first members of a new cluster, all with --initial-cluster-state=new.
	Bootstrap ActionKind = "Bootstrap"
	// CreateMemberPods creates Pods (and PVCs) for members that belong to the cluster's bootstrap but have no
	// Pod: the rest of a bootstrap the operator was interrupted in, or a deleted Pod whose data is intact.
	CreateMemberPods ActionKind = "CreateMemberPods"
	// Wait does nothing this pass; Reason says what for.
	Wait ActionKind = "Wait"
	// None: the cluster is as specified.
	None ActionKind = "None"
)

// Action is one step, and why.
type Action struct {
	Kind ActionKind
	// Members are the names the step creates.
	Members []string
	// Pods are the member Pods a RecreateMemberPods re-creates, each as its volume records.
	Pods []PodOnVolume
	// HaveRun are the members of a CreateMemberPods that have run (HasRun): their Pods refuse to start etcd on an
	// empty data dir.
	HaveRun []string
	// InitialCluster is the --initial-cluster of the members the step creates, and State their
	// --initial-cluster-state ("new" in a bootstrap, "existing" when joining a running cluster).
	InitialCluster map[string]string
	State          string
	// Version and Image are what the members the step creates or restarts run; empty means the spec's.
	Version string
	Image   string
	// Restore is the EtcdRestore whose snapshot the members a step creates start from; Backup the backup a
	// CreateRestore restores, and Reseed whether that restore re-seeds a formed cluster.
	Restore string
	Backup  string
	Reseed  bool
	// MemberID is the etcd member a membership step acts on; TargetID the member leadership moves to.
	MemberID uint64
	TargetID uint64
	// TLS is the TLS mode of the members a step creates or restarts (TLSPlaintext, TLSBridge, TLSOn), and
	// PeerURL the peer URL of an AddLearner or UpdatePeerURL.
	TLS     string
	PeerURL string
	// Revision is the revision a CompactForSpace compacts to; for a Defragment, the revision the cluster is
	// compacted to (recorded with the defragmentation; 0 when not known).
	Revision int64
	// Quota is the database quota a RaiseQuota raises to.
	Quota int64
	// Deferred is the optional work this pass left for the next maintenance window (what, and the step it would
	// have taken), whatever step it returns.
	Deferred []string
	// Reason is a CamelCase reason for the Progressing condition; Message says it to a human.
	Reason  string
	Message string
}

// Next returns the one step to take now.
func Next(spec Spec, obs Observation) Action {
	if spec.Hibernate && !spec.Paused {
		// Stopping Pods needs neither certificates nor etcd: nothing the TLS step waits for holds it up.
		return hibernate(spec, obs)
	}
	if obs.TLSBlocked != nil {
		return *obs.TLSBlocked
	}
	return guardRuns(obs, next(spec, obs))
}

// guardRuns names, in a step that creates Pods of existing members, those that have run (HasRun): every path to
// a member's Pod passes here, so none of them can start such a member on an empty data dir.
func guardRuns(obs Observation, a Action) Action {
	if a.Kind != CreateMemberPods {
		return a
	}
	for _, name := range a.Members {
		if m, ok := find(obs.Members, name); ok && HasRun(m, obs.Bootstrapped) && !slices.Contains(a.HaveRun, name) {
			a.HaveRun = append(a.HaveRun, name)
		}
	}
	return a
}

// next is Next's steps: a pause, a rejected password, a re-seed, members' Pods back on their intact volumes, a
// quorum-loss recovery, then a new cluster's bootstrap, a formed cluster's steps (nextAfterBootstrap), or the
// rest of a bootstrap.
func next(spec Spec, obs Observation) Action {
	if spec.Paused {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonPaused, Message: "spec.paused is true: Steward observes but changes nothing"}
	}
	if obs.PasswordRejected && (obs.Adoption == nil || !obs.Adoption.CredentialsInUse) {
		return operatorPasswordStep(obs)
	}
	if r := obs.Restore; r != nil && r.Reseed && r.Ready && obs.Bootstrapped {
		return reseed(spec, obs)
	}
	// Missing Pods of members whose volumes are intact come back before anything else: it changes no
	// membership, needs no member list, and it is how a cluster that lost its Pods regains its quorum.
	if a, ok := recreatePods(spec, obs, sortedMembers(obs.Members)); ok {
		return a
	}
	// An adoption decides its own steps until no source member is left: the source's members have no Pod, and
	// every rule below that reads a member without one as lost (or as a stray) must never see them.
	if a, ok := adoption(spec, obs); ok {
		return a
	}
	if a, ok := quorumLossRecovery(spec, obs); ok {
		return a
	}
	if _, err := bootstrapCluster(obs.Members); err != nil {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonInconsistentBootstrap, Message: err.Error()}
	}
	if a, ok := bootstrapNew(spec, obs); ok {
		return a
	}
	if obs.Bootstrapped {
		if a, waiting := seededJoinLater(spec, obs); waiting {
			return a
		}
		return nextAfterBootstrap(spec, obs)
	}
	return finishBootstrap(spec, obs)
}

// bootstrapNew starts a brand-new cluster: no Pod, no etcd member, no volume. Nothing can be lost, so all members
// start at once; etcd's static bootstrap needs every initial member to be started with the same
// --initial-cluster anyway.
func bootstrapNew(spec Spec, obs Observation) (Action, bool) {
	for _, m := range obs.Members {
		if m.HasPod {
			return Action{}, false
		}
	}
	if anyInEtcd(obs.Members) || anyPVC(obs.Members) {
		return Action{}, false
	}
	if obs.Bootstrapped {
		// Silently starting an empty cluster under the same name would look like success to clients.
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonMemberDataLost,
			Message: "every member and volume of this cluster is gone; restore it from a backup or delete and re-create the EtcdCluster"}, true
	}
	restore := ""
	if spec.Standby && obs.Restore == nil && !obs.StandbySeedComplete {
		// A restore of a seed that does not exist yet would fail for good; the seed appears once its Job is done.
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonBootstrapping, Message: fmt.Sprintf(
			"standby: waiting for EtcdBackup %s, the source's newest snapshot carried to its newest segment, to be Complete before any member starts", spec.FromBackup)}, true
	}
	if spec.FromBackup != "" || obs.Restore != nil {
		if a, waiting := fromBackup(spec, obs); waiting {
			return a, true
		}
		restore = obs.Restore.Name
	}
	count := spec.Replicas
	if restore != "" && obs.Restore.OneSeed {
		count = 1
	}
	if len(obs.NewMemberNames) < count {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonBootstrapping, Message: "not enough new member names"}, true
	}
	names := append([]string(nil), obs.NewMemberNames[:count]...)
	sort.Strings(names)
	initial := map[string]string{}
	for _, n := range names {
		initial[n] = obs.PeerURL(n)
	}
	msg := fmt.Sprintf("creating %d members", len(names))
	if restore != "" {
		msg += " from the snapshot of restore " + restore
		if count < spec.Replicas {
			msg += fmt.Sprintf(" (its claim can be mounted on one node at a time: the other %d join as learners)", spec.Replicas-count)
		}
	}
	return Action{Kind: Bootstrap, Members: names, InitialCluster: initial, State: "new", Restore: restore,
		TLS: podTLSFor(spec, nil, initial[names[0]]), Reason: etcdv1alpha1.ReasonBootstrapping, Message: msg}, true
}

// finishBootstrap finishes a bootstrap: every member listed in the bootstrap's --initial-cluster needs a Pod.
// The list is read back from the Pods and PVCs that exist, so a restarted operator creates the same members,
// never a second cluster identity.
func finishBootstrap(spec Spec, obs Observation) Action {
	initial, _ := bootstrapCluster(obs.Members)
	if initial != nil {
		var missing []string
		for name := range initial {
			m, ok := find(obs.Members, name)
			if ok && m.PodDeleting {
				return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonPodDeleting, Message: fmt.Sprintf("waiting for Pod %s to be deleted before recreating it", name)}
			}
			if ok && !m.HasPod && !m.HasPVC && m.Started {
				// Recreating it under the same member ID with an empty data dir would let it vote without the
				// entries it acknowledged. It must be removed and replaced instead (membership changes).
				return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonMemberDataLost,
					Message: fmt.Sprintf("member %s has run and its data is gone (no Pod, no PVC)", name)}
			}
			if !ok || !m.HasPod {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			// Members of a bootstrap from a snapshot start from the same snapshot, through the same restore.
			restore := bootstrapRestore(obs.Members)
			if restore != "" && (obs.Restore == nil || obs.Restore.Name != restore || !obs.Restore.Ready) {
				return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForRestore,
					Message: fmt.Sprintf("bootstrap members %v were created from restore %s, which is not ready or gone; waiting for it", missing, restore)}
			}
			return Action{Kind: CreateMemberPods, Members: missing, InitialCluster: initial, State: "new", Restore: restore,
				TLS: podTLSFor(spec, nil, initial[missing[0]]), Reason: etcdv1alpha1.ReasonBootstrapping,
				Message: fmt.Sprintf("creating Pods of bootstrap members %v", missing)}
		}
	}
	if w, waiting := waitForMembers(obs); waiting {
		return w
	}
	return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonBootstrapping, Message: "waiting for every bootstrap member to start"}
}

// waitForMembers returns a Wait while etcd is unreachable or a member Pod is not healthy and ready.
func waitForMembers(obs Observation) (Action, bool) {
	withPod := 0
	var unhealthy, unready []string
	for _, m := range obs.Members {
		if !m.HasPod || (obs.EtcdReachable && abandonedLeftover(m)) {
			continue
		}
		withPod++
		if !m.Healthy {
			unhealthy = append(unhealthy, m.Name)
		} else if !m.PodReady && !m.IsLearner { // a learner cannot pass /readyz: it serves no linearizable reads
			unready = append(unready, m.Name)
		}
	}
	if obs.EtcdReachable && len(unhealthy)+len(unready) == 0 {
		return Action{}, false
	}
	msg := fmt.Sprintf("waiting for members: %d of %d healthy in etcd", withPod-len(unhealthy), withPod)
	if len(unhealthy) > 0 {
		msg += fmt.Sprintf(" (not yet: %v)", unhealthy)
	}
	if len(unready) > 0 {
		msg += fmt.Sprintf("; Pods not yet Ready: %v", unready)
	}
	if !obs.EtcdReachable {
		msg += "; no member list from etcd"
	}
	return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers, Message: msg}, true
}

// abandonedLeftover reports whether m is a removed member (etcd does not list it) whose deleted Pod has outlived
// its grace period by AbandonLeftoverPodAfter: a node that does not answer holds it, and nothing Steward does
// makes it go sooner.
func abandonedLeftover(m Member) bool {
	return !m.InEtcd && m.HasPod && m.PodDeleting && m.PodOverdue >= AbandonLeftoverPodAfter
}

// AbandonLeftoverPodAfter is how long past its grace period a removed member's deleted Pod must be before Steward
// stops waiting for it. Not zero: a kubelet that has stopped a Pod's containers moves its deletion timestamp to
// the present and the Pod goes a moment later, so a Pod just past its timestamp is most often one about to go
// (waiting for it keeps a replacement's successor from being listed beside it).
const AbandonLeftoverPodAfter = 15 * time.Second

// bootstrapCluster returns the --initial-cluster that the bootstrap members' Pods and PVCs agree on, nil when
// none is a bootstrap member, and an error when two disagree (which Steward never creates).
func bootstrapCluster(members []Member) (map[string]string, error) {
	var initial map[string]string
	var from string
	for _, m := range members {
		if m.InitialState != "new" || m.InitialCluster == nil {
			continue
		}
		if initial == nil {
			initial, from = m.InitialCluster, m.Name
			continue
		}
		if !sameCluster(initial, m.InitialCluster) {
			return nil, fmt.Errorf("bootstrap members %s and %s were created with different initial clusters; refusing to guess which is right", from, m.Name)
		}
	}
	return initial, nil
}

// bootstrapRestore is the restore the bootstrap members were seeded from, "" when they started empty.
func bootstrapRestore(members []Member) string {
	for _, m := range members {
		if m.InitialState == "new" && m.Restore != "" {
			return m.Restore
		}
	}
	return ""
}

func sameCluster(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// sortedMembers returns a copy of members sorted by name, so that every choice among them is stable.
func sortedMembers(members []Member) []Member {
	out := append([]Member(nil), members...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func find(members []Member, name string) (Member, bool) {
	for _, m := range members {
		if m.Name == name {
			return m, true
		}
	}
	return Member{}, false
}

func anyInEtcd(members []Member) bool {
	for _, m := range members {
		if m.InEtcd {
			return true
		}
	}
	return false
}

func anyPVC(members []Member) bool {
	for _, m := range members {
		if m.HasPVC {
			return true
		}
	}
	return false
}
