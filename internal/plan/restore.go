package plan

import (
	"fmt"
	"sort"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Restore steps.
const (
	// CreateRestore creates an EtcdRestore of Backup: for spec.bootstrap.fromBackup (a new cluster), or, with
	// Reseed, by the quorum-loss policy (a confirmed re-seed).
	CreateRestore ActionKind = "CreateRestore"
	// RetireMembers deletes the Pods of Members, members a re-seed replaces. The cluster has no quorum.
	RetireMembers ActionKind = "RetireMembers"
	// RetireVolumes sets aside the volumes of Members, members a re-seed replaced (their Pods are gone): the
	// data is kept for a human, no longer counted as the cluster's.
	RetireVolumes ActionKind = "RetireVolumes"
)

// Restore is the EtcdRestore the cluster's members are (to be) seeded from, as the controller read it.
type Restore struct {
	Name string
	// Reseed: the cluster had formed and lost quorum; its members are replaced. Otherwise the restore seeds a
	// new cluster's first members (spec.bootstrap.fromBackup).
	Reseed bool
	// Ready: the stored snapshot was verified (and a re-seed confirmed): members may start from it and, for a
	// re-seed, the old ones may go.
	Ready bool
	// Rollback: the cluster may have quorum and is rolled back anyway (spec.allowRollbackOfHealthyCluster, and
	// its safety backup is Complete): its running members are stopped like those of a cluster that lost quorum.
	Rollback bool
	// Failed: the restore ended without success; Message says why.
	Failed  bool
	Message string
	// OneSeed: the snapshot can be read on one node at a time (a ReadWriteOnce claim), so one member starts from
	// it (on a node that can mount the claim) and the others join that member as learners once the restore is
	// done, wherever the spread puts them. Otherwise every bootstrap member starts from the snapshot at once.
	OneSeed bool
	// NotMountable, when set, says why no node the cluster's members may use now can mount the claim holding the
	// snapshot: no member is created from it and, in a re-seed, no old member is stopped, until one can.
	NotMountable string
}

// reseed replaces a cluster that lost quorum by one started from a verified, confirmed snapshot: first the old
// members' Pods go (all at once: without quorum there is nothing to keep serving), then their volumes are set
// aside, and then the new members bootstrap from the snapshot like a new cluster. Members are told apart by the
// restore that seeded them (recorded on their Pods and volumes). A restarted operator resumes at the same step.
func reseed(spec Spec, obs Observation) Action {
	var old, fresh []Member
	for _, m := range obs.Members {
		if m.Restore == obs.Restore.Name {
			fresh = append(fresh, m)
		} else {
			old = append(old, m)
		}
	}
	if len(old) > 0 {
		if a, ok := retireOld(spec, obs, old); ok {
			return a
		}
		// Only etcd still lists old members (no Pod, no volume): nothing of them is left to act on.
	}
	// The old members are gone: the new ones are a cluster of their own, bootstrapped (from the snapshot) or
	// formed, and decided on as any other.
	next := obs
	next.Members = fresh
	next.Bootstrapped = BootstrapComplete(fresh, obs.EtcdReachable)
	seeding := *obs.Restore
	seeding.Reseed = false
	next.Restore = &seeding
	return Next(spec, next)
}

// retireOld is reseed's step while members of the cluster that lost quorum remain: the last checks that the
// re-seed is still wanted, then their Pods stopped, then their volumes set aside. False when only etcd's list
// still names them.
func retireOld(spec Spec, obs Observation, old []Member) (Action, bool) {
	// The last check before anything is destroyed, on this pass's observation: the restore controller
	// admitted the re-seed on an earlier one.
	if voters, healthy := HealthyVoters(old); !obs.Restore.Rollback && obs.EtcdReachable && voters > 0 && healthy >= Quorum(voters) {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonRestoreRefused,
			Message: fmt.Sprintf("restore %s: the cluster has quorum again (%d of %d voters healthy); it is not re-seeded", obs.Restore.Name, healthy, voters)}, true
	}
	// The kubelet's view, as the quorum-loss policy takes it: etcd that does not answer Steward (a
	// NetworkPolicy, a partition of the operator) is not a lost quorum while a quorum of the members' Pods
	// pass etcd's /readyz, which needs a leader.
	if c := TakeCensus(old); !obs.Restore.Rollback && PodsServeQuorum(c.Ready, c.Members) {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonRestoreRefused, Message: fmt.Sprintf(
			"restore %s: %s; it is not re-seeded", obs.Restore.Name, ServingMessage(c.Ready, c.Members, obs.EtcdReachable))}, true
	}
	if obs.Restore.NotMountable != "" {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonBackupNotMountable,
			Message: fmt.Sprintf("restore %s: %s; no old member is stopped until the snapshot can be read", obs.Restore.Name, obs.Restore.NotMountable)}, true
	}
	// A re-seed is for a quorum that is gone with its data, not for Pods that are merely missing: members
	// whose volumes are intact get their Pods back first, and time to form a quorum, before any is stopped.
	// (Not the members this re-seed has begun to stop: their volumes carry its name.)
	var keep []Member
	for _, m := range old {
		if m.RetiredBy != obs.Restore.Name {
			keep = append(keep, m)
		}
	}
	if a, ok := recreatePods(spec, obs, sortedMembers(keep)); ok {
		a.Message = fmt.Sprintf("restore %s waits: %s first", obs.Restore.Name, a.Message)
		return a, true
	}
	if back := comingBack(keep, spec.RecoveryGrace); len(back) > 0 {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers, Message: fmt.Sprintf(
			"restore %s waits: members %v are coming back on their intact volumes (Pods started less than %s ago, or still terminating) and may still form a quorum with every write they hold",
			obs.Restore.Name, back, spec.RecoveryGrace)}, true
	}
	var pods, deleting, volumes []string
	for _, m := range old {
		switch {
		case m.HasPod && m.PodDeleting:
			deleting = append(deleting, m.Name)
		case m.HasPod:
			pods = append(pods, m.Name)
		case m.HasPVC:
			volumes = append(volumes, m.Name)
		}
	}
	sort.Strings(pods)
	sort.Strings(volumes)
	switch {
	case len(pods) > 0:
		what := "the cluster that lost quorum"
		if obs.Restore.Rollback {
			what = "the cluster rolled back to the backup"
		}
		return Action{Kind: RetireMembers, Members: pods, Restore: obs.Restore.Name, Reason: etcdv1alpha1.ReasonReseeding,
			Message: fmt.Sprintf("restore %s: stopping members %v of %s", obs.Restore.Name, pods, what)}, true
	case len(deleting) > 0:
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonPodDeleting, Message: fmt.Sprintf("restore %s: waiting for the Pods of %v to go", obs.Restore.Name, deleting)}, true
	case len(volumes) > 0:
		return Action{Kind: RetireVolumes, Members: volumes, Restore: obs.Restore.Name, Reason: etcdv1alpha1.ReasonReseeding,
			Message: fmt.Sprintf("restore %s: setting aside the volumes of replaced members %v (kept, not deleted)", obs.Restore.Name, volumes)}, true
	}
	return Action{}, false
}

// BootstrapComplete reports whether a bootstrap has formed: etcd answered and every member of the bootstrap's
// initial cluster has started.
func BootstrapComplete(members []Member, reachable bool) bool {
	if !reachable {
		return false
	}
	initial, err := bootstrapCluster(members)
	if err != nil || initial == nil {
		return false
	}
	for name := range initial {
		m, ok := find(members, name)
		if !ok || !m.Started {
			return false
		}
	}
	return true
}

// fromBackup decides a new cluster's first step when spec.bootstrap.fromBackup names a backup: its EtcdRestore
// is created, verifies the snapshot, and only then do members start (from it).
func fromBackup(spec Spec, obs Observation) (Action, bool) {
	r := obs.Restore
	switch {
	case r == nil:
		return Action{Kind: CreateRestore, Backup: spec.FromBackup, Reason: etcdv1alpha1.ReasonRestoringFromBackup,
			Message: fmt.Sprintf("creating the restore of backup %s for the cluster's first members", spec.FromBackup)}, true
	case r.Failed:
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonRestoreFailed, Message: fmt.Sprintf("restore %s failed: %s", r.Name, r.Message)}, true
	case !r.Ready:
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForRestore, Message: fmt.Sprintf("waiting for restore %s to verify backup %s", r.Name, spec.FromBackup)}, true
	}
	return backupNotMountable(r)
}

// backupNotMountable is the wait of a verified restore whose snapshot no node of the cluster can read now.
func backupNotMountable(r *Restore) (Action, bool) {
	if r.NotMountable == "" {
		return Action{}, false
	}
	return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonBackupNotMountable,
		Message: fmt.Sprintf("restore %s: %s; no member is created until the snapshot can be read", r.Name, r.NotMountable)}, true
}

// seededJoinLater is the wait of a cluster seeded from a snapshot by one member (Restore.OneSeed): the other
// members are added as learners, by the ordinary scale-up, only once the restore is done, so that every member
// the restore counts as its own started from the snapshot.
func seededJoinLater(spec Spec, obs Observation) (Action, bool) {
	r := obs.Restore
	if r == nil || !r.OneSeed || r.Failed || len(obs.Members) >= spec.Replicas {
		return Action{}, false
	}
	return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForRestore, Message: fmt.Sprintf(
		"restore %s seeded %d member(s) from the snapshot (its claim can be mounted on one node at a time); the other %d join as learners once the restore is complete",
		r.Name, len(obs.Members), spec.Replicas-len(obs.Members))}, true
}

// quorumLossRecovery is the opt-in automatic re-seed: once the formed cluster has been without quorum for
// spec.QuorumLossAfter and no restore is under way, a confirmed restore of the newest backup of this cluster is
// created. Once per loss of quorum: after a failed one, a human decides.
func quorumLossRecovery(spec Spec, obs Observation) (Action, bool) {
	if spec.QuorumLossAfter <= 0 || !obs.Bootstrapped || obs.Restore != nil || obs.QuorumLostFor < spec.QuorumLossAfter {
		return Action{}, false
	}
	if obs.AutoRestoreTried != "" {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonAutoRestoreFailed,
			Message: fmt.Sprintf("quorum lost for %s; the automatic restore %s did not succeed, a human must decide", obs.QuorumLostFor.Round(time.Second), obs.AutoRestoreTried)}, true
	}
	if back := comingBack(obs.Members, spec.QuorumLossAfter); len(back) > 0 {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers, Message: fmt.Sprintf(
			"quorum lost for %s; members %v are coming back on their intact volumes (Pods started less than %s ago, or still terminating) and may still form a quorum with every write they hold: no re-seed until then",
			obs.QuorumLostFor.Round(time.Second), back, spec.QuorumLossAfter)}, true
	}
	if obs.LatestBackup == "" {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonNoBackupToRestore,
			Message: fmt.Sprintf("quorum lost for %s and no Complete backup of this cluster to restore from", obs.QuorumLostFor.Round(time.Second))}, true
	}
	return Action{Kind: CreateRestore, Backup: obs.LatestBackup, Reseed: true, Reason: etcdv1alpha1.ReasonQuorumLossRecovery,
		Message: fmt.Sprintf("quorum lost for %s (policy RestoreLatestBackup after %s): re-seeding from backup %s", obs.QuorumLostFor.Round(time.Second), spec.QuorumLossAfter, obs.LatestBackup)}, true
}

// QuorumLost reports whether the formed cluster of obs has lost quorum, ready of its Pods being Ready. Lost means
// both views agree: Steward gets no healthy quorum through etcd's API, and the kubelet's readiness probes
// (etcd's /readyz, which needs a leader) pass on fewer member Pods than a quorum. The second view keeps a
// network problem between the operator and the members from looking like a dead cluster to the quorum-loss
// policy, which would otherwise re-seed a working one.
func QuorumLost(obs Observation, ready int) bool {
	if !obs.Bootstrapped {
		return false
	}
	voters, healthy := HealthyVoters(obs.Members)
	if !obs.EtcdReachable || voters == 0 {
		// Without a member list, the members Steward knows stand for the voters.
		voters, healthy = TakeCensus(obs.Members).Members, 0
	}
	return voters > 0 && healthy < Quorum(voters) && !PodsServeQuorum(ready, voters)
}

// PodsServeQuorum reports whether ready member Pods, of members, are a quorum. A member Pod is Ready only while
// etcd's /readyz passes, which needs a leader: a quorum of them says the cluster serves, whatever Steward's own
// connection to etcd says. The quorum-loss policy and every re-seed count a quorum lost only when this is false.
func PodsServeQuorum(ready, members int) bool {
	return members > 0 && ready >= Quorum(members)
}

// ServingMessage says why a cluster whose member Pods serve a quorum is not treated as one that lost it.
func ServingMessage(ready, members int, reachable bool) string {
	why := "Steward cannot reach its etcd (a NetworkPolicy, or the operator cut off from the members?)"
	if reachable {
		why = "Steward does not see a healthy quorum through etcd's API"
	}
	return fmt.Sprintf("%s, but %d of %d member Pods are Ready (etcd's /readyz, which passes only with a leader): the cluster serves", why, ready, members)
}
