package plan

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func voter(name string, id uint64) Member {
	m := bootMember(name)
	m.ID = id
	return m
}

func formed(members ...Member) Observation {
	return Observation{EtcdReachable: true, Bootstrapped: true, LeaderID: 1, Members: members,
		NewMemberNames: []string{"c-new"}, PeerURL: peerURL}
}

func TestNextMembership(t *testing.T) {
	a, b, c := voter("c-a", 1), voter("c-b", 2), voter("c-c", 3)
	learner := Member{Name: "c-new", InEtcd: true, IsLearner: true, ID: 9}
	down := func(d time.Duration) Member {
		m := c
		m.Healthy, m.PodReady, m.UnhealthyFor = false, false, d
		return m
	}
	// stuck is the learner c-new, its Pod created age ago, answering (healthy) or cut off.
	stuck := func(age time.Duration, healthy bool) Member {
		l := learner
		l.HasPod, l.HasPVC, l.LearnerFor, l.Healthy = true, true, age, healthy
		if !healthy {
			l.UnhealthyFor = age
		}
		return l
	}
	// gone is m with neither Pod nor volume, still listed by etcd.
	gone := func(m Member) Member {
		m.HasPod, m.HasPVC, m.Healthy, m.PodReady = false, false, false, false
		return m
	}
	// joiningLearner is the learner c-new whose Pod was created age ago; started once its etcd has published its name.
	joiningLearner := func(age time.Duration, started bool) Member {
		l := learner
		l.HasPod, l.HasPVC, l.LearnerFor, l.Started, l.Healthy = true, true, age, started, started
		return l
	}
	// evicted is m whose Pod went (a drain's eviction) and whose volume's only node is cordoned.
	evicted := func(m Member) Member {
		m.HasPod, m.Healthy, m.PodReady, m.VolumeNodeGone = false, false, false, "its node n2 is cordoned"
		return m
	}
	// heldByDeadNode is m removed from etcd, its Pod deleted and past its grace period: its node does not answer.
	heldByDeadNode := func(m Member) Member {
		m.InEtcd, m.PodDeleting, m.PodOverdue, m.Healthy, m.PodReady = false, true, AbandonLeftoverPodAfter, false, false
		return m
	}
	// lost is m crash-looping on a data dir that was emptied: its Pod and volume are there, etcd lists it.
	lost := func(m Member) Member {
		m.Healthy, m.PodReady, m.UnhealthyFor, m.DataLoss = false, false, 10*time.Second, "raft log lost"
		return m
	}
	tests := map[string]struct {
		replicas int
		obs      Observation
		want     ActionKind
		reason   string
		member   string
		id       uint64
	}{
		"member unhealthy longer than allowed is replaced":     {3, formed(a, b, down(10*time.Minute)), RemoveMember, etcdv1alpha1.ReasonReplacingMember, "c-c", 3},
		"member unhealthy for less than allowed is waited for": {3, formed(a, b, down(time.Minute)), Wait, etcdv1alpha1.ReasonWaitingForMembers, "", 0},
		"member whose image cannot be pulled is not replaced": {3, formed(a, b, func() Member {
			m := down(time.Hour)
			m.PodStuck = "ImagePullBackOff"
			return m
		}()), Wait, etcdv1alpha1.ReasonWaitingForMembers, "", 0},
		"learner whose container cannot be created is not replaced": {5, formed(a, b, c, func() Member {
			l := stuck(time.Hour, false)
			l.PodStuck = "CreateContainerConfigError"
			return l
		}()), Wait, etcdv1alpha1.ReasonWaitingForMembers, "", 0},
		"scale up adds one learner":                                   {5, formed(a, b, c), AddLearner, etcdv1alpha1.ReasonScalingUp, "c-new", 0},
		"learner without Pod is started joining the existing cluster": {5, formed(a, b, c, learner), CreateMemberPods, etcdv1alpha1.ReasonScalingUp, "c-new", 0},
		"learner starting is waited for": {5, formed(a, b, c, func() Member {
			l := learner
			l.HasPod, l.HasPVC = true, true
			return l
		}()), Wait, etcdv1alpha1.ReasonWaitingForMembers, "", 0},
		"healthy learner is promoted": {5, formed(a, b, c, func() Member {
			l := learner
			l.HasPod, l.HasPVC, l.Healthy, l.PodReady, l.Started, l.PodVersion = true, true, true, true, true, "3.6.16"
			return l
		}()), PromoteLearner, etcdv1alpha1.ReasonScalingUp, "c-new", 9},
		"no membership change while a member is unhealthy": {5, formed(a, b, with([]Member{c}, "c-c", func(m *Member) { m.Healthy = false })[0]), Wait, etcdv1alpha1.ReasonWaitingForMembers, "", 0},
		"the member that bootstrapped the cluster alone is restarted once three voters keep a quorum": {3,
			formed(a, func() Member { m := b; m.PodBootstrapsAlone = true; return m }(), c), RestartMember, etcdv1alpha1.ReasonRestartingLoneBootstrapMember, "c-b", 2},
		"as the leader, it hands leadership over first": {3,
			formed(func() Member { m := a; m.PodBootstrapsAlone = true; return m }(), b, c), MoveLeader, etcdv1alpha1.ReasonMovingLeader, "", 1},
		"not before the scale-up has made three voters": {3,
			formed(func() Member { m := a; m.PodBootstrapsAlone = true; return m }(), b), AddLearner, etcdv1alpha1.ReasonScalingUp, "c-new", 0},
		"not in a cluster of two, where a restart would stop it": {2,
			formed(a, func() Member { m := b; m.PodBootstrapsAlone = true; return m }()), None, etcdv1alpha1.ReasonReconciled, "", 0},
		"scale down removes a follower, not the leader":       {1, formed(a, b, c), RemoveMember, etcdv1alpha1.ReasonScalingDown, "c-c", 3},
		"scale down skips the leader":                         {1, func() Observation { o := formed(a, b, c); o.LeaderID = 3; return o }(), RemoveMember, etcdv1alpha1.ReasonScalingDown, "c-b", 2},
		"removed member's Pod goes first":                     {1, formed(a, b, func() Member { m := c; m.InEtcd = false; return m }()), DeleteMemberPod, etcdv1alpha1.ReasonRemovingLeftoverMember, "c-c", 0},
		"removed member's volume goes after its Pod":          {1, formed(a, b, func() Member { m := c; m.InEtcd, m.HasPod = false, false; return m }()), DeleteMemberPVC, etcdv1alpha1.ReasonRemovingLeftoverMember, "c-c", 0},
		"a terminating Pod of a removed member is waited for": {1, formed(a, b, func() Member { m := c; m.InEtcd, m.PodDeleting = false, true; return m }()), Wait, etcdv1alpha1.ReasonPodDeleting, "", 0},
		// Its node stopped: the member was removed after replaceUnhealthyAfter, its Pod deleted, and no kubelet
		// takes the Pod away. The successor joins and is promoted meanwhile.
		"a removed member's Pod held past its grace period does not hold its successor back": {3, formed(a, b, heldByDeadNode(c)), AddLearner, etcdv1alpha1.ReasonScalingUp, "c-new", 0},
		"nor its promotion": {3, formed(a, b, heldByDeadNode(c), joiningLearner(time.Second, true)), PromoteLearner, etcdv1alpha1.ReasonScalingUp, "c-new", 9},
		"a removed member's Pod within its grace period is waited for": {3, formed(a, b, func() Member {
			m := heldByDeadNode(c)
			m.PodOverdue = 0
			return m
		}()), Wait, etcdv1alpha1.ReasonPodDeleting, "", 0},
		// The kubelet stopped it and moved its deletion timestamp to the present: it goes a moment later.
		"a removed member's Pod just past its deletion timestamp is waited for": {3, formed(a, b, func() Member {
			m := heldByDeadNode(c)
			m.PodOverdue = time.Second
			return m
		}()), Wait, etcdv1alpha1.ReasonPodDeleting, "", 0},
		"unknown member that never ran is removed":  {3, formed(a, b, c, Member{Name: StrayMemberName(255), InEtcd: true, ID: 255}), RemoveMember, etcdv1alpha1.ReasonUnknownMember, StrayMemberName(255), 255},
		"unknown voter that ran is left to a human": {3, formed(a, b, c, Member{Name: StrayMemberName(255), InEtcd: true, Started: true, ID: 255}), Wait, etcdv1alpha1.ReasonUnknownMember, "", 0},
		"member whose Pod and volume are gone is removed to be replaced": {3, formed(a, b, func() Member {
			m := c
			m.HasPod, m.HasPVC, m.Healthy, m.PodReady = false, false, false, false
			return m
		}()), RemoveMember, etcdv1alpha1.ReasonReplacingMember, "c-c", 3},
		"dead member is not removed when the rest has no quorum": {3, formed(a, with([]Member{b}, "c-b", func(m *Member) { m.Healthy = false })[0], func() Member {
			m := c
			m.HasPod, m.HasPVC, m.Healthy, m.PodReady = false, false, false, false
			return m
		}()), Wait, etcdv1alpha1.ReasonQuorumAtRisk, "", 0},
		// Drained: c-c's Pod evicted, its local volume on a cordoned node. A Pod re-created there could never
		// start; the member is replaced on another node at once (no replaceUnhealthyAfter: no wait can help).
		"member evicted from a drained node is replaced, not re-created on its volume": {3, formed(a, b, evicted(c)), RemoveMember, etcdv1alpha1.ReasonReplacingMember, "c-c", 3},
		"member whose Pod waits for a cordoned node is replaced": {3, formed(a, b, func() Member {
			m := evicted(c)
			m.HasPod = true
			return m
		}()), RemoveMember, etcdv1alpha1.ReasonReplacingMember, "c-c", 3},
		"drained member is not removed when the rest has no quorum": {3, formed(a, with([]Member{b}, "c-b", func(m *Member) { m.Healthy = false })[0], evicted(c)),
			Wait, etcdv1alpha1.ReasonQuorumAtRisk, "", 0},
		"evicted member whose volume's node takes Pods is re-created on its volume": {3, formed(a, b, func() Member {
			m := evicted(c)
			m.VolumeNodeGone = ""
			return m
		}()), RecreateMemberPods, etcdv1alpha1.ReasonRecreatingMember, "c-c", 0},
		"after a replacement's removal a successor is added": {3, formed(a, b), AddLearner, etcdv1alpha1.ReasonScalingUp, "c-new", 0},
		// The bench's replacement: the successor was added while c-c still ran, c-c's Pod and volume then went.
		"a removal waits for a learner that has not started etcd yet": {3, formed(a, b, gone(c), joiningLearner(3*time.Second, false)),
			Wait, etcdv1alpha1.ReasonReplacingMember, "", 0},
		"a removal waits no longer than the learner's start grace": {3, formed(a, b, gone(c), joiningLearner(learnerStartGrace, false)),
			RemoveMember, etcdv1alpha1.ReasonReplacingMember, "c-c", 3},
		"a removal goes ahead once the learner has started": {3, formed(a, b, gone(c), joiningLearner(3*time.Second, true)),
			RemoveMember, etcdv1alpha1.ReasonReplacingMember, "c-c", 3},
		"learner cut off longer than allowed is removed":           {5, formed(a, b, c, stuck(10*time.Minute, false)), RemoveMember, etcdv1alpha1.ReasonReplacingLearner, "c-new", 9},
		"learner refused promotion longer than allowed is removed": {5, formed(a, b, c, stuck(10*time.Minute, true)), RemoveMember, etcdv1alpha1.ReasonReplacingLearner, "c-new", 9},
		"learner younger than allowed is waited for":               {5, formed(a, b, c, stuck(time.Minute, false)), Wait, etcdv1alpha1.ReasonWaitingForMembers, "", 0},
		"healthy learner whose promotion waits for a sick voter stays": {5, formed(a, b, down(time.Minute), stuck(10*time.Minute, true)),
			Wait, etcdv1alpha1.ReasonWaitingForMembers, "", 0},
		"stuck learner is removed while a voter is sick, if the voters have quorum": {5, formed(a, b, down(time.Minute), stuck(10*time.Minute, false)),
			RemoveMember, etcdv1alpha1.ReasonReplacingLearner, "c-new", 9},
		"member whose data dir was emptied is removed to be replaced": {3, formed(a, b, lost(c)), RemoveMember, etcdv1alpha1.ReasonReplacingMember, "c-c", 3},
		"member with data-loss evidence that runs again is left alone": {3, formed(a, b, func() Member { m := c; m.DataLoss = "raft log lost"; return m }()),
			None, etcdv1alpha1.ReasonReconciled, "", 0},
		"member that lost its data is not removed when the rest has no quorum": {3, formed(a, with([]Member{b}, "c-b", func(m *Member) { m.Healthy = false })[0], lost(c)),
			Wait, etcdv1alpha1.ReasonQuorumAtRisk, "", 0},
		"nothing is removed or deleted while etcd is unreachable": {1, func() Observation {
			o := formed(a, b, func() Member { m := c; m.InEtcd = false; return m }())
			o.EtcdReachable = false
			return o
		}(), Wait, etcdv1alpha1.ReasonWaitingForMembers, "", 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := Next(Spec{Replicas: tt.replicas, Version: "3.6.16", ReplaceUnhealthyAfter: 5 * time.Minute}, tt.obs)
			if got.Kind != tt.want || got.Reason != tt.reason {
				t.Fatalf("Next = %s/%s (%s), want %s/%s", got.Kind, got.Reason, got.Message, tt.want, tt.reason)
			}
			if tt.member != "" && (len(got.Members) != 1 || got.Members[0] != tt.member) {
				t.Errorf("members %v, want [%s]", got.Members, tt.member)
			}
			if got.MemberID != tt.id {
				t.Errorf("member ID %d, want %d", got.MemberID, tt.id)
			}
		})
	}
	joining := Next(Spec{Replicas: 5, Version: "3.6.16"}, formed(a, b, c, learner))
	if joining.State != "existing" || len(joining.InitialCluster) != 4 || joining.InitialCluster["c-new"] != peerURL("c-new") {
		t.Errorf("joining learner starts with state %q and cluster %v", joining.State, joining.InitialCluster)
	}
}

// TestStuckLearnerWindow: a learner's window to catch up (replaceUnhealthyAfter) counts from its etcd container's
// start, not from its Pod's creation: on a loaded node a learner's Pod took 13-16 s to start etcd, and a window of
// 15 s counted from the Pod's creation replaced every learner by the next, in a loop (flakes.md, 2026-11-28). A
// learner whose etcd does not run is bounded by its Pod's age: learnerStartGrace, then the window.
func TestStuckLearnerWindow(t *testing.T) {
	const window = 15 * time.Second
	a, b, c := voter("c-a", 1), voter("c-b", 2), voter("c-c", 3)
	// learner is c-new, its Pod created podAge ago and its etcd running for running (0: not running), answering
	// (caught up far enough to serve its status) or not.
	learner := func(podAge, running time.Duration, answering bool) Member {
		return Member{Name: "c-new", InEtcd: true, Started: running > 0, IsLearner: true, ID: 9, HasPod: true, HasPVC: true,
			LearnerFor: podAge, PodAge: podAge, RunningFor: running, Healthy: answering}
	}
	tests := map[string]struct {
		learner Member
		want    ActionKind
		reason  string
		message string
	}{
		"the run-58 learner, Pod created 16s ago, etcd started 3s ago, answering, is promoted": {learner(16*time.Second, 3*time.Second, true),
			PromoteLearner, etcdv1alpha1.ReasonScalingUp, ""},
		"a learner whose Pod was created long ago but whose etcd started recently is waited for": {learner(10*time.Minute, 3*time.Second, false),
			Wait, etcdv1alpha1.ReasonWaitingForMembers, ""},
		"a learner whose etcd started longer ago than the window, cut off, is replaced": {learner(10*time.Minute, 16*time.Second, false),
			RemoveMember, etcdv1alpha1.ReasonReplacingLearner, "removing member c-new, still a learner 16s after its etcd started (more than 15s), to replace it"},
		"a learner whose etcd started longer ago than the window, refused promotion, is replaced": {learner(20*time.Second, 16*time.Second, true),
			RemoveMember, etcdv1alpha1.ReasonReplacingLearner, "still a learner 16s after its etcd started"},
		"a learner whose Pod is older than the window but has not started etcd is waited for": {learner(30*time.Second, 0, false),
			Wait, etcdv1alpha1.ReasonWaitingForMembers, ""},
		"a learner whose etcd has not run within the start grace and the window is replaced": {learner(learnerStartGrace+window, 0, false),
			RemoveMember, etcdv1alpha1.ReasonReplacingLearner, "still a learner 1m15s after its Pod was created, its etcd not running (more than 1m15s)"},
		"a learner whose Pod cannot pull its image is never replaced": {func() Member {
			l := learner(time.Hour, 0, false)
			l.PodStuck = "ImagePullBackOff"
			return l
		}(), Wait, etcdv1alpha1.ReasonWaitingForMembers, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := Next(Spec{Replicas: 5, Version: "3.6.16", ReplaceUnhealthyAfter: window}, formed(a, b, c, tt.learner))
			if got.Kind != tt.want || got.Reason != tt.reason {
				t.Fatalf("Next = %s/%s (%s), want %s/%s", got.Kind, got.Reason, got.Message, tt.want, tt.reason)
			}
			if !strings.Contains(got.Message, tt.message) {
				t.Errorf("message %q, want it to say %q", got.Message, tt.message)
			}
			if got.Kind == RemoveMember && (len(got.Members) != 1 || got.Members[0] != "c-new" || got.MemberID != 9) {
				t.Errorf("removes %v (ID %d), want the learner c-new (9)", got.Members, got.MemberID)
			}
		})
	}
}

// TestMembershipNeverBreaksQuorum: over random formed clusters, a membership step is only taken when etcd
// answered and every member is healthy, a removal leaves a healthy quorum and spares the leader while
// another voter exists, and Pods and volumes are only deleted for members etcd no longer lists.
func TestMembershipNeverBreaksQuorum(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 20000; i++ {
		var members []Member
		n := 1 + rng.Intn(6)
		for j := 0; j < n; j++ {
			m := voter(string(rune('a'+j)), uint64(j+1))
			m.Healthy, m.PodReady = rng.Intn(5) > 0, rng.Intn(5) > 0
			m.InEtcd, m.HasPod, m.HasPVC = rng.Intn(6) > 0, rng.Intn(6) > 0, rng.Intn(6) > 0
			m.IsLearner = rng.Intn(6) == 0
			if m.IsLearner && m.HasPod {
				m.LearnerFor = time.Duration(rng.Intn(600)) * time.Second
				m.RunningFor = time.Duration(rng.Intn(2)*rng.Intn(600)) * time.Second
			}
			if rng.Intn(8) == 0 {
				m.DataLoss = "raft log lost"
			}
			if !m.Healthy {
				m.UnhealthyFor = time.Duration(rng.Intn(600)) * time.Second
			}
			members = append(members, m)
		}
		obs := formed(members...)
		obs.EtcdReachable = rng.Intn(4) > 0
		obs.LeaderID = uint64(1 + rng.Intn(n))
		got := Next(Spec{Replicas: 1 + 2*rng.Intn(3), Version: "3.6.16", ReplaceUnhealthyAfter: 5 * time.Minute}, obs)
		switch got.Kind {
		case AddLearner, PromoteLearner:
			if !obs.EtcdReachable {
				t.Fatalf("%s without a member list: %+v", got.Kind, members)
			}
			for _, m := range members {
				if m.HasPod && (!m.Healthy || (!m.PodReady && !m.IsLearner)) {
					t.Fatalf("%s while %s is unhealthy: %+v", got.Kind, m.Name, members)
				}
			}
		case DeleteMemberPod, DeleteMemberPVC:
			m, _ := find(members, got.Members[0])
			if !obs.EtcdReachable || m.InEtcd {
				t.Fatalf("%s of %s, which etcd lists (or etcd unreachable): %+v", got.Kind, m.Name, members)
			}
		}
		if got.Kind == RemoveMember {
			if !obs.EtcdReachable {
				t.Fatalf("removal without a member list: %+v", members)
			}
			voters, healthy := votersAfterRemoval(members, got.MemberID)
			if voters > 1 && healthy < Quorum(voters-1) {
				t.Fatalf("removal leaves %d healthy of %d voters: %+v", healthy, voters-1, members)
			}
			if got.Reason == etcdv1alpha1.ReasonScalingDown && got.MemberID == obs.LeaderID && voters > 1 {
				t.Fatalf("removed the leader while other voters exist: %+v", members)
			}
		}
	}
}

func TestHealthyVoters(t *testing.T) {
	a, b := voter("c-a", 1), voter("c-b", 2)
	sick := voter("c-c", 3)
	sick.Healthy = false
	learner := Member{Name: "c-l", InEtcd: true, IsLearner: true, Healthy: true, HasPod: true}
	removed := voter("c-r", 4)
	removed.InEtcd = false
	tests := map[string]struct {
		members         []Member
		voters, healthy int
	}{
		"all healthy": {[]Member{a, b}, 2, 2},
		"a sick voter counts as voter, not healthy": {[]Member{a, b, sick}, 3, 2},
		"a healthy learner is no voter":             {[]Member{a, learner}, 1, 1},
		"a member etcd no longer lists is no voter": {[]Member{a, b, removed}, 2, 2},
		"nothing": {nil, 0, 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if v, h := HealthyVoters(tt.members); v != tt.voters || h != tt.healthy {
				t.Errorf("HealthyVoters = %d, %d; want %d, %d", v, h, tt.voters, tt.healthy)
			}
		})
	}
}

// TestRemoveIfSafeMovesLeadershipFirst: the leader is never removed while it leads and another healthy voter can
// take over; leadership goes first, to a healthy voter.
func TestRemoveIfSafeMovesLeadershipFirst(t *testing.T) {
	a, b, c := voter("c-a", 1), voter("c-b", 2), voter("c-c", 3)
	got := removeIfSafe(1, []Member{a, b, c}, a, etcdv1alpha1.ReasonScalingDown, "removing c-a")
	if got.Kind != MoveLeader || got.MemberID != 1 || got.TargetID != 2 {
		t.Fatalf("removing the leader: %s %d -> %d (%s), want MoveLeader to c-b first", got.Kind, got.MemberID, got.TargetID, got.Message)
	}
	b.Healthy, c.Healthy = false, false
	if got := removeIfSafe(1, []Member{a, b, c}, a, etcdv1alpha1.ReasonScalingDown, "removing c-a"); got.Kind != Wait || got.Reason != etcdv1alpha1.ReasonQuorumAtRisk {
		t.Fatalf("removing the only healthy voter: %s/%s, want a wait", got.Kind, got.Reason)
	}
	if got := removeIfSafe(2, []Member{a, voter("c-b", 2), voter("c-c", 3)}, a, etcdv1alpha1.ReasonScalingDown, "removing c-a"); got.Kind != RemoveMember {
		t.Fatalf("removing a follower: %s, want RemoveMember", got.Kind)
	}
}

// votersAfterRemoval counts the voters before member id is removed, and the healthy ones that remain after: the
// oracle the property tests check removals against.
func votersAfterRemoval(members []Member, id uint64) (voters, healthy int) {
	for _, m := range members {
		if m.InEtcd && !m.IsLearner {
			voters++
			if m.Healthy && m.ID != id {
				healthy++
			}
		}
	}
	return voters, healthy
}

// TestClusterNamedUnknown: members of a cluster named "unknown" or "unknown-a" are named "unknown-xxxxx" and
// "unknown-a-xxxxx": they are the cluster's own, healed like any other, never taken for members Steward did not
// create (which waited for a human forever).
func TestClusterNamedUnknown(t *testing.T) {
	for _, cluster := range []string{"unknown", "unknown-a"} {
		n := func(s string) string { return cluster + "-" + s }
		recorded := map[string]string{n("bcd24"): peerURL(n("bcd24")), n("fgh56"): peerURL(n("fgh56")), n("jkl78"): peerURL(n("jkl78"))}
		member := func(s string, id uint64) Member {
			m := voter(n(s), id)
			m.InitialCluster = recorded
			m.VolumeVersion, m.VolumeImage, m.VolumeTLS, m.PodTLS, m.PodAge = "3.6.16", "etcd:v3.6.16", TLSOn, TLSOn, time.Hour
			return m
		}
		a, b, c := member("bcd24", 0xbcd24), member("fgh56", 2), member("jkl78", 3)
		dataGone := c
		dataGone.HasPod, dataGone.HasPVC, dataGone.Healthy, dataGone.PodReady = false, false, false, false
		spec := Spec{Replicas: 3, Version: "3.6.16", TLS: true}
		tests := map[string]struct {
			obs     Observation
			want    ActionKind
			reason  string
			members []string
			id      uint64
		}{
			"a member whose data is gone is replaced": {obs: formed(a, b, dataGone), want: RemoveMember, reason: etcdv1alpha1.ReasonReplacingMember, id: 3},
			"a member whose Pod went comes back on its volume, etcd answering": {obs: formed(a, b, podGone(c)),
				want: RecreateMemberPods, reason: etcdv1alpha1.ReasonRecreatingMember, members: []string{n("jkl78")}},
			"all members' Pods come back on their volumes without a member list": {obs: noList(podGone(a), podGone(b), podGone(c)),
				want: RecreateMemberPods, reason: etcdv1alpha1.ReasonRecreatingMember, members: []string{n("bcd24"), n("fgh56"), n("jkl78")}},
			// A member Steward did not create, whose ID spells a member's suffix: its name is still its own.
			"a stray whose ID spells a member's name is removed, not the member": {obs: formed(a, b, c, Member{Name: StrayMemberName(0xbcd24 + 1), InEtcd: true, ID: 0xbcd24 + 1}),
				want: RemoveMember, reason: etcdv1alpha1.ReasonUnknownMember, id: 0xbcd24 + 1},
		}
		for name, tt := range tests {
			t.Run(cluster+"/"+name, func(t *testing.T) {
				got := Next(spec, tt.obs)
				if got.Kind != tt.want || got.Reason != tt.reason {
					t.Fatalf("Next = %s/%s (%s), want %s/%s", got.Kind, got.Reason, got.Message, tt.want, tt.reason)
				}
				if tt.members != nil && !reflect.DeepEqual(got.Members, tt.members) {
					t.Errorf("members %v, want %v", got.Members, tt.members)
				}
				if tt.id != 0 && got.MemberID != tt.id {
					t.Errorf("member ID %x, want %x", got.MemberID, tt.id)
				}
			})
		}
		if census := TakeCensus([]Member{a, b, c}); census.Members != 3 {
			t.Errorf("%s: census counts %d members of 3: %s", cluster, census.Members, census)
		}
		for _, m := range []Member{a, b, c} {
			if IsStray(m.Name) {
				t.Errorf("member %s of cluster %s taken for a stray", m.Name, cluster)
			}
		}
	}
}
