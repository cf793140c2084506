package plan

import (
	"fmt"
	"sort"
	"strings"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Bringing members back on their own volumes. A member's Pod is only a process; its identity and data are on its
// volume. Re-creating a missing Pod there (same name, flags, member ID and data) is not a membership change, so
// it needs no member list from etcd — which is just as well, because a cluster whose majority of Pods is gone has
// no quorum to answer one. Re-creating them all together is how that quorum comes back.

// RecreateMemberPods re-creates the Pods of Pods[].Name on their intact volumes, each as its volume records.
const RecreateMemberPods ActionKind = "RecreateMemberPods"

// DefaultRecoveryGrace is how long members whose Pods were re-created on their intact volumes get to form a
// quorum before a confirmed re-seed may stop them, when spec.quorumLossRecovery sets no time of its own. Members
// that can form a quorum do so within seconds of starting; a minute leaves room for a slow image pull.
const DefaultRecoveryGrace = time.Minute

// PodOnVolume is a member Pod to re-create on the member's own volume.
type PodOnVolume struct {
	Name string
	// InitialCluster and State are the member's --initial-cluster and --initial-cluster-state as recorded (etcd
	// ignores both once its data dir holds a member).
	InitialCluster map[string]string
	State          string
	// Version and Image are the release its data was last started with; TLS the mode it listens in.
	Version string
	Image   string
	TLS     string
	// HasRun: the member has run (HasRun), so its data dir must hold it: its Pod refuses to start etcd on an
	// empty one.
	HasRun bool
	// Restore is the restore under way that the member's volume records it was created from: its Pod is seeded
	// from that snapshot again (which does nothing to a data dir that already holds a member) and records it, so
	// the restore counts it among its members. Empty when that restore is over.
	Restore string
}

// HasRun reports whether member m has run: its data dir has held the member, so a Pod of it must never start etcd
// on an empty one. An emptied data dir (a re-imaged node, a wiped local disk) would otherwise come back as a new,
// empty cluster under the cluster's name (a member that bootstrapped alone), or rejoin under its old member ID
// with an empty log and vote (any other), and either way acknowledged writes would be gone without a word.
//
// Not only etcd's member list says so (Started): a cluster that lost its Pods has none to give, and the only
// member of a 1-member cluster never has one while its Pod is gone. So Steward records it on the member's volume
// (VolumeHasRun), beside the data and not in it, once it sees the member started. For a volume from before that
// record, what Steward knew before is read back: status lists the member with the version it reported
// (ServedBefore), or the member belongs to the bootstrap of a formed cluster (every one of those started; not
// the members of a bootstrap from a snapshot, which a re-seed creates while the cluster it replaces counts as
// formed).
func HasRun(m Member, bootstrapped bool) bool {
	return m.Started || m.VolumeHasRun || m.ServedBefore || (bootstrapped && m.InitialState == "new" && m.Restore == "")
}

// RunsToRecord are the members whose volumes do not yet record that they have run although they have (HasRun):
// the controller writes the record on every pass, so it is there before the member list that showed it is gone.
func RunsToRecord(obs Observation) []Member {
	var out []Member
	for _, m := range sortedMembers(obs.Members) {
		if m.HasPVC && !m.VolumeHasRun && !m.Removed && m.RetiredBy == "" && !IsStray(m.Name) && HasRun(m, obs.Bootstrapped) {
			out = append(out, m)
		}
	}
	return out
}

// bringsBack reports whether member m's Pod is to be re-created on its volume: it has no Pod, its volume is
// intact and records how the member was started, and nothing says it stopped being a member: with a member list,
// etcd lists it (a volume of a member etcd no longer lists is a leftover); without one, its volume carries no mark
// that Steward removed it from etcd or that a re-seed stopped it.
func bringsBack(m Member, reachable bool) bool {
	if m.HasPod || !m.HasPVC || m.InitialCluster == nil || IsStray(m.Name) {
		return false
	}
	if reachable {
		// A volume no new Pod can mount is not brought back: its member is replaced (nextAfterBootstrap).
		return m.InEtcd && m.VolumeNodeGone == ""
	}
	return !m.Removed && m.RetiredBy == ""
}

// recreatePods returns the re-creation of every member Pod that bringsBack, in one step, and false when there is
// none. Only for a formed cluster: before that, finishing the bootstrap re-creates its members.
func recreatePods(spec Spec, obs Observation, members []Member) (Action, bool) {
	if !obs.Bootstrapped {
		return Action{}, false
	}
	var pods []PodOnVolume
	var names []string
	for _, m := range members {
		if !bringsBack(m, obs.EtcdReachable) {
			continue
		}
		// Same identity, same data, same release: the data may be in a format only that release reads.
		version, image := m.VolumeVersion, m.VolumeImage
		if version == "" {
			version, image = joinVersion(spec, obs, members)
		}
		pod := PodOnVolume{Name: m.Name, InitialCluster: m.InitialCluster, State: m.InitialState, HasRun: HasRun(m, obs.Bootstrapped),
			Version: version, Image: image, TLS: volumeTLS(spec, members, m)}
		// A member of a bootstrap from a snapshot whose Pod was never created (the operator stopped half-way) or
		// was lost before it started holds no data yet: it is seeded like its peers.
		if m.Restore != "" && obs.Restore != nil && obs.Restore.Name == m.Restore {
			pod.Restore = m.Restore
		}
		pods = append(pods, pod)
		names = append(names, m.Name)
	}
	if len(pods) == 0 {
		return Action{}, false
	}
	msg := fmt.Sprintf("re-creating the Pods of members %v on their intact volumes", names)
	if len(names) == 1 {
		msg = fmt.Sprintf("re-creating the Pod of member %s on its volume", names[0])
	}
	if !obs.EtcdReachable {
		msg += " (no member list from etcd; not a membership change, so none is needed)"
	}
	return Action{Kind: RecreateMemberPods, Members: names, Pods: pods, Reason: etcdv1alpha1.ReasonRecreatingMember, Message: msg}, true
}

// volumeTLS is the TLS mode a member's Pod is re-created in. The peer URL etcd lists decides when there is one
// (podTLSFor); without a member list, the mode its last Pod ran, as its volume records; for a volume from before
// Steward recorded it, the mode of a member that is not in the middle of a switch.
func volumeTLS(spec Spec, members []Member, m Member) string {
	switch {
	case m.InEtcd && m.PeerURL != "":
		return podTLSFor(spec, members, m.PeerURL)
	case m.VolumeTLS != "":
		return m.VolumeTLS
	case spec.TLS:
		return TLSOn
	default:
		return TLSPlaintext
	}
}

// comingBack lists the members with intact volumes whose Pods were (re-)created less than grace ago, or are still
// terminating (their Pods are re-created once they are gone): they may still form a quorum with the data they
// hold, which a re-seed from a backup would throw away. Members whose crash shows their data is lost, and members
// a re-seed already stopped, are not coming back. (A Pod that never goes holds its volume from a re-seed too: a
// human must force-delete it either way, and status says so.)
func comingBack(members []Member, grace time.Duration) []string {
	var out []string
	for _, m := range members {
		if m.HasPod && m.HasPVC && m.DataLoss == "" && m.RetiredBy == "" && !m.Removed && (m.PodDeleting || m.PodAge < grace) {
			out = append(out, m.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Census is what Steward knows of a formed cluster's members from Kubernetes alone: enough to say, when etcd
// cannot answer, whether the members that still hold data can form a quorum. Members Steward removed from etcd
// or a re-seed stopped are not counted.
type Census struct {
	// Members is how many members there are: Pods, volumes, and the ones etcd listed when it last answered.
	Members int
	// Running have a Pod (Ready of them pass etcd's /readyz, which needs a leader).
	Running []string
	Ready   int
	// Missing have no Pod (or one being deleted) but an intact volume: they come back on it.
	Missing []string
	// NoData have neither a Pod nor a volume, or crashed with evidence that the data on their volume is lost.
	NoData []string
}

// TakeCensus counts members. Learners count like voters: without a member list Steward cannot tell them apart,
// and counting one more member only makes the quorum it reports larger, never smaller.
func TakeCensus(members []Member) Census {
	var c Census
	for _, m := range members {
		if m.Removed || m.RetiredBy != "" || IsStray(m.Name) {
			continue
		}
		if !m.HasPod && !m.HasPVC && !m.InEtcd && !m.Remembered && !m.VolumeDeleting {
			continue
		}
		c.Members++
		switch {
		case m.DataLoss != "":
			c.NoData = append(c.NoData, m.Name)
		case m.HasPod && !m.PodDeleting:
			c.Running = append(c.Running, m.Name)
			if m.PodReady {
				c.Ready++
			}
		case m.HasPVC:
			c.Missing = append(c.Missing, m.Name)
		default:
			c.NoData = append(c.NoData, m.Name)
		}
	}
	sort.Strings(c.Running)
	sort.Strings(c.Missing)
	sort.Strings(c.NoData)
	return c
}

// Quorum is the quorum of the members counted.
func (c Census) Quorum() int { return Quorum(c.Members) }

// CanFormQuorum reports whether the members holding data (running, or coming back on their volumes) are a quorum.
func (c Census) CanFormQuorum() bool { return len(c.Running)+len(c.Missing) >= c.Quorum() }

// String says it to a human: "3 members: 1 with a Pod (0 ready), 2 missing their Pod, volume intact [a b];
// quorum needs 2".
func (c Census) String() string {
	noun := "members"
	if c.Members == 1 {
		noun = "member"
	}
	s := fmt.Sprintf("%d %s: %d with a Pod (%d ready)", c.Members, noun, len(c.Running), c.Ready)
	if len(c.Missing) > 0 {
		s += fmt.Sprintf(", %d missing their Pod with their volume intact %v", len(c.Missing), c.Missing)
	}
	if len(c.NoData) > 0 {
		s += fmt.Sprintf(", %d with no data left %v", len(c.NoData), c.NoData)
	}
	return s + fmt.Sprintf("; quorum needs %d", c.Quorum())
}

// withoutMemberList is the wait of a formed cluster whose members give no member list, once every Pod that can
// come back has been re-created: for a quorum to form, or, when too few members still hold data for one, for a
// human (no membership change is possible without quorum, and a re-seed from a backup is theirs to order).
func withoutMemberList(spec Spec, obs Observation) Action {
	c := TakeCensus(obs.Members)
	if c.Members > 0 && !c.CanFormQuorum() {
		msg := fmt.Sprintf("no member list from etcd, and too few members hold data to form a quorum (%s).%s Steward cannot bring the cluster back by itself: "+
			"restore it from a backup with an EtcdRestore whose spec.confirm names this cluster", c, lostOnVolumes(obs.Members))
		if spec.QuorumLossAfter > 0 {
			msg += fmt.Sprintf(" (spec.quorumLossRecovery does so after %s)", spec.QuorumLossAfter)
		}
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonQuorumUnrecoverable, Message: msg + ", or bring back the lost volumes or the data on them"}
	}
	return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers, Message: fmt.Sprintf("no member list from etcd; waiting for the members to form a quorum (%s)", c)}
}

// lostOnVolumes says which members lost their data on volumes that are still there (an emptied data dir: a
// re-imaged node, a wiped local disk; a corrupt one), each with its claim and the evidence, "" when none did.
// Such a member is never started again under its identity: its data dir would make it an empty cluster or a
// voter without the writes it acknowledged.
func lostOnVolumes(members []Member) string {
	var lost []string
	for _, m := range sortedMembers(members) {
		if m.DataLoss != "" && m.HasPVC && m.RetiredBy == "" && !m.Removed {
			lost = append(lost, fmt.Sprintf("member %s, volume %s: %s", m.Name, m.PVC, m.DataLoss))
		}
	}
	if len(lost) == 0 {
		return ""
	}
	return fmt.Sprintf(" Data lost on volumes that are still there (%s); Steward does not start a member that has run on an empty or corrupt data dir.",
		strings.Join(lost, "; "))
}
