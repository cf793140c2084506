package plan

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func TestCompareHashes(t *testing.T) {
	h := func(name string, hash uint32, compacted int64) MemberHash {
		return MemberHash{Name: name, Hash: hash, CompactRevision: compacted}
	}
	tests := map[string]struct {
		hashes     []MemberHash
		result     string
		mismatched []string
		msg        string
	}{
		"three agree":          {[]MemberHash{h("c-a", 7, 10), h("c-b", 7, 10), h("c-c", 7, 10)}, HashConsistent, nil, "3 members have the same hash"},
		"one differs of three": {[]MemberHash{h("c-c", 7, 10), h("c-a", 7, 10), h("c-b", 9, 10)}, HashMismatch, []string{"c-b"}, "members c-b differs"},
		"two differ alike of five, three agree": {[]MemberHash{h("c-a", 7, 10), h("c-b", 9, 10), h("c-c", 7, 10), h("c-d", 9, 10), h("c-e", 7, 10)},
			HashMismatch, []string{"c-b", "c-d"}, "c-a, c-c, c-e have 00000007"},
		"each of three differs: no majority": {[]MemberHash{h("c-a", 1, 10), h("c-b", 2, 10), h("c-c", 3, 10)}, HashNoMajority, []string{"c-a", "c-b", "c-c"},
			"cannot tell which data is right"},
		"two against two: no majority": {[]MemberHash{h("c-a", 1, 10), h("c-b", 1, 10), h("c-c", 3, 10), h("c-d", 3, 10)}, HashNoMajority,
			[]string{"c-a", "c-b", "c-c", "c-d"}, "no majority agrees"},
		"two members that differ: no majority": {[]MemberHash{h("c-a", 1, 10), h("c-b", 2, 10)}, HashNoMajority, []string{"c-a", "c-b"}, ""},
		"a compaction between two answers: inconclusive, not a mismatch": {[]MemberHash{h("c-a", 7, 10), h("c-b", 8, 12), h("c-c", 7, 10)},
			HashInconclusive, nil, "different compacted revisions"},
		"a member without an answer: inconclusive": {[]MemberHash{h("c-a", 7, 10), {Name: "c-b", Err: "deadline exceeded"}, h("c-c", 9, 10)},
			HashInconclusive, nil, "c-b: deadline exceeded"},
		"a single member: nothing to compare": {[]MemberHash{h("c-a", 7, 10)}, HashConsistent, nil, "nothing to compare"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v := CompareHashes(42, tc.hashes)
			if v.Result != tc.result || !slices.Equal(v.Mismatched, tc.mismatched) || !strings.Contains(v.Message, tc.msg) {
				t.Errorf("got %s %v %q, want %s %v containing %q", v.Result, v.Mismatched, v.Message, tc.result, tc.mismatched, tc.msg)
			}
		})
	}
}

func TestMismatchedMemberReplacement(t *testing.T) {
	mismatched := func(m Member) Member { m.HashMismatch = true; return m }
	replacing := specAt("3.6.16")
	replacing.Maintenance.ReplaceMismatched = true
	tests := map[string]struct {
		spec   Spec
		obs    Observation
		want   ActionKind
		member string
		reason string
	}{
		"reported only: nothing is done": {specAt("3.6.16"),
			clusterAt("3.6.0", at("c-a", 1, "3.6.16"), mismatched(at("c-b", 2, "3.6.16")), at("c-c", 3, "3.6.16")), None, "", etcdv1alpha1.ReasonReconciled},
		"replacement allowed: the follower is removed to be replaced": {replacing,
			clusterAt("3.6.0", at("c-a", 1, "3.6.16"), mismatched(at("c-b", 2, "3.6.16")), at("c-c", 3, "3.6.16")), RemoveMember, "c-b", etcdv1alpha1.ReasonReplacingMismatchedMember},
		"the leader hands leadership over first": {replacing,
			clusterAt("3.6.0", mismatched(at("c-a", 1, "3.6.16")), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")), MoveLeader, "c-a", etcdv1alpha1.ReasonMovingLeader},
		"not while the rest would lose quorum": {replacing,
			clusterAt("3.6.0", at("c-a", 1, "3.6.16"), mismatched(at("c-b", 2, "3.6.16")), func() Member { m := at("c-c", 3, "3.6.16"); m.Healthy = false; return m }()), Wait, "", etcdv1alpha1.ReasonQuorumAtRisk},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := Next(tc.spec, tc.obs)
			if a.Kind != tc.want || a.Reason != tc.reason || (tc.member != "" && (len(a.Members) == 0 || a.Members[0] != tc.member)) {
				t.Errorf("got %s %v %s: %s, want %s %s %s", a.Kind, a.Members, a.Reason, a.Message, tc.want, tc.member, tc.reason)
			}
		})
	}
}

// TestQuotaAndMismatchStepsNeverBreakQuorum: whatever the members' quotas, hash verdicts and health, a restart for
// the quota never takes down the leader while it leads nor acts while a member is unhealthy, and a removal of a
// mismatched member never leaves fewer healthy voters than quorum nor removes the leader while it leads.
func TestQuotaAndMismatchStepsNeverBreakQuorum(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	quotas := []int64{0, 288 * mib, 576 * mib}
	for i := 0; i < 20000; i++ {
		var members []Member
		n := 1 + rng.Intn(7)
		for j := 0; j < n; j++ {
			m := sized(fmt.Sprintf("c-%c", 'a'+j), uint64(j+1), 40, 20)
			m.Healthy, m.PodReady = rng.Intn(6) > 0, rng.Intn(6) > 0
			m.IsLearner = rng.Intn(8) == 0
			m.PodQuota = quotas[rng.Intn(len(quotas))]
			m.HashMismatch = rng.Intn(4) == 0
			members = append(members, m)
		}
		obs := clusterAt("3.6.0", members...)
		obs.LeaderID = uint64(1 + rng.Intn(n))
		spec := raisingSpec(576, 1024)
		spec.Replicas = n
		spec.Maintenance.ReplaceMismatched = rng.Intn(2) == 0
		got := Next(spec, obs)
		switch {
		case got.Kind == RestartMember && got.Reason == etcdv1alpha1.ReasonRestartingForQuota:
			for _, m := range members {
				if !m.Healthy || (!m.PodReady && !m.IsLearner) {
					t.Fatalf("restart for the quota while %s is unhealthy: %+v", m.Name, members)
				}
			}
			if got.MemberID == obs.LeaderID && n > 1 {
				t.Fatalf("restarted the leader while it leads: %+v", members)
			}
		case got.Kind == RemoveMember && got.Reason == etcdv1alpha1.ReasonReplacingMismatchedMember:
			if !spec.Maintenance.ReplaceMismatched {
				t.Fatalf("replaced a mismatched member without replaceMismatchedMembers")
			}
			voters, healthy := votersAfterRemoval(members, got.MemberID)
			for _, m := range members {
				if m.ID == got.MemberID && (!m.HashMismatch || m.IsLearner) {
					t.Fatalf("removed %s, which is not a mismatched voter", m.Name)
				}
			}
			// A leader that does not answer cannot hand leadership over; removing it is an election, as when any
			// unhealthy leader is replaced.
			if m, _ := find(members, "c-"+string(rune('a'+got.MemberID-1))); got.MemberID == obs.LeaderID && m.Healthy {
				t.Fatalf("removed the leader while it leads: %+v", members)
			}
			if voters > 1 && healthy < Quorum(voters-1) {
				t.Fatalf("removal leaves %d healthy of %d voters: %+v", healthy, voters-1, members)
			}
		}
	}
}
