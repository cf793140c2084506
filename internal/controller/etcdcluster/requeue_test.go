package etcdcluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/plan"
)

// TestRequeueAfter: a step that etcd finishes by itself is looked at again within a second; a wait that a Pod's
// event or a human ends keeps the slower pace, and a settled cluster the steady one.
func TestRequeueAfter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		action plan.Action
		want   time.Duration
	}{
		{"settled", plan.Action{Kind: plan.None, Reason: etcdv1alpha1.ReasonReconciled}, requeueSteady},
		{"learner added", plan.Action{Kind: plan.AddLearner, Reason: etcdv1alpha1.ReasonScalingUp}, requeueInFlight},
		{"promotion refused until caught up", plan.Action{Kind: plan.PromoteLearner, Reason: etcdv1alpha1.ReasonScalingUp}, requeueInFlight},
		{"leader moved", plan.Action{Kind: plan.MoveLeader, Reason: etcdv1alpha1.ReasonMovingLeader}, requeueInFlight},
		{"others catching up", plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForCatchUp}, requeueInFlight},
		{"restarted member not on its release yet", plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForRestart}, requeueInFlight},
		{"cluster version to follow", plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForClusterVersion}, requeueInFlight},
		{"storage version to follow", plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForStorageVersion}, requeueInFlight},
		{"member Pods starting", plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers}, requeueProgressing},
		{"bootstrap", plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonBootstrapping}, requeueProgressing},
		{"paused", plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonPaused}, requeueProgressing},
		{"a version change etcd refuses", plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonVersionChangeRefused}, requeueProgressing},
		{"no healthy follower to lead", plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonMovingLeader}, requeueProgressing},
	} {
		if got := requeueAfter(tc.action); got != tc.want {
			t.Errorf("%s: requeue after %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestRequeueAfterUpgradeTail: once the last member of an upgrade runs the new release, etcd raises the cluster
// version by itself within seconds; the settled pass that sees it still behind looks again within a second, and
// one whose cluster version has followed goes back to the steady pace.
func TestRequeueAfterUpgradeTail(t *testing.T) {
	member := func(v string) plan.Member { return plan.Member{Name: "db-" + v, InEtcd: true, RunningVersion: v} }
	settled := plan.Action{Kind: plan.None, Reason: etcdv1alpha1.ReasonReconciled}
	behind := plan.Observation{ClusterVersion: "3.5.0", Members: []plan.Member{member("3.6.16"), member("3.6.16")}}
	followed := plan.Observation{ClusterVersion: "3.6.0", Members: behind.Members}
	if got := requeueAfterPass(settled, behind); got != requeueInFlight {
		t.Errorf("cluster version behind every member: requeue after %s, want %s", got, requeueInFlight)
	}
	if got := requeueAfterPass(settled, followed); got != requeueSteady {
		t.Errorf("cluster version followed: requeue after %s, want %s", got, requeueSteady)
	}
	if got := requeueAfterPass(plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers}, behind); got != requeueProgressing {
		t.Errorf("another wait: requeue after %s, want %s", got, requeueProgressing)
	}
}

// TestNotSettledIsTheSameOnEveryPass: a learner etcd refuses to add is drawn under a new name on every pass; the
// wait that replaces it must not carry that name (nor the time since), or each pass would change status and wake
// the next at once. Once every member has refused it on its own for a minute, the wait is a human's, naming them.
func TestNotSettledIsTheSameOnEveryPass(t *testing.T) {
	a := plan.Action{Kind: plan.AddLearner, Members: []string{"db-x7k2p"}, Reason: etcdv1alpha1.ReasonScalingUp,
		Message: "adding member db-x7k2p as a learner (3 of 5 voters)"}
	b := a
	b.Members, b.Message = []string{"db-q9w4r"}, "adding member db-q9w4r as a learner (3 of 5 voters)"
	since := time.Unix(1000, 0)
	members := map[string]string{"https://10.0.0.1:2379": "db-a", "https://10.0.0.2:2379": "db-b"}
	both := []string{"https://10.0.0.2:2379", "https://10.0.0.1:2379"}
	for _, tc := range []struct {
		name     string
		err      error
		now      time.Time
		reason   string
		mentions []string
	}{
		{"through the balanced client", etcd.ErrClusterNotSettled, since.Add(time.Hour), etcdv1alpha1.ReasonScalingUp, nil},
		{"a young run", &etcd.RefusedError{Since: since}, since.Add(5 * time.Second), etcdv1alpha1.ReasonScalingUp, nil},
		{"every member refusing, under a minute", &etcd.RefusedError{Since: since, Refusing: both}, since.Add(59 * time.Second), etcdv1alpha1.ReasonScalingUp, nil},
		{"a member not asked", &etcd.RefusedError{Since: since, Refusing: both[:1], Unreachable: both[1:]}, since.Add(time.Hour), etcdv1alpha1.ReasonScalingUp, nil},
		{"every member refusing for a minute", &etcd.RefusedError{Since: since, Refusing: both}, since.Add(time.Minute), etcdv1alpha1.ReasonMembershipChangeRefused,
			[]string{"(ScalingUp) since 1970-01-01T00:16:40Z", "(db-a, db-b)", "etcd-io/etcd#14523", "kubectl delete pod"}},
		{"an hour later, the same", &etcd.RefusedError{Since: since, Refusing: both}, since.Add(time.Hour), etcdv1alpha1.ReasonMembershipChangeRefused,
			[]string{"(ScalingUp) since 1970-01-01T00:16:40Z", "(db-a, db-b)"}},
	} {
		wa, wb := notSettled(a, tc.err, members, tc.now), notSettled(b, tc.err, members, tc.now)
		if wa.Kind != plan.Wait || wa.Reason != tc.reason {
			t.Errorf("%s: refused add became %s/%s, want a Wait with reason %s", tc.name, wa.Kind, wa.Reason, tc.reason)
		}
		if wa.Message != wb.Message || strings.Contains(wa.Message, "db-x7k2p") || strings.Contains(wa.Message, "db-q9w4r") {
			t.Errorf("%s: messages %q and %q: they must be the same and name no new member", tc.name, wa.Message, wb.Message)
		}
		for _, m := range tc.mentions {
			if !strings.Contains(wa.Message, m) {
				t.Errorf("%s: message %q does not say %q", tc.name, wa.Message, m)
			}
		}
	}
	if !humanWaits[etcdv1alpha1.ReasonMembershipChangeRefused] {
		t.Error("MembershipChangeRefused is not a human wait: Degraded would not say it, and no Warning would be recorded")
	}
}

// A down member that a pass restarts (on the spec's release, image or TLS mode) gets the whole
// replaceUnhealthyAfter on its new Pod: the pass restarts its clock. A member that was healthy keeps none, and
// other steps leave the clocks alone.
func TestRestartedClock(t *testing.T) {
	before, now := time.Unix(400, 0), time.Unix(1000, 0)
	for _, tc := range []struct {
		name   string
		action plan.Action
		want   map[string]time.Time
	}{
		{"a down member rolled", plan.Action{Kind: plan.RollMember, Members: []string{"db-down"}}, map[string]time.Time{"db-down": now, "db-other": before}},
		{"a down member restarted", plan.Action{Kind: plan.RestartMember, Members: []string{"db-down"}}, map[string]time.Time{"db-down": now, "db-other": before}},
		{"a healthy member rolled", plan.Action{Kind: plan.RollMember, Members: []string{"db-healthy"}}, map[string]time.Time{"db-down": before, "db-other": before}},
		{"another step", plan.Action{Kind: plan.AddLearner, Members: []string{"db-down"}}, map[string]time.Time{"db-down": before, "db-other": before}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &observation{unhealthySince: map[string]time.Time{"db-down": before, "db-other": before}}
			restartedClock(obs, tc.action, now)
			if fmt.Sprint(obs.unhealthySince) != fmt.Sprint(tc.want) {
				t.Errorf("clocks %v, want %v", obs.unhealthySince, tc.want)
			}
		})
	}
}

// TestRequeueWhileLearnerComesUp: the promotion of a learner that started moments ago is asked for again within a
// quarter second (etcd grants it as soon as the learner has caught up, which no Kubernetes event says); not for a
// learner running for long, one whose container does not run or whose Pod goes, nor for voters that restarted.
func TestRequeueWhileLearnerComesUp(t *testing.T) {
	promote := plan.Action{Kind: plan.PromoteLearner, Reason: etcdv1alpha1.ReasonScalingUp}
	waiting := plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers}
	member := func(change func(m *plan.Member)) plan.Observation {
		m := plan.Member{Name: "db-d", HasPod: true, InEtcd: true, IsLearner: true, Healthy: true, RunningFor: 2 * time.Second}
		change(&m)
		voter := plan.Member{Name: "db-a", HasPod: true, InEtcd: true, Healthy: true, PodReady: true, RunningFor: time.Hour}
		return plan.Observation{ClusterVersion: "3.6.0", Bootstrapped: true, Members: []plan.Member{voter, m}}
	}
	for _, tc := range []struct {
		name   string
		action plan.Action
		obs    plan.Observation
		want   time.Duration
	}{
		{"a learner that just started, its promotion asked for", promote, member(func(*plan.Member) {}), requeueComingUp},
		{"a learner that just started, a wait", waiting, member(func(*plan.Member) {}), requeueComingUp},
		{"a learner running for longer than the window", promote, member(func(m *plan.Member) { m.RunningFor = comingUpWindow }), requeueInFlight},
		{"a learner whose container does not run", promote, member(func(m *plan.Member) { m.RunningFor = 0 }), requeueInFlight},
		{"a learner whose Pod goes", promote, member(func(m *plan.Member) { m.PodDeleting = true }), requeueInFlight},
		{"a voter that just restarted, not Ready", waiting, member(func(m *plan.Member) { m.IsLearner, m.PodReady = false, false }), requeueProgressing},
		{"another step", plan.Action{Kind: plan.RollMember, Reason: etcdv1alpha1.ReasonUpgrading}, member(func(*plan.Member) {}), requeueInFlight},
	} {
		if got := requeueAfterPass(tc.action, tc.obs); got != tc.want {
			t.Errorf("%s: requeue after %s, want %s", tc.name, got, tc.want)
		}
	}
}
