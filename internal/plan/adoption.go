package plan

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Adoption of a running etcd (spec.bootstrap.fromExisting, docs/user/adoption.md). The source's members are
// external: Steward did not start them and never starts, restarts, replaces or stops them; it only removes them
// from etcd's member list when the user hands the cluster over (handover Retire). Its own members join the
// running cluster as learners, one at a time, exactly as in a scale-up. The invariants, on top of etcd's rules
// (docs/development/architecture.md):
//   - nothing is changed on the source before the preflight (AdmitSource) admitted it;
//   - a member etcd lists under a recorded source ID is never a stray: Steward's removal of unknown members, its
//     replacement of members without Pods, and every other step of a settled cluster skip it;
//   - a source member leaves only when handover is Retire, once Steward's replicas are voters and every member is
//     healthy, followers first, the leader last after leadership moved to one of Steward's members;
//   - an abort removes only Steward's members, and only before the first source member left.

// Adoption steps.
const (
	// AdoptSource records the source the preflight admitted (its cluster ID and members, as external members) in
	// status: the controller's memory, from which later passes tell the source's members from strays.
	AdoptSource ActionKind = "AdoptSource"
	// AddSourceOperatorUser adds Steward's own etcd user (the operator credentials, with the root role) to an
	// admitted source with authentication on, through the user of the adoption's credentials Secret.
	AddSourceOperatorUser ActionKind = "AddSourceOperatorUser"
	// RemoveSourceOperatorUser deletes that user again, the last step of an abort.
	RemoveSourceOperatorUser ActionKind = "RemoveSourceOperatorUser"
)

// Handovers, as spec.bootstrap.fromExisting.handover has them.
const (
	HandoverKeep   = string(etcdv1alpha1.HandoverKeep)
	HandoverRetire = string(etcdv1alpha1.HandoverRetire)
	HandoverAbort  = string(etcdv1alpha1.HandoverAbort)
)

// externalPrefix starts the name under which a source member is observed. Like strayPrefix, the colon keeps it
// apart from every name Steward gives a member, whatever the source called its members.
const externalPrefix = "source:"

// ExternalMemberName is the name a source member of etcd name etcdName (empty while it has not started) and ID
// id is observed under.
func ExternalMemberName(etcdName string, id uint64) string {
	if etcdName == "" {
		return externalPrefix + strconv.FormatUint(id, 16)
	}
	return externalPrefix + etcdName
}

// IsExternal reports whether a member name is one ExternalMemberName gave.
func IsExternal(name string) bool { return strings.HasPrefix(name, externalPrefix) }

// Adopt is what spec.bootstrap.fromExisting asks (Spec.Adopt).
type Adopt struct {
	// Handover is Keep, Retire or Abort.
	Handover string
	// Quota is the --quota-backend-bytes Steward's members run with; 0 when etcd's default (2 GiB) applies.
	Quota int64
	// Endpoints are the source's client URLs as the spec names them.
	Endpoints []string
	// StewardCA: spec.tls.provider is Steward, whose own CA no source trusts.
	StewardCA bool
}

// Source is what the preflight read of the source (reads only: member list, statuses, alarms, auth state).
type Source struct {
	// ListErr says why no member list could be read; empty when one was.
	ListErr string
	// TLSProblem says why a TLS handshake with the source failed (its certificate not of the CA Steward trusts,
	// or Steward's refused); empty when none did.
	TLSProblem string
	// CredentialsProblem says why Steward's credentials for the source cannot serve (its Secret missing or
	// lacking keys, or refused by etcd); empty when there is none.
	CredentialsProblem string
	ClusterID          uint64
	Members            []SourceMember
	// Alarms are the alarms the source keeps raised (NOSPACE, CORRUPT).
	Alarms []string
	// AuthEnabled: etcd's authentication is on; AuthKnown: Steward could tell.
	AuthEnabled bool
	AuthKnown   bool
	// User is the etcd user of the adoption's credentials Secret, which the preflight read as ("" without one);
	// UserIsRoot: etcd lists the root role among its roles (read only while authentication is on).
	User       string
	UserIsRoot bool
}

// SourceMember is one member of the source's member list, with its status answer.
type SourceMember struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
	// Answered: its client URL answered a status request; Healthy: the answer knew a leader and had no errors.
	Answered bool
	Healthy  bool
	Version  string
	DBSize   int64
	// StatusErr is why it gave no (healthy) answer, for the message.
	StatusErr string
}

// Adoption is the adoption under way, as observed (Observation.Adoption).
type Adoption struct {
	// Admitted: status records the admitted source (the controller's memory); Source is the preflight's read,
	// needed only until then.
	Admitted bool
	Source   Source
	// ClusterID is the cluster ID recorded at admission; ObservedClusterID the one etcd answers with now (0 when
	// unknown).
	ClusterID         uint64
	ObservedClusterID uint64
	// Retired: status records a source member Steward removed: from then on the cluster cannot go back to the
	// source as it was, and an abort is refused.
	Retired bool
	// CredentialsInUse: the pass read etcd as the user of the adoption's credentials Secret (Steward has not added
	// its own to the source yet), so a refused password (Observation.PasswordRejected) is that user's.
	CredentialsInUse bool
	// OperatorUser is the etcd user status records Steward added to the source ("" while it added none).
	OperatorUser string
}

// maxSourceVoters is the most voters a source may have: Steward's largest cluster.
const maxSourceVoters = 9

// defaultQuota is etcd's --quota-backend-bytes when none is set.
const defaultQuota = 2 << 30

// AdmitSource is the preflight: whether Steward may start adopting src, decided on what it read alone. It returns
// an empty reason when the source is admitted, else a reason of etcdv1alpha1 (the Source... reasons) and a
// message for a human; a refusal changes nothing, and the next pass reads the source again.
func AdmitSource(spec Spec, src Source) (reason, message string) {
	if reason, msg := admitEndpoints(spec); reason != "" {
		return reason, msg
	}
	switch {
	case src.TLSProblem != "":
		return etcdv1alpha1.ReasonSourceTLSUnsupported,
			"the TLS handshake with the source failed (" + src.TLSProblem + "): Steward's client certificate and CA (spec.tls's client Secret) must be issued by the CA the source's members use, and their certificates must name the addresses Steward dials"
	case src.CredentialsProblem != "":
		return etcdv1alpha1.ReasonSourceAccessRejected, src.CredentialsProblem
	case src.ListErr != "":
		return etcdv1alpha1.ReasonSourceUnreachable, "no endpoint of the source gave a member list: " + src.ListErr
	case len(src.Members) == 0:
		return etcdv1alpha1.ReasonSourceUnreachable, "the source's member list is empty"
	}
	members := append([]SourceMember(nil), src.Members...)
	sort.Slice(members, func(i, j int) bool { return members[i].ID < members[j].ID })
	voters := 0
	for _, m := range members {
		switch {
		case m.Name == "":
			return etcdv1alpha1.ReasonSourceMembershipChanging,
				fmt.Sprintf("source member %x has not started (etcd lists it without a name): wait until it has, or remove it", m.ID)
		case m.IsLearner:
			return etcdv1alpha1.ReasonSourceMembershipChanging,
				fmt.Sprintf("source member %s is a learner: someone else is changing the source's membership; adopt it once that is done", m.Name)
		}
		voters++
	}
	if voters > maxSourceVoters {
		return etcdv1alpha1.ReasonSourceMembershipChanging, fmt.Sprintf("the source has %d voters, more than %d", voters, maxSourceVoters)
	}
	for _, m := range members {
		if !m.Healthy {
			why := m.StatusErr
			if why == "" {
				why = "it answered without a leader or with errors"
			}
			return etcdv1alpha1.ReasonSourceUnhealthy, fmt.Sprintf("source member %s is not healthy (%s): every member must be before Steward's join", m.Name, why)
		}
	}
	if len(src.Alarms) > 0 {
		return etcdv1alpha1.ReasonSourceUnhealthy, fmt.Sprintf("the source keeps alarms raised (%s): disarm them first", strings.Join(src.Alarms, ", "))
	}
	if reason, msg := admitVersions(spec, members); reason != "" {
		return reason, msg
	}
	if reason, msg := admitTLS(spec, members); reason != "" {
		return reason, msg
	}
	if reason, msg := admitAuth(spec, src); reason != "" {
		return reason, msg
	}
	quota := spec.AdoptQuota()
	for _, m := range members {
		if m.DBSize > quota {
			return etcdv1alpha1.ReasonSourceTooBig,
				fmt.Sprintf("source member %s's database is %d bytes, more than the quota of %d bytes Steward's members would run with: raise spec.storage.size or spec.etcd.quotaBackendBytes, or defragment the source", m.Name, m.DBSize, quota)
		}
	}
	return "", ""
}

// AdoptQuota is the database quota Steward's members run with during an adoption.
func (spec Spec) AdoptQuota() int64 {
	if spec.Adopt != nil && spec.Adopt.Quota > 0 {
		return spec.Adopt.Quota
	}
	return defaultQuota
}

// admitVersions: every source member runs the same release, of spec.version's minor. Steward's members join at
// spec.version; a minor apart they would join as an upgrade or a downgrade Steward did not plan, so versions
// change after the adoption, through Steward's rolling upgrade.
func admitVersions(spec Spec, members []SourceMember) (string, string) {
	want, err := ParseVersion(spec.Version)
	if err != nil {
		return etcdv1alpha1.ReasonSourceVersionUnsupported, fmt.Sprintf("spec.version: %v", err)
	}
	first := ""
	for _, m := range members {
		v, err := ParseVersion(m.Version)
		if err != nil {
			return etcdv1alpha1.ReasonSourceVersionUnsupported, fmt.Sprintf("source member %s runs %q: %v", m.Name, m.Version, err)
		}
		if v.Major != 3 || v.Minor < 5 || v.Minor > 7 {
			return etcdv1alpha1.ReasonSourceVersionUnsupported,
				fmt.Sprintf("source member %s runs etcd %s; Steward adopts 3.5, 3.6 and 3.7 (upgrade the source first)", m.Name, v)
		}
		if first == "" {
			first = m.Version
		} else if m.Version != first {
			return etcdv1alpha1.ReasonSourceVersionUnsupported,
				fmt.Sprintf("the source's members run different releases (%s and %s): finish its upgrade first", first, m.Version)
		}
		if !v.sameMinor(want) {
			return etcdv1alpha1.ReasonSourceVersionUnsupported,
				fmt.Sprintf("the source runs etcd %s and spec.version is %s: set spec.version to a %s release; change it after the adoption", v, spec.Version, v.MinorString())
		}
	}
	return "", ""
}

// admitAuth: with etcd's authentication on at the source, Steward keeps it on (spec.auth.enabled: false would
// turn it off under the source's clients) and acts as the credentials Secret's user, which must hold the root
// role: etcd allows membership changes, leadership moves and its own user's creation to root alone. The source's
// users and roles are never touched. A source without authentication needs no credentials; spec.auth.enabled
// true turns authentication on once the adoption is complete, as for any cluster.
func admitAuth(spec Spec, src Source) (string, string) {
	switch {
	case !src.AuthKnown:
		return etcdv1alpha1.ReasonSourceAuthUnsupported, "could not tell whether the source has authentication on"
	case !src.AuthEnabled:
		return "", ""
	case !spec.Auth:
		return etcdv1alpha1.ReasonSourceAuthUnsupported,
			"the source has etcd's authentication on and spec.auth.enabled is false, which would turn it off for the source's clients: set spec.auth.enabled to true (its users and roles stay)"
	case spec.TLS:
		// With TLS Steward's identity is its client certificate's common name, not a password user; carrying that
		// over (the source's user of that name holding the root role) is not built.
		return etcdv1alpha1.ReasonSourceAuthUnsupported,
			"the source serves TLS and has etcd's authentication on: this version adopts sources with authentication in plaintext only"
	case src.User == "":
		return etcdv1alpha1.ReasonSourceAccessRejected,
			"the source has etcd's authentication on: name a Secret with the username and password of a user with the root role in spec.bootstrap.fromExisting.credentialsSecret"
	case !src.UserIsRoot:
		return etcdv1alpha1.ReasonSourceAccessRejected,
			fmt.Sprintf("etcd user %s (spec.bootstrap.fromExisting.credentialsSecret) lacks the root role, which membership changes need: grant it (etcdctl user grant-role %s root) or give a user that holds it", src.User, src.User)
	}
	return "", ""
}

// admitEndpoints: the spec's endpoints speak what spec.tls says Steward speaks (one scheme for all: the pool
// dials them with one configuration).
func admitEndpoints(spec Spec) (string, string) {
	if spec.Adopt == nil {
		return "", ""
	}
	for _, ep := range spec.Adopt.Endpoints {
		switch {
		case PeerTLS(ep) && !spec.TLS:
			return etcdv1alpha1.ReasonSourceTLSUnsupported,
				fmt.Sprintf("endpoint %s serves TLS and spec.tls.provider is None: adopt a TLS source with provider Secrets (or CertManager) holding certificates of the source's CA (docs/user/adoption.md)", ep)
		case !PeerTLS(ep) && spec.TLS:
			return etcdv1alpha1.ReasonSourceTLSUnsupported,
				fmt.Sprintf("endpoint %s is plaintext and spec.tls asks for TLS: a plaintext source is adopted with spec.tls.provider None (switch to TLS after the adoption), a TLS source through https endpoints", ep)
		}
	}
	return "", ""
}

// admitTLS: Steward's members must speak what the source's do, and each side must trust the other's
// certificates. A plaintext source is adopted with spec.tls.provider None (TLS follows after the adoption with
// the live switch). A TLS source is adopted with certificates of its own CA (provider Secrets, or CertManager
// with an issuer of that CA): the source's members then trust Steward's members' peer certificates and its client
// certificate, and Steward's members trust theirs. Its peer certificates do not carry Steward's peer identity
// name, so peerAuth must be AnyCertificate.
func admitTLS(spec Spec, members []SourceMember) (string, string) {
	tlsMembers := 0
	for _, m := range members {
		// A joining member's --initial-cluster must list every member's peer URLs as etcd lists them, and Steward
		// keeps one per member.
		if len(m.PeerURLs) != 1 {
			return etcdv1alpha1.ReasonSourceTLSUnsupported,
				fmt.Sprintf("source member %s advertises %d peer URLs; Steward adopts members with exactly one", m.Name, len(m.PeerURLs))
		}
		peerTLS := PeerTLS(m.PeerURLs[0])
		for _, u := range m.ClientURLs {
			if PeerTLS(u) != peerTLS {
				return etcdv1alpha1.ReasonSourceTLSUnsupported,
					fmt.Sprintf("source member %s serves its peer URL %s and client URL %s in different schemes; Steward adopts members that use TLS on both or on neither", m.Name, m.PeerURLs[0], u)
			}
		}
		if peerTLS {
			tlsMembers++
		}
	}
	switch {
	case tlsMembers > 0 && tlsMembers < len(members):
		return etcdv1alpha1.ReasonSourceTLSUnsupported,
			fmt.Sprintf("%d of the source's %d members serve TLS: finish the source's switch first", tlsMembers, len(members))
	case tlsMembers == 0 && spec.TLS:
		return etcdv1alpha1.ReasonSourceTLSUnsupported,
			"the source runs plaintext: set spec.tls.provider None to adopt it, and switch to TLS once the adoption is complete"
	case tlsMembers == 0:
		return "", ""
	case !spec.TLS:
		return etcdv1alpha1.ReasonSourceTLSUnsupported,
			"the source serves TLS: set spec.tls.provider Secrets (or CertManager) with certificates issued by the source's CA"
	case spec.Adopt != nil && spec.Adopt.StewardCA:
		return etcdv1alpha1.ReasonSourceTLSUnsupported,
			"the source serves TLS and spec.tls.provider is Steward, whose own CA the source's members do not trust: use provider Secrets (or CertManager) with certificates issued by the source's CA"
	case spec.PeerCheck:
		return etcdv1alpha1.ReasonSourceTLSUnsupported,
			"spec.tls.peerAuth is MemberIdentity, and the source's peer certificates do not carry Steward's peer identity name: set peerAuth AnyCertificate to adopt it"
	}
	return "", ""
}

// adoption is the pass's step while an adoption is under way; false once it is complete (no source member left
// in etcd after one was retired), or for clusters Steward created.
func adoption(spec Spec, obs Observation) (Action, bool) {
	ad := obs.Adoption
	if spec.Adopt == nil || ad == nil {
		return Action{}, false
	}
	if !ad.Admitted {
		return admit(spec, ad)
	}
	if ad.CredentialsInUse && obs.PasswordRejected {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonSourceAccessRejected,
			Message: "the source refuses the password of spec.bootstrap.fromExisting.credentialsSecret's user, which Steward acts as until its own user is added: put the password etcd knows into the Secret"}, true
	}
	if !obs.EtcdReachable {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers,
			Message: "no member list from the adopted cluster: no membership change without one"}, true
	}
	if ad.ObservedClusterID != 0 && ad.ObservedClusterID != ad.ClusterID {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonSourceChanged,
			Message: fmt.Sprintf("the adopted cluster answers with cluster ID %x, not %x as admitted: Steward changes nothing", ad.ObservedClusterID, ad.ClusterID)}, true
	}
	members := sortedMembers(obs.Members)
	external := externalsInEtcd(members)
	if len(external) == 0 && ad.Retired {
		return Action{}, false // complete: the cluster is Steward's
	}
	for _, m := range members {
		if m.InEtcd && IsStray(m.Name) {
			// During an adoption a member neither side knows is someone else's change to the cluster: Steward's
			// removal of strays is for clusters it owns alone.
			return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonSourceChanged,
				Message: fmt.Sprintf("etcd lists member %x, neither Steward's nor the source's as admitted: Steward changes nothing until it is gone", m.ID)}, true
		}
	}
	if spec.Adopt.Handover == HandoverAbort {
		return abortAdoption(obs, members, ad), true
	}
	if obs.AuthEnabled != nil && *obs.AuthEnabled && ad.OperatorUser == "" {
		// Before the first change to the source's membership: from here on Steward acts as its own user, and the
		// credentials Secret may be rotated or deleted without stopping the adoption.
		return Action{Kind: AddSourceOperatorUser, Reason: etcdv1alpha1.ReasonAddingOperatorUser,
			Message: "adding Steward's etcd user steward:operator (root role) to the source, through the credentials Secret's user; the source's users and roles stay"}, true
	}
	if a, ok := removeLeftovers(spec, obs, members); ok {
		return a, true
	}
	if a, ok := startOwnLearner(spec, obs, members); ok {
		return a, true
	}
	if w, waiting := waitForAdoptionMembers(obs, members); waiting {
		return w, true
	}
	r := rolesOf(own(members))
	if len(r.learners) > 0 {
		l := r.learners[0]
		if voters := len(r.voters) + len(external); spec.Adopt.Handover != HandoverRetire && len(r.voters)+1 >= spec.Replicas && (voters+1)%2 == 0 {
			// Steward's last member waits as a caught-up learner while the source stays: promoted, it would make
			// the voters even (3 + 3), and a cut between the source's network and Kubernetes would leave neither
			// side a quorum. Held back, the source's side keeps one (3 of 5). It is promoted when handover is
			// Retire, right before the first source member leaves.
			return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonAdoptionWaitingForHandover,
				Message: fmt.Sprintf("Steward's members have joined beside the source's %d; %s stays a learner until handover, so that the voters stay odd (%d); set spec.bootstrap.fromExisting.handover to Retire to retire the source's members, or Abort to back out",
					len(external), l.Name, voters)}, true
		}
		return Action{Kind: PromoteLearner, Members: []string{l.Name}, MemberID: l.ID, Reason: etcdv1alpha1.ReasonAdopting,
			Message: fmt.Sprintf("promoting learner %s to voter once it has caught up with the adopted cluster", l.Name)}, true
	}
	if len(r.voters) < spec.Replicas {
		if len(obs.NewMemberNames) == 0 {
			return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonAdopting, Message: "no new member name"}, true
		}
		name := obs.NewMemberNames[0]
		return Action{Kind: AddLearner, Members: []string{name}, PeerURL: withScheme(obs.PeerURL(name), newPeerURLScheme(spec, members)),
			Reason: etcdv1alpha1.ReasonAdopting,
			Message: fmt.Sprintf("adding member %s as a learner to the adopted cluster (%d of %d of Steward's voters; %d source members)",
				name, len(r.voters), spec.Replicas, len(external))}, true
	}
	if spec.Adopt.Handover != HandoverRetire {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonAdoptionWaitingForHandover,
			Message: fmt.Sprintf("Steward's %d members are voters beside the source's %d; set spec.bootstrap.fromExisting.handover to Retire to retire the source's members, or Abort to back out",
				len(r.voters), len(external))}, true
	}
	return retireSourceMember(obs, members, external), true
}

// admit is the step of an adoption the preflight has not admitted yet: a refusal, or the admission.
func admit(spec Spec, ad *Adoption) (Action, bool) {
	if spec.Adopt.Handover == HandoverAbort {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonAdoptionAborted,
			Message: "adoption aborted before the source was admitted: nothing was changed on it"}, true
	}
	if reason, msg := AdmitSource(spec, ad.Source); reason != "" {
		return Action{Kind: Wait, Reason: reason, Message: msg}, true
	}
	names := make([]string, 0, len(ad.Source.Members))
	for _, m := range ad.Source.Members {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return Action{Kind: AdoptSource, Reason: etcdv1alpha1.ReasonSourceAdmitted,
		Message: fmt.Sprintf("source cluster %x admitted: members %s recorded as external members", ad.Source.ClusterID, strings.Join(names, ", "))}, true
}

// startOwnLearner starts one of Steward's learners that etcd lists without a Pod, with --initial-cluster listing
// every member etcd lists, the source's under their own names. One of Steward's members that started and lost its
// Pod and volume is removed (a successor joins later), as in a cluster Steward owns.
func startOwnLearner(spec Spec, obs Observation, members []Member) (Action, bool) {
	for _, m := range members {
		if !m.InEtcd || m.HasPod || m.External {
			continue
		}
		if !m.Started && m.IsLearner {
			return Action{Kind: CreateMemberPods, Members: []string{m.Name}, InitialCluster: currentCluster(members, obs.PeerURL), State: "existing",
				Version: spec.Version, Image: spec.Image, TLS: podTLSFor(spec, members, m.PeerURL),
				Reason: etcdv1alpha1.ReasonAdopting, Message: fmt.Sprintf("starting learner %s, joining the adopted cluster", m.Name)}, true
		}
		return removeIfSafe(obs.LeaderID, members, m, etcdv1alpha1.ReasonReplacingMember,
			fmt.Sprintf("removing member %s, whose data is gone (no Pod, no volume), to replace it", m.Name)), true
	}
	return Action{}, false
}

// waitForAdoptionMembers holds every membership change of an adoption until all members are healthy: Steward's
// (waitForMembers) and the source's, which have no Pod.
func waitForAdoptionMembers(obs Observation, members []Member) (Action, bool) {
	if w, waiting := waitForMembers(obs); waiting {
		return w, true
	}
	var unhealthy []string
	for _, m := range members {
		if m.External && m.InEtcd && !m.Healthy {
			unhealthy = append(unhealthy, m.Name)
		}
	}
	if len(unhealthy) > 0 {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers,
			Message: fmt.Sprintf("waiting for source members %v to answer healthy", unhealthy)}, true
	}
	return Action{}, false
}

// retireSourceMember removes one source member from etcd: followers first, in name order, the leader last after
// leadership moved to one of Steward's voters (removeIfSafe), and only while the rest keeps a healthy quorum.
func retireSourceMember(obs Observation, members, external []Member) Action {
	victim := external[0]
	for _, m := range external {
		if m.ID != obs.LeaderID {
			victim = m
			break
		}
	}
	msg := fmt.Sprintf("removing source member %s (ID %x) from etcd; afterwards stop its process (peer URL %s): Steward never stops a process it did not start",
		victim.EtcdName, victim.ID, victim.PeerURL)
	return removeIfSafe(obs.LeaderID, members, victim, etcdv1alpha1.ReasonRetiringSourceMember, msg)
}

// abortAdoption removes Steward's own members again, learners first, then followers, its leader last after
// leadership moved back to a source member; then their Pods and volumes. Refused once a source member left: the
// source could not be given back as it was.
func abortAdoption(obs Observation, members []Member, ad *Adoption) Action {
	if ad.Retired {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonAdoptionAbortTooLate,
			Message: "a source member has already been retired: the source cannot be given back as it was; set spec.bootstrap.fromExisting.handover to Retire or Keep"}
	}
	mine := own(members)
	for _, m := range mine {
		if m.InEtcd && m.IsLearner {
			return removeIfSafe(obs.LeaderID, members, m, etcdv1alpha1.ReasonAbortingAdoption, fmt.Sprintf("removing learner %s: adoption aborted", m.Name))
		}
	}
	var voters []Member
	for _, m := range mine {
		if m.InEtcd {
			voters = append(voters, m)
		}
	}
	if len(voters) > 0 {
		victim := followerFirst(voters, obs.LeaderID)
		if victim.ID == obs.LeaderID && victim.Healthy {
			// Leadership goes back to the source, never to another of Steward's members about to leave.
			if to, ok := transferee(members, victim, func(m Member) bool { return m.External }); ok && to.External {
				return Action{Kind: MoveLeader, Members: []string{victim.Name, to.Name}, MemberID: victim.ID, TargetID: to.ID,
					Reason: etcdv1alpha1.ReasonMovingLeader, Message: fmt.Sprintf("moving leadership from %s back to source member %s before removing it", victim.Name, to.EtcdName)}
			}
		}
		return removeIfSafe(obs.LeaderID, members, victim, etcdv1alpha1.ReasonAbortingAdoption, fmt.Sprintf("removing member %s: adoption aborted", victim.Name))
	}
	if a, ok := removeLeftovers(Spec{}, obs, members); ok {
		a.Reason = etcdv1alpha1.ReasonAbortingAdoption
		return a
	}
	if ad.OperatorUser != "" {
		return Action{Kind: RemoveSourceOperatorUser, Reason: etcdv1alpha1.ReasonRemovingOperatorUser,
			Message: fmt.Sprintf("deleting etcd user %s, which Steward added to the source: adoption aborted", ad.OperatorUser)}
	}
	return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonAdoptionAborted,
		Message: "Steward's members have left and their Pods and volumes are gone: the source is as Steward found it; delete the EtcdCluster"}
}

// externalsInEtcd are the source's members etcd still lists.
func externalsInEtcd(members []Member) []Member {
	var out []Member
	for _, m := range members {
		if m.External && m.InEtcd {
			out = append(out, m)
		}
	}
	return out
}

// own are Steward's members: all but the source's.
func own(members []Member) []Member {
	var out []Member
	for _, m := range members {
		if !m.External {
			out = append(out, m)
		}
	}
	return out
}
