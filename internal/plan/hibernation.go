package plan

import (
	"fmt"
	"sort"
	"strings"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Hibernation. A member is its volume; its Pod is only the process. Hibernating stops the processes and keeps
// the rest, so resuming is the step Steward already takes for a cluster whose Pods are all gone on intact volumes
// (recreatePods): the same members, data, cluster ID and revisions come back, and quorum forms as they start.
// Stopping a Pod is etcd's clean shutdown (SIGTERM), and every write etcd acknowledged is on a majority of the
// volumes that stay, so the order of the stops is about availability only: followers first, the leader last, so
// that the cluster serves until its last moments rather than electing leaders among the members that remain.

// StopMember deletes the Pod of Members[0] to hibernate the cluster; its volume, identity and certificates stay.
const StopMember ActionKind = "StopMember"

// hibernate is the step of a cluster whose spec asks for hibernation: stop the next member's Pod, wait for the
// one stopping, or (none left running) stay hibernated. Before the cluster has formed, and while a restore
// re-seeds it, it waits for that to end: a member stopped before it started would leave a bootstrap half done.
func hibernate(spec Spec, obs Observation) Action {
	if !obs.Bootstrapped {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonHibernating,
			Message: "spec.hibernation.enabled is set: waiting for the cluster to form before stopping its members"}
	}
	if r := obs.Restore; r != nil && r.Reseed && !r.Failed {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonHibernating,
			Message: fmt.Sprintf("spec.hibernation.enabled is set: waiting for restore %s to finish before stopping the members", r.Name)}
	}
	var running []Member
	for _, m := range sortedMembers(obs.Members) {
		switch {
		case !m.HasPod:
		case m.PodDeleting && m.PodOverdue == 0:
			// One stop at a time; a Pod past its grace period is held by a node that does not answer (Degraded
			// says so) and holds up nothing else.
			return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonHibernating, Members: []string{m.Name},
				Message: fmt.Sprintf("hibernating: waiting for the Pod of member %s to stop", m.Name)}
		case !m.PodDeleting:
			running = append(running, m)
		}
	}
	if len(running) == 0 {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonHibernated, Message: hibernatedMessage(spec, obs)}
	}
	next := stopOrder(running, obs.LeaderID)[0]
	msg := fmt.Sprintf("hibernating: stopping member %s, the last one running (its volume stays)", next.Name)
	if len(running) > 1 {
		msg = fmt.Sprintf("hibernating: stopping member %s, %d running (followers first, the leader last; volumes stay)", next.Name, len(running))
	}
	return Action{Kind: StopMember, Members: []string{next.Name}, Reason: etcdv1alpha1.ReasonHibernating, Message: msg}
}

// stopOrder sorts running members in the order hibernation stops them: learners (no vote), then followers, the
// leader last, by name within each.
func stopOrder(running []Member, leaderID uint64) []Member {
	rank := func(m Member) int {
		switch {
		case m.IsLearner:
			return 0
		case m.ID != 0 && m.ID == leaderID:
			return 2
		default:
			return 1
		}
	}
	out := append([]Member(nil), running...)
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i]) < rank(out[j]) })
	return out
}

// hibernatedMessage says that no member runs, what is kept, how to resume, and which spec changes wait for it.
func hibernatedMessage(spec Spec, obs Observation) string {
	kept := KeptMembers(obs.Members)
	msg := fmt.Sprintf("hibernated: no member runs; the volumes of %d members are kept (%s). Set spec.hibernation.enabled to false to resume",
		len(kept), strings.Join(kept, ", "))
	if pending := pendingOnResume(spec, obs.Members); len(pending) > 0 {
		msg += "; applied after resuming: " + strings.Join(pending, ", ")
	}
	return msg
}

// KeptMembers are the members a hibernated cluster brings back: those with a volume that no removal or re-seed
// ended, by name.
func KeptMembers(members []Member) []string {
	var out []string
	for _, m := range sortedMembers(members) {
		if m.HasPVC && !m.Removed && m.RetiredBy == "" && !IsStray(m.Name) {
			out = append(out, m.Name)
		}
	}
	return out
}

// pendingOnResume lists the spec changes a hibernated cluster has not applied: the members come back as their
// volumes record them, and only then does Steward roll, scale or move them.
func pendingOnResume(spec Spec, members []Member) []string {
	var out []string
	kept := KeptMembers(members)
	if len(kept) != spec.Replicas {
		out = append(out, fmt.Sprintf("replicas %d -> %d", len(kept), spec.Replicas))
	}
	versions := map[string]bool{}
	for _, m := range members {
		if m.HasPVC && m.VolumeVersion != "" && m.VolumeVersion != spec.Version {
			versions[m.VolumeVersion] = true
		}
	}
	for _, v := range sortedKeys(versions) {
		out = append(out, fmt.Sprintf("version %s -> %s", v, spec.Version))
	}
	return out
}

func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
