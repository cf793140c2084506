package etcdcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

func memoryNode(name, allocatable string, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(allocatable)}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func podOn(node string) *corev1.Pod { return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}} }

// TestObserveMemory: members' memory is compared with their limit and with the nodes' allocatable memory, as the
// Node cache holds them; the cluster's quota is etcd's default (2Gi, no storage size), so a member may need
// 5248Mi.
func TestObserveMemory(t *testing.T) {
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	three := map[string]*corev1.Pod{"db-a": podOn("n1"), "db-b": podOn("n1"), "db-c": podOn("n1")}
	spread := map[string]*corev1.Pod{"db-a": podOn("n1"), "db-b": podOn("n2"), "db-c": podOn("n3")}
	tests := map[string]struct {
		resources corev1.ResourceRequirements
		nodes     []client.Object // nil: Steward may not read Nodes
		pods      map[string]*corev1.Pod
		reason    string
		says      string
	}{
		"no nodes to read, no limit": {pods: three},
		"a limit below the need, without nodes": {resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
			reason: etcdv1alpha1.ReasonMemoryLimitTooLow, says: "below the 5248Mi"},
		"one member per node": {nodes: []client.Object{memoryNode("n1", "8Gi"), memoryNode("n2", "8Gi"), memoryNode("n3", "8Gi")}, pods: spread},
		"three members on a node too small for them": {nodes: []client.Object{memoryNode("n1", "12Gi")}, pods: three,
			reason: etcdv1alpha1.ReasonMemberMemoryExceedsNodes, says: "db-a, db-b, db-c on node n1 may need 15744Mi of its 12Gi allocatable"},
		"a deleted member's Pod does not count": {nodes: []client.Object{memoryNode("n1", "12Gi")}, pods: map[string]*corev1.Pod{"db-a": podOn("n1"),
			"db-b": podOn("n1"), "db-c": {ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: time.Unix(1, 0)}}, Spec: corev1.PodSpec{NodeName: "n1"}}}},
		"no node members may use can give the request": {nodes: []client.Object{memoryNode("big", "64Gi", cordoned), memoryNode("n1", "4Gi")},
			reason: etcdv1alpha1.ReasonMemberMemoryExceedsNodes, says: "requests 5248Mi of memory, more than any node members may use can give (the largest, n1, has 4Gi"},
		"a small limit on a small node: the limit is reported": {resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
			nodes: []client.Object{memoryNode("n1", "2Gi")}, pods: three, reason: etcdv1alpha1.ReasonMemoryLimitTooLow},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cluster := testCluster()
			cluster.Spec.Resources = tt.resources
			r := &Reconciler{}
			if tt.nodes != nil {
				r.Nodes = fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(tt.nodes...).Build()
			}
			obs := &observation{pods: tt.pods}
			r.observeMemory(context.Background(), cluster, obs)
			if obs.memory.reason != tt.reason || !strings.Contains(obs.memory.message, tt.says) {
				t.Fatalf("memory problem %q: %q, want %q saying %q", obs.memory.reason, obs.memory.message, tt.reason, tt.says)
			}
		})
	}
}

func TestNodeMemoryOf(t *testing.T) {
	cluster := testCluster()
	cluster.Spec.Pod.NodeSelector = map[string]string{"role": "etcd"}
	etcdRole := func(n *corev1.Node) { n.Labels["role"] = "etcd" }
	nodes := []corev1.Node{*memoryNode("n1", "8Gi", etcdRole), *memoryNode("n2", "16Gi"), *memoryNode("n3", "4Gi", etcdRole)}
	nodes[2].Status.Allocatable = nil // a node that reports none yet
	got := nodeMemoryOf(cluster, nodes, map[string]*corev1.Pod{"db-a": podOn("n1"), "db-b": podOn("n2"), "db-c": {}})
	want := []plan.NodeMemory{{Name: "n1", Allocatable: 8 << 30, Eligible: true, Members: []string{"db-a"}},
		{Name: "n2", Allocatable: 16 << 30, Members: []string{"db-b"}}, {Name: "n3", Eligible: true}}
	if len(got) != len(want) {
		t.Fatalf("nodeMemoryOf = %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Allocatable != w.Allocatable || g.Eligible != w.Eligible || strings.Join(g.Members, ",") != strings.Join(w.Members, ",") {
			t.Errorf("node %d: %+v, want %+v", i, g, w)
		}
	}
}

// TestMemoryProblemIsDegraded: a memory problem makes the cluster Degraded with its reason, after the problems of
// the members themselves, and records a Warning Event once, when it begins.
func TestMemoryProblemIsDegraded(t *testing.T) {
	obs := obsOf(true, true, "a", "b", "c")
	obs.memory = memoryProblem{etcdv1alpha1.ReasonMemberMemoryExceedsNodes, "members may need more memory than their node can give"}
	available := metav1.Condition{Status: metav1.ConditionTrue}
	if d := degradedCondition(obs, plan.Action{Kind: plan.None}, nil, available); d.Status != metav1.ConditionTrue ||
		d.Reason != etcdv1alpha1.ReasonMemberMemoryExceedsNodes || d.Message != obs.memory.message {
		t.Errorf("Degraded %+v, want MemberMemoryExceedsNodes", d)
	}
	unhealthy := obsOf(true, true, "a", "b")
	unhealthy.memory = obs.memory
	if d := degradedCondition(unhealthy, plan.Action{Kind: plan.None}, nil, available); d.Reason != etcdv1alpha1.ReasonMembersUnhealthy {
		t.Errorf("Degraded %+v: an unhealthy member comes first", d)
	}

	events := record.NewFakeRecorder(10)
	r := &Reconciler{Recorder: events, Now: func() time.Time { return time.Unix(100, 0) }}
	cluster := testCluster()
	for range 2 {
		r.setConditions(cluster, obs, plan.Action{Kind: plan.None}, nil)
	}
	d := meta.FindStatusCondition(cluster.Status.Conditions, etcdv1alpha1.ConditionDegraded)
	if d == nil || d.Reason != etcdv1alpha1.ReasonMemberMemoryExceedsNodes {
		t.Fatalf("Degraded %+v", d)
	}
	var warnings []string
	for len(events.Events) > 0 {
		if e := <-events.Events; strings.HasPrefix(e, "Warning "+etcdv1alpha1.ReasonMemberMemoryExceedsNodes) {
			warnings = append(warnings, e)
		}
	}
	if len(warnings) != 1 {
		t.Errorf("Warnings %q, want one when the problem begins", warnings)
	}
}
