package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// healthySource is a three-member plaintext etcd 3.6.16 source without auth, alarms or learners.
func healthySource() Source {
	src := Source{ClusterID: 0xc1, AuthKnown: true}
	for i, name := range []string{"infra0", "infra1", "infra2"} {
		src.Members = append(src.Members, SourceMember{ID: uint64(0xa0 + i), Name: name,
			PeerURLs: []string{fmt.Sprintf("http://10.245.0.1:%d", 12380+i)}, ClientURLs: []string{fmt.Sprintf("http://10.245.0.1:%d", 12379+i)},
			Answered: true, Healthy: true, Version: "3.6.16", DBSize: 20 << 20})
	}
	return src
}

// tlsSource is healthySource serving TLS on its peer and client URLs.
func tlsSource() Source {
	src := healthySource()
	for i := range src.Members {
		m := &src.Members[i]
		m.PeerURLs = []string{withScheme(m.PeerURLs[0], "https")}
		m.ClientURLs = []string{withScheme(m.ClientURLs[0], "https")}
	}
	return src
}

// tlsAdoptSpec adopts a TLS source through an https endpoint with certificates of the source's CA (provider Secrets,
// peerAuth AnyCertificate).
func tlsAdoptSpec() Spec {
	s := adoptSpec(HandoverKeep)
	s.TLS, s.ClientCertAuth = true, true
	s.Adopt.Endpoints = []string{"https://10.245.0.1:12379"}
	return s
}

// authSource is healthySource with etcd's authentication on, read as the credentials' user admin, holding the
// root role or not.
func authSource(root bool) Source {
	src := healthySource()
	src.AuthEnabled, src.User, src.UserIsRoot = true, "admin", root
	return src
}

// authSpec is adoptSpec(Keep) with spec.auth.enabled.
func authSpec() Spec { return authSpecHandover(HandoverKeep) }

// authSpecHandover is adoptSpec(handover) with spec.auth.enabled.
func authSpecHandover(handover string) Spec {
	s := adoptSpec(handover)
	s.Auth = true
	return s
}

func adoptSpec(handover string) Spec {
	return Spec{Replicas: 3, Version: "3.6.15", Adopt: &Adopt{Handover: handover, Quota: 1 << 30}}
}

func TestAdmitSource(t *testing.T) {
	change := func(f func(*Source)) Source {
		s := healthySource()
		f(&s)
		return s
	}
	tests := map[string]struct {
		spec   Spec
		src    Source
		reason string
		says   string
	}{
		"healthy plaintext source of the spec's minor is admitted": {adoptSpec(HandoverKeep), healthySource(), "", ""},
		"unreachable": {adoptSpec(HandoverKeep), Source{ListErr: "context deadline exceeded"}, etcdv1alpha1.ReasonSourceUnreachable,
			"context deadline exceeded"},
		"empty member list": {adoptSpec(HandoverKeep), Source{AuthKnown: true}, etcdv1alpha1.ReasonSourceUnreachable, "empty"},
		"credentials come first": {adoptSpec(HandoverKeep), change(func(s *Source) { s.CredentialsProblem = "Secret src has no password" }),
			etcdv1alpha1.ReasonSourceAccessRejected, "no password"},
		"member not started": {adoptSpec(HandoverKeep), change(func(s *Source) { s.Members[1].Name = "" }),
			etcdv1alpha1.ReasonSourceMembershipChanging, "has not started"},
		"learner in the source": {adoptSpec(HandoverKeep), change(func(s *Source) { s.Members[2].IsLearner = true }),
			etcdv1alpha1.ReasonSourceMembershipChanging, "infra2 is a learner"},
		"more than nine voters": {adoptSpec(HandoverKeep), change(func(s *Source) {
			for i := 3; i < 10; i++ {
				m := s.Members[0]
				m.ID, m.Name = uint64(0xb0+i), fmt.Sprintf("extra%d", i)
				s.Members = append(s.Members, m)
			}
		}), etcdv1alpha1.ReasonSourceMembershipChanging, "10 voters"},
		"member does not answer": {adoptSpec(HandoverKeep), change(func(s *Source) {
			s.Members[1].Answered, s.Members[1].Healthy, s.Members[1].StatusErr = false, false, "connection refused"
		}), etcdv1alpha1.ReasonSourceUnhealthy, "infra1 is not healthy (connection refused)"},
		"alarm raised": {adoptSpec(HandoverKeep), change(func(s *Source) { s.Alarms = []string{"NOSPACE on a1"} }),
			etcdv1alpha1.ReasonSourceUnhealthy, "NOSPACE"},
		"another minor than the spec's": {adoptSpec(HandoverKeep), change(func(s *Source) {
			for i := range s.Members {
				s.Members[i].Version = "3.5.21"
			}
		}), etcdv1alpha1.ReasonSourceVersionUnsupported, "set spec.version to a 3.5 release"},
		"a release Steward does not support": {adoptSpec(HandoverKeep), change(func(s *Source) {
			for i := range s.Members {
				s.Members[i].Version = "3.4.30"
			}
		}), etcdv1alpha1.ReasonSourceVersionUnsupported, "adopts 3.5, 3.6 and 3.7"},
		"members on different releases": {adoptSpec(HandoverKeep), change(func(s *Source) { s.Members[2].Version = "3.6.15" }),
			etcdv1alpha1.ReasonSourceVersionUnsupported, "different releases"},
		"peer TLS": {adoptSpec(HandoverKeep), change(func(s *Source) { s.Members[0].PeerURLs = []string{"https://10.245.0.1:12380"} }),
			etcdv1alpha1.ReasonSourceTLSUnsupported, "in different schemes"},
		"a TLS source with certificates of its CA is admitted": {tlsAdoptSpec(), tlsSource(), "", ""},
		"a TLS source with spec.tls None":                      {adoptSpec(HandoverKeep), tlsSource(), etcdv1alpha1.ReasonSourceTLSUnsupported, "set spec.tls.provider Secrets"},
		"a TLS source with Steward's own CA": {func() Spec { s := tlsAdoptSpec(); s.Adopt.StewardCA = true; return s }(), tlsSource(),
			etcdv1alpha1.ReasonSourceTLSUnsupported, "whose own CA the source's members do not trust"},
		"a TLS source with peerAuth MemberIdentity": {func() Spec { s := tlsAdoptSpec(); s.PeerCheck = true; return s }(), tlsSource(),
			etcdv1alpha1.ReasonSourceTLSUnsupported, "set peerAuth AnyCertificate"},
		"a source half switched to TLS": {tlsAdoptSpec(), func() Source { s := tlsSource(); s.Members[1] = healthySource().Members[1]; return s }(),
			etcdv1alpha1.ReasonSourceTLSUnsupported, "2 of the source's 3 members serve TLS"},
		"a failed handshake comes first": {tlsAdoptSpec(), func() Source {
			s := tlsSource()
			s.ListErr, s.TLSProblem = "x509: certificate signed by unknown authority", "x509: certificate signed by unknown authority"
			return s
		}(), etcdv1alpha1.ReasonSourceTLSUnsupported, "must be issued by the CA the source's members use"},
		"a plaintext endpoint with spec.tls": {func() Spec { s := tlsAdoptSpec(); s.Adopt.Endpoints = []string{"http://10.245.0.1:12379"}; return s }(), tlsSource(),
			etcdv1alpha1.ReasonSourceTLSUnsupported, "endpoint http://10.245.0.1:12379 is plaintext"},
		"a TLS source with auth on": {func() Spec { s := tlsAdoptSpec(); s.Auth = true; return s }(), func() Source {
			s := tlsSource()
			s.AuthEnabled, s.User, s.UserIsRoot = true, "admin", true
			return s
		}(), etcdv1alpha1.ReasonSourceAuthUnsupported, "in plaintext only"},
		"two peer URLs": {adoptSpec(HandoverKeep), change(func(s *Source) { s.Members[2].PeerURLs = append(s.Members[2].PeerURLs, "http://10.0.0.9:2380") }),
			etcdv1alpha1.ReasonSourceTLSUnsupported, "advertises 2 peer URLs"},
		"spec asks for TLS for a plaintext source": {func() Spec { s := adoptSpec(HandoverKeep); s.TLS = true; return s }(), healthySource(),
			etcdv1alpha1.ReasonSourceTLSUnsupported, "provider None"},
		"auth on with spec.auth.enabled false": {adoptSpec(HandoverKeep), authSource(true), etcdv1alpha1.ReasonSourceAuthUnsupported, "set spec.auth.enabled to true"},
		"auth on with a root user is admitted": {authSpec(), authSource(true), "", ""},
		"auth on without credentials": {authSpec(), change(func(s *Source) { s.AuthEnabled = true }), etcdv1alpha1.ReasonSourceAccessRejected,
			"name a Secret with the username and password"},
		"auth on with a user lacking the root role": {authSpec(), authSource(false), etcdv1alpha1.ReasonSourceAccessRejected,
			"etcd user admin (spec.bootstrap.fromExisting.credentialsSecret) lacks the root role"},
		"a refused password comes before the auth state": {authSpec(), func() Source {
			s := authSource(true)
			s.CredentialsProblem = "the source refuses the password of etcd user admin"
			return s
		}(), etcdv1alpha1.ReasonSourceAccessRejected, "refuses the password"},
		"auth off needs no credentials, whatever spec.auth says": {authSpec(), healthySource(), "", ""},
		"an https endpoint with spec.tls None is refused before anything is read": {func() Spec {
			s := adoptSpec(HandoverKeep)
			s.Adopt.Endpoints = []string{"http://10.245.0.1:12379", "https://10.245.0.1:12381"}
			return s
		}(), Source{ListErr: "tls: first record does not look like a TLS handshake"}, etcdv1alpha1.ReasonSourceTLSUnsupported, "endpoint https://10.245.0.1:12381 serves TLS"},
		"auth state unknown": {adoptSpec(HandoverKeep), change(func(s *Source) { s.AuthKnown = false }), etcdv1alpha1.ReasonSourceAuthUnsupported, "could not tell"},
		"database larger than Steward's quota": {adoptSpec(HandoverKeep), change(func(s *Source) { s.Members[1].DBSize = 1<<30 + 1 }),
			etcdv1alpha1.ReasonSourceTooBig, "infra1's database is 1073741825 bytes"},
		"database of the quota's size fits": {adoptSpec(HandoverKeep), change(func(s *Source) { s.Members[1].DBSize = 1 << 30 }), "", ""},
		"etcd's default quota without one": {Spec{Replicas: 3, Version: "3.6.16", Adopt: &Adopt{}}, change(func(s *Source) { s.Members[0].DBSize = 3 << 30 }),
			etcdv1alpha1.ReasonSourceTooBig, "2147483648"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			reason, msg := AdmitSource(tc.spec, tc.src)
			if reason != tc.reason || !strings.Contains(msg, tc.says) {
				t.Errorf("got %q %q, want %q containing %q", reason, msg, tc.reason, tc.says)
			}
			if tc.reason != "" && msg == "" {
				t.Error("a refusal without a message")
			}
		})
	}
}

// ext is source member name (ID id) as an admitted adoption observes it.
func ext(name string, id uint64) Member {
	return Member{Name: ExternalMemberName(name, id), EtcdName: name, External: true, InEtcd: true, Started: true, ID: id, Healthy: true,
		PeerURL: fmt.Sprintf("http://10.245.0.1:%d", 12380+id-0xa0)}
}

// joined is Steward's member name, a voter of the adopted cluster.
func joined(name string, id uint64) Member {
	return Member{Name: name, HasPod: true, HasPVC: true, PodReady: true, PodVersion: "3.6.15", InitialState: "existing",
		InEtcd: true, Started: true, Healthy: true, ID: id, PeerURL: peerURL(name)}
}

func admitted(leader uint64, members ...Member) Observation {
	return Observation{EtcdReachable: true, Bootstrapped: true, LeaderID: leader, Members: members, NewMemberNames: []string{"c-new"},
		PeerURL: peerURL, Adoption: &Adoption{Admitted: true, ClusterID: 0xc1, ObservedClusterID: 0xc1}}
}

func TestNextAdoption(t *testing.T) {
	x0, x1, x2 := ext("infra0", 0xa0), ext("infra1", 0xa1), ext("infra2", 0xa2)
	s1, s2, s3 := joined("c-s1", 1), joined("c-s2", 2), joined("c-s3", 3)
	learner := Member{Name: "c-s3", InEtcd: true, IsLearner: true, ID: 3, PeerURL: peerURL("c-s3")}
	runningLearner := learner
	runningLearner.HasPod, runningLearner.HasPVC, runningLearner.Started, runningLearner.Healthy = true, true, true, true
	unhealthy := func(m Member) Member { m.Healthy = false; return m }
	gone := func(m Member) Member { m.InEtcd = false; return m }
	retired := func(o Observation) Observation { o.Adoption.Retired = true; return o }
	preflight := func(src Source) Observation {
		return Observation{EtcdReachable: true, NewMemberNames: []string{"c-new"}, PeerURL: peerURL, Adoption: &Adoption{Source: src}}
	}
	tests := map[string]struct {
		spec   Spec
		obs    Observation
		want   ActionKind
		reason string
		member string
		id     uint64
	}{
		"a refused source changes nothing":          {adoptSpec(HandoverKeep), preflight(Source{ListErr: "refused"}), Wait, etcdv1alpha1.ReasonSourceUnreachable, "", 0},
		"an admitted source is recorded first":      {adoptSpec(HandoverKeep), preflight(healthySource()), AdoptSource, etcdv1alpha1.ReasonSourceAdmitted, "", 0},
		"an abort before admission changes nothing": {adoptSpec(HandoverAbort), preflight(healthySource()), Wait, etcdv1alpha1.ReasonAdoptionAborted, "", 0},
		"the first learner joins":                   {adoptSpec(HandoverKeep), admitted(0xa0, x0, x1, x2), AddLearner, etcdv1alpha1.ReasonAdopting, "c-new", 0},
		"a learner without a Pod is started": {adoptSpec(HandoverKeep), admitted(0xa0, x0, x1, x2, s1, s2, learner), CreateMemberPods,
			etcdv1alpha1.ReasonAdopting, "c-s3", 0},
		"a caught-up learner is promoted": {adoptSpec(HandoverKeep), admitted(0xa0, x0, x1, x2, s1, runningLearner), PromoteLearner,
			etcdv1alpha1.ReasonAdopting, "c-s3", 3},
		"Keep holds the last learner back while its promotion would make the voters even": {adoptSpec(HandoverKeep),
			admitted(0xa0, x0, x1, x2, s1, s2, runningLearner), Wait, etcdv1alpha1.ReasonAdoptionWaitingForHandover, "", 0},
		"Keep promotes the last learner when the voters stay odd": {adoptSpec(HandoverKeep),
			admitted(0xa0, x0, x1, s1, s2, runningLearner), PromoteLearner, etcdv1alpha1.ReasonAdopting, "c-s3", 3},
		"Retire promotes the held learner first": {adoptSpec(HandoverRetire), admitted(0xa0, x0, x1, x2, s1, s2, runningLearner), PromoteLearner,
			etcdv1alpha1.ReasonAdopting, "c-s3", 3},
		"nothing joins while a source member is unhealthy": {adoptSpec(HandoverKeep), admitted(0xa0, x0, unhealthy(x1), x2), Wait,
			etcdv1alpha1.ReasonWaitingForMembers, "", 0},
		"a source member without a Pod is never removed or replaced": {adoptSpec(HandoverKeep), admitted(0xa0, x0, x1, x2, s1), AddLearner,
			etcdv1alpha1.ReasonAdopting, "c-new", 0},
		"Keep waits for the handover once Steward's members are voters": {adoptSpec(HandoverKeep), admitted(0xa0, x0, x1, x2, s1, s2, s3), Wait,
			etcdv1alpha1.ReasonAdoptionWaitingForHandover, "", 0},
		"Retire removes a source follower first": {adoptSpec(HandoverRetire), admitted(0xa0, x0, x1, x2, s1, s2, s3), RemoveMember,
			etcdv1alpha1.ReasonRetiringSourceMember, "source:infra1", 0xa1},
		"Retire waits for Steward's members first": {adoptSpec(HandoverRetire), admitted(0xa0, x0, x1, x2, s1, s2), AddLearner,
			etcdv1alpha1.ReasonAdopting, "c-new", 0},
		"the source's leader is retired last, after leadership moved": {adoptSpec(HandoverRetire), retired(admitted(0xa0, x0, gone(x1), gone(x2), s1, s2, s3)),
			MoveLeader, etcdv1alpha1.ReasonMovingLeader, "source:infra0", 0xa0},
		"then removed": {adoptSpec(HandoverRetire), retired(admitted(2, x0, gone(x1), gone(x2), s1, s2, s3)), RemoveMember,
			etcdv1alpha1.ReasonRetiringSourceMember, "source:infra0", 0xa0},
		"no retirement while a member is unhealthy": {adoptSpec(HandoverRetire), admitted(0xa0, x0, x1, x2, unhealthy(s1), s2, s3), Wait,
			etcdv1alpha1.ReasonWaitingForMembers, "", 0},
		"complete: the cluster is Steward's": {adoptSpec(HandoverRetire), retired(admitted(2, gone(x0), gone(x1), gone(x2), s1, s2, s3)), None,
			etcdv1alpha1.ReasonReconciled, "", 0},
		"an unknown member stops the adoption": {adoptSpec(HandoverKeep), admitted(0xa0, x0, x1, x2, Member{Name: StrayMemberName(0x77), ID: 0x77, InEtcd: true}), Wait,
			etcdv1alpha1.ReasonSourceChanged, "", 0},
		"another cluster ID stops the adoption": {adoptSpec(HandoverKeep), func() Observation {
			o := admitted(0xa0, x0, x1, x2)
			o.Adoption.ObservedClusterID = 0xc2
			return o
		}(), Wait, etcdv1alpha1.ReasonSourceChanged, "", 0},
		"no member list: no change": {adoptSpec(HandoverKeep), func() Observation {
			o := admitted(0xa0, x0, x1, x2, s1)
			o.EtcdReachable = false
			return o
		}(), Wait, etcdv1alpha1.ReasonWaitingForMembers, "", 0},
		"Abort removes Steward's learner first": {adoptSpec(HandoverAbort), admitted(0xa0, x0, x1, x2, s1, s2, runningLearner), RemoveMember,
			etcdv1alpha1.ReasonAbortingAdoption, "c-s3", 3},
		"Abort moves leadership back to the source": {adoptSpec(HandoverAbort), admitted(1, x0, x1, x2, s1), MoveLeader,
			etcdv1alpha1.ReasonMovingLeader, "c-s1", 1},
		"Abort removes followers before Steward's leader": {adoptSpec(HandoverAbort), admitted(1, x0, x1, x2, s1, s2), RemoveMember,
			etcdv1alpha1.ReasonAbortingAdoption, "c-s2", 2},
		"Abort deletes the Pods of removed members": {adoptSpec(HandoverAbort), admitted(0xa0, x0, x1, x2, gone(s1)), DeleteMemberPod,
			etcdv1alpha1.ReasonAbortingAdoption, "c-s1", 0},
		"Abort done": {adoptSpec(HandoverAbort), admitted(0xa0, x0, x1, x2), Wait, etcdv1alpha1.ReasonAdoptionAborted, "", 0},
		"a source with auth on gets Steward's user before anything joins": {authSpec(), authOn(admitted(0xa0, x0, x1, x2), ""), AddSourceOperatorUser,
			etcdv1alpha1.ReasonAddingOperatorUser, "", 0},
		"then Steward's members join as its own user": {authSpec(), authOn(admitted(0xa0, x0, x1, x2), "steward:operator"), AddLearner,
			etcdv1alpha1.ReasonAdopting, "c-new", 0},
		"the credentials' password refused after admission: no change": {authSpec(), func() Observation {
			o := authOn(admitted(0xa0, x0, x1, x2), "")
			o.Adoption.CredentialsInUse, o.PasswordRejected = true, true
			return o
		}(), Wait, etcdv1alpha1.ReasonSourceAccessRejected, "", 0},
		"a refused password before admission is the preflight's": {authSpec(), func() Observation {
			src := authSource(true)
			src.CredentialsProblem = "the source refuses the password of etcd user admin"
			o := preflight(src)
			o.Adoption.CredentialsInUse, o.PasswordRejected = true, true
			return o
		}(), Wait, etcdv1alpha1.ReasonSourceAccessRejected, "", 0},
		"Steward's own password refused: the operator's wait": {authSpec(), func() Observation {
			o := authOn(admitted(0xa0, x0, x1, x2, s1), "steward:operator")
			o.PasswordRejected = true
			return o
		}(), Wait, etcdv1alpha1.ReasonOperatorPasswordRejected, "", 0},
		"Abort never adds Steward's user": {authSpecHandover(HandoverAbort),
			authOn(admitted(0xa0, x0, x1, x2), ""), Wait, etcdv1alpha1.ReasonAdoptionAborted, "", 0},
		"Abort deletes Steward's user once its members have left": {authSpecHandover(HandoverAbort),
			authOn(admitted(0xa0, x0, x1, x2), "steward:operator"), RemoveSourceOperatorUser, etcdv1alpha1.ReasonRemovingOperatorUser, "", 0},
		"and not before": {authSpecHandover(HandoverAbort),
			authOn(admitted(0xa0, x0, x1, x2, s1), "steward:operator"), RemoveMember, etcdv1alpha1.ReasonAbortingAdoption, "c-s1", 1},
		"Abort after a retirement is refused": {adoptSpec(HandoverAbort), retired(admitted(0xa0, x0, x1, gone(x2), s1, s2, s3)), Wait,
			etcdv1alpha1.ReasonAdoptionAbortTooLate, "", 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := Next(tc.spec, tc.obs)
			if a.Kind != tc.want || a.Reason != tc.reason {
				t.Fatalf("got %s/%s (%s), want %s/%s", a.Kind, a.Reason, a.Message, tc.want, tc.reason)
			}
			if tc.member != "" && (len(a.Members) == 0 || a.Members[0] != tc.member) {
				t.Errorf("members %v, want %s first", a.Members, tc.member)
			}
			if a.MemberID != tc.id {
				t.Errorf("member ID %x, want %x", a.MemberID, tc.id)
			}
		})
	}
}

// authOn is o with etcd's authentication on and operatorUser as the user status records Steward added.
func authOn(o Observation, operatorUser string) Observation {
	on := true
	o.AuthEnabled, o.Adoption.OperatorUser = &on, operatorUser
	return o
}

func TestAdoptionJoinCarriesTheSourceNames(t *testing.T) {
	x0, x1 := ext("infra0", 0xa0), ext("infra1", 0xa1)
	learner := Member{Name: "c-s1", InEtcd: true, IsLearner: true, ID: 1, PeerURL: peerURL("c-s1")}
	a := Next(adoptSpec(HandoverKeep), admitted(0xa0, x0, x1, learner))
	want := map[string]string{"infra0": x0.PeerURL, "infra1": x1.PeerURL, "c-s1": peerURL("c-s1")}
	if a.Kind != CreateMemberPods || a.State != "existing" || !sameCluster(a.InitialCluster, want) {
		t.Fatalf("got %s %s %v, want CreateMemberPods existing %v", a.Kind, a.State, a.InitialCluster, want)
	}
	if a.Version != "3.6.15" {
		t.Errorf("joins at %q, want spec.version", a.Version)
	}
}

// adoptionWorld is a replay of an adoption: the planner's steps applied to a model of etcd and the Pods, each pass
// checked against the adoption's invariants.
type adoptionWorld struct {
	t       *testing.T
	members []Member
	leader  uint64
	retired bool
	nextID  uint64
	names   int
	steps   []string
}

func newAdoptionWorld(t *testing.T) *adoptionWorld {
	return &adoptionWorld{t: t, leader: 0xa0, nextID: 1,
		members: []Member{ext("infra0", 0xa0), ext("infra1", 0xa1), ext("infra2", 0xa2)}}
}

func (w *adoptionWorld) obs() Observation {
	o := admitted(w.leader, w.members...)
	o.NewMemberNames = []string{fmt.Sprintf("c-s%d", w.names+1)}
	o.Adoption.Retired = w.retired
	o.ClusterVersion = "3.6.0"
	return o
}

// run takes passes until the planner waits or is done, at most limit.
func (w *adoptionWorld) run(spec Spec, limit int) Action {
	for range limit {
		obs := w.obs()
		a := Next(spec, obs)
		if a.Kind == Wait || a.Kind == None {
			return a
		}
		w.apply(spec, obs, a)
	}
	w.t.Fatalf("no end after %d passes: %v", limit, w.steps)
	return Action{}
}

func (w *adoptionWorld) index(name string) int {
	for i, m := range w.members {
		if m.Name == name {
			return i
		}
	}
	w.t.Fatalf("no member %s", name)
	return -1
}

func (w *adoptionWorld) apply(spec Spec, obs Observation, a Action) {
	w.steps = append(w.steps, string(a.Kind)+" "+strings.Join(a.Members, ","))
	switch a.Kind {
	case AddLearner:
		if slices.ContainsFunc(w.members, func(m Member) bool { return m.InEtcd && m.IsLearner }) {
			w.t.Fatalf("a second learner: %v", w.steps)
		}
		w.names++
		w.members = append(w.members, Member{Name: a.Members[0], InEtcd: true, IsLearner: true, ID: w.nextID, PeerURL: a.PeerURL})
		w.nextID++
	case CreateMemberPods:
		m := &w.members[w.index(a.Members[0])]
		for _, x := range w.members {
			if x.External && x.InEtcd && a.InitialCluster[x.EtcdName] != x.PeerURL {
				w.t.Fatalf("learner %s would start without source member %s in its --initial-cluster %v", m.Name, x.EtcdName, a.InitialCluster)
			}
		}
		m.HasPod, m.HasPVC, m.PodReady, m.Started, m.Healthy = true, true, true, true, true
		m.PodVersion, m.RunningVersion = spec.Version, spec.Version
	case PromoteLearner:
		w.members[w.index(a.Members[0])].IsLearner = false
	case MoveLeader:
		w.leader = a.TargetID
	case RemoveMember:
		i := w.index(a.Members[0])
		m := w.members[i]
		if m.External && (spec.Adopt.Handover != HandoverRetire) {
			w.t.Fatalf("source member %s removed with handover %s", m.Name, spec.Adopt.Handover)
		}
		if !m.External && spec.Adopt.Handover != HandoverAbort {
			w.t.Fatalf("Steward's member %s removed during an adoption without abort", m.Name)
		}
		if m.ID == w.leader {
			w.t.Fatalf("leader %s removed while it leads", m.Name)
		}
		voters, healthy := votersAfterRemoval(w.members, m.ID)
		if !m.IsLearner {
			voters--
		}
		if healthy < Quorum(voters) {
			w.t.Fatalf("removing %s leaves %d healthy of %d voters", m.Name, healthy, voters)
		}
		w.members[i].InEtcd = false
		if m.External {
			// Etcd no longer lists it and it has no Pod: nothing observes it any more.
			w.retired = true
			w.members = slices.Delete(w.members, i, i+1)
		}
	case DeleteMemberPod:
		w.members[w.index(a.Members[0])].HasPod = false
	case DeleteMemberPVC:
		w.members = slices.Delete(w.members, w.index(a.Members[0]), w.index(a.Members[0])+1)
	default:
		w.t.Fatalf("unexpected step %s (%s) in %v", a.Kind, a.Message, w.steps)
	}
}

func TestAdoptionReplay(t *testing.T) {
	w := newAdoptionWorld(t)
	a := w.run(adoptSpec(HandoverKeep), 30)
	if a.Reason != etcdv1alpha1.ReasonAdoptionWaitingForHandover {
		t.Fatalf("Keep ended with %s: %s (%v)", a.Reason, a.Message, w.steps)
	}
	// Three times add and start, promote the first two: the third stays a learner, so that the voters stay odd.
	if len(w.steps) != 8 || !strings.HasPrefix(w.steps[7], "CreateMemberPods") {
		t.Errorf("joined in %d steps, want 8 ending with the last learner started: %v", len(w.steps), w.steps)
	}
	a = w.run(adoptSpec(HandoverRetire), 30)
	if a.Kind != None {
		t.Fatalf("Retire ended with %s/%s: %s (%v)", a.Kind, a.Reason, a.Message, w.steps)
	}
	var retiredOrder []string
	for _, s := range w.steps {
		if strings.HasPrefix(s, "RemoveMember source:") {
			retiredOrder = append(retiredOrder, strings.TrimPrefix(s, "RemoveMember "))
		}
	}
	if want := []string{"source:infra1", "source:infra2", "source:infra0"}; !slices.Equal(retiredOrder, want) {
		t.Errorf("retired %v, want followers first, the leader last: %v", retiredOrder, want)
	}
	for _, m := range w.members {
		if m.InEtcd && m.External {
			t.Errorf("source member %s still in etcd", m.Name)
		}
	}
}

func TestAdoptionAbortReplay(t *testing.T) {
	w := newAdoptionWorld(t)
	w.run(adoptSpec(HandoverKeep), 30)
	w.leader = 2 // one of Steward's members leads by now
	a := w.run(adoptSpec(HandoverAbort), 30)
	if a.Reason != etcdv1alpha1.ReasonAdoptionAborted {
		t.Fatalf("Abort ended with %s: %s (%v)", a.Reason, a.Message, w.steps)
	}
	if len(w.members) != 3 {
		t.Fatalf("left %v, want the three source members alone", w.members)
	}
	for _, m := range w.members {
		if !m.External || !m.InEtcd {
			t.Errorf("member %+v after the abort", m)
		}
	}
	if !slices.Contains(w.steps, "MoveLeader c-s2,source:infra0") {
		t.Errorf("leadership never moved back to the source: %v", w.steps)
	}
}

// TestAdoptionJoinsATLSSourceOverTLS: Steward's learners join a TLS source with https peer URLs and start serving
// TLS, the source's https peer URLs in their --initial-cluster.
func TestAdoptionJoinsATLSSourceOverTLS(t *testing.T) {
	x0, x1 := ext("infra0", 0xa0), ext("infra1", 0xa1)
	x0.PeerURL, x1.PeerURL = withScheme(x0.PeerURL, "https"), withScheme(x1.PeerURL, "https")
	a := Next(tlsAdoptSpec(), admitted(0xa0, x0, x1))
	if a.Kind != AddLearner || !PeerTLS(a.PeerURL) {
		t.Fatalf("got %s with peer URL %q, want an https learner", a.Kind, a.PeerURL)
	}
	learner := Member{Name: "c-s1", InEtcd: true, IsLearner: true, ID: 1, PeerURL: a.PeerURL}
	a = Next(tlsAdoptSpec(), admitted(0xa0, x0, x1, learner))
	if a.Kind != CreateMemberPods || a.TLS != TLSOn || a.InitialCluster["infra0"] != x0.PeerURL {
		t.Fatalf("got %s in TLS mode %q with %v, want the learner's Pod serving TLS", a.Kind, a.TLS, a.InitialCluster)
	}
}
