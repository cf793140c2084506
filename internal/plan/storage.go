package plan

import (
	"fmt"
	"sort"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Storage steps: moving members' volumes to what spec.storage asks, once membership is settled.
const (
	// ExpandVolume raises the requested size of member Members[0]'s PVC to the spec's size; the volume's
	// StorageClass allows expansion, so its provisioner grows the volume in place under the running member.
	ExpandVolume ActionKind = "ExpandVolume"
)

// StorageGoal is what spec.storage asks of members' volumes.
type StorageGoal struct {
	// Size is the requested size of each member's volume in bytes; 0 when members have no volumes (ephemeral),
	// which leaves nothing to change.
	Size int64
	// Class is the StorageClass spec.storage names; empty means any: members keep the class their volumes got
	// (the cluster's default when they were created).
	Class string
}

// Volume is a member's PVC as far as its size and class go.
type Volume struct {
	// Class is the PVC's StorageClass (the default class once the API server has filled it in).
	Class string
	// Request is the size the PVC requests (spec.resources.requests), Capacity the size its volume has
	// (status.capacity; 0 until bound): while Capacity is below Request, an expansion is under way.
	Request  int64
	Capacity int64
	// Expandable: the PVC's StorageClass allows volume expansion. Only looked up for a volume that would grow
	// in its own class; false when unknown (a class Steward may not read is never assumed to expand).
	Expandable bool
	// Resize is the PVC's resize condition while an expansion is under way ("Resizing",
	// "FileSystemResizePending", "ControllerResizeError", "NodeResizeError"), with its message; empty when none.
	Resize        string
	ResizeMessage string
	// ResizePendingFor is how long the PVC has been FileSystemResizePending (from its condition's transition
	// time, so a restarted operator sees the same); 0 otherwise.
	ResizePendingFor time.Duration
}

// FileSystemResizeGrace is how long a volume may stay FileSystemResizePending before Steward restarts its member:
// the kubelet grows a mounted file system online when the volume's driver can, on its periodic pod sync (every
// minute by default); a driver that can only grow it offline does so when the volume is next mounted, which for a
// running member means a restart.
const FileSystemResizeGrace = 3 * time.Minute

// volumeNeed is what a member's volume needs to match the spec.
type volumeNeed int

const (
	volumeAsSpecified volumeNeed = iota
	volumeExpand                 // grow the PVC in place
	volumeReplace                // replace the member onto a new volume
)

// needOf compares one volume with the goal. A PVC never shrinks and never changes class, and grows only where
// its class allows expansion: everything else is a new volume, which for etcd means a new member.
func needOf(goal StorageGoal, v Volume) (volumeNeed, string) {
	switch {
	case goal.Size == 0 || v.Request == 0:
		return volumeAsSpecified, ""
	case goal.Class != "" && v.Class != goal.Class:
		return volumeReplace, fmt.Sprintf("its volume is of storage class %q, the spec asks for %q", v.Class, goal.Class)
	case v.Request > goal.Size:
		return volumeReplace, fmt.Sprintf("its volume of %s is larger than the spec's %s and volumes cannot shrink", bytesString(v.Request), bytesString(goal.Size))
	case v.Request < goal.Size && !v.Expandable:
		return volumeReplace, fmt.Sprintf("its volume of %s must grow to %s and storage class %q does not allow volume expansion", bytesString(v.Request), bytesString(goal.Size), v.Class)
	case v.Request < goal.Size:
		return volumeExpand, fmt.Sprintf("its volume of %s grows in place to %s", bytesString(v.Request), bytesString(goal.Size))
	}
	return volumeAsSpecified, ""
}

// nextStorageStep returns the step that moves a settled cluster's volumes toward spec.storage (every member
// healthy, no learner, at least as many voters as specified, no member whose volume is being deleted), and false
// when every volume is as specified.
//
// Expansion in place is not disruptive (the member keeps running on its volume), but goes one volume at a time so
// that a class whose expansion fails stops at the first volume. A replacement follows etcd's rules for membership:
// with as many voters as specified, a learner on the new storage joins (the scale-up steps start its Pod, on a PVC
// built from the spec, and promote it once it has caught up); with one voter more than specified, a member on the
// old storage is removed, a follower first, the leader last and only after it has handed leadership over (its Pod
// and PVC go afterwards as any removed member's). So the cluster never has fewer voters than specified, one
// membership change happens at a time, and each waits for every member to be healthy (the steps before this one).
func nextStorageStep(spec Spec, obs Observation, members, voters []Member) (Action, bool) {
	if spec.Storage.Size == 0 {
		return Action{}, false
	}
	// An expansion under way is waited for: its volume's capacity has not reached the request.
	for _, m := range members {
		v := m.Volume
		if !m.InEtcd || !m.HasPVC || v.Capacity == 0 || v.Capacity >= v.Request {
			continue
		}
		msg := fmt.Sprintf("waiting for the volume of member %s to grow from %s to %s", m.Name, bytesString(v.Capacity), bytesString(v.Request))
		reason := etcdv1alpha1.ReasonExpandingVolume
		switch v.Resize {
		case "":
		case "FileSystemResizePending":
			if v.ResizePendingFor >= FileSystemResizeGrace && m.HasPod {
				return restartForResize(obs, members, m), true
			}
			msg += " (FileSystemResizePending: the volume has grown, the kubelet grows its file system while the member runs, or when its Pod next starts)"
		case "ControllerResizeError", "NodeResizeError":
			reason = etcdv1alpha1.ReasonVolumeResizeFailed
			msg = fmt.Sprintf("the expansion of member %s's volume from %s to %s failed (%s: %s): fix the storage, or set spec.storage to a class Steward can migrate to",
				m.Name, bytesString(v.Capacity), bytesString(v.Request), v.Resize, orUnknown(v.ResizeMessage))
		default:
			msg += fmt.Sprintf(" (%s: %s)", v.Resize, orUnknown(v.ResizeMessage))
		}
		return Action{Kind: Wait, Reason: reason, Members: []string{m.Name}, Message: msg}, true
	}
	var replace, expand []Member
	why := map[string]string{}
	for _, m := range members {
		if !m.InEtcd || !m.HasPVC {
			continue
		}
		need, reason := needOf(spec.Storage, m.Volume)
		why[m.Name] = reason
		switch {
		case need == volumeReplace && !m.IsLearner:
			replace = append(replace, m)
		case need == volumeExpand:
			expand = append(expand, m)
		}
	}
	if len(replace) > 0 {
		sort.Slice(replace, func(i, j int) bool { return replace[i].Name < replace[j].Name })
		if len(voters) > spec.Replicas {
			// The successor has joined and been promoted: an old member leaves, a follower first.
			m := followerFirst(replace, obs.LeaderID)
			return removeIfSafe(obs.LeaderID, members, m, etcdv1alpha1.ReasonMigratingStorage,
				fmt.Sprintf("removing member %s, now that a member on the spec's storage has joined in its place (%d of %d members on the old storage left): %s",
					m.Name, len(replace), len(voters), why[m.Name])), true
		}
		if len(obs.NewMemberNames) == 0 {
			return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonMigratingStorage, Message: "no new member name"}, true
		}
		name := obs.NewMemberNames[0]
		next := followerFirst(replace, obs.LeaderID)
		return Action{Kind: AddLearner, Members: []string{name}, PeerURL: withScheme(obs.PeerURL(name), newPeerURLScheme(spec, members)),
			Reason: etcdv1alpha1.ReasonMigratingStorage,
			Message: fmt.Sprintf("adding member %s as a learner on the spec's storage (%s%s) to replace member %s (%d of %d members on the old storage left): %s",
				name, bytesString(spec.Storage.Size), classSuffix(spec.Storage.Class), next.Name, len(replace), len(voters), why[next.Name])}, true
	}
	if len(expand) > 0 {
		volumes := 0
		for _, m := range members {
			if m.InEtcd && m.HasPVC {
				volumes++
			}
		}
		sort.Slice(expand, func(i, j int) bool { return expand[i].Name < expand[j].Name })
		m := expand[0]
		return Action{Kind: ExpandVolume, Members: []string{m.Name}, MemberID: m.ID, Reason: etcdv1alpha1.ReasonExpandingVolume,
			Message: fmt.Sprintf("expanding the volume of member %s from %s to %s in place (%d of %d volumes left)",
				m.Name, bytesString(m.Volume.Request), bytesString(spec.Storage.Size), len(expand), volumes)}, true
	}
	return Action{}, false
}

// restartForResize restarts member m, whose volume has waited for its file system resize longer than the kubelet
// needs to do it online: the kubelet finishes it when the member's Pod, re-created on the volume with the same
// name, member ID and data, mounts it. Every member is healthy (the storage steps come after that wait), so the
// others keep a quorum; the leader hands leadership over first.
func restartForResize(obs Observation, members []Member, m Member) Action {
	return restartOne(obs, members, m, etcdv1alpha1.ReasonExpandingVolume,
		fmt.Sprintf("its volume has waited %s for its file system resize (FileSystemResizePending), which the kubelet does when the volume is next mounted",
			m.Volume.ResizePendingFor.Round(time.Second)))
}

// restartOne restarts member m (its Pod re-created on its volume, in the TLS mode it runs), or first hands
// leadership away from it, so that the restart does not stall writes for an election.
func restartOne(obs Observation, members []Member, m Member, reason, why string) Action {
	voters, _ := votersAndHealthyOthers(members, m.Name)
	if m.ID == obs.LeaderID && voters > 1 {
		if to, ok := transferee(members, m, nil); ok {
			return Action{Kind: MoveLeader, Members: []string{m.Name, to.Name}, MemberID: m.ID, TargetID: to.ID, Reason: etcdv1alpha1.ReasonMovingLeader,
				Message: fmt.Sprintf("moving leadership from %s to %s before restarting it: %s", m.Name, to.Name, why)}
		}
	}
	return Action{Kind: RestartMember, Members: []string{m.Name}, MemberID: m.ID, TLS: m.PodTLS, Reason: reason,
		Message: fmt.Sprintf("restarting member %s: %s", m.Name, why)}
}

func classSuffix(class string) string {
	if class == "" {
		return ""
	}
	return fmt.Sprintf(", storage class %q", class)
}

// bytesString writes a size the way Kubernetes quantities usually are: in Gi or Mi when it is a whole number of
// them.
func bytesString(n int64) string {
	const mi, gi = 1 << 20, 1 << 30
	switch {
	case n > 0 && n%gi == 0:
		return fmt.Sprintf("%dGi", n/gi)
	case n > 0 && n%mi == 0:
		return fmt.Sprintf("%dMi", n/mi)
	}
	return fmt.Sprintf("%d bytes", n)
}
