package plan

import (
	"fmt"
	"strings"
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// tlsCluster simulates members switching between plaintext and TLS, with the rule of who can talk to whom that
// etcd's peer transport has: a member serves its peer URL's scheme only if its Pod listens with it (https only
// in TLS mode), and dials an https URL only with certificates (Bridge or TLS mode). Two members talk when each
// can reach the other.
type tlsCluster struct {
	members []Member
	// starting are Pods just created: they run from the next pass on.
	starting map[string]bool
	leader   uint64
}

func newTLSCluster(n int, mode, scheme string) *tlsCluster {
	c := &tlsCluster{starting: map[string]bool{}, leader: 1}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("c-%c", 'a'+i)
		m := at(name, uint64(i+1), "3.6.16")
		m.PodTLS, m.PeerURL, m.PodReady = mode, scheme+"://"+name+".c-peer:2380", true
		c.members = append(c.members, m)
	}
	return c
}

func listensAs(m Member) string {
	if m.PodTLS == TLSOn {
		return "https"
	}
	return "http"
}

// reaches reports whether a can open a peer connection to b.
func reaches(a, b Member) bool {
	if !b.HasPod || listensAs(b)+"://" != b.PeerURL[:strings.Index(b.PeerURL, "://")+3] {
		return false
	}
	return !PeerTLS(b.PeerURL) || a.PodTLS != TLSPlaintext
}

// connected returns the members that run and talk both ways with the leader (or, without a running leader, with
// the first running member), and whether they are a quorum.
func (c *tlsCluster) connected() (map[string]bool, bool) {
	var anchor *Member
	for i := range c.members {
		m := &c.members[i]
		if m.HasPod && !c.starting[m.Name] && (anchor == nil || m.ID == c.leader) {
			anchor = m
		}
	}
	in := map[string]bool{}
	if anchor == nil {
		return in, false
	}
	for _, m := range c.members {
		if m.HasPod && !c.starting[m.Name] && (m.Name == anchor.Name || reaches(*anchor, m) && reaches(m, *anchor)) {
			in[m.Name] = true
		}
	}
	return in, len(in) >= Quorum(len(c.members))
}

func (c *tlsCluster) observe() Observation {
	in, quorum := c.connected()
	for i := range c.members {
		m := &c.members[i]
		delete(c.starting, m.Name)
		m.Healthy, m.PodReady = quorum && in[m.Name], quorum && in[m.Name]
	}
	obs := formed(append([]Member(nil), c.members...)...)
	obs.LeaderID = c.leader
	obs.EtcdReachable = quorum
	return obs
}

func (c *tlsCluster) apply(t *testing.T, a Action) {
	find := func(name string) *Member {
		for i := range c.members {
			if c.members[i].Name == name {
				return &c.members[i]
			}
		}
		t.Fatalf("%s on unknown member %s", a.Kind, name)
		return nil
	}
	switch a.Kind {
	case RestartMember:
		m := find(a.Members[0])
		m.HasPod, m.PodTLS = false, ""
	case CreateMemberPods:
		m := find(a.Members[0])
		m.HasPod, m.PodTLS = true, a.TLS
		c.starting[m.Name] = true
	case RecreateMemberPods:
		for _, p := range a.Pods {
			m := find(p.Name)
			m.HasPod, m.PodTLS = true, p.TLS
			c.starting[m.Name] = true
		}
	case UpdatePeerURL:
		find(a.Members[0]).PeerURL = a.PeerURL
	case MoveLeader:
		c.leader = a.TargetID
	case Wait, None:
	default:
		t.Fatalf("unexpected step %s (%s)", a.Kind, a.Message)
	}
}

// TestTLSSwitchKeepsQuorum runs whole switches, in both directions, on 3 and 5 members, and checks after every
// step that the members that talk to each other are a quorum (no step cuts the cluster in two) and that it ends
// with every member in the spec's mode and scheme.
func TestTLSSwitchKeepsQuorum(t *testing.T) {
	tests := []struct {
		members           int
		fromMode, fromURL string
		spec              bool
		wantMode, wantURL string
		wantRestarts      int
	}{
		{3, TLSPlaintext, "http", true, TLSOn, "https", 6},
		{5, TLSPlaintext, "http", true, TLSOn, "https", 10},
		// The last member to leave https has no TLS peer left: it goes straight to Plaintext.
		{3, TLSOn, "https", false, TLSPlaintext, "http", 5},
		{5, TLSOn, "https", false, TLSPlaintext, "http", 9},
		// Half-way states a restarted operator may find: it carries on from what it sees.
		{3, TLSBridge, "http", true, TLSOn, "https", 3},
		{3, TLSBridge, "http", false, TLSPlaintext, "http", 3},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%d members %s/%s to TLS=%v", tt.members, tt.fromMode, tt.fromURL, tt.spec)
		t.Run(name, func(t *testing.T) {
			c := newTLSCluster(tt.members, tt.fromMode, tt.fromURL)
			spec := tlsSpec(tt.members, tt.spec)
			restarts, done := 0, false
			var steps []string
			for pass := 0; pass < 200 && !done; pass++ {
				obs := c.observe()
				if _, quorum := c.connected(); !quorum {
					t.Fatalf("pass %d: quorum lost after %v", pass, steps)
				}
				a := Next(spec, obs)
				switch a.Kind {
				case None:
					done = true
				case RestartMember:
					restarts++
				}
				if a.Kind != Wait && a.Kind != None {
					steps = append(steps, fmt.Sprintf("%s %s %s%s", a.Kind, a.Members[0], a.TLS, a.PeerURL))
				}
				c.apply(t, a)
			}
			if !done {
				t.Fatalf("no end after 200 passes: %v", steps)
			}
			for _, m := range c.members {
				if m.PodTLS != tt.wantMode || !strings.HasPrefix(m.PeerURL, tt.wantURL+"://") {
					t.Errorf("member %s ended as %s with %s", m.Name, m.PodTLS, m.PeerURL)
				}
			}
			if restarts != tt.wantRestarts {
				t.Errorf("%d restarts, want %d: %v", restarts, tt.wantRestarts, steps)
			}
			// The leader restarts last in each round, after handing leadership on.
			for i, s := range steps {
				if strings.HasPrefix(s, "RestartMember c-a") && (i == 0 || !strings.HasPrefix(steps[i-1], "MoveLeader c-a") && !strings.HasPrefix(steps[i-1], "UpdatePeerURL c-a")) {
					t.Errorf("leader c-a restarted without handing leadership on first: %v", steps)
				}
			}
		})
	}
}

func tlsSpec(replicas int, tls bool) Spec {
	s := specAt("3.6.16")
	s.Replicas, s.TLS = replicas, tls
	return s
}

// tlsMembers builds healthy 3.6.16 voters (voter) and sets how they run TLS.
func tlsMembers() (voter func(string, uint64) Member, plain, bridge, secure func(Member) Member) {
	as := func(mode, scheme string) func(Member) Member {
		return func(m Member) Member { m.PodTLS, m.PeerURL = mode, scheme+"://"+m.Name+".c-peer:2380"; return m }
	}
	return func(name string, id uint64) Member { return at(name, id, "3.6.16") }, as(TLSPlaintext, "http"), as(TLSBridge, "http"), as(TLSOn, "https")
}

func TestTLSSteps(t *testing.T) {
	voter, plain, bridge, secure := tlsMembers()
	tests := map[string]struct {
		tls     bool
		members []Member
		want    ActionKind
		reason  string
		member  string
		mode    string
		url     string
	}{
		"plaintext cluster, plaintext spec: nothing": {
			members: []Member{plain(voter("c-a", 1)), plain(voter("c-b", 2)), plain(voter("c-c", 3))}, want: None},
		"TLS cluster, TLS spec: nothing": {tls: true,
			members: []Member{secure(voter("c-a", 1)), secure(voter("c-b", 2)), secure(voter("c-c", 3))}, want: None},
		"enabling: a follower first becomes Bridge": {tls: true,
			members: []Member{plain(voter("c-a", 1)), plain(voter("c-b", 2)), plain(voter("c-c", 3))},
			want:    RestartMember, reason: etcdv1alpha1.ReasonEnablingTLS, member: "c-b", mode: TLSBridge},
		"enabling: no https peer URL while a member is plaintext": {tls: true,
			members: []Member{bridge(voter("c-a", 1)), bridge(voter("c-b", 2)), func() Member {
				m := plain(voter("c-c", 3))
				m.Healthy = false
				return m
			}()},
			want: RestartMember, reason: etcdv1alpha1.ReasonEnablingTLS, member: "c-c", mode: TLSBridge},
		"enabling: every member Bridge, a follower's peer URL goes https": {tls: true,
			members: []Member{bridge(voter("c-a", 1)), bridge(voter("c-b", 2)), bridge(voter("c-c", 3))},
			want:    UpdatePeerURL, reason: etcdv1alpha1.ReasonEnablingTLS, member: "c-b", url: "https://c-b.c-peer:2380"},
		"enabling: a member cut off by its new peer URL restarts although unhealthy": {tls: true,
			members: []Member{bridge(voter("c-a", 1)), func() Member {
				m := bridge(voter("c-b", 2))
				m.PeerURL, m.Healthy = "https://c-b.c-peer:2380", false
				return m
			}(), bridge(voter("c-c", 3))},
			want: RestartMember, reason: etcdv1alpha1.ReasonEnablingTLS, member: "c-b", mode: TLSOn},
		"enabling: another member down, the restart waits": {tls: true,
			members: []Member{plain(voter("c-a", 1)), plain(voter("c-b", 2)), func() Member {
				m := plain(voter("c-c", 3))
				m.PodReady = false
				return m
			}()},
			want: Wait, reason: etcdv1alpha1.ReasonEnablingTLS},
		"enabling: the leader's peer URL changes after it hands leadership on": {tls: true,
			members: []Member{bridge(voter("c-a", 1)), secure(voter("c-b", 2)), secure(voter("c-c", 3))},
			want:    MoveLeader, reason: etcdv1alpha1.ReasonMovingLeader, member: "c-a"},
		"disabling: a follower's peer URL goes http first": {
			members: []Member{secure(voter("c-a", 1)), secure(voter("c-b", 2)), secure(voter("c-c", 3))},
			want:    UpdatePeerURL, reason: etcdv1alpha1.ReasonDisablingTLS, member: "c-b", url: "http://c-b.c-peer:2380"},
		"disabling: a member with an http peer URL becomes Bridge while others serve TLS": {
			members: []Member{secure(voter("c-a", 1)), func() Member {
				m := secure(voter("c-b", 2))
				m.PeerURL = "http://c-b.c-peer:2380"
				return m
			}(), secure(voter("c-c", 3))},
			want: RestartMember, reason: etcdv1alpha1.ReasonDisablingTLS, member: "c-b", mode: TLSBridge},
		"disabling: every peer URL http, Bridge members drop their certificates": {
			members: []Member{bridge(voter("c-a", 1)), bridge(voter("c-b", 2)), bridge(voter("c-c", 3))},
			want:    RestartMember, reason: etcdv1alpha1.ReasonDisablingTLS, member: "c-b", mode: TLSPlaintext},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			obs := formed(tt.members...)
			got := Next(tlsSpec(3, tt.tls), obs)
			if got.Kind != tt.want || got.Reason != tt.reason && tt.reason != "" || tt.member != "" && got.Members[0] != tt.member ||
				got.TLS != tt.mode || got.PeerURL != tt.url {
				t.Fatalf("Next = %s/%s %v tls=%q url=%q (%s), want %s/%s %s tls=%q url=%q", got.Kind, got.Reason, got.Members, got.TLS, got.PeerURL,
					got.Message, tt.want, tt.reason, tt.member, tt.mode, tt.url)
			}
		})
	}
}

// TestJoiningDuringTLSSwitch: a member added while the switch is under way gets a peer URL every member can
// reach, and a Pod that can reach every member.
func TestJoiningDuringTLSSwitch(t *testing.T) {
	voter, plain, bridge, secure := tlsMembers()
	tests := map[string]struct {
		tls      bool
		members  []Member
		wantURL  string
		wantMode string
	}{
		"enabling, a plaintext member left: http, Bridge": {true, []Member{plain(voter("c-a", 1)), bridge(voter("c-b", 2))}, "http://c-new.c-peer:2380", TLSBridge},
		"enabling, none plaintext: https, TLS":            {true, []Member{bridge(voter("c-a", 1)), secure(voter("c-b", 2))}, "https://c-new.c-peer:2380", TLSOn},
		"disabling, a TLS member left: http, Bridge":      {false, []Member{secure(voter("c-a", 1)), bridge(voter("c-b", 2))}, "http://c-new.c-peer:2380", TLSBridge},
		"plaintext: http, Plaintext":                      {false, []Member{plain(voter("c-a", 1)), plain(voter("c-b", 2))}, "http://c-new.c-peer:2380", TLSPlaintext},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			spec := tlsSpec(3, tt.tls)
			if tt.members[0].PodTLS == TLSPlaintext && tt.tls {
				// A restart to Bridge comes first; the scheme and mode the new member would get are still these.
				if got, mode := newPeerURLScheme(spec, tt.members), podTLSFor(spec, tt.members, tt.wantURL); got+"://c-new.c-peer:2380" != tt.wantURL || mode != tt.wantMode {
					t.Fatalf("scheme %s, mode %s", got, mode)
				}
				return
			}
			a := Next(spec, formed(tt.members...))
			if a.Kind != AddLearner || a.PeerURL != tt.wantURL {
				t.Fatalf("Next = %s %q (%s), want AddLearner %s", a.Kind, a.PeerURL, a.Message, tt.wantURL)
			}
			learner := Member{Name: "c-new", InEtcd: true, IsLearner: true, ID: 9, PeerURL: a.PeerURL}
			b := Next(spec, formed(append(tt.members, learner)...))
			if b.Kind != CreateMemberPods || b.TLS != tt.wantMode || b.InitialCluster["c-a"] != tt.members[0].PeerURL {
				t.Fatalf("Next = %s tls=%q initial=%v (%s), want CreateMemberPods %s", b.Kind, b.TLS, b.InitialCluster, b.Message, tt.wantMode)
			}
		})
	}
}

// TestClientAuthRestart: members whose client port requires client certificates against spec.tls.clientAuth (or
// asks for none against it) restart one at a time, followers first, the leader after handing leadership over;
// nothing while a member is unhealthy, and nothing for members of a cluster switching to plaintext.
func TestClientAuthRestart(t *testing.T) {
	member := func(name string, id uint64, certs bool) Member {
		m := at(name, id, "3.6.16")
		m.PodTLS, m.PodClientCertAuth, m.PeerURL = TLSOn, certs, "https://"+name+".c-peer:2380"
		return m
	}
	spec := func(tls, certs bool) Spec {
		s := specAt("3.6.16")
		s.TLS, s.ClientCertAuth = tls, certs
		return s
	}
	tests := map[string]struct {
		spec        Spec
		members     []Member
		wantKind    ActionKind
		wantMembers []string
	}{
		"to Password: a follower first": {spec(true, false),
			[]Member{member("c-a", 1, true), member("c-b", 2, true), member("c-c", 3, true)}, RestartMember, []string{"c-b"}},
		"to Password: the leader last, after handing over": {spec(true, false),
			[]Member{member("c-a", 1, true), member("c-b", 2, false), member("c-c", 3, false)}, MoveLeader, []string{"c-a", "c-b"}},
		"back to Certificate": {spec(true, true),
			[]Member{member("c-a", 1, true), member("c-b", 2, false), member("c-c", 3, true)}, RestartMember, []string{"c-b"}},
		"as specified: nothing": {spec(true, false),
			[]Member{member("c-a", 1, false), member("c-b", 2, false), member("c-c", 3, false)}, None, nil},
		"a member unhealthy: wait for it first": {spec(true, false),
			with([]Member{member("c-a", 1, true), member("c-b", 2, true), member("c-c", 3, true)}, "c-c", func(m *Member) { m.Healthy = false }), Wait, nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			a := Next(tt.spec, clusterAt("3.6.0", tt.members...))
			if a.Kind != tt.wantKind || (tt.wantMembers != nil && strings.Join(a.Members, ",") != strings.Join(tt.wantMembers, ",")) {
				t.Fatalf("Next() = %s %v (%s: %s), want %s %v", a.Kind, a.Members, a.Reason, a.Message, tt.wantKind, tt.wantMembers)
			}
			if a.Kind == RestartMember && (a.Reason != etcdv1alpha1.ReasonRestartingForClientAuth || a.TLS != TLSOn) {
				t.Fatalf("restart %s in mode %s, want reason %s in mode TLS", a.Reason, a.TLS, etcdv1alpha1.ReasonRestartingForClientAuth)
			}
		})
	}
	// A cluster switching to plaintext is left to the TLS switch, which restarts members into the spec's flags.
	if _, ok := clientAuthRestart(spec(false, false), clusterAt("3.6.0"), []Member{member("c-a", 1, true)}); ok {
		t.Fatal("clientAuthRestart acted on a cluster whose spec is plaintext")
	}
}

// TestPeerCheckRestart: members move to checking the peer identity (spec.tls.peerAuth MemberIdentity) one at a
// time, followers first, the leader last after handing over, and only once every member's certificate carries
// the identity (a member checking it refuses peers without it both ways); back to AnyCertificate the same way,
// with no wait.
func TestPeerCheckRestart(t *testing.T) {
	member := func(name string, id uint64, checks, holds bool) Member {
		m := at(name, id, "3.6.16")
		m.PodTLS, m.PodClientCertAuth, m.PeerURL = TLSOn, true, "https://"+name+".c-peer:2380"
		m.PodPeerCheck, m.PeerIdentity = checks, holds || checks
		return m
	}
	spec := func(check bool) Spec {
		s := specAt("3.6.16")
		s.TLS, s.ClientCertAuth, s.PeerCheck = true, true, check
		return s
	}
	tests := map[string]struct {
		spec        Spec
		members     []Member
		wantKind    ActionKind
		wantReason  string
		wantMembers []string
	}{
		"every certificate carries the identity: a follower first": {spec(true),
			[]Member{member("c-a", 1, false, true), member("c-b", 2, false, true), member("c-c", 3, false, true)}, RestartMember, etcdv1alpha1.ReasonRestartingForPeerAuth, []string{"c-b"}},
		"a certificate without it yet: wait, naming the member": {spec(true),
			[]Member{member("c-a", 1, false, true), member("c-b", 2, false, true), member("c-c", 3, false, false)}, Wait, etcdv1alpha1.ReasonWaitingForPeerIdentity, nil},
		"the leader last, after handing over": {spec(true),
			[]Member{member("c-a", 1, false, true), member("c-b", 2, true, true), member("c-c", 3, true, true)}, MoveLeader, etcdv1alpha1.ReasonMovingLeader, []string{"c-a", "c-b"}},
		"all check: nothing": {spec(true),
			[]Member{member("c-a", 1, true, true), member("c-b", 2, true, true), member("c-c", 3, true, true)}, None, etcdv1alpha1.ReasonReconciled, nil},
		"back to AnyCertificate, no wait for identities": {spec(false),
			[]Member{member("c-a", 1, true, true), member("c-b", 2, true, true), member("c-c", 3, false, false)}, RestartMember, etcdv1alpha1.ReasonRestartingForPeerAuth, []string{"c-b"}},
		"AnyCertificate, none checks: nothing": {spec(false),
			[]Member{member("c-a", 1, false, false), member("c-b", 2, false, false), member("c-c", 3, false, false)}, None, etcdv1alpha1.ReasonReconciled, nil},
		"a member unhealthy: wait for it first": {spec(true),
			with([]Member{member("c-a", 1, false, true), member("c-b", 2, false, true), member("c-c", 3, false, true)}, "c-c", func(m *Member) { m.Healthy = false }), Wait, "", nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			a := Next(tt.spec, clusterAt("3.6.0", tt.members...))
			if a.Kind != tt.wantKind || (tt.wantReason != "" && a.Reason != tt.wantReason) ||
				(tt.wantMembers != nil && strings.Join(a.Members, ",") != strings.Join(tt.wantMembers, ",")) {
				t.Fatalf("Next() = %s %v (%s: %s), want %s %s %v", a.Kind, a.Members, a.Reason, a.Message, tt.wantKind, tt.wantReason, tt.wantMembers)
			}
			if a.Kind == RestartMember && a.TLS != TLSOn {
				t.Fatalf("restart in mode %s, want TLS", a.TLS)
			}
			if a.Reason == etcdv1alpha1.ReasonWaitingForPeerIdentity && !strings.Contains(a.Message, "c-c") {
				t.Fatalf("wait does not name the member: %s", a.Message)
			}
		})
	}
	if _, ok := peerCheckRestart(Spec{}, clusterAt("3.6.0"), []Member{member("c-a", 1, true, true)}); ok {
		t.Fatal("peerCheckRestart acted on a cluster whose spec is plaintext")
	}
}

// TestPeerCheckForNewPods: a Pod created now checks the peer identity only when the spec asks for it and every
// running member holding certificates carries it (a new cluster: no member yet); plaintext members and Pods
// going away do not count.
func TestPeerCheckForNewPods(t *testing.T) {
	on := Spec{TLS: true, PeerCheck: true}
	m := func(tls string, holds, deleting bool) Member {
		return Member{Name: "m", HasPod: true, PodTLS: tls, PeerIdentity: holds, PodDeleting: deleting}
	}
	tests := map[string]struct {
		spec    Spec
		members []Member
		want    bool
	}{
		"new cluster":                         {on, nil, true},
		"every member carries it":             {on, []Member{m(TLSOn, true, false), m(TLSBridge, true, false)}, true},
		"a TLS member without it":             {on, []Member{m(TLSOn, true, false), m(TLSOn, false, false)}, false},
		"a Bridge member without it":          {on, []Member{m(TLSBridge, false, false)}, false},
		"a plaintext member does not count":   {on, []Member{m(TLSPlaintext, false, false)}, true},
		"a Pod being deleted does not count":  {on, []Member{m(TLSOn, false, true)}, true},
		"a member without a Pod is new again": {on, []Member{{Name: "m", InEtcd: true}}, true},
		"spec AnyCertificate":                 {Spec{TLS: true}, nil, false},
		"spec plaintext":                      {Spec{PeerCheck: true}, nil, false},
	}
	for name, tt := range tests {
		if got := PeerCheckForNewPods(tt.spec, tt.members); got != tt.want {
			t.Errorf("%s: PeerCheckForNewPods = %v, want %v", name, got, tt.want)
		}
	}
}
