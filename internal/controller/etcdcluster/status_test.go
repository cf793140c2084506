package etcdcluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/plan"
)

// obsOf builds an observation of a 3-voter cluster whose members listed in healthy answer their status.
func obsOf(bootstrapped, reachable bool, healthy ...string) *observation {
	obs := &observation{statusOf: map[string]etcd.Status{}, nameOf: map[uint64]string{}}
	obs.plan.Bootstrapped, obs.plan.EtcdReachable = bootstrapped, reachable
	for i, name := range []string{"a", "b", "c"} {
		id := uint64(i + 1)
		obs.view.Members = append(obs.view.Members, etcd.Member{ID: id, Name: name})
		obs.nameOf[id] = name
		m := plan.Member{Name: name, HasPod: true, InEtcd: true}
		for _, h := range healthy {
			if h == name {
				obs.statusOf[name] = etcd.Status{MemberID: id, LeaderID: 1}
				m.Healthy = true
			}
		}
		if !m.Healthy {
			obs.statusOf[name] = etcd.Status{Err: errors.New("timeout")}
		}
		obs.plan.Members = append(obs.plan.Members, m)
	}
	if !reachable {
		obs.view.ListErr = errors.New("no quorum")
	}
	return obs
}

func TestConditions(t *testing.T) {
	reconciled := plan.Action{Kind: plan.None, Reason: etcdv1alpha1.ReasonReconciled, Message: "ok"}
	tests := map[string]struct {
		obs         *observation
		action      plan.Action
		err         error
		available   string
		progressing string
		degraded    string
	}{
		"healthy": {obsOf(true, true, "a", "b", "c"), reconciled, nil,
			etcdv1alpha1.ReasonQuorumAvailable, etcdv1alpha1.ReasonReconciled, etcdv1alpha1.ReasonAsExpected},
		"one member down keeps quorum but is degraded": {obsOf(true, true, "a", "b"), reconciled, nil,
			etcdv1alpha1.ReasonQuorumAvailable, etcdv1alpha1.ReasonReconciled, etcdv1alpha1.ReasonMembersUnhealthy},
		"majority down loses quorum": {obsOf(true, false, "a"), plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers, Message: "w"}, nil,
			etcdv1alpha1.ReasonQuorumLost, etcdv1alpha1.ReasonWaitingForMembers, etcdv1alpha1.ReasonQuorumLost},
		"bootstrap in progress is not degraded": {obsOf(false, false), plan.Action{Kind: plan.Bootstrap, Reason: etcdv1alpha1.ReasonBootstrapping, Message: "b"}, nil,
			etcdv1alpha1.ReasonBootstrapping, etcdv1alpha1.ReasonBootstrapping, etcdv1alpha1.ReasonAsExpected},
		"data loss is degraded": {obsOf(true, true, "a", "b"), plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonMemberDataLost, Message: "lost"}, nil,
			etcdv1alpha1.ReasonQuorumAvailable, etcdv1alpha1.ReasonMemberDataLost, etcdv1alpha1.ReasonMemberDataLost},
		"errors are degraded": {obsOf(true, true, "a", "b", "c"), reconciled, errors.New("boom"),
			etcdv1alpha1.ReasonQuorumAvailable, etcdv1alpha1.ReasonReconciled, etcdv1alpha1.ReasonReconcileError},
		"without a member list, Kubernetes' counts": {obsOf(true, false), plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers, Message: "w"}, nil,
			etcdv1alpha1.ReasonQuorumLost, etcdv1alpha1.ReasonWaitingForMembers, etcdv1alpha1.ReasonQuorumLost},
		"hibernating, quorum kept while followers stop": {obsOf(true, true, "a", "b"),
			plan.Action{Kind: plan.StopMember, Reason: etcdv1alpha1.ReasonHibernating, Message: "h"}, nil,
			etcdv1alpha1.ReasonQuorumAvailable, etcdv1alpha1.ReasonHibernating, etcdv1alpha1.ReasonHibernating},
		"hibernating, the leader alone: stopped as asked, not a lost quorum": {obsOf(true, false, "a"),
			plan.Action{Kind: plan.StopMember, Reason: etcdv1alpha1.ReasonHibernating, Message: "h"}, nil,
			etcdv1alpha1.ReasonHibernating, etcdv1alpha1.ReasonHibernating, etcdv1alpha1.ReasonHibernating},
		"hibernated": {obsOf(true, false),
			plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonHibernated, Message: "h"}, nil,
			etcdv1alpha1.ReasonHibernated, etcdv1alpha1.ReasonHibernated, etcdv1alpha1.ReasonHibernated},
		"a volume deleted under a running member": {func() *observation {
			o := obsOf(true, true, "a", "b", "c")
			o.plan.Members[2].VolumeDeleting = true
			return o
		}(), plan.Action{Kind: plan.AddLearner, Reason: etcdv1alpha1.ReasonReplacingMember, Message: "r"}, nil,
			etcdv1alpha1.ReasonQuorumAvailable, etcdv1alpha1.ReasonReplacingMember, etcdv1alpha1.ReasonMemberVolumeDeleting},
		"a Pod that outlives its grace period by minutes": {func() *observation {
			o := obsOf(true, false, "a")
			o.plan.Members[1].PodDeleting, o.plan.Members[1].PodOverdue = true, 5*time.Minute
			return o
		}(), plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers, Message: "w"}, nil,
			etcdv1alpha1.ReasonQuorumLost, etcdv1alpha1.ReasonWaitingForMembers, etcdv1alpha1.ReasonPodStuckTerminating},
		"a NOSPACE alarm: the cluster is read-only": {func() *observation {
			o := obsOf(true, true, "a", "b", "c")
			o.view.Alarms = []etcd.Alarm{{MemberID: 2, Type: "NOSPACE"}}
			return o
		}(), reconciled, nil, etcdv1alpha1.ReasonQuorumAvailable, etcdv1alpha1.ReasonReconciled, etcdv1alpha1.ReasonNoSpaceAlarm},
		"a CORRUPT alarm comes before a NOSPACE one": {func() *observation {
			o := obsOf(true, true, "a", "b", "c")
			o.view.Alarms = []etcd.Alarm{{MemberID: 1, Type: "NOSPACE"}, {MemberID: 3, Type: "CORRUPT"}}
			return o
		}(), reconciled, nil, etcdv1alpha1.ReasonQuorumAvailable, etcdv1alpha1.ReasonReconciled, etcdv1alpha1.ReasonCorruptAlarm},
		"an alarm list that could not be read says nothing": {func() *observation {
			o := obsOf(true, true, "a", "b", "c")
			o.view.Alarms, o.view.AlarmErr = nil, errors.New("timeout")
			return o
		}(), reconciled, nil, etcdv1alpha1.ReasonQuorumAvailable, etcdv1alpha1.ReasonReconciled, etcdv1alpha1.ReasonAsExpected},
		"quorum lost outranks an alarm": {func() *observation {
			o := obsOf(true, false, "a")
			o.view.Alarms = []etcd.Alarm{{MemberID: 1, Type: "NOSPACE"}}
			return o
		}(), plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers, Message: "w"}, nil,
			etcdv1alpha1.ReasonQuorumLost, etcdv1alpha1.ReasonWaitingForMembers, etcdv1alpha1.ReasonQuorumLost},
		"waiting for a volume's file system to grow is progress, not settled": {obsOf(true, true, "a", "b", "c"),
			plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonExpandingVolume, Message: "waiting for the volume of member a to grow"}, nil,
			etcdv1alpha1.ReasonQuorumAvailable, etcdv1alpha1.ReasonExpandingVolume, etcdv1alpha1.ReasonAsExpected},
		"a Pod still within its grace period is not reported": {func() *observation {
			o := obsOf(true, true, "a", "c")
			o.plan.Members[1].PodDeleting, o.plan.Members[1].PodOverdue = true, 10*time.Second
			return o
		}(), reconciled, nil, etcdv1alpha1.ReasonQuorumAvailable, etcdv1alpha1.ReasonReconciled, etcdv1alpha1.ReasonMembersUnhealthy},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			conds := conditions(tt.obs, tt.action, tt.err)
			for typ, want := range map[string]string{etcdv1alpha1.ConditionAvailable: tt.available,
				etcdv1alpha1.ConditionProgressing: tt.progressing, etcdv1alpha1.ConditionDegraded: tt.degraded} {
				c := meta.FindStatusCondition(conds, typ)
				if c == nil || c.Reason != want || c.Message == "" || strings.Contains(c.Message, "0 of 0") {
					t.Errorf("%s = %+v, want reason %s", typ, c, want)
				}
			}
			if d := meta.FindStatusCondition(conds, etcdv1alpha1.ConditionDegraded); (d.Reason == etcdv1alpha1.ReasonNoSpaceAlarm && !strings.Contains(d.Message, "[b]")) ||
				(d.Reason == etcdv1alpha1.ReasonCorruptAlarm && !strings.Contains(d.Message, "[c]")) {
				t.Errorf("Degraded %q does not name the alarmed member", d.Message)
			}
			if a := meta.FindStatusCondition(conds, etcdv1alpha1.ConditionAvailable); (a.Status == metav1.ConditionTrue) != (tt.available == etcdv1alpha1.ReasonQuorumAvailable) {
				t.Errorf("Available status %s with reason %s", a.Status, a.Reason)
			}
			// Settled (Progressing False) only when nothing is under way: a step taken, or a wait for one to finish,
			// is progress.
			wantProgressing := tt.action.Kind != plan.None && tt.action.Kind != plan.Wait ||
				tt.action.Reason == etcdv1alpha1.ReasonWaitingForMembers || tt.action.Reason == etcdv1alpha1.ReasonExpandingVolume
			if p := meta.FindStatusCondition(conds, etcdv1alpha1.ConditionProgressing); (p.Status == metav1.ConditionTrue) != wantProgressing {
				t.Errorf("Progressing status %s with reason %s, want true: %v", p.Status, p.Reason, wantProgressing)
			}
		})
	}
}

func TestWaitStarts(t *testing.T) {
	degraded := func(reason string) []metav1.Condition {
		return []metav1.Condition{{Type: etcdv1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: reason}}
	}
	tests := map[string]struct {
		before []metav1.Condition
		reason string
		want   bool
	}{
		"first pass of a data-loss wait warns":         {nil, etcdv1alpha1.ReasonMemberDataLost, true},
		"data-loss wait after another problem warns":   {degraded(etcdv1alpha1.ReasonMembersUnhealthy), etcdv1alpha1.ReasonMemberDataLost, true},
		"data-loss wait already reported stays quiet":  {degraded(etcdv1alpha1.ReasonMemberDataLost), etcdv1alpha1.ReasonMemberDataLost, false},
		"inconsistent bootstrap already reported":      {degraded(etcdv1alpha1.ReasonInconsistentBootstrap), etcdv1alpha1.ReasonInconsistentBootstrap, false},
		"inconsistent bootstrap after data loss warns": {degraded(etcdv1alpha1.ReasonMemberDataLost), etcdv1alpha1.ReasonInconsistentBootstrap, true},
		"data loss again after it was resolved warns":  {[]metav1.Condition{{Type: etcdv1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: etcdv1alpha1.ReasonMemberDataLost}}, etcdv1alpha1.ReasonMemberDataLost, true},
		"ordinary waits never warn":                    {nil, etcdv1alpha1.ReasonWaitingForMembers, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := waitStarts(tt.before, tt.reason); got != tt.want {
				t.Errorf("waitStarts = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestReadyReplicasMatchesAvailable: status.readyReplicas and the Available condition's count of healthy voters
// come from the same members, learners and members etcd no longer lists excluded from both.
func TestReadyReplicasMatchesAvailable(t *testing.T) {
	obs := obsOf(true, true, "a", "b")
	obs.plan.Members = append(obs.plan.Members,
		plan.Member{Name: "learner", HasPod: true, InEtcd: true, IsLearner: true, Healthy: true},
		plan.Member{Name: "removed", HasPod: true, Healthy: true})
	obs.view.Members = append(obs.view.Members, etcd.Member{ID: 9, Name: "learner", IsLearner: true})
	_, ready := plan.HealthyVoters(obs.plan.Members)
	a := meta.FindStatusCondition(conditions(obs, plan.Action{Kind: plan.None, Reason: etcdv1alpha1.ReasonReconciled, Message: "ok"}, nil), etcdv1alpha1.ConditionAvailable)
	if ready != 2 || a.Message != "2 of 3 voting members healthy (quorum 2)" {
		t.Errorf("ready %d, Available says %q", ready, a.Message)
	}
}

// TestPodProblemsAreDegraded: what CEL cannot check (an image that does not exist, a storage class that does
// not exist) shows as Degraded with the kubelet's or scheduler's own words, also before the cluster formed.
func TestPodProblemsAreDegraded(t *testing.T) {
	waiting := func(reason, msg string) corev1.PodStatus {
		return corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}
	}
	unschedulable := corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "pod has unbound immediate PersistentVolumeClaims"}}}
	tests := map[string]struct {
		bootstrapped bool
		healthy      []string
		status       corev1.PodStatus
		reason, msg  string
	}{
		"image missing while bootstrapping": {false, nil, waiting("ImagePullBackOff", `Back-off pulling image "nope"`),
			etcdv1alpha1.ReasonMemberPodsFailing, `a: ImagePullBackOff: Back-off pulling image "nope"`},
		"unschedulable while bootstrapping": {false, nil, unschedulable, etcdv1alpha1.ReasonMemberPodsFailing,
			"a: Unschedulable: pod has unbound immediate PersistentVolumeClaims"},
		"one member failing in a healthy cluster": {true, []string{"b", "c"}, waiting("ErrImagePull", "not found"),
			etcdv1alpha1.ReasonMemberPodsFailing, "a: ErrImagePull: not found"},
		"quorum lost says which Pods fail": {true, []string{"b"}, waiting("CrashLoopBackOff", "back-off 5m"),
			etcdv1alpha1.ReasonQuorumLost, "1 of 3 voting members healthy, quorum is 2; a: CrashLoopBackOff: back-off 5m"},
		"a container that is only starting is no problem": {false, nil, waiting("ContainerCreating", ""), etcdv1alpha1.ReasonAsExpected, "no problem found"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			obs := obsOf(tt.bootstrapped, tt.bootstrapped, tt.healthy...)
			obs.pods = map[string]*corev1.Pod{"a": {Status: tt.status}, "b": {}, "c": {}}
			got := meta.FindStatusCondition(conditions(obs, plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers}, nil), etcdv1alpha1.ConditionDegraded)
			wantStatus := metav1.ConditionTrue
			if tt.reason == etcdv1alpha1.ReasonAsExpected {
				wantStatus = metav1.ConditionFalse
			}
			if got.Status != wantStatus || got.Reason != tt.reason || got.Message != tt.msg {
				t.Errorf("Degraded = %s %s %q, want %s %s %q", got.Status, got.Reason, got.Message, wantStatus, tt.reason, tt.msg)
			}
		})
	}
}

// TestStatusHibernation follows status.hibernation through a hibernation and a resume, pass by pass: the phase,
// when it began, what is kept (the size read while members answered stays once they have stopped), and one Event
// per phase.
func TestStatusHibernation(t *testing.T) {
	recorder := record.NewFakeRecorder(10)
	clock := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	r := &Reconciler{Recorder: recorder, Now: func() time.Time { return clock }}
	cluster := &etcdv1alpha1.EtcdCluster{Spec: etcdv1alpha1.EtcdClusterSpec{Hibernation: &etcdv1alpha1.Hibernation{Enabled: true}}}
	cluster.Status.Revision = 42
	pass := func(obs *observation, action plan.Action, available metav1.ConditionStatus) *etcdv1alpha1.HibernationStatus {
		meta.SetStatusCondition(&cluster.Status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionAvailable, Status: available, Reason: "R", Message: "m"})
		r.statusHibernation(cluster, obs, action)
		return cluster.Status.Hibernation
	}
	withPVCs := func(o *observation) *observation {
		for i := range o.plan.Members {
			o.plan.Members[i].HasPVC = true
		}
		return o
	}
	stopping := withPVCs(obsOf(true, true, "a", "b", "c"))
	stopping.statusOf["a"] = etcd.Status{DBSizeBytes: 4096}
	stopping.statusOf["b"] = etcd.Status{DBSizeBytes: 8192}
	h := pass(stopping, plan.Action{Kind: plan.StopMember, Reason: etcdv1alpha1.ReasonHibernating}, metav1.ConditionTrue)
	if h == nil || h.Phase != etcdv1alpha1.HibernationHibernating || !h.Since.Time.Equal(clock) || h.DataSizeBytes != 8192 || h.Revision != 42 ||
		strings.Join(h.Members, ",") != "a,b,c" {
		t.Fatalf("while stopping: %+v", h)
	}
	clock = clock.Add(time.Minute)
	h = pass(withPVCs(obsOf(true, false)), plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonHibernated, Message: "hibernated: ..."}, metav1.ConditionFalse)
	if h.Phase != etcdv1alpha1.HibernationHibernated || !h.Since.Time.Equal(clock) || h.DataSizeBytes != 8192 {
		t.Fatalf("hibernated: %+v, want the size read before the members stopped", h)
	}
	clock = clock.Add(time.Hour)
	h = pass(withPVCs(obsOf(true, false)), plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonHibernated}, metav1.ConditionFalse)
	if h.Since.Time.Equal(clock) {
		t.Fatalf("a later pass moved the phase's start: %+v", h)
	}
	cluster.Spec.Hibernation.Enabled = false
	h = pass(withPVCs(obsOf(true, false)), plan.Action{Kind: plan.RecreateMemberPods, Reason: etcdv1alpha1.ReasonRecreatingMember}, metav1.ConditionFalse)
	if h == nil || h.Phase != etcdv1alpha1.HibernationResuming || !h.Since.Time.Equal(clock) || strings.Join(h.Members, ",") != "a,b,c" {
		t.Fatalf("resuming: %+v", h)
	}
	if h = pass(obsOf(true, true, "a", "b", "c"), plan.Action{Kind: plan.None}, metav1.ConditionTrue); h != nil {
		t.Fatalf("Available again: %+v, want no hibernation status", h)
	}
	close(recorder.Events)
	var events []string
	for e := range recorder.Events {
		events = append(events, strings.SplitN(e, " ", 3)[1])
	}
	if got := strings.Join(events, ","); got != "Hibernating,Hibernated,Resuming,Resumed" {
		t.Errorf("events %s, want one per phase", got)
	}
}
