package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

func TestStepKind(t *testing.T) {
	tests := map[plan.ActionKind]string{
		plan.Bootstrap:          "bootstrap",
		plan.AddLearner:         "add_learner",
		plan.PromoteLearner:     "promote_learner",
		plan.RemoveMember:       "remove_member",
		plan.RollMember:         "roll_member",
		plan.MoveLeader:         "move_leader",
		plan.RecreateMemberPods: "recreate_member_pods",
		plan.UpdatePeerURL:      "update_peer_url",
		plan.EnableDowngrade:    "enable_downgrade",
		plan.CancelDowngrade:    "cancel_downgrade",
		plan.CreateRestore:      "create_restore",
		plan.DeleteMemberPVC:    "delete_member_pvc",
		plan.RestartMember:      "restart_member",
		"PVCSize":               "pvc_size",
		"Step2Go":               "step2_go",
	}
	for kind, want := range tests {
		if got := StepKind(kind); got != want {
			t.Errorf("StepKind(%s) = %q, want %q", kind, got, want)
		}
	}
}

func TestStepTakenCountsReplacements(t *testing.T) {
	defer Forget("ns", "steps")
	StepTaken("ns", "steps", plan.Action{Kind: plan.AddLearner, Reason: etcdv1alpha1.ReasonReplacingMember})
	StepTaken("ns", "steps", plan.Action{Kind: plan.RemoveMember, Reason: etcdv1alpha1.ReasonScalingDown})
	StepTaken("ns", "steps", plan.Action{Kind: plan.RemoveMember, Reason: etcdv1alpha1.ReasonReplacingMember})
	StepTaken("ns", "steps", plan.Action{Kind: plan.RemoveMember, Reason: etcdv1alpha1.ReasonReplacingLearner})
	StepTaken("ns", "steps", plan.Action{Kind: plan.RemoveMember, Reason: etcdv1alpha1.ReasonRemovingLeftoverMember})
	if got := testutil.ToFloat64(stepsTotal.WithLabelValues("ns", "steps", "remove_member")); got != 4 {
		t.Errorf("remove_member steps = %v, want 4", got)
	}
	if got := testutil.ToFloat64(stepsTotal.WithLabelValues("ns", "steps", "add_learner")); got != 1 {
		t.Errorf("add_learner steps = %v, want 1", got)
	}
	// Only removals to replace a member count as replacements (the add that brings the successor does not).
	if got := testutil.CollectAndCount(membersReplacedTotal); got != 2 {
		t.Errorf("%d replacement series, want 2 (ReplacingMember, ReplacingLearner)", got)
	}
	if got := testutil.ToFloat64(membersReplacedTotal.WithLabelValues("ns", "steps", etcdv1alpha1.ReasonReplacingMember)); got != 1 {
		t.Errorf("ReplacingMember replacements = %v, want 1", got)
	}
}

func TestObserveLeader(t *testing.T) {
	type pass struct{ recorded, observed string }
	tests := map[string]struct {
		passes []pass
		want   float64
	}{
		"first sight of a leader is no change":                       {[]pass{{"", "a"}}, 0},
		"a leader other than the one recorded in status is a change": {[]pass{{"a", "b"}}, 1},
		"the same leader pass after pass":                            {[]pass{{"a", "a"}, {"a", "a"}}, 0},
		// The next pass may still read the old leader from a cache that has not seen the status write.
		"a stale status after a change counts once": {[]pass{{"a", "b"}, {"a", "b"}, {"b", "b"}}, 1},
		"no leader in between is not a change":      {[]pass{{"a", "a"}, {"a", ""}, {"", "a"}}, 0},
		"a new leader after an election counts":     {[]pass{{"a", "a"}, {"a", ""}, {"", "b"}}, 1},
		"no leader on the first pass, then another": {[]pass{{"a", ""}, {"", "b"}}, 1},
		"back and forth counts each change":         {[]pass{{"a", "b"}, {"b", "a"}, {"a", "b"}}, 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			defer Forget("ns", "leader")
			for _, p := range tc.passes {
				ObserveLeader("ns", "leader", p.recorded, p.observed)
			}
			if got := testutil.ToFloat64(leaderChangesTotal.WithLabelValues("ns", "leader")); got != tc.want {
				t.Errorf("leader changes = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestForgetDeletesOnlyTheCluster(t *testing.T) {
	for _, c := range []string{"gone", "stays"} {
		StepTaken("ns", c, plan.Action{Kind: plan.RemoveMember, Reason: etcdv1alpha1.ReasonReplacingMember})
		ObserveLeader("ns", c, "a", "b")
		BackupEnded("ns", c, ResultFailed, "SnapshotFailed")
		RestoreEnded("ns", c, ResultComplete, "")
	}
	// Same cluster name in another namespace: not the deleted cluster.
	BackupEnded("other", "gone", ResultComplete, "")
	defer Forget("ns", "stays")
	defer Forget("other", "gone")
	Forget("ns", "gone")
	for _, c := range counters {
		if got := testutil.CollectAndCount(c); got != 1 && c != backupsTotal {
			t.Errorf("%d series left after Forget, want the other cluster's 1", got)
		}
	}
	if got := testutil.CollectAndCount(backupsTotal); got != 2 {
		t.Errorf("%d backup series left, want 2 (ns/stays and other/gone)", got)
	}
	// The leader remembered went too: a cluster re-created under the name starts afresh.
	ObserveLeader("ns", "gone", "", "x")
	defer Forget("ns", "gone")
	if got := testutil.ToFloat64(leaderChangesTotal.WithLabelValues("ns", "gone")); got != 0 {
		t.Errorf("re-created cluster counts %v leader changes, want 0", got)
	}
}
