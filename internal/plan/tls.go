package plan

import (
	"fmt"
	"strings"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Steps of a switch between plaintext and TLS.
const (
	// RestartMember deletes the Pod of Members[0] so that it is re-created on its volume in TLS mode TLS (the
	// Pod's command and volumes cannot change in place). Same name, member ID and data.
	RestartMember ActionKind = "RestartMember"
	// UpdatePeerURL changes the peer URL etcd lists for member MemberID (Members[0]) to PeerURL.
	UpdatePeerURL ActionKind = "UpdatePeerURL"
)

// TLS modes of a member, as in package resources: Plaintext listens and dials in plaintext; Bridge listens in
// plaintext and holds the cluster's certificates, to dial members that serve TLS; TLS serves TLS. A Plaintext
// member cannot talk to a TLS one and never meets one: every step below keeps that so.
const (
	TLSPlaintext = "Plaintext"
	TLSBridge    = "Bridge"
	TLSOn        = "TLS"
)

// PeerTLS reports whether a peer URL is https.
func PeerTLS(url string) bool { return strings.HasPrefix(url, "https://") }

// anyPeerTLS reports whether etcd lists a member with an https peer URL.
func anyPeerTLS(members []Member) bool {
	for _, m := range members {
		if m.InEtcd && PeerTLS(m.PeerURL) {
			return true
		}
	}
	return false
}

// anyPodPlaintext reports whether a member runs (or is set to run) plaintext without certificates.
func anyPodPlaintext(members []Member) bool {
	for _, m := range members {
		if m.HasPod && !m.PodDeleting && m.PodTLS == TLSPlaintext {
			return true
		}
	}
	return false
}

// podTLSFor is the TLS mode a member's Pod is (re)created in. Its peer URL decides between serving TLS and
// listening in plaintext (its peers dial that URL); a plaintext listener holds certificates (Bridge) while the
// spec asks for TLS or any member still serves it.
func podTLSFor(spec Spec, members []Member, peerURL string) string {
	switch {
	case PeerTLS(peerURL):
		return TLSOn
	case spec.TLS || anyPeerTLS(members):
		return TLSBridge
	default:
		return TLSPlaintext
	}
}

// newPeerURLScheme is the scheme of a joining member's peer URL: https when the spec asks for TLS and no member
// runs plaintext (a new TLS member could not reach it), else http. So a cluster keeps taking members while it
// switches: in the middle of one a new member joins as Bridge, and the switch later moves it like the others.
func newPeerURLScheme(spec Spec, members []Member) string {
	if spec.TLS && !anyPodPlaintext(members) {
		return "https"
	}
	return "http"
}

// withScheme replaces the scheme of url.
func withScheme(url, scheme string) string {
	if _, rest, ok := strings.Cut(url, "://"); ok {
		return scheme + "://" + rest
	}
	return url
}

// tlsRestart returns the restart of a member whose Pod runs another TLS mode than its peer URL and the spec call
// for (podTLSFor), one at a time and the leader last. It may be down: a member whose peer URL just changed to a
// scheme it does not listen with is cut off from its peers until it restarts, and waiting for it to be healthy
// first would wait forever. The others must be healthy and ready, so that they keep a quorum while it restarts.
func tlsRestart(spec Spec, obs Observation, members []Member) (Action, bool) {
	var todo []Member
	for _, m := range members {
		// Not one whose mode or peer URL is unknown: only what was observed is acted on.
		if !m.InEtcd || !m.HasPod || m.PodDeleting || m.PodTLS == "" || m.PeerURL == "" {
			continue
		}
		if want := podTLSFor(spec, members, m.PeerURL); m.PodTLS != want {
			todo = append(todo, m)
		}
	}
	if len(todo) == 0 {
		return Action{}, false
	}
	next := followerFirst(todo, obs.LeaderID)
	reason := tlsReason(spec)
	for _, o := range members {
		if o.Name != next.Name && o.HasPod && (!o.Healthy || (!o.PodReady && !o.IsLearner)) {
			return Action{Kind: Wait, Reason: reason, Message: fmt.Sprintf(
				"member %s is to restart in TLS mode %s; waiting for member %s to be healthy and ready first", next.Name,
				podTLSFor(spec, members, next.PeerURL), o.Name)}, true
		}
	}
	if !obs.EtcdReachable {
		return Action{}, false
	}
	if a, waiting := catchUp(obs, members, next.Name); waiting {
		return a, true
	}
	want := podTLSFor(spec, members, next.PeerURL)
	if next.ID == obs.LeaderID && next.Healthy {
		if to, ok := transferee(members, next, nil); ok {
			return Action{Kind: MoveLeader, Members: []string{next.Name, to.Name}, MemberID: next.ID, TargetID: to.ID, Reason: etcdv1alpha1.ReasonMovingLeader,
				Message: fmt.Sprintf("moving leadership from %s to %s before restarting it in TLS mode %s", next.Name, to.Name, want)}, true
		}
	}
	return Action{Kind: RestartMember, Members: []string{next.Name}, MemberID: next.ID, TLS: want, Reason: reason,
		Message: fmt.Sprintf("restarting member %s in TLS mode %s (was %s; peer URL %s)", next.Name, want, next.PodTLS, next.PeerURL)}, true
}

// catchUp waits while a member other than skip lags the leader by more than catchUpSlack entries: the member
// about to restart should not leave the cluster depending on one that is still catching up.
func catchUp(obs Observation, members []Member, skip string) (Action, bool) {
	var leader *Member
	for i := range members {
		if members[i].InEtcd && members[i].ID == obs.LeaderID {
			leader = &members[i]
		}
	}
	if leader == nil {
		return Action{}, false
	}
	for _, m := range members {
		if m.Name != skip && m.InEtcd && m.Healthy && leader.CommitIndex > m.AppliedIndex+catchUpSlack {
			return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForCatchUp,
				Message: fmt.Sprintf("waiting for member %s to catch up (applied %d, leader committed %d)", m.Name, m.AppliedIndex, leader.CommitIndex)}, true
		}
	}
	return Action{}, false
}

// tlsPeerURLStep moves one member's peer URL to the scheme the spec asks for, once every Pod runs the mode its
// peer URL calls for (tlsRestart has nothing left). Towards TLS only when no member runs plaintext: from the
// change on, its peers dial it with TLS, which a Plaintext member cannot. Away from TLS always: Bridge and TLS
// members dial http URLs too. The member then restarts in its new mode (tlsRestart), followers first, the
// leader last and only after it handed leadership on. Called when every member is healthy.
func tlsPeerURLStep(spec Spec, obs Observation, members []Member) (Action, bool) {
	want := "http"
	if spec.TLS {
		want = "https"
		if anyPodPlaintext(members) {
			return Action{}, false // tlsRestart moves them to Bridge first
		}
	}
	var todo []Member
	for _, m := range members {
		if m.InEtcd && m.PeerURL != "" && PeerTLS(m.PeerURL) != spec.TLS {
			todo = append(todo, m)
		}
	}
	if len(todo) == 0 {
		return Action{}, false
	}
	next := followerFirst(todo, obs.LeaderID)
	if a, waiting := catchUp(obs, members, ""); waiting {
		return a, true
	}
	if next.ID == obs.LeaderID {
		if to, ok := transferee(members, next, nil); ok {
			return Action{Kind: MoveLeader, Members: []string{next.Name, to.Name}, MemberID: next.ID, TargetID: to.ID, Reason: etcdv1alpha1.ReasonMovingLeader,
				Message: fmt.Sprintf("moving leadership from %s to %s before changing its peer URL", next.Name, to.Name)}, true
		}
	}
	url := withScheme(next.PeerURL, want)
	return Action{Kind: UpdatePeerURL, Members: []string{next.Name}, MemberID: next.ID, PeerURL: url, Reason: tlsReason(spec),
		Message: fmt.Sprintf("changing the peer URL of member %s to %s; it restarts next", next.Name, url)}, true
}

func tlsReason(spec Spec) string {
	if spec.TLS {
		return etcdv1alpha1.ReasonEnablingTLS
	}
	return etcdv1alpha1.ReasonDisablingTLS
}

// clientAuthRestart restarts a member that serves TLS and requires client certificates where the spec says not,
// or the other way round: one at a time, followers first, the leader after handing leadership over. It comes
// after every member is healthy and after a switch between plaintext and TLS has finished (that switch restarts
// members itself, into the spec's flags).
func clientAuthRestart(spec Spec, obs Observation, members []Member) (Action, bool) {
	if !spec.TLS {
		return Action{}, false
	}
	var due []Member
	for _, m := range members {
		if m.InEtcd && m.HasPod && !m.PodDeleting && m.PodTLS == TLSOn && m.PodClientCertAuth != spec.ClientCertAuth {
			due = append(due, m)
		}
	}
	if len(due) == 0 {
		return Action{}, false
	}
	next := followerFirst(sortedByName(due), obs.LeaderID)
	why := "its Pod requires client certificates, spec.tls.clientAuth is Password"
	if spec.ClientCertAuth {
		why = "its Pod asks for no client certificate, spec.tls.clientAuth is Certificate"
	}
	return restartOne(obs, members, next, etcdv1alpha1.ReasonRestartingForClientAuth,
		fmt.Sprintf("%s (%d of %d members to restart)", why, len(due), len(members))), true
}

// lacksPeerIdentity is the first member holding certificates whose certificate is not known to carry the peer
// identity. A member that checks the identity refuses such a peer both ways (etcd checks the certificate a peer
// presents and the one a peer it dials serves), so no member may start checking while one is found.
func lacksPeerIdentity(members []Member) (Member, bool) {
	for _, m := range members {
		if m.HasPod && !m.PodDeleting && m.PodTLS != "" && m.PodTLS != TLSPlaintext && !m.PeerIdentity {
			return m, true
		}
	}
	return Member{}, false
}

// PeerCheckForNewPods reports whether a member Pod created now checks the peer identity: when the spec asks for
// it and every running member's certificate carries it (a new cluster's always do: their certificates are issued
// before their Pods). Otherwise the Pod starts accepting any certificate of the CA, and peerCheckRestart moves it
// once every certificate carries the identity.
func PeerCheckForNewPods(spec Spec, members []Member) bool {
	if !spec.TLS || !spec.PeerCheck {
		return false
	}
	_, lacking := lacksPeerIdentity(members)
	return !lacking
}

// peerCheckRestart restarts a member that serves TLS and checks the peer identity where the spec says not, or
// the other way round: one at a time, followers first, the leader after handing leadership over. Towards
// checking only once every member's certificate carries the identity (until then it waits, naming the member).
// It comes after every member is healthy and after a switch between plaintext and TLS has finished.
func peerCheckRestart(spec Spec, obs Observation, members []Member) (Action, bool) {
	if !spec.TLS {
		return Action{}, false
	}
	var due []Member
	for _, m := range members {
		if m.InEtcd && m.HasPod && !m.PodDeleting && m.PodTLS == TLSOn && m.PodPeerCheck != spec.PeerCheck {
			due = append(due, m)
		}
	}
	if len(due) == 0 {
		return Action{}, false
	}
	why := "its Pod checks the peer identity, spec.tls.peerAuth is AnyCertificate"
	if spec.PeerCheck {
		if m, lacking := lacksPeerIdentity(members); lacking {
			return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForPeerIdentity, Message: fmt.Sprintf(
				"%d of %d members are to accept only member certificates on the peer port; waiting for the certificate of member %s to carry the peer identity first",
				len(due), len(members), m.Name)}, true
		}
		why = "its Pod accepts any certificate of the cluster's CA on the peer port, spec.tls.peerAuth is MemberIdentity"
	}
	next := followerFirst(sortedByName(due), obs.LeaderID)
	return restartOne(obs, members, next, etcdv1alpha1.ReasonRestartingForPeerAuth,
		fmt.Sprintf("%s (%d of %d members to restart)", why, len(due), len(members))), true
}
