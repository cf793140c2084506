package plan

import (
	"testing"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func TestRestoreSteps(t *testing.T) {
	spec3 := Spec{Replicas: 3, Version: "3.6.16"}
	names := []string{"c-x", "c-y", "c-z", "c-w"}
	fromB := Spec{Replicas: 3, Version: "3.6.16", FromBackup: "b1"}
	standby := Spec{Replicas: 3, Version: "3.6.16", FromBackup: "c-standby-seed", Standby: true}
	ready := &Restore{Name: "r1", Ready: true}
	reseedReady := &Restore{Name: "r1", Reseed: true, Ready: true}
	// Quorum lost: two of three members down (their Pods not Ready: etcd's /readyz needs a leader).
	lost := with(with(healthy3(), "c-a", func(m *Member) { m.Healthy, m.PodReady = false, false }), "c-b", func(m *Member) { m.Healthy, m.PodReady = false, false })
	for i := range lost {
		lost[i].PodAge = 2 * time.Hour // running since long before quorum was lost
	}
	// Quorum lost because the Pods of two members are gone; their volumes are intact.
	podsGone := with(with(lost, "c-a", func(m *Member) { m.HasPod, m.PodReady, m.PodAge = false, false, 0 }), "c-b",
		func(m *Member) { m.HasPod, m.PodReady, m.PodAge = false, false, 0 })
	// The same two re-created 30 seconds ago, not yet back.
	recreated := with(with(lost, "c-a", func(m *Member) { m.PodAge = 30 * time.Second }), "c-b", func(m *Member) { m.PodAge = 30 * time.Second })
	withinAMinute := Spec{Replicas: 3, Version: "3.6.16", QuorumLossAfter: time.Minute, RecoveryGrace: time.Minute}
	fresh := func(name string, started bool) Member {
		initial := map[string]string{"c-x": peerURL("c-x"), "c-y": peerURL("c-y"), "c-z": peerURL("c-z")}
		m := Member{Name: name, HasPod: true, HasPVC: true, PodReady: started, PodVersion: "3.6.16", InitialCluster: initial, InitialState: "new",
			InEtcd: started, Started: started, Healthy: started, Restore: "r1"}
		if started {
			m.RunningVersion = "3.6.16"
		}
		return m
	}
	oneSeed := &Restore{Name: "r1", Ready: true, OneSeed: true}
	unreadable := &Restore{Name: "r1", Ready: true, OneSeed: true, NotMountable: "claim backups is on node n1 only, which is cordoned"}
	seed := Member{Name: "c-x", HasPod: true, HasPVC: true, PodReady: true, PodVersion: "3.6.16", RunningVersion: "3.6.16",
		InitialCluster: map[string]string{"c-x": peerURL("c-x")}, InitialState: "new", InEtcd: true, Started: true, Healthy: true, Restore: "r1"}
	tests := map[string]struct {
		spec    Spec
		obs     Observation
		want    ActionKind
		reason  string
		members []string
		restore string
	}{
		"fromBackup: first the restore is created": {
			spec: fromB, obs: Observation{NewMemberNames: names}, want: CreateRestore, reason: etcdv1alpha1.ReasonRestoringFromBackup,
		},
		"standby: nothing starts before the seed is Complete": {
			spec: standby, obs: Observation{NewMemberNames: names}, want: Wait, reason: etcdv1alpha1.ReasonBootstrapping,
		},
		"standby: the seed Complete, its restore is created": {
			spec: standby, obs: Observation{NewMemberNames: names, StandbySeedComplete: true}, want: CreateRestore, reason: etcdv1alpha1.ReasonRestoringFromBackup,
		},
		"standby: the seed's restore verified, every member starts from it": {
			spec: standby, obs: Observation{NewMemberNames: names, Restore: ready}, want: Bootstrap, reason: etcdv1alpha1.ReasonBootstrapping,
			members: []string{"c-x", "c-y", "c-z"}, restore: "r1",
		},
		"fromBackup: members wait for the snapshot to be verified": {
			spec: fromB, obs: Observation{NewMemberNames: names, Restore: &Restore{Name: "r1"}}, want: Wait, reason: etcdv1alpha1.ReasonWaitingForRestore,
		},
		"fromBackup: a failed restore creates nothing and needs a human": {
			spec: fromB, obs: Observation{NewMemberNames: names, Restore: &Restore{Name: "r1", Failed: true, Message: "SnapshotCorrupt"}}, want: Wait, reason: etcdv1alpha1.ReasonRestoreFailed,
		},
		"fromBackup: verified, every member starts from the snapshot": {
			spec: fromB, obs: Observation{NewMemberNames: names, Restore: ready}, want: Bootstrap, reason: etcdv1alpha1.ReasonBootstrapping,
			members: []string{"c-x", "c-y", "c-z"}, restore: "r1",
		},
		"fromBackup: an interrupted bootstrap creates the rest from the same restore": {
			spec: fromB, obs: Observation{NewMemberNames: names, Restore: ready, EtcdReachable: false,
				Members: []Member{fresh("c-x", false), {Name: "c-y", HasPVC: true, InitialCluster: fresh("c-x", false).InitialCluster, InitialState: "new", Restore: "r1"}}},
			want: CreateMemberPods, members: []string{"c-y", "c-z"}, restore: "r1",
		},
		"fromBackup: an interrupted bootstrap whose restore is gone waits": {
			spec: fromB, obs: Observation{NewMemberNames: names, Members: []Member{fresh("c-x", false)}},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForRestore,
		},
		"fromBackup: a snapshot on a ReadWriteOnce claim seeds one member": {
			spec: fromB, obs: Observation{NewMemberNames: names, Restore: oneSeed}, want: Bootstrap, reason: etcdv1alpha1.ReasonBootstrapping,
			members: []string{"c-x"}, restore: "r1",
		},
		"fromBackup: the seed formed, the others wait for the restore to complete": {
			spec: fromB, obs: Observation{NewMemberNames: names, Restore: oneSeed, Bootstrapped: true, EtcdReachable: true, ClusterVersion: "3.6.0",
				Members: []Member{seed}},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForRestore,
		},
		"fromBackup: the restore complete, the others join the seed as learners": {
			spec: fromB, obs: Observation{NewMemberNames: names, Bootstrapped: true, EtcdReachable: true, ClusterVersion: "3.6.0",
				Members: []Member{seed}},
			want: AddLearner, reason: etcdv1alpha1.ReasonScalingUp,
		},
		"fromBackup: a snapshot no node of the cluster can read creates nothing": {
			spec: fromB, obs: Observation{NewMemberNames: names, Restore: unreadable}, want: Wait, reason: etcdv1alpha1.ReasonBackupNotMountable,
		},
		"reseed: a snapshot no node of the cluster can read stops no old member": {
			spec: spec3, obs: Observation{Bootstrapped: true, EtcdReachable: false, Members: lost, Restore: &Restore{Name: "r1", Reseed: true, Ready: true,
				NotMountable: "no node"}, NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonBackupNotMountable,
		},
		"reseed: the old members gone, a snapshot on a ReadWriteOnce claim seeds one member": {
			spec: spec3, obs: Observation{Bootstrapped: true, Restore: &Restore{Name: "r1", Reseed: true, Ready: true, OneSeed: true}, NewMemberNames: names},
			want: Bootstrap, members: []string{"c-x"}, restore: "r1",
		},
		"reseed: refused while the old members have quorum": {
			spec: spec3, obs: Observation{Bootstrapped: true, EtcdReachable: true, Members: healthy3(), Restore: reseedReady, NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonRestoreRefused,
		},
		"reseed: refused while etcd does not answer Steward but a quorum of member Pods are Ready": {
			spec: spec3, obs: Observation{Bootstrapped: true, EtcdReachable: false, Members: healthy3(), Restore: reseedReady, NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonRestoreRefused,
		},
		"reseed: refused while etcd answers without a healthy quorum but a quorum of member Pods are Ready": {
			spec: spec3, obs: Observation{Bootstrapped: true, EtcdReachable: true, Members: with(with(healthy3(), "c-a", func(m *Member) { m.Healthy = false }), "c-b", func(m *Member) { m.Healthy = false }),
				Restore: reseedReady, NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonRestoreRefused,
		},
		"reseed: one Ready Pod of three is no quorum: the members are stopped": {
			spec: spec3, obs: Observation{Bootstrapped: true, EtcdReachable: false, Members: with(lost, "c-c", func(m *Member) { m.PodReady = true }), Restore: reseedReady, NewMemberNames: names},
			want: RetireMembers, reason: etcdv1alpha1.ReasonReseeding, members: []string{"c-a", "c-b", "c-c"}, restore: "r1",
		},
		"rollback: a healthy cluster's running members are stopped, all at once": {
			spec: spec3, obs: Observation{Bootstrapped: true, EtcdReachable: true, Members: healthy3(), Restore: &Restore{Name: "r1", Reseed: true, Ready: true, Rollback: true}, NewMemberNames: names},
			want: RetireMembers, reason: etcdv1alpha1.ReasonReseeding, members: []string{"c-a", "c-b", "c-c"}, restore: "r1",
		},
		"rollback: not before its snapshot is verified (and its safety backup taken)": {
			spec: spec3, obs: Observation{Bootstrapped: true, EtcdReachable: true, Members: healthy3(), Restore: &Restore{Name: "r1", Reseed: true, Rollback: true}, NewMemberNames: names},
			want: None,
		},
		"reseed: an unconfirmed or unverified restore does nothing": {
			spec: spec3, obs: Observation{Bootstrapped: true, EtcdReachable: false, Members: lost, Restore: &Restore{Name: "r1", Reseed: true}, NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"reseed: first every old Pod goes, at once": {
			spec: spec3, obs: Observation{Bootstrapped: true, EtcdReachable: false, Members: lost, Restore: reseedReady, NewMemberNames: names},
			want: RetireMembers, reason: etcdv1alpha1.ReasonReseeding, members: []string{"c-a", "c-b", "c-c"}, restore: "r1",
		},
		"reseed: members missing their Pods on intact volumes come back first, and are not stopped": {
			spec: withinAMinute, obs: Observation{Bootstrapped: true, EtcdReachable: false, Members: podsGone, Restore: reseedReady, NewMemberNames: names},
			want: RecreateMemberPods, reason: etcdv1alpha1.ReasonRecreatingMember, members: []string{"c-a", "c-b"},
		},
		"reseed: re-created members get their grace to form a quorum": {
			spec: withinAMinute, obs: Observation{Bootstrapped: true, EtcdReachable: false, Members: recreated, Restore: reseedReady, NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"reseed: after the grace, the re-created members are stopped too": {
			spec: Spec{Replicas: 3, Version: "3.6.16", RecoveryGrace: 20 * time.Second},
			obs:  Observation{Bootstrapped: true, EtcdReachable: false, Members: recreated, Restore: reseedReady, NewMemberNames: names},
			want: RetireMembers, reason: etcdv1alpha1.ReasonReseeding, members: []string{"c-a", "c-b", "c-c"}, restore: "r1",
		},
		"reseed: then their volumes are set aside": {
			spec: spec3, obs: Observation{Bootstrapped: true, Restore: reseedReady, NewMemberNames: names, Members: []Member{
				{Name: "c-a", HasPVC: true, InitialCluster: cluster3, RetiredBy: "r1"}, {Name: "c-b", HasPVC: true, HasPod: true, PodDeleting: true, RetiredBy: "r1"}}},
			want: Wait, reason: etcdv1alpha1.ReasonPodDeleting,
		},
		"reseed: volumes set aside once no old Pod is left (their members are not brought back)": {
			spec: spec3, obs: Observation{Bootstrapped: true, Restore: reseedReady, NewMemberNames: names, Members: []Member{
				{Name: "c-a", HasPVC: true, InitialCluster: cluster3, RetiredBy: "r1"}, {Name: "c-b", HasPVC: true, InitialCluster: cluster3, RetiredBy: "r1"}}},
			want: RetireVolumes, members: []string{"c-a", "c-b"}, restore: "r1",
		},
		"reseed: then the new members bootstrap from the snapshot": {
			spec: spec3, obs: Observation{Bootstrapped: true, Restore: reseedReady, NewMemberNames: names},
			want: Bootstrap, members: []string{"c-x", "c-y", "c-z"}, restore: "r1",
		},
		"reseed: new members starting are waited for": {
			spec: spec3, obs: Observation{Bootstrapped: true, Restore: reseedReady, NewMemberNames: names,
				Members: []Member{fresh("c-x", false), fresh("c-y", false), fresh("c-z", false)}},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"reseed: formed, the new cluster is reconciled as any other": {
			spec: spec3, obs: Observation{Bootstrapped: true, EtcdReachable: true, Restore: reseedReady, NewMemberNames: names, ClusterVersion: "3.6.0",
				Members: []Member{fresh("c-x", true), fresh("c-y", true), fresh("c-z", true)}},
			want: None,
		},
		"policy: not before the time without quorum": {
			spec: Spec{Replicas: 3, Version: "3.6.16", QuorumLossAfter: time.Minute},
			obs:  Observation{Bootstrapped: true, Members: lost, QuorumLostFor: 59 * time.Second, LatestBackup: "b9", NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"policy: after it, a confirmed restore of the newest backup": {
			spec: Spec{Replicas: 3, Version: "3.6.16", QuorumLossAfter: time.Minute},
			obs:  Observation{Bootstrapped: true, Members: lost, QuorumLostFor: time.Minute, LatestBackup: "b9", NewMemberNames: names},
			want: CreateRestore, reason: etcdv1alpha1.ReasonQuorumLossRecovery,
		},
		"policy: Pods missing on intact volumes are re-created, never re-seeded": {
			spec: withinAMinute,
			obs:  Observation{Bootstrapped: true, Members: podsGone, QuorumLostFor: time.Hour, LatestBackup: "b9", NewMemberNames: names},
			want: RecreateMemberPods, reason: etcdv1alpha1.ReasonRecreatingMember, members: []string{"c-a", "c-b"},
		},
		"policy: members re-created less than after ago hold the re-seed back": {
			spec: withinAMinute,
			obs:  Observation{Bootstrapped: true, Members: recreated, QuorumLostFor: time.Hour, LatestBackup: "b9", NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"policy: members re-created after ago that did not form a quorum are re-seeded": {
			spec: withinAMinute,
			obs: Observation{Bootstrapped: true, Members: with(with(recreated, "c-a", func(m *Member) { m.PodAge = time.Minute }), "c-b",
				func(m *Member) { m.PodAge = time.Minute }), QuorumLostFor: time.Hour, LatestBackup: "b9", NewMemberNames: names},
			want: CreateRestore, reason: etcdv1alpha1.ReasonQuorumLossRecovery,
		},
		"policy: one member still within its time holds the re-seed back": {
			spec: withinAMinute,
			obs: Observation{Bootstrapped: true, Members: with(recreated, "c-a", func(m *Member) { m.PodAge = time.Minute }), QuorumLostFor: time.Hour,
				LatestBackup: "b9", NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"policy: members whose crash shows lost data do not hold the re-seed back": {
			spec: withinAMinute,
			obs: Observation{Bootstrapped: true, Members: with(with(recreated, "c-a", func(m *Member) { m.DataLoss = "raft log lost" }), "c-b",
				func(m *Member) { m.DataLoss = "raft log lost" }), QuorumLostFor: time.Hour, LatestBackup: "b9", NewMemberNames: names},
			want: CreateRestore, reason: etcdv1alpha1.ReasonQuorumLossRecovery,
		},
		"policy: members whose Pods are still terminating hold the re-seed back (they come back once gone)": {
			spec: withinAMinute,
			obs: Observation{Bootstrapped: true, Members: with(lost, "c-a", func(m *Member) { m.PodDeleting, m.PodOverdue = true, time.Hour }),
				QuorumLostFor: time.Hour, LatestBackup: "b9", NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"policy: without a backup it waits for a human": {
			spec: Spec{Replicas: 3, Version: "3.6.16", QuorumLossAfter: time.Minute},
			obs:  Observation{Bootstrapped: true, Members: lost, QuorumLostFor: time.Hour, NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonNoBackupToRestore,
		},
		"policy: once per loss of quorum": {
			spec: Spec{Replicas: 3, Version: "3.6.16", QuorumLossAfter: time.Minute},
			obs:  Observation{Bootstrapped: true, Members: lost, QuorumLostFor: time.Hour, LatestBackup: "b9", AutoRestoreTried: "c-auto-1", NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonAutoRestoreFailed,
		},
		"policy: not while a restore is under way": {
			spec: Spec{Replicas: 3, Version: "3.6.16", QuorumLossAfter: time.Minute},
			obs:  Observation{Bootstrapped: true, Members: lost, QuorumLostFor: time.Hour, LatestBackup: "b9", Restore: &Restore{Name: "r0", Reseed: true}, NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"manual policy never re-seeds": {
			spec: spec3, obs: Observation{Bootstrapped: true, Members: lost, QuorumLostFor: 24 * time.Hour, LatestBackup: "b9", NewMemberNames: names},
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tt.obs.PeerURL = peerURL
			got := Next(tt.spec, tt.obs)
			if got.Kind != tt.want || (tt.reason != "" && got.Reason != tt.reason) {
				t.Fatalf("Next = %s/%s (%s), want %s/%s", got.Kind, got.Reason, got.Message, tt.want, tt.reason)
			}
			if tt.members != nil && !equalStrings(got.Members, tt.members) {
				t.Errorf("members %v, want %v", got.Members, tt.members)
			}
			if got.Restore != tt.restore {
				t.Errorf("restore %q, want %q", got.Restore, tt.restore)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPodsServeQuorum(t *testing.T) {
	for _, tt := range []struct {
		ready, members int
		want           bool
	}{{0, 0, false}, {1, 1, true}, {0, 1, false}, {1, 3, false}, {2, 3, true}, {3, 3, true}, {2, 5, false}, {3, 5, true}} {
		if got := PodsServeQuorum(tt.ready, tt.members); got != tt.want {
			t.Errorf("PodsServeQuorum(%d, %d) = %v, want %v", tt.ready, tt.members, got, tt.want)
		}
	}
}

// TestQuorumLost: a formed cluster has lost quorum only when etcd's API shows no healthy quorum and fewer of its
// Pods than a quorum are Ready; a cluster that has not formed never has.
func TestQuorumLost(t *testing.T) {
	voter := func(name string, healthy bool) Member {
		return Member{Name: name, HasPod: true, HasPVC: true, InEtcd: true, Healthy: healthy}
	}
	three := func(healthy int) []Member {
		var ms []Member
		for i, n := range []string{"a", "b", "c"} {
			ms = append(ms, voter(n, i < healthy))
		}
		return ms
	}
	tests := map[string]struct {
		obs   Observation
		ready int
		want  bool
	}{
		"healthy quorum":                      {Observation{Bootstrapped: true, EtcdReachable: true, Members: three(2)}, 2, false},
		"one healthy of three, one Pod Ready": {Observation{Bootstrapped: true, EtcdReachable: true, Members: three(1)}, 1, true},
		"no healthy quorum, Pods serve one":   {Observation{Bootstrapped: true, EtcdReachable: true, Members: three(1)}, 2, false},
		"no member list, no Pod Ready":        {Observation{Bootstrapped: true, Members: three(0)}, 0, true},
		"no member list, Pods serve a quorum": {Observation{Bootstrapped: true, Members: three(0)}, 2, false},
		"not formed":                          {Observation{EtcdReachable: true, Members: three(0)}, 0, false},
		"no members at all":                   {Observation{Bootstrapped: true, EtcdReachable: true}, 0, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := QuorumLost(tt.obs, tt.ready); got != tt.want {
				t.Errorf("QuorumLost = %v, want %v", got, tt.want)
			}
		})
	}
}
