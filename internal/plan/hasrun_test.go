package plan

import (
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func TestHasRun(t *testing.T) {
	joined := Member{Name: "c-d", HasPVC: true, InitialCluster: cluster3, InitialState: "existing"}
	boot := Member{Name: "c-a", HasPVC: true, InitialCluster: cluster3, InitialState: "new"}
	tests := map[string]struct {
		m            Member
		bootstrapped bool
		want         bool
	}{
		"etcd lists it started":                                {Member{Started: true}, false, true},
		"its volume records it":                                {func() Member { m := joined; m.VolumeHasRun = true; return m }(), true, true},
		"status lists it with the version it reported":         {func() Member { m := joined; m.ServedBefore = true; return m }(), true, true},
		"a bootstrap member of a formed cluster":               {boot, true, true},
		"a joined member with no record and no list":           {joined, true, false},
		"a bootstrap member before the cluster formed":         {boot, false, false},
		"a bootstrap member from a snapshot (a re-seed's)":     {func() Member { m := boot; m.Restore = "r1"; return m }(), true, false},
		"a bootstrap member from a snapshot, recorded as run":  {func() Member { m := boot; m.Restore, m.VolumeHasRun = "r1", true; return m }(), true, true},
		"a learner added, never started, nothing recorded yet": {Member{Name: "c-n", InEtcd: true, IsLearner: true, InitialState: "existing"}, true, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := HasRun(tt.m, tt.bootstrapped); got != tt.want {
				t.Errorf("HasRun = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRunsToRecord: the record goes on every volume of a member that has run and does not say so yet, including
// volumes from before Steward wrote it (status or the bootstrap shows the run); never on a leftover.
func TestRunsToRecord(t *testing.T) {
	a, b, c := voter("c-a", 1), voter("c-b", 2), voter("c-c", 3)
	b.VolumeHasRun = true
	learner := Member{Name: "c-n", HasPod: true, HasPVC: true, InEtcd: true, IsLearner: true, ID: 9, InitialState: "existing"}
	removed := Member{Name: "c-r", HasPVC: true, Removed: true, ServedBefore: true}
	obs := formed(a, b, c, learner, removed)
	var got []string
	for _, m := range RunsToRecord(obs) {
		got = append(got, m.Name)
	}
	if want := []string{"c-a", "c-c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("RunsToRecord = %v, want %v", got, want)
	}
	// An upgrade of Steward while the members' Pods are gone: no list, no record yet; status remembers them.
	old := noList(podGone(voter("c-a", 1)), func() Member {
		m := podGone(voter("c-d", 4))
		m.InitialState, m.ServedBefore = "existing", true
		return m
	}(),
		func() Member { m := podGone(voter("c-e", 5)); m.InitialState = "existing"; return m }())
	got = nil
	for _, m := range RunsToRecord(old) {
		got = append(got, m.Name)
	}
	if want := []string{"c-a", "c-d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("RunsToRecord without a list = %v, want %v", got, want)
	}
}

// TestEmptiedVolume walks the volume of a member that has run coming back emptied (a re-imaged node, a wiped local
// disk) with its Pod gone: the Pod is re-created refusing an empty data dir, whatever the member list says; its
// refusal is data-loss evidence; with no quorum left the cluster waits for a human (or the quorum-loss policy)
// naming the member and its volume, and with a quorum the member is replaced.
func TestEmptiedVolume(t *testing.T) {
	only := Member{Name: "c-a", HasPVC: true, PVC: "c-a-data", InitialCluster: map[string]string{"c-a": peerURL("c-a")}, InitialState: "new",
		VolumeVersion: "3.6.16", VolumeImage: "etcd:v3.6.16", VolumeTLS: TLSOn}
	refused := func(m Member) Member {
		m.HasPod, m.PodAge, m.DataLoss = true, 10*time.Second, "data dir empty, but this member has run (steward-agent refused to start etcd)"
		return m
	}
	a, b := voter("c-a", 1), voter("c-b", 2)
	joined := voter("c-d", 4) // a member that joined later, as a learner: "existing"
	joined.InitialState, joined.VolumeHasRun, joined.PVC = "existing", true, "c-d-data"
	one := Spec{Replicas: 1, Version: "3.6.16", TLS: true, RecoveryGrace: time.Minute}
	three := Spec{Replicas: 3, Version: "3.6.16", TLS: true, RecoveryGrace: time.Minute}
	withPolicy := func(s Spec) Spec { s.QuorumLossAfter = 30 * time.Second; return s }
	tests := map[string]struct {
		spec    Spec
		obs     Observation
		want    ActionKind
		reason  string
		guarded []string
		says    []string
	}{
		"1 member, its volume records the run: re-created guarded": {
			spec: one, obs: noList(func() Member { m := only; m.VolumeHasRun = true; return m }()),
			want: RecreateMemberPods, reason: etcdv1alpha1.ReasonRecreatingMember, guarded: []string{"c-a"},
		},
		"1 member from before the record: status remembers it served": {
			spec: one, obs: func() Observation {
				o := noList(func() Member { m := only; m.ServedBefore = true; return m }())
				o.Bootstrapped = false // not even the formed bootstrap is remembered: status's members are enough
				return o
			}(),
			want: CreateMemberPods, reason: etcdv1alpha1.ReasonBootstrapping, guarded: []string{"c-a"},
		},
		"1 member refused its empty data dir: the loss is reported, naming member and volume": {
			spec: one, obs: noList(refused(only)),
			want: Wait, reason: etcdv1alpha1.ReasonQuorumUnrecoverable,
			says: []string{"member c-a, volume c-a-data: data dir empty", "EtcdRestore", "spec.confirm"},
		},
		"1 member refused, policy set, before its time: reported": {
			spec: withPolicy(one), obs: func() Observation {
				o := noList(refused(only))
				o.QuorumLostFor, o.LatestBackup = 10*time.Second, "b1"
				return o
			}(),
			want: Wait, reason: etcdv1alpha1.ReasonQuorumUnrecoverable, says: []string{"c-a-data", "spec.quorumLossRecovery does so after 30s"},
		},
		"1 member refused, policy set, its time passed: restored from the newest backup": {
			spec: withPolicy(one), obs: func() Observation {
				o := noList(refused(only))
				o.QuorumLostFor, o.LatestBackup = time.Minute, "b1"
				return o
			}(),
			want: CreateRestore, reason: etcdv1alpha1.ReasonQuorumLossRecovery,
		},
		"1 member refused, policy set, no backup: reported, never started empty": {
			spec: withPolicy(one), obs: func() Observation { o := noList(refused(only)); o.QuorumLostFor = time.Minute; return o }(),
			want: Wait, reason: etcdv1alpha1.ReasonNoBackupToRestore,
		},
		"3 members, all Pods gone, a joined member's volume emptied: all re-created guarded": {
			spec: three, obs: noList(podGone(a), podGone(b), podGone(joined)),
			want: RecreateMemberPods, reason: etcdv1alpha1.ReasonRecreatingMember, guarded: []string{"c-a", "c-b", "c-d"},
		},
		"3 members, the joined one refused, the others have no quorum yet: wait for them": {
			spec: three, obs: noList(a, b, refused(podGone(joined))),
			want: Wait, reason: etcdv1alpha1.ReasonWaitingForMembers,
		},
		"3 members, the joined one refused, the others formed a quorum: replaced": {
			spec: three, obs: formed(a, b, func() Member { m := refused(joined); m.Healthy, m.PodReady = false, false; return m }()),
			want: RemoveMember, reason: etcdv1alpha1.ReasonReplacingMember, says: []string{"c-d", "lost or corrupt"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := Next(tt.spec, tt.obs)
			if got.Kind != tt.want || got.Reason != tt.reason {
				t.Fatalf("Next = %s/%s (%s), want %s/%s", got.Kind, got.Reason, got.Message, tt.want, tt.reason)
			}
			guarded := got.HaveRun
			for _, p := range got.Pods {
				if p.HasRun {
					guarded = append(guarded, p.Name)
				}
			}
			if !reflect.DeepEqual(guarded, tt.guarded) {
				t.Errorf("Pods re-created refusing an empty data dir: %v, want %v (%+v)", guarded, tt.guarded, got.Pods)
			}
			for _, s := range tt.says {
				if !strings.Contains(got.Message, s) {
					t.Errorf("message %q does not say %q", got.Message, s)
				}
			}
		})
	}
}

// TestMembersThatRanAreAlwaysGuarded: whatever the cluster looks like, with or without a member list, every Pod
// the planner creates for a member that has run (HasRun) refuses an empty data dir, and a bootstrap never takes a
// name of such a member. Together with resources (TestInitialClusterState, TestEtcdRunsGuarded), a member that
// has run never starts etcd on an empty data dir, and one that bootstrapped alone never with "new".
func TestMembersThatRanAreAlwaysGuarded(t *testing.T) {
	rng := rand.New(rand.NewSource(39))
	names := []string{"c-a", "c-b", "c-c", "c-d", "c-e"}
	alone := map[string]string{"c-a": peerURL("c-a")}
	guardedPods := 0
	for i := 0; i < 50000; i++ {
		reachable := rng.Intn(2) == 0
		var members []Member
		for j, n := range names {
			if rng.Intn(4) == 0 {
				continue
			}
			m := Member{Name: n, HasPod: rng.Intn(2) == 0, HasPVC: rng.Intn(4) > 0, PodDeleting: rng.Intn(6) == 0, Healthy: rng.Intn(2) == 0,
				PodReady: rng.Intn(2) == 0, PodVersion: "3.6.16", PodAge: time.Duration(rng.Intn(120)) * time.Second,
				VolumeHasRun: rng.Intn(3) == 0, ServedBefore: rng.Intn(4) == 0, Removed: rng.Intn(10) == 0,
				UnhealthyFor: time.Duration(rng.Intn(3)) * time.Minute, LearnerFor: time.Hour, PodTLS: TLSOn}
			if reachable && rng.Intn(3) > 0 {
				m.InEtcd, m.ID, m.IsLearner = true, uint64(j+1), rng.Intn(5) == 0
				m.Started = rng.Intn(4) > 0
				m.PeerURL = peerURL(n)
			}
			if (m.HasPod || m.HasPVC) && rng.Intn(5) > 0 {
				m.InitialCluster, m.InitialState = cluster3, []string{"new", "existing"}[rng.Intn(2)]
				if rng.Intn(4) == 0 {
					m.InitialCluster = alone
				}
			}
			if rng.Intn(8) == 0 {
				m.DataLoss = "data dir empty, but this member has run (steward-agent refused to start etcd)"
			}
			if rng.Intn(10) == 0 {
				m.Restore = "r1"
			}
			members = append(members, m)
		}
		spec := Spec{Replicas: 1 + 2*rng.Intn(3), Version: "3.6.16", TLS: true, RecoveryGrace: time.Minute,
			ReplaceUnhealthyAfter: time.Duration(rng.Intn(2)) * time.Minute}
		if rng.Intn(2) == 0 {
			spec.QuorumLossAfter = time.Minute
		}
		obs := Observation{Members: members, Bootstrapped: rng.Intn(3) > 0, EtcdReachable: reachable, LeaderID: 1,
			QuorumLostFor: time.Duration(rng.Intn(120)) * time.Second, LatestBackup: "b1",
			NewMemberNames: []string{"c-x", "c-y", "c-z"}, PeerURL: peerURL}
		if rng.Intn(6) == 0 {
			obs.Restore = &Restore{Name: "r1", Ready: true, Reseed: rng.Intn(2) == 0}
		}
		got := Next(spec, obs)
		ran := func(name string) bool {
			m, ok := find(members, name)
			return ok && HasRun(m, obs.Bootstrapped)
		}
		switch got.Kind {
		case RecreateMemberPods:
			for _, p := range got.Pods {
				if ran(p.Name) && !p.HasRun {
					t.Fatalf("re-created %s, which has run, without the guard: %+v\nobservation %+v", p.Name, p, obs)
				}
				if p.HasRun {
					guardedPods++
				}
			}
		case CreateMemberPods:
			for _, n := range got.Members {
				if ran(n) && !slices.Contains(got.HaveRun, n) {
					t.Fatalf("created the Pod of %s, which has run, without the guard: %+v\nobservation %+v", n, got, obs)
				}
			}
		case Bootstrap:
			for _, n := range got.Members {
				if _, ok := find(members, n); ok {
					t.Fatalf("bootstrap of %v takes the name of member %s", got.Members, n)
				}
			}
		}
	}
	if guardedPods == 0 {
		t.Fatal("no guarded Pod was ever planned: the generator misses the cases")
	}
}
