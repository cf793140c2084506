package plan

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Membership steps, taken only after the bootstrap, one per pass, each re-observed before the next.
const (
	// AddLearner adds Members[0] to etcd as a learner (it does not count toward quorum); its Pod comes next.
	AddLearner ActionKind = "AddLearner"
	// PromoteLearner makes learner MemberID a voter, once etcd says it has caught up.
	PromoteLearner ActionKind = "PromoteLearner"
	// RemoveMember removes voter MemberID from etcd; its Pod and then its PVC go in later passes.
	RemoveMember ActionKind = "RemoveMember"
	// DeleteMemberPod deletes the Pod of Members[0], which etcd no longer lists.
	DeleteMemberPod ActionKind = "DeleteMemberPod"
	// DeleteMemberPVC deletes the PVC of Members[0], which etcd no longer lists and which has no Pod.
	DeleteMemberPVC ActionKind = "DeleteMemberPVC"
)

// strayPrefix starts the name under which a member etcd lists, and Steward cannot name, is observed. The colon
// keeps it apart from every name Steward gives a member (a DNS label: it is the Pod's hostname), whatever the
// cluster is called: a cluster named "unknown" has members "unknown-xxxxx", which are its own.
const strayPrefix = "unknown:"

// StrayMemberName is the name of a member etcd lists under ID id that Steward cannot name.
func StrayMemberName(id uint64) string { return strayPrefix + strconv.FormatUint(id, 16) }

// IsStray reports whether a member name is one StrayMemberName gave: a member Steward did not create.
func IsStray(name string) bool { return strings.HasPrefix(name, strayPrefix) }

// Quorum is the number of voting members that must agree: a majority.
//
//	voters: 1 3 5 7 9
//	quorum: 1 2 3 4 5
func Quorum(voters int) int { return voters/2 + 1 }

// HealthyVoters counts the voting members etcd lists and how many of them answered healthy: the one count behind
// both status.readyReplicas and the Available condition.
func HealthyVoters(members []Member) (voters, healthy int) {
	for _, m := range members {
		if !m.InEtcd || m.IsLearner {
			continue
		}
		voters++
		if m.Healthy {
			healthy++
		}
	}
	return voters, healthy
}

// nextAfterBootstrap decides once the cluster has formed. From here on etcd's member list is the truth about who
// belongs to the cluster; Pods and PVCs follow it. Its steps, in order: the first that has something to do is the
// pass's step.
func nextAfterBootstrap(spec Spec, obs Observation) Action {
	if !obs.EtcdReachable {
		// No member list, no membership decision: without it Steward cannot tell a removed member from a live
		// one, and without quorum etcd could not apply a change anyway. (Missing Pods on intact volumes were
		// re-created before this: that needs no list.)
		return withoutMemberList(spec, obs)
	}
	members := sortedMembers(obs.Members)
	var deferred []string
	for _, step := range []struct {
		take func(Spec, Observation, []Member) (Action, bool)
		// optional is the work of the step that waits for a maintenance window; nil for steps that never wait.
		optional *optionalWork
	}{
		{startOrReplaceListed, nil},  // 1
		{removeLeftovers, nil},       // 2
		{replaceBroken, nil},         // 3
		{rollUnhealthy, nil},         // 3b
		{tlsRestart, nil},            // 3c
		{settledMembershipStep, nil}, // 4 to 6
		{nextVersionStep, &versionWork},
		{tlsPeerURLStep, nil},
		{clientAuthRestart, &clientAuthWork},
		{peerCheckRestart, &peerCheckWork},
		{nextMaintenanceStep, &maintenanceWork},
		{authStepOf, nil},
		{rebalanceStepOf, &rebalanceWork},
	} {
		a, ok := step.take(spec, obs, members)
		if !ok {
			continue
		}
		if w := step.optional; w != nil && obs.Window != nil && !obs.Window.Open && w.deferrable(spec, obs, a) {
			deferred = append(deferred, w.what+": "+a.Message)
			continue
		}
		a.Deferred = deferred
		return a
	}
	if len(deferred) > 0 {
		return deferredWait(obs, deferred)
	}
	return Action{Kind: None, Reason: etcdv1alpha1.ReasonReconciled, Message: "all members healthy and as specified"}
}

// startOrReplaceListed is step 1: members etcd lists without a Pod are started (a new learner; a member whose
// volume is intact got its Pod back in Next already), or replaced.
func startOrReplaceListed(spec Spec, obs Observation, members []Member) (Action, bool) {
	for _, m := range members {
		if !m.InEtcd || m.HasPod {
			continue
		}
		if IsStray(m.Name) {
			// A member Steward did not create. One that never ran, or a learner, holds no data and no vote that
			// matters: removing it is safe. A voter that ran is somebody's deliberate change; leave it to them.
			if !m.Started || m.IsLearner {
				return removeIfSafe(obs.LeaderID, members, m, etcdv1alpha1.ReasonUnknownMember,
					fmt.Sprintf("removing member %x, which Steward did not create and which holds no data", m.ID)), true
			}
			return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonUnknownMember,
				Message: fmt.Sprintf("etcd lists voting member %x that Steward did not create; remove it by hand or restore the cluster", m.ID)}, true
		}
		switch {
		case m.VolumeNodeGone != "":
			// Drained or lost with its node: its data cannot follow it, a successor joins on another node.
			return removeIfSafe(obs.LeaderID, members, m, etcdv1alpha1.ReasonReplacingMember,
				fmt.Sprintf("removing member %s, whose volume no Pod can mount (%s), to replace it on another node", m.Name, m.VolumeNodeGone)), true
		case !m.Started && m.IsLearner:
			version, image := joinVersion(spec, obs, members)
			return Action{Kind: CreateMemberPods, Members: []string{m.Name}, InitialCluster: currentCluster(members, obs.PeerURL), State: "existing",
				Version: version, Image: image, TLS: podTLSFor(spec, members, m.PeerURL),
				Reason: etcdv1alpha1.ReasonScalingUp, Message: fmt.Sprintf("starting learner %s", m.Name)}, true
		default:
			// Its data is gone: it must never come back under its old ID (it would vote without the entries it
			// acknowledged). Remove it; the scale-up that follows adds a successor with a new name and ID.
			return removeIfSafe(obs.LeaderID, members, m, etcdv1alpha1.ReasonReplacingMember,
				fmt.Sprintf("removing member %s, whose data is gone (no Pod, no volume), to replace it", m.Name)), true
		}
	}
	return Action{}, false
}

// removeLeftovers is step 2: leftovers of members etcd no longer lists (removed), their Pod first, then their
// volume. A deleted Pod that outlives its grace period is held by a node that does not answer (down, cut off):
// it goes when the node comes back, and waiting for it would leave the cluster a member short all that time, so
// the steps below go on without it. Its member is out of etcd: it cannot rejoin under its old ID.
func removeLeftovers(_ Spec, _ Observation, members []Member) (Action, bool) {
	for _, m := range members {
		if m.InEtcd || abandonedLeftover(m) {
			continue
		}
		if m.HasPod {
			if m.PodDeleting {
				return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonPodDeleting, Message: fmt.Sprintf("waiting for the Pod of removed member %s to go", m.Name)}, true
			}
			return Action{Kind: DeleteMemberPod, Members: []string{m.Name}, Reason: etcdv1alpha1.ReasonRemovingLeftoverMember,
				Message: fmt.Sprintf("deleting the Pod of member %s, which etcd no longer lists", m.Name)}, true
		}
		if m.HasPVC {
			return Action{Kind: DeleteMemberPVC, Members: []string{m.Name}, Reason: etcdv1alpha1.ReasonRemovingLeftoverMember,
				Message: fmt.Sprintf("deleting the volume of member %s, which etcd no longer lists", m.Name)}, true
		}
	}
	return Action{}, false
}

// replaceBroken is step 3: replacements, one at a time, each only if the rest keeps a healthy quorum. First a
// member that crashed because its data dir was emptied or corrupted on its intact volume: restarting it can never
// help, and if it came back under its old ID it would vote without the entries it acknowledged. (Only while it is
// unhealthy: the evidence is its last crash, and a member that runs again has been repaired by someone.)
func replaceBroken(spec Spec, obs Observation, members []Member) (Action, bool) {
	for _, m := range members {
		if m.InEtcd && m.DataLoss != "" && !m.Healthy {
			return removeIfSafe(obs.LeaderID, members, m, etcdv1alpha1.ReasonReplacingMember,
				fmt.Sprintf("removing member %s, whose data on its volume is lost or corrupt (%s), to replace it", m.Name, m.DataLoss)), true
		}
	}
	// Then, where the spec allows it, a voter whose key space differs from the majority's: it serves wrong data to
	// the clients that read from it, and a successor joins with the majority's data.
	if voters, _ := votersAndHealthyOthers(members, ""); spec.Maintenance.ReplaceMismatched && voters > 1 {
		for _, m := range members {
			if m.InEtcd && !m.IsLearner && m.HashMismatch {
				return removeIfSafe(obs.LeaderID, members, m, etcdv1alpha1.ReasonReplacingMismatchedMember,
					fmt.Sprintf("removing member %s, whose key space differs from the majority's (status.hashCheck), to replace it", m.Name)), true
			}
		}
	}
	// A member whose Pod waits for a node it can never get: its volume's node is cordoned or gone (the Pod was
	// re-created on the volume before that was seen).
	for _, m := range members {
		if m.InEtcd && m.HasPod && m.VolumeNodeGone != "" {
			return removeIfSafe(obs.LeaderID, members, m, etcdv1alpha1.ReasonReplacingMember,
				fmt.Sprintf("removing member %s, whose volume no Pod can mount (%s), to replace it on another node", m.Name, m.VolumeNodeGone)), true
		}
	}
	// A learner whose volume is being deleted: promoting it would make a voter of a member about to lose its data.
	for _, m := range members {
		if m.InEtcd && m.IsLearner && m.VolumeDeleting {
			return removeIfSafe(obs.LeaderID, members, m, etcdv1alpha1.ReasonReplacingLearner,
				fmt.Sprintf("removing learner %s, whose volume is being deleted, to replace it", m.Name)), true
		}
	}
	if spec.ReplaceUnhealthyAfter > 0 {
		return replaceUnhealthy(spec, obs, members)
	}
	return Action{}, false
}

// replaceUnhealthy is the end of step 3: a voter unhealthy for longer than spec.replaceUnhealthyAfter, or a
// learner that has not caught up within the same bound.
func replaceUnhealthy(spec Spec, obs Observation, members []Member) (Action, bool) {
	for _, m := range members {
		if m.InEtcd && !m.IsLearner && !m.Healthy && m.UnhealthyFor >= spec.ReplaceUnhealthyAfter && m.PodStuck == "" {
			return removeIfSafe(obs.LeaderID, members, m, etcdv1alpha1.ReasonReplacingMember,
				fmt.Sprintf("removing member %s, unhealthy for %s (more than %s), to replace it", m.Name, m.UnhealthyFor.Round(time.Second), spec.ReplaceUnhealthyAfter)), true
		}
	}
	// A learner that has not caught up within the same bound (cut off, crashing, or refused promotion): it
	// blocks every other membership change while it stays. Removing a learner never changes the voters. Not a
	// healthy learner whose promotion waits for other members to be healthy: that wait is not its fault.
	for _, m := range members {
		if m.InEtcd && m.IsLearner && m.HasPod && m.PodStuck == "" && (!m.Healthy || !othersUnready(members, m.Name)) {
			if why, stuck := learnerStuck(m, spec.ReplaceUnhealthyAfter); stuck {
				return removeIfSafe(obs.LeaderID, members, m, etcdv1alpha1.ReasonReplacingLearner,
					fmt.Sprintf("removing member %s, %s, to replace it", m.Name, why)), true
			}
		}
	}
	return Action{}, false
}

// roles sorts etcd's members for the membership steps of a settled cluster. Voters whose volume is being deleted
// (their PVC waits for the Pod to stop, and their data goes with it) are leaving: they are replaced while they
// still serve, a successor joins first, as in a scale-up, and only then are they removed, as in a scale-down. So
// the cluster never runs a member short.
type roles struct {
	voters, learners, staying, leaving []Member
}

func rolesOf(members []Member) roles {
	var r roles
	for _, m := range members {
		if !m.InEtcd {
			continue
		}
		switch {
		case m.IsLearner:
			r.learners = append(r.learners, m)
		case m.VolumeDeleting:
			r.voters, r.leaving = append(r.voters, m), append(r.leaving, m)
		default:
			r.voters, r.staying = append(r.voters, m), append(r.staying, m)
		}
	}
	return r
}

// settledMembershipStep is steps 4 to 6: every member healthy before any other membership change, then a
// learner's promotion, a scale-up, the restart of a lone bootstrap member, storage, a scale-down.
func settledMembershipStep(spec Spec, obs Observation, members []Member) (Action, bool) {
	// 4. Every member healthy before any other membership change.
	if w, waiting := waitForMembers(obs); waiting {
		return w, true
	}
	r := rolesOf(members)
	// 4. A learner is promoted before anything else changes; etcd refuses until it has caught up.
	if len(r.learners) > 0 {
		l := r.learners[0]
		return Action{Kind: PromoteLearner, Members: []string{l.Name}, MemberID: l.ID, Reason: etcdv1alpha1.ReasonScalingUp,
			Message: fmt.Sprintf("promoting learner %s to voter once it has caught up", l.Name)}, true
	}
	// 5. Scale up: one learner at a time.
	if len(r.staying) < spec.Replicas {
		return scaleUp(spec, obs, members, r), true
	}
	// 5a. The first member of a cluster created with one replica still runs the Pod that bootstrapped it alone:
	// were its data dir emptied, its etcd would start an empty cluster under this cluster's identity, which the
	// other members' data could not stop. Once the others keep a quorum without it, it is restarted on its volume
	// (same name, ID and data), and the new Pod asks its peers instead (resources.etcdInitialState).
	if len(r.voters) >= 3 && len(r.leaving) == 0 {
		for _, m := range r.voters {
			if m.PodBootstrapsAlone {
				return restartOne(obs, members, m, etcdv1alpha1.ReasonRestartingLoneBootstrapMember,
					"its Pod bootstrapped the cluster alone and, were its data dir emptied, would start an empty cluster under this cluster's identity; re-created on its volume, it asks its peers instead"), true
			}
		}
	}
	// 5b. Storage: volumes expanded in place, or members replaced onto new volumes one at a time (storage.go).
	if len(r.leaving) == 0 {
		if a, ok := nextStorageStep(spec, obs, members, r.voters); ok {
			return a, true
		}
	}
	// 6. Scale down: one voter at a time, a follower, and only if the rest still has a healthy quorum. A member
	// whose volume is being deleted goes first (its successor has joined: step 5 came before).
	if len(r.leaving) > 0 {
		m := r.leaving[0]
		return removeIfSafe(obs.LeaderID, members, m, etcdv1alpha1.ReasonReplacingMember,
			fmt.Sprintf("removing member %s, whose volume is being deleted, now that its successor has joined", m.Name)), true
	}
	if len(r.voters) > spec.Replicas {
		return scaleDown(spec, obs, members, r.voters), true
	}
	return Action{}, false
}

// scaleUp adds one learner: a new member, or the successor of a member whose volume is being deleted.
func scaleUp(spec Spec, obs Observation, members []Member, r roles) Action {
	if len(obs.NewMemberNames) == 0 {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonScalingUp, Message: "no new member name"}
	}
	name := obs.NewMemberNames[0]
	reason, msg := etcdv1alpha1.ReasonScalingUp, fmt.Sprintf("adding member %s as a learner (%d of %d voters)", name, len(r.voters), spec.Replicas)
	if len(r.leaving) > 0 {
		reason, msg = etcdv1alpha1.ReasonReplacingMember, fmt.Sprintf("adding member %s as a learner to replace member %s, whose volume is being deleted", name, r.leaving[0].Name)
	}
	return Action{Kind: AddLearner, Members: []string{name}, PeerURL: withScheme(obs.PeerURL(name), newPeerURLScheme(spec, members)), Reason: reason,
		Message: msg}
}

// scaleDown removes one voter of more than spec.replicas, a follower, only if the rest keeps a healthy quorum.
func scaleDown(spec Spec, obs Observation, members, voters []Member) Action {
	if obs.Placement != nil {
		// Under Steward's default spread the voter on the most crowded node goes, the leader too (after
		// handing leadership over): so a scale-down evens the spread out, and a rebalancing move (a learner
		// added where members are fewest) completes.
		victim := countSpread(obs.Placement, voters).mostCrowded(obs.Placement, voters, obs.LeaderID)[0]
		msg := fmt.Sprintf("removing member %s (%d of %d voters)", victim.Name, len(voters), spec.Replicas)
		if victim.Node != "" {
			msg += fmt.Sprintf(" from node %s, where members are most crowded", victim.Node)
		}
		return removeIfSafe(obs.LeaderID, members, victim, etcdv1alpha1.ReasonScalingDown, msg)
	}
	victim, ok := pickRemoval(voters, obs.LeaderID)
	if !ok {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonScalingDown, Message: "no follower to remove"}
	}
	healthyAfter := 0
	for _, v := range voters {
		if v.Name != victim.Name && v.Healthy {
			healthyAfter++
		}
	}
	if healthyAfter < Quorum(len(voters)-1) {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonScalingDown,
			Message: fmt.Sprintf("removing %s would leave %d healthy voters, fewer than quorum %d", victim.Name, healthyAfter, Quorum(len(voters)-1))}
	}
	return Action{Kind: RemoveMember, Members: []string{victim.Name}, MemberID: victim.ID, Reason: etcdv1alpha1.ReasonScalingDown,
		Message: fmt.Sprintf("removing member %s (%d of %d voters)", victim.Name, len(voters), spec.Replicas)}
}

// authStepOf and rebalanceStepOf are authStep and rebalanceStep in the shape of nextAfterBootstrap's steps.
func authStepOf(spec Spec, obs Observation, _ []Member) (Action, bool) { return authStep(spec, obs) }

func rebalanceStepOf(spec Spec, obs Observation, members []Member) (Action, bool) {
	return rebalanceStep(spec, obs, members, rolesOf(members).voters)
}

// removeIfSafe removes member m unless that would leave fewer healthy voters than the quorum of the voters
// that remain. Removing a member that is not healthy never lowers the healthy count, so replacing a dead member
// is safe exactly when the others still form a quorum after it.
func removeIfSafe(leaderID uint64, members []Member, m Member, reason, message string) Action {
	// A learner whose Pod has not started etcd yet was given the member list of the moment it was added as its
	// --initial-cluster, and etcd refuses to start a joining member whose list differs from the cluster's
	// ("member count is unequal"): a removal now would keep it from ever starting. Its start takes seconds.
	for _, l := range members {
		if l.Name != m.Name && l.InEtcd && l.IsLearner && !l.Started && l.HasPod && l.LearnerFor < learnerStartGrace {
			return Action{Kind: Wait, Reason: reason,
				Message: fmt.Sprintf("%s: not before learner %s has started, whose --initial-cluster lists the members as they are now", message, l.Name)}
		}
	}
	voters, healthyOthers := votersAndHealthyOthers(members, m.Name)
	remaining := voters
	if !m.IsLearner {
		remaining--
	}
	if remaining > 0 && healthyOthers < Quorum(remaining) {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonQuorumAtRisk,
			Message: fmt.Sprintf("%s: not now, it would leave %d healthy of %d voters, below quorum %d", message, healthyOthers, remaining, Quorum(remaining))}
	}
	// The leader goes last and never while it leads: hand leadership to a healthy voter first, so that the
	// removal does not stall writes for an election.
	if m.ID == leaderID && m.Healthy && remaining > 0 {
		if to, ok := transferee(members, m, nil); ok {
			return Action{Kind: MoveLeader, Members: []string{m.Name, to.Name}, MemberID: m.ID, TargetID: to.ID, Reason: etcdv1alpha1.ReasonMovingLeader,
				Message: fmt.Sprintf("moving leadership from %s to %s before removing it", m.Name, to.Name)}
		}
	}
	return Action{Kind: RemoveMember, Members: []string{m.Name}, MemberID: m.ID, Reason: reason, Message: message}
}

// PodStartGrace is how long a member's Pod, once placed on a node, may take to start etcd before that counts
// against the member: its volumes mounting, the node authorizer yet to let the kubelet read the Pod's Secrets and
// claim, init containers, an image pulling. A removal waits that long for a learner's Pod to start etcd; a learner
// that has not started by then is stuck anyway (its image, its node), and is replaced once its Pod has been that
// long and replaceUnhealthyAfter more without a running etcd (learnerStuck); the removal does not wait for that.
// A voter's unhealthy clock gives its starting Pod the same grace (the controller's assemble).
const PodStartGrace = time.Minute

// learnerStartGrace is PodStartGrace for a learner.
const learnerStartGrace = PodStartGrace

// learnerStuck says whether learner m has had its chance to catch up within window, and why. Its chance starts
// when its etcd container starts, not when its Pod is created: a Pod slow to start (a loaded node, a Secret
// mount the kubelet retries) would otherwise be replaced by a successor that starts as slowly, in a loop. A
// learner whose etcd does not run (its Pod still starting, on a node that is gone, in a crash loop's back-off)
// is bounded by its Pod's age instead: learnerStartGrace to start, then the same window.
func learnerStuck(m Member, window time.Duration) (string, bool) {
	if m.RunningFor > 0 {
		return fmt.Sprintf("still a learner %s after its etcd started (more than %s)", m.RunningFor.Round(time.Second), window),
			m.RunningFor >= window
	}
	bound := learnerStartGrace + window
	return fmt.Sprintf("still a learner %s after its Pod was created, its etcd not running (more than %s)", m.LearnerFor.Round(time.Second), bound),
		m.LearnerFor >= bound
}

// votersAndHealthyOthers counts etcd's voting members, and the healthy ones among them other than name.
func votersAndHealthyOthers(members []Member, name string) (voters, healthyOthers int) {
	for _, o := range members {
		if !o.InEtcd || o.IsLearner {
			continue
		}
		voters++
		if o.Name != name && o.Healthy {
			healthyOthers++
		}
	}
	return voters, healthyOthers
}

// othersUnready reports whether a member other than name has a Pod and is not healthy and ready: what makes
// waitForMembers hold back a promotion.
func othersUnready(members []Member, name string) bool {
	for _, m := range members {
		if m.Name != name && m.HasPod && !abandonedLeftover(m) && (!m.Healthy || (!m.PodReady && !m.IsLearner)) {
			return true
		}
	}
	return false
}

// pickRemoval chooses the voter to remove: never the leader while another voter exists (removing the leader
// forces an election during which writes stall); among followers the last by name, so the choice is stable.
func pickRemoval(voters []Member, leaderID uint64) (Member, bool) {
	for i := len(voters) - 1; i >= 0; i-- {
		if voters[i].ID != leaderID {
			return voters[i], true
		}
	}
	return Member{}, false
}

// currentCluster is the --initial-cluster a joining member starts with: every member etcd lists, itself
// included, with the peer URL etcd lists (etcd checks a joining member's list against its own).
func currentCluster(members []Member, peerURL func(string) string) map[string]string {
	out := map[string]string{}
	for _, m := range members {
		if !m.InEtcd {
			continue
		}
		name := m.Name
		if m.EtcdName != "" {
			name = m.EtcdName // a source member of an adoption, under the name etcd lists
		}
		out[name] = m.PeerURL
		if m.PeerURL == "" {
			out[name] = peerURL(m.Name)
		}
	}
	return out
}
