package plan

import (
	"math/rand"
	"reflect"
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func peerURL(name string) string { return "http://" + name + ".c-peer:2380" }

// cluster3 is the initial cluster of a three-member bootstrap of names a, b, c.
var cluster3 = map[string]string{"c-a": peerURL("c-a"), "c-b": peerURL("c-b"), "c-c": peerURL("c-c")}

func bootMember(name string) Member {
	return Member{Name: name, HasPod: true, HasPVC: true, PodReady: true, PodVersion: "3.6.16",
		InitialCluster: cluster3, InitialState: "new", InEtcd: true, Started: true, Healthy: true}
}

func healthy3() []Member { return []Member{bootMember("c-a"), bootMember("c-b"), bootMember("c-c")} }

func with(members []Member, name string, change func(*Member)) []Member {
	out := append([]Member(nil), members...)
	for i := range out {
		if out[i].Name == name {
			change(&out[i])
		}
	}
	return out
}

func TestNext(t *testing.T) {
	spec3 := Spec{Replicas: 3, Version: "3.6.16"}
	names := []string{"c-c", "c-a", "c-b", "c-x"}
	tests := map[string]struct {
		spec    Spec
		obs     Observation
		want    ActionKind
		reason  string
		members []string
		initial map[string]string
	}{
		"paused cluster is left alone": {
			spec: Spec{Replicas: 3, Version: "3.6.16", Paused: true}, obs: Observation{NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonPaused,
		},
		"new one-member cluster bootstraps one member": {
			spec: Spec{Replicas: 1, Version: "3.6.16"}, obs: Observation{NewMemberNames: names},
			want: Bootstrap, reason: etcdv1alpha1.ReasonBootstrapping, members: []string{"c-c"}, initial: map[string]string{"c-c": peerURL("c-c")},
		},
		"new three-member cluster bootstraps all members at once": {
			spec: spec3, obs: Observation{NewMemberNames: names},
			want: Bootstrap, reason: etcdv1alpha1.ReasonBootstrapping, members: []string{"c-a", "c-b", "c-c"}, initial: cluster3,
		},
		"a formed cluster whose members and volumes all vanished is not silently re-created empty": {
			spec: spec3, obs: Observation{Bootstrapped: true, NewMemberNames: names}, want: Wait, reason: etcdv1alpha1.ReasonMemberDataLost,
		},
		"not enough names waits": {
			spec: spec3, obs: Observation{NewMemberNames: names[:2]}, want: Wait, reason: etcdv1alpha1.ReasonBootstrapping,
		},
		"bootstrap interrupted after the first Pod creates the others with the same initial cluster": {
			spec: spec3,
			obs: Observation{NewMemberNames: names, Members: []Member{{Name: "c-a", HasPod: true, HasPVC: true,
				InitialCluster: cluster3, InitialState: "new"}}},
			want: CreateMemberPods, reason: etcdv1alpha1.ReasonBootstrapping, members: []string{"c-b", "c-c"}, initial: cluster3,
		},
		"bootstrap interrupted after the first PVC creates all Pods": {
			spec: spec3,
			obs: Observation{NewMemberNames: names, Members: []Member{{Name: "c-a", HasPVC: true,
				InitialCluster: cluster3, InitialState: "new"}}},
			want: CreateMemberPods, reason: etcdv1alpha1.ReasonBootstrapping, members: []string{"c-a", "c-b", "c-c"}, initial: cluster3,
		},
		"deleted Pod of a started member with its PVC is recreated with the same identity": {
			spec: spec3, obs: Observation{EtcdReachable: true, Bootstrapped: true, NewMemberNames: names,
				Members: with(healthy3(), "c-b", func(m *Member) { m.HasPod, m.PodReady, m.Healthy = false, false, false })},
			want: RecreateMemberPods, reason: etcdv1alpha1.ReasonRecreatingMember, members: []string{"c-b"}, initial: cluster3,
		},
		"started member whose Pod and PVC are gone is not recreated under its old identity": {
			spec: spec3, obs: Observation{EtcdReachable: true, NewMemberNames: names,
				Members: with(healthy3(), "c-b", func(m *Member) {
					m.HasPod, m.HasPVC, m.PodReady, m.Healthy, m.InitialCluster, m.InitialState = false, false, false, false, nil, ""
				})},
			want: Wait, reason: etcdv1alpha1.ReasonMemberDataLost,
		},
		"after bootstrap nothing is decided while etcd is unreachable": {
			spec: spec3, obs: Observation{EtcdReachable: false, Bootstrapped: true, NewMemberNames: names,
				Members: []Member{bootMember("c-a"), bootMember("c-b")}},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"Pod still terminating is waited for": {
			spec: spec3, obs: Observation{EtcdReachable: true, NewMemberNames: names,
				Members: with(healthy3(), "c-b", func(m *Member) { m.PodDeleting = true })},
			want: Wait, reason: etcdv1alpha1.ReasonPodDeleting,
		},
		"bootstrap members that disagree on the initial cluster are not touched": {
			spec: spec3, obs: Observation{NewMemberNames: names, Members: []Member{
				{Name: "c-a", HasPod: true, InitialCluster: cluster3, InitialState: "new"},
				{Name: "c-x", HasPod: true, InitialCluster: map[string]string{"c-x": peerURL("c-x")}, InitialState: "new"}}},
			want: Wait, reason: etcdv1alpha1.ReasonInconsistentBootstrap,
		},
		"members starting up are waited for": {
			spec: spec3, obs: Observation{EtcdReachable: true, NewMemberNames: names,
				Members: with(healthy3(), "c-c", func(m *Member) { m.Healthy, m.PodReady = false, false })},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"unreachable etcd is waited for": {
			spec: spec3, obs: Observation{EtcdReachable: false, NewMemberNames: names, Members: healthy3()},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"healthy cluster as specified needs nothing": {
			spec: spec3, obs: Observation{EtcdReachable: true, Bootstrapped: true, NewMemberNames: names, Members: healthy3()},
			want: None, reason: etcdv1alpha1.ReasonReconciled,
		},
		"changed version waits for etcd's cluster version before restarting anyone": {
			spec: Spec{Replicas: 3, Version: "3.6.15"}, obs: Observation{EtcdReachable: true, Bootstrapped: true, NewMemberNames: names, Members: healthy3()},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForClusterVersion,
		},
		"bootstrap members all healthy but not yet recorded as started wait": {
			spec: spec3, obs: Observation{EtcdReachable: true, NewMemberNames: names,
				Members: with(healthy3(), "c-c", func(m *Member) { m.Started = false })},
			want: Wait, reason: etcdv1alpha1.ReasonBootstrapping,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tt.obs.PeerURL = peerURL
			got := Next(tt.spec, tt.obs)
			if got.Kind != tt.want || got.Reason != tt.reason {
				t.Fatalf("Next = %s/%s (%s), want %s/%s", got.Kind, got.Reason, got.Message, tt.want, tt.reason)
			}
			if got.Message == "" {
				t.Error("action without a message")
			}
			if !reflect.DeepEqual(got.Members, tt.members) {
				t.Errorf("members = %v, want %v", got.Members, tt.members)
			}
			initial := got.InitialCluster
			if got.Kind == RecreateMemberPods {
				initial = got.Pods[0].InitialCluster
			}
			if tt.initial != nil && !reflect.DeepEqual(initial, tt.initial) {
				t.Errorf("initial cluster = %v, want %v", initial, tt.initial)
			}
		})
	}
}

// TestNextNeverStartsASecondIdentity checks invariants over random observations: a cluster with any Pod, PVC or
// etcd member is never bootstrapped again, a step never creates a member that has a Pod, and a member that ran
// is never recreated without its volume.
func TestNextNeverStartsASecondIdentity(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	names := []string{"c-a", "c-b", "c-c"}
	for i := 0; i < 20000; i++ {
		var members []Member
		for _, n := range names {
			if rng.Intn(4) == 0 {
				continue
			}
			m := Member{Name: n, HasPod: rng.Intn(2) == 0, HasPVC: rng.Intn(2) == 0, InEtcd: rng.Intn(2) == 0,
				PodDeleting: rng.Intn(5) == 0, Healthy: rng.Intn(2) == 0, PodReady: rng.Intn(2) == 0, PodVersion: "3.6.16"}
			m.Started = m.InEtcd && rng.Intn(2) == 0
			if (m.HasPod || m.HasPVC) && rng.Intn(3) > 0 {
				m.InitialCluster, m.InitialState = cluster3, "new"
			}
			members = append(members, m)
		}
		bootstrapped := rng.Intn(2) == 0
		obs := Observation{Members: members, Bootstrapped: bootstrapped, EtcdReachable: rng.Intn(2) == 0, NewMemberNames: []string{"c-x", "c-y", "c-z"}, PeerURL: peerURL}
		got := Next(Spec{Replicas: 3, Version: "3.6.16"}, obs)
		existing := false
		for _, m := range members {
			existing = existing || m.HasPod || m.HasPVC || m.InEtcd
		}
		if got.Kind == Bootstrap && existing {
			t.Fatalf("bootstrapped a cluster that has members: %+v", members)
		}
		if got.Kind != Bootstrap && got.Kind != CreateMemberPods && got.Kind != RecreateMemberPods {
			continue
		}
		for _, name := range got.Members {
			m, ok := find(members, name)
			if ok && m.HasPod {
				t.Fatalf("step %s creates member %s that has a Pod: %+v", got.Kind, name, members)
			}
			if (ok && (m.Started || bootstrapped) && !m.HasPVC) || (!ok && bootstrapped) {
				t.Fatalf("step %s recreates member %s that may have run, without its data: %+v", got.Kind, name, members)
			}
		}
	}
}
