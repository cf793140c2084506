package plan

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// podGone is m after its Pod was deleted: its volume, with everything recorded on it, is intact.
func podGone(m Member) Member {
	m.HasPod, m.PodReady, m.Healthy, m.PodTLS, m.PodAge = false, false, false, "", 0
	return m
}

// noList is what a formed cluster looks like when etcd gives no member list: nothing from etcd.
func noList(members ...Member) Observation {
	for i := range members {
		members[i].InEtcd, members[i].Started, members[i].Healthy, members[i].ID, members[i].PeerURL = false, false, false, 0, ""
	}
	return Observation{Bootstrapped: true, EtcdReachable: false, Members: members, NewMemberNames: []string{"c-new"}, PeerURL: peerURL}
}

func TestRecreatePods(t *testing.T) {
	a, b, c := voter("c-a", 1), voter("c-b", 2), voter("c-c", 3)
	for _, m := range []*Member{&a, &b, &c} {
		m.VolumeVersion, m.VolumeImage, m.VolumeTLS, m.PodTLS, m.PodAge = "3.6.16", "etcd:v3.6.16", TLSOn, TLSOn, time.Hour
	}
	only := Member{Name: "c-a", HasPVC: true, InitialCluster: map[string]string{"c-a": peerURL("c-a")}, InitialState: "new",
		VolumeVersion: "3.6.16", VolumeImage: "etcd:v3.6.16", VolumeTLS: TLSOn}
	tlsSpec := Spec{Replicas: 3, Version: "3.6.16", TLS: true}
	tests := map[string]struct {
		spec    Spec
		obs     Observation
		want    ActionKind
		reason  string
		members []string
	}{
		"the only member of a 1-member cluster comes back": {
			spec: Spec{Replicas: 1, Version: "3.6.16", TLS: true}, obs: noList(only),
			want: RecreateMemberPods, reason: etcdv1alpha1.ReasonRecreatingMember, members: []string{"c-a"},
		},
		"2 of 3 come back together, without a member list": {
			spec: tlsSpec, obs: noList(podGone(a), podGone(b), c),
			want: RecreateMemberPods, reason: etcdv1alpha1.ReasonRecreatingMember, members: []string{"c-a", "c-b"},
		},
		"3 of 3 come back together": {
			spec: tlsSpec, obs: noList(podGone(a), podGone(b), podGone(c)),
			want: RecreateMemberPods, reason: etcdv1alpha1.ReasonRecreatingMember, members: []string{"c-a", "c-b", "c-c"},
		},
		"1 of 3 comes back while etcd still answers": {
			spec: tlsSpec, obs: formed(a, podGone(b), c),
			want: RecreateMemberPods, reason: etcdv1alpha1.ReasonRecreatingMember, members: []string{"c-b"},
		},
		"a volume Steward marked removed is a leftover, not a member": {
			spec: tlsSpec, obs: noList(a, func() Member { m := podGone(b); m.Removed = true; return m }(), c),
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"a volume a re-seed stopped is not brought back": {
			spec: tlsSpec, obs: noList(a, func() Member { m := podGone(b); m.RetiredBy = "r1"; return m }(), c),
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"with a member list, a volume etcd does not list is a leftover": {
			spec: tlsSpec, obs: formed(a, c, func() Member { m := podGone(b); m.InEtcd, m.Started = false, false; return m }()),
			want: DeleteMemberPVC, reason: etcdv1alpha1.ReasonRemovingLeftoverMember, members: []string{"c-b"},
		},
		"a volume without the record of how its member started is not guessed at": {
			spec: tlsSpec, obs: noList(a, func() Member { m := podGone(b); m.InitialCluster = nil; return m }(), c),
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"a cluster that never formed finishes its bootstrap instead": {
			spec: tlsSpec, obs: func() Observation { o := noList(podGone(a), b, c); o.Bootstrapped = false; return o }(),
			want: CreateMemberPods, reason: etcdv1alpha1.ReasonBootstrapping, members: []string{"c-a"},
		},
		"once the Pods exist, the members are given time to form a quorum": {
			spec: tlsSpec, obs: noList(a, b, c),
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"too few members with data: a human must act": {
			spec: tlsSpec, obs: noList(a, Member{Name: "c-b", Remembered: true}, Member{Name: "c-c", Remembered: true}),
			want: Wait, reason: etcdv1alpha1.ReasonQuorumUnrecoverable,
		},
		"data-loss evidence on the volumes counts as no data": {
			spec: tlsSpec, obs: noList(a, func() Member { m := b; m.DataLoss = "raft log lost"; return m }(), func() Member { m := c; m.DataLoss = "raft log lost"; return m }()),
			want: Wait, reason: etcdv1alpha1.ReasonQuorumUnrecoverable,
		},
		"paused: nothing, not even this": {
			spec: Spec{Replicas: 3, Version: "3.6.16", Paused: true}, obs: noList(podGone(a), podGone(b), c),
			want: Wait, reason: etcdv1alpha1.ReasonPaused,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := Next(tt.spec, tt.obs)
			if got.Kind != tt.want || got.Reason != tt.reason {
				t.Fatalf("Next = %s/%s (%s), want %s/%s", got.Kind, got.Reason, got.Message, tt.want, tt.reason)
			}
			if tt.members != nil && !reflect.DeepEqual(got.Members, tt.members) {
				t.Errorf("members %v, want %v", got.Members, tt.members)
			}
			for _, p := range got.Pods {
				m, _ := find(tt.obs.Members, p.Name)
				if p.Version != m.VolumeVersion || p.Image != m.VolumeImage || p.TLS != m.VolumeTLS || !reflect.DeepEqual(p.InitialCluster, m.InitialCluster) || p.State != m.InitialState {
					t.Errorf("re-created %+v, want it as its volume records (%s %s %s %v %s)", p, m.VolumeVersion, m.VolumeImage, m.VolumeTLS, m.InitialCluster, m.InitialState)
				}
			}
		})
	}
}

// TestRecreatedPodsKeepTheirRestore: the operator stopped half-way through creating the Pods of a bootstrap
// from a snapshot (a re-seed): the member whose Pod was never created is brought back
// seeded from the same restore while it is under way (its Pod records it, so the restore counts it), and without
// it once the restore is over.
func TestRecreatedPodsKeepTheirRestore(t *testing.T) {
	initial := map[string]string{"c-x": peerURL("c-x"), "c-y": peerURL("c-y"), "c-z": peerURL("c-z")}
	started := func(name string) Member {
		return Member{Name: name, HasPod: true, HasPVC: true, PodReady: true, PodVersion: "3.6.16", InitialCluster: initial,
			InitialState: "new", InEtcd: true, Started: true, Healthy: true, Restore: "r1", RunningVersion: "3.6.16", PodAge: time.Minute}
	}
	neverStarted := Member{Name: "c-z", HasPVC: true, InitialCluster: initial, InitialState: "new", InEtcd: true, Restore: "r1"}
	spec := Spec{Replicas: 3, Version: "3.6.16"}
	for name, tt := range map[string]struct {
		restore *Restore
		want    string
	}{
		"the restore under way seeds it":      {restore: &Restore{Name: "r1", Ready: true}, want: "r1"},
		"a finished restore is not named":     {restore: nil, want: ""},
		"another restore under way is not it": {restore: &Restore{Name: "r2", Ready: true}, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			a := Next(spec, Observation{Bootstrapped: true, EtcdReachable: true, Restore: tt.restore,
				Members: []Member{started("c-x"), started("c-y"), neverStarted}})
			if a.Kind != RecreateMemberPods || len(a.Pods) != 1 || a.Pods[0].Name != "c-z" {
				t.Fatalf("got %s %v %+v, want c-z re-created", a.Kind, a.Members, a.Pods)
			}
			if a.Pods[0].Restore != tt.want || a.Pods[0].State != "new" || len(a.Pods[0].InitialCluster) != 3 {
				t.Errorf("Pod %+v, want restore %q, state new and the bootstrap's initial cluster", a.Pods[0], tt.want)
			}
		})
	}
}

func TestVolumeTLS(t *testing.T) {
	tests := map[string]struct {
		spec Spec
		m    Member
		want string
	}{
		"etcd's peer URL decides when there is one":   {Spec{TLS: true}, Member{InEtcd: true, PeerURL: "http://c-a", VolumeTLS: TLSOn}, TLSBridge},
		"without a list, the volume's record":         {Spec{TLS: true}, Member{VolumeTLS: TLSBridge}, TLSBridge},
		"a volume from before the record, TLS spec":   {Spec{TLS: true}, Member{}, TLSOn},
		"a volume from before the record, plaintext":  {Spec{}, Member{}, TLSPlaintext},
		"the record wins over the spec mid-switch":    {Spec{}, Member{VolumeTLS: TLSOn}, TLSOn},
		"an https peer URL serves TLS whatever spec":  {Spec{}, Member{InEtcd: true, PeerURL: "https://c-a"}, TLSOn},
		"a plaintext record in a spec asking for TLS": {Spec{TLS: true}, Member{VolumeTLS: TLSPlaintext}, TLSPlaintext},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := volumeTLS(tt.spec, nil, tt.m); got != tt.want {
				t.Fatalf("volumeTLS = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCensus(t *testing.T) {
	members := []Member{
		{Name: "c-a", HasPod: true, HasPVC: true, PodReady: true},
		{Name: "c-b", HasPVC: true},
		{Name: "c-c", HasPod: true, PodDeleting: true, HasPVC: true},
		{Name: "c-d", Remembered: true},
		{Name: "c-e", HasPod: true, HasPVC: true, DataLoss: "raft log lost"},
		{Name: "c-f", HasPVC: true, Removed: true},
		{Name: "c-g", HasPVC: true, RetiredBy: "r1"},
		{Name: StrayMemberName(9), InEtcd: true},
	}
	c := TakeCensus(members)
	want := Census{Members: 5, Running: []string{"c-a"}, Ready: 1, Missing: []string{"c-b", "c-c"}, NoData: []string{"c-d", "c-e"}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("census %+v, want %+v", c, want)
	}
	if !c.CanFormQuorum() {
		t.Error("3 of 5 members with data cannot form a quorum?")
	}
	if s := c.String(); s != "5 members: 1 with a Pod (1 ready), 2 missing their Pod with their volume intact [c-b c-c], 2 with no data left [c-d c-e]; quorum needs 3" {
		t.Errorf("census says %q", s)
	}
	if s := TakeCensus(members[1:2]).String(); s != "1 member: 0 with a Pod (0 ready), 1 missing their Pod with their volume intact [c-b]; quorum needs 1" {
		t.Errorf("census of one says %q", s)
	}
}

// TestWithoutMemberListOnlyPodsComeBack: whatever a formed cluster looks like, while etcd gives no member list
// the planner's only step is re-creating Pods on intact volumes of members nothing marks as gone; never a
// membership change, a restart, or a deletion. With the quorum-loss policy, the only other step is creating the
// restore, and never while a member is coming back on its volume.
func TestWithoutMemberListOnlyPodsComeBack(t *testing.T) {
	rng := rand.New(rand.NewSource(14))
	names := []string{"c-a", "c-b", "c-c", "c-d", "c-e"}
	for i := 0; i < 50000; i++ {
		var members []Member
		for _, n := range names {
			if rng.Intn(5) == 0 {
				continue
			}
			m := Member{Name: n, HasPod: rng.Intn(2) == 0, HasPVC: rng.Intn(3) > 0, VolumeDeleting: rng.Intn(6) == 0,
				PodDeleting: rng.Intn(5) == 0, Healthy: rng.Intn(3) == 0, PodReady: rng.Intn(3) == 0, PodVersion: "3.6.16",
				PodAge: time.Duration(rng.Intn(120)) * time.Second, Removed: rng.Intn(6) == 0, Remembered: rng.Intn(6) == 0,
				IsLearner: rng.Intn(8) == 0, UnhealthyFor: time.Hour, LearnerFor: time.Hour, PodTLS: []string{TLSPlaintext, TLSBridge, TLSOn}[rng.Intn(3)],
				VolumeVersion: []string{"", "3.5.35", "3.6.16"}[rng.Intn(3)], VolumeTLS: []string{"", TLSBridge, TLSOn}[rng.Intn(3)]}
			if rng.Intn(8) == 0 {
				m.DataLoss = "raft log lost"
			}
			if rng.Intn(8) == 0 {
				m.RetiredBy = "r0"
			}
			if (m.HasPod || m.HasPVC) && rng.Intn(4) > 0 {
				m.InitialCluster, m.InitialState = cluster3, []string{"new", "existing"}[rng.Intn(2)]
			}
			members = append(members, m)
		}
		spec := Spec{Replicas: 1 + 2*rng.Intn(3), Version: []string{"3.6.16", "3.6.15", "3.7.3"}[rng.Intn(3)], TLS: rng.Intn(2) == 0,
			ReplaceUnhealthyAfter: time.Duration(rng.Intn(2)) * time.Minute, RecoveryGrace: time.Minute}
		if rng.Intn(2) == 0 {
			spec.QuorumLossAfter = time.Minute
		}
		obs := Observation{Members: members, Bootstrapped: true, EtcdReachable: false, QuorumLostFor: time.Duration(rng.Intn(180)) * time.Second,
			LatestBackup: "b1", NewMemberNames: []string{"c-x", "c-y"}, PeerURL: peerURL, LeaderID: 1}
		got := Next(spec, obs)
		switch got.Kind {
		case Wait, None:
		case RecreateMemberPods:
			if len(got.Pods) == 0 || len(got.Pods) != len(got.Members) {
				t.Fatalf("re-creation of %v with pods %+v", got.Members, got.Pods)
			}
			for _, p := range got.Pods {
				m, ok := find(members, p.Name)
				if !ok || m.HasPod || !m.HasPVC || m.Removed || m.RetiredBy != "" || m.InitialCluster == nil {
					t.Fatalf("re-created %s, which is not a member with an intact volume and no Pod: %+v", p.Name, m)
				}
			}
		case CreateRestore:
			if spec.QuorumLossAfter == 0 || obs.QuorumLostFor < spec.QuorumLossAfter {
				t.Fatalf("restore without the policy's time: %+v", got)
			}
			if back := comingBack(members, spec.QuorumLossAfter); len(back) > 0 {
				t.Fatalf("restore while %v come back on their volumes", back)
			}
			for _, m := range members {
				if bringsBack(m, false) {
					t.Fatalf("restore while %s's Pod is missing on an intact volume", m.Name)
				}
			}
		default:
			t.Fatalf("without a member list the planner took %s (%s) on %+v", got.Kind, got.Message, members)
		}
		if got.Message == "" || strings.Contains(got.Message, "0 of 0") {
			t.Fatalf("message %q", got.Message)
		}
	}
}

// TestVolumeDeletingMemberIsReplacedWhileItServes walks a replacement of a member whose PVC is being deleted: a
// successor joins as a learner first, is promoted, and only then is the doomed member removed (leadership moved
// off it first when it leads).
func TestVolumeDeletingMemberIsReplacedWhileItServes(t *testing.T) {
	a, b, c := voter("c-a", 1), voter("c-b", 2), voter("c-c", 3)
	doomed := func(m Member) Member { m.HasPVC, m.VolumeDeleting = false, true; return m }
	successor := Member{Name: "c-new", InEtcd: true, IsLearner: true, ID: 9, HasPod: true, HasPVC: true, Healthy: true, Started: true}
	promoted := successor
	promoted.IsLearner, promoted.PodReady = false, true
	tests := map[string]struct {
		obs    Observation
		want   ActionKind
		reason string
		id     uint64
	}{
		"first a successor joins as a learner":        {formed(a, b, doomed(c)), AddLearner, etcdv1alpha1.ReasonReplacingMember, 0},
		"then it is promoted":                         {formed(a, b, doomed(c), successor), PromoteLearner, etcdv1alpha1.ReasonScalingUp, 9},
		"then the doomed member is removed":           {formed(a, b, doomed(c), promoted), RemoveMember, etcdv1alpha1.ReasonReplacingMember, 3},
		"the leader hands over leadership first":      {formed(doomed(a), b, c, promoted), MoveLeader, etcdv1alpha1.ReasonMovingLeader, 1},
		"a learner whose volume goes is not promoted": {formed(a, b, c, doomed(successor)), RemoveMember, etcdv1alpha1.ReasonReplacingLearner, 9},
		"1-member cluster: successor first":           {formed(doomed(a)), AddLearner, etcdv1alpha1.ReasonReplacingMember, 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			replicas := 3
			if len(tt.obs.Members) == 1 {
				replicas = 1
			}
			got := Next(Spec{Replicas: replicas, Version: "3.6.16"}, tt.obs)
			if got.Kind != tt.want || got.Reason != tt.reason || got.MemberID != tt.id {
				t.Fatalf("Next = %s/%s id %d (%s), want %s/%s id %d", got.Kind, got.Reason, got.MemberID, got.Message, tt.want, tt.reason, tt.id)
			}
		})
	}
}
