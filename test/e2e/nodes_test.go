package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/etcdcluster"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
	"steward.dev/steward/test/linearizability"
)

// bedOptions is the test bed the suite runs on: four nodes in three zones. Every test but the multi-node ones
// runs on the first node; the other three carry testbed.DedicatedTaint, one per zone, and only clusters that
// onDedicatedNodes places there run on them, so that a test that stops, cuts off or drains one of them
// disturbs no other test. Prometheus scrapes only the namespaces of the tests that read it
// (framework.NewScrapedNamespace).
var bedOptions = testbed.Options{Nodes: 4, Zones: 3, DedicatedNodes: 3, ScrapeLabelledNamespacesOnly: true}

// dedicatedNodes is held by the test that uses the dedicated nodes: one at a time, since each changes what
// the nodes can run (a stopped node, a cordon) or counts where members land.
var dedicatedNodes sync.Mutex

// parallelOnDedicatedNodes is parallel for a test that uses the dedicated nodes: it waits for them (another
// such test may have them) and returns them, the test's until it ends. It takes no slot of the gate: the tests on
// the dedicated nodes run one at a time in a lane of their own beside the gate's slots. They spend most of their
// time waiting for a node to go NotReady, for replaceUnhealthyAfter, for a drain, with a cluster under a paced
// client load that leaves the CPU to the others; in a slot they would hold it for all that waiting.
func parallelOnDedicatedNodes(t *testing.T) []testbed.Node {
	t.Helper()
	framework.RequireBed(t)
	t.Parallel()
	waitFrom := time.Now()
	dedicatedNodes.Lock()
	t.Cleanup(dedicatedNodes.Unlock)
	begin := time.Now()
	t.Logf("waited %s for the dedicated nodes", begin.Sub(waitFrom).Round(time.Second))
	t.Cleanup(func() {
		t.Logf("ran %s after waiting %s for the dedicated nodes", time.Since(begin).Round(time.Second), begin.Sub(waitFrom).Round(time.Second))
	})
	track(t)
	var out []testbed.Node
	for _, n := range framework.Bed.Nodes() {
		if n.Dedicated {
			out = append(out, n)
		}
	}
	if len(out) < 3 {
		t.Fatalf("the test bed has %d dedicated nodes, the multi-node tests need 3", len(out))
	}
	if trouble := dedicatedNodesTrouble(out, false, 2*time.Minute); len(trouble) > 0 {
		t.Fatalf("the dedicated nodes are not as the test bed started them: %s", describeTrouble(trouble))
	}
	t.Cleanup(func() { handBackDedicatedNodes(t, out) }) // before the unlock: cleanups run last first
	return out
}

// nodeTrouble says what keeps node from running members as the test bed started it, "" when nothing: not Ready,
// cordoned, or tainted with more than the dedicated taint (the node controller's not-ready and unreachable taints
// stay a moment after the node is Ready again).
func nodeTrouble(node *corev1.Node) string {
	var trouble []string
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		ready = c.Status == corev1.ConditionTrue
		if !ready {
			trouble = append(trouble, fmt.Sprintf("Ready=%s since %s (%s: %s)", c.Status,
				c.LastTransitionTime.Format(time.TimeOnly), c.Reason, c.Message))
		}
	}
	if !ready && len(trouble) == 0 {
		trouble = append(trouble, "no Ready condition")
	}
	if node.Spec.Unschedulable {
		trouble = append(trouble, "cordoned")
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key != testbed.DedicatedTaint {
			trouble = append(trouble, "taint "+taint.ToString())
		}
	}
	return strings.Join(trouble, ", ")
}

// dedicatedNodesTrouble waits up to timeout for nodes to be free of trouble (nodeTrouble, and with leftPods any
// Pod still on them: no test runs there meanwhile) and returns the trouble of those that are not, with what of their
// kubelet and containerd does not run.
func dedicatedNodesTrouble(nodes []testbed.Node, leftPods bool, timeout time.Duration) map[string]string {
	deadline := time.Now().Add(timeout)
	for {
		trouble := map[string]string{}
		for _, n := range nodes {
			var node corev1.Node
			if err := framework.K8s.Get(context.Background(), client.ObjectKey{Name: n.Name}, &node); err != nil {
				trouble[n.Name] = err.Error()
			} else if why := nodeTrouble(&node); why != "" {
				trouble[n.Name] = why
			}
			if leftPods {
				if left := podsOnNode(n.Name); left != "" {
					trouble[n.Name] = strings.TrimPrefix(trouble[n.Name]+", Pods left: "+left, ", ")
				}
			}
		}
		if len(trouble) == 0 || time.Now().After(deadline) {
			for name := range trouble {
				if down := framework.Bed.NodeProcessesDown(name); down != "" {
					trouble[name] += "; " + down
				}
			}
			return trouble
		}
		time.Sleep(time.Second)
	}
}

// podsOnNode names the Pods bound to node, with their phase and deletion, "" for none or when they cannot be listed.
func podsOnNode(node string) string {
	var pods corev1.PodList
	if err := framework.K8s.List(context.Background(), &pods, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return ""
	}
	var out []string
	for _, p := range pods.Items {
		desc := p.Namespace + "/" + p.Name + " " + string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			desc += " deleted at " + p.DeletionTimestamp.Format(time.TimeOnly)
		}
		out = append(out, desc)
	}
	return strings.Join(out, ", ")
}

func describeTrouble(trouble map[string]string) string {
	var out []string
	for name, why := range trouble {
		out = append(out, name+": "+why)
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// handBackDedicatedNodes fails t for each dedicated node it leaves unable to run members, saying why, and brings
// the node back as the test bed started it (uncordoned; stopped and started if not Ready), so that the tests after
// it do not fail for its fault.
func handBackDedicatedNodes(t *testing.T, nodes []testbed.Node) {
	trouble := dedicatedNodesTrouble(nodes, true, 2*time.Minute)
	if len(trouble) == 0 {
		return
	}
	t.Errorf("the test leaves dedicated nodes unable to run members: %s", describeTrouble(trouble))
	for name, why := range trouble {
		if strings.Contains(why, "cordoned") {
			if err := nodeKubectl("uncordon", name); err != nil {
				t.Errorf("restore node %s: %v", name, err)
			}
		}
		if strings.Contains(why, "Ready=") || strings.Contains(why, "not running") {
			if err := framework.Bed.StopNode(name); err != nil {
				t.Errorf("restore node %s: %v", name, err)
			} else if err := framework.Bed.StartNode(context.Background(), name); err != nil {
				t.Errorf("restore node %s: %v", name, err)
			}
		}
	}
	if left := dedicatedNodesTrouble(nodes, false, 2*time.Minute); len(left) > 0 {
		t.Errorf("dedicated nodes still unable to run members after a restart: %s", describeTrouble(left))
	} else {
		t.Logf("dedicated nodes restored")
	}
}

// onDedicatedNodes places a cluster's members on the dedicated nodes, the way a user gives etcd nodes of its
// own: a node selector and a toleration. Neither replaces Steward's default spread across nodes and zones.
func onDedicatedNodes(c *etcdv1alpha1.EtcdCluster) {
	c.Spec.Pod.NodeSelector = map[string]string{testbed.DedicatedTaint: "true"}
	c.Spec.Pod.Tolerations = []corev1.Toleration{{Key: testbed.DedicatedTaint, Operator: corev1.TolerationOpEqual, Value: "true",
		Effect: corev1.TaintEffectNoSchedule}}
}

// dedicatedClusterUnderLoad creates a cluster of replicas members on the dedicated nodes, in a namespace of its own
// with its own operator and replaceUnhealthyAfter when not zero, waits until it settles, and starts client load on
// it.
func dedicatedClusterUnderLoad(t *testing.T, name string, replicas int32, replaceUnhealthyAfter time.Duration) (client.ObjectKey, *etcdv1alpha1.EtcdCluster, *linearizability.Load) {
	t.Helper()
	ns := framework.NewNamespace(t, name)
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, name, replicas)
	onDedicatedNodes(c)
	if replaceUnhealthyAfter > 0 {
		c.Spec.ReplaceUnhealthyAfter = &metav1.Duration{Duration: replaceUnhealthyAfter}
	}
	if err := framework.K8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	got := framework.WaitSettled(t, key, 4*time.Minute)
	return key, got, framework.StartLoad(t, got)
}

// membersPerDomain counts a cluster's member Pods per node and per zone, and fails t for a Pod not on one of
// nodes.
func membersPerDomain(t *testing.T, c *etcdv1alpha1.EtcdCluster, nodes []testbed.Node) (perNode, perZone map[string]int) {
	t.Helper()
	pods := framework.MemberPodsOf(t, c)
	perNode, perZone, stray := podsPerDomain(pods.Items, nodes)
	for _, p := range stray {
		t.Errorf("member Pod %s is not on one of the dedicated nodes", p)
	}
	return perNode, perZone
}

// podsPerDomain counts pods per node and per zone of nodes (every node and zone counted), and names the pods on
// none of them, with the node they are on ("" while unscheduled).
func podsPerDomain(pods []corev1.Pod, nodes []testbed.Node) (perNode, perZone map[string]int, stray []string) {
	zoneOf := map[string]string{}
	perNode, perZone = map[string]int{}, map[string]int{}
	for _, n := range nodes {
		zoneOf[n.Name] = n.Zone
		perNode[n.Name], perZone[n.Zone] = 0, 0
	}
	for _, p := range pods {
		zone, ok := zoneOf[p.Spec.NodeName]
		if !ok {
			stray = append(stray, fmt.Sprintf("%s (on node %q)", p.Name, p.Spec.NodeName))
			continue
		}
		perNode[p.Spec.NodeName]++
		perZone[zone]++
	}
	return perNode, perZone, stray
}

// spreadOf is a domain count as its sorted counts, highest first: "2 2 1".
func spreadOf(counts map[string]int) string {
	var vals []int
	for _, v := range counts {
		vals = append(vals, v)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(vals)))
	return fmt.Sprint(vals)
}

// TestMembersSpreadAcrossNodesAndZones: with no placement in its spec but the nodes to use, a 3-member cluster
// gets one member on each of three nodes in three zones, and scaled to 5 under client load, two, two and one;
// status names each member's node, the history is linearizable and no acknowledged write is lost.
func TestMembersSpreadAcrossNodesAndZones(t *testing.T) {
	nodes := parallelOnDedicatedNodes(t)
	key, got, load := dedicatedClusterUnderLoad(t, "spread", 3, 0)
	for _, step := range []struct {
		replicas int32
		want     string
	}{{3, "[1 1 1]"}, {5, "[2 2 1]"}} {
		if got.Spec.Replicas != step.replicas {
			begin := time.Now()
			framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = step.replicas })
			got = framework.WaitSettled(t, key, 5*time.Minute)
			t.Logf("scaled to %d in %s", step.replicas, time.Since(begin).Round(100*time.Millisecond))
		}
		framework.CheckDefaultPlacement(t, got)
		perNode, perZone := membersPerDomain(t, got, nodes)
		if spreadOf(perNode) != step.want || spreadOf(perZone) != step.want {
			t.Errorf("%d members: per node %v, per zone %v; want %s in both", step.replicas, perNode, perZone, step.want)
		}
	}
	framework.RequireNoLostWrites(t, load, "spread 3->5")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestZoneLossHealsAndRebalances: a 5-member cluster spread over three nodes in three zones (two, two and one
// members) loses a zone: the node holding two followers stops (its kubelet, containerd and containers killed at
// once, as when a machine or a zone's power dies) under client load. The other three keep quorum; past
// replaceUnhealthyAfter Steward removes the two members, one at a time, and successors join on the two nodes left,
// while the old Pods still hang on the dead node (no kubelet takes them away). When the node returns, the old
// members' Pods and volumes go, they never rejoin, and Steward moves one member back onto the returned node
// (learner first, then the member on the most crowded node leaves) until the spread is two, two and one again.
// The history is linearizable and no acknowledged write is lost.
func TestZoneLossHealsAndRebalances(t *testing.T) {
	nodes := parallelOnDedicatedNodes(t)
	ctx := context.Background()
	key, got, load := dedicatedClusterUnderLoad(t, "zoneloss", 5, 20*time.Second)
	node, lost := "", map[string]bool{}
	perNode, _ := membersPerDomain(t, got, nodes)
	for _, n := range nodes {
		if perNode[n.Name] != 2 || node != "" {
			continue
		}
		on := map[string]bool{}
		for _, m := range got.Status.Members {
			if m.Node == n.Name && m.Role != etcdv1alpha1.RoleLeader {
				on[m.Name] = true
			}
		}
		if len(on) == 2 {
			node, lost = n.Name, on
		}
	}
	if node == "" {
		t.Fatalf("no node holds two followers: %v, %s", perNode, framework.Describe(got))
	}
	begin := time.Now()
	if err := framework.Bed.StopNode(node); err != nil {
		t.Fatal(err)
	}
	started := false
	t.Cleanup(func() {
		if !started { // the next multi-node test needs the node
			if err := framework.Bed.StartNode(context.Background(), node); err != nil {
				t.Errorf("start node %s again: %v", node, err)
			}
		}
	})
	t.Logf("stopped node %s with followers %v", node, lost)

	framework.Poll(t, fmt.Sprintf("members %v replaced on the other nodes", lost), 8*time.Minute, func() error {
		if err := framework.K8s.Get(ctx, key, got); err != nil {
			return err
		}
		voters := 0
		for _, m := range got.Status.Members {
			if lost[m.Name] {
				// Listed while its Pod hangs on the dead node, but no longer in etcd.
				if m.Role == etcdv1alpha1.RoleLeader || m.Role == etcdv1alpha1.RoleFollower || m.ID != "" {
					return fmt.Errorf("member %s still in etcd: %+v", m.Name, m)
				}
				continue
			}
			if m.Role != etcdv1alpha1.RoleLearner && m.Healthy {
				voters++
			}
			if m.Node == node {
				return fmt.Errorf("member %s is on the stopped node %s", m.Name, node)
			}
		}
		if voters != 5 || got.Status.ReadyReplicas != 5 {
			return fmt.Errorf("%d healthy voters, %d ready: %s", voters, got.Status.ReadyReplicas, framework.Describe(got))
		}
		return nil
	})
	t.Logf("replaced in %s, node still down: %s", time.Since(begin).Round(time.Second), framework.Describe(got))
	for name := range lost {
		var old corev1.Pod
		if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, &old); err != nil || old.DeletionTimestamp == nil {
			t.Errorf("the lost member's Pod %s should hang, deleted, on the stopped node: %v, %+v", name, err, old.DeletionTimestamp)
		}
	}

	// Rebalancing is optional work: with the maintenance window closed, the move waits and is listed.
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		if c.Spec.Maintenance == nil {
			c.Spec.Maintenance = &etcdv1alpha1.Maintenance{}
		}
		c.Spec.Maintenance.Window = closedWindow()
	})
	returned := time.Now()
	if err := framework.Bed.StartNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	started = true
	framework.Poll(t, "the rebalancing move deferred to the maintenance window", 4*time.Minute, func() error {
		if err := framework.K8s.Get(ctx, key, got); err != nil {
			return err
		}
		w := got.Status.MaintenanceWindow
		if w == nil || len(w.Deferred) != 1 || !strings.HasPrefix(w.Deferred[0], "rebalancing: ") {
			return fmt.Errorf("status.maintenanceWindow %+v: %s", w, framework.Describe(got))
		}
		return nil
	})
	if adds := withReason(framework.EventsOf(t, got, "MemberAdded", returned), etcdv1alpha1.ReasonRebalancing); len(adds) > 0 {
		t.Fatalf("a member moved with the maintenance window closed: %v", adds)
	}
	t.Logf("move deferred %s after the node returned: %s", time.Since(returned).Round(time.Second), got.Status.MaintenanceWindow.Deferred[0])
	openWindowNow(t, key)
	got = waitRebalanced(t, key, nodes, "[2 2 1]", 6*time.Minute)
	t.Logf("rebalanced in %s after the node returned: %s", time.Since(returned).Round(time.Second), framework.Describe(got))
	// One move: a learner added where members are fewest, then the member on the most crowded node removed. A
	// learner still not joined after replaceUnhealthyAfter (20 s here: a Pod starting on a node that has just come
	// back, on a loaded machine) is replaced by the rule for stuck learners and another learner is added for the
	// same move. That is not rebalancing going round in circles, so it is allowed (and logged); a second removal
	// to even the spread out is not.
	adds := withReason(framework.EventsWithin(t, got, "MemberAdded", returned, 1), etcdv1alpha1.ReasonRebalancing)
	removals := framework.EventsWithin(t, got, "MemberRemoved", returned, 1)
	moves, replacedLearners := withReason(removals, etcdv1alpha1.ReasonScalingDown), withReason(removals, etcdv1alpha1.ReasonReplacingLearner)
	for _, e := range replacedLearners {
		if !slices.ContainsFunc(adds, func(a string) bool { return eventMember(a) == eventMember(e) }) {
			t.Errorf("learner replaced that was not added to rebalance: %s", e)
		}
	}
	if len(moves) != 1 || len(adds) != 1+len(replacedLearners) {
		t.Errorf("want one member moved to rebalance after the node returned (a learner added, one more for each learner replaced, and one member removed), got added %q, removed %q", adds, removals)
		framework.LogEvents(t, got, returned)
	} else {
		t.Logf("events: %s; %s", strings.Join(adds, "; "), moves[0])
	}
	for _, e := range replacedLearners {
		t.Logf("a learner too slow to join was replaced: %s", e)
	}
	framework.CheckStatusMatchesEtcd(t, got)
	for name := range lost {
		var old corev1.Pod
		if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: name}, &old); !apierrors.IsNotFound(err) {
			t.Errorf("Pod %s of a removed member still there after its node returned: %v", name, err)
		}
	}
	for _, m := range got.Status.Members {
		if lost[m.Name] {
			t.Errorf("member %s rejoined after its node returned", m.Name)
		}
	}
	framework.RequireNoLostWrites(t, load, "zone loss, return and rebalancing")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// withReason keeps the Event messages that name reason as their step's, "... (Reason): ...".
func withReason(messages []string, reason string) []string {
	var out []string
	for _, m := range messages {
		if strings.Contains(m, "("+reason+"):") {
			out = append(out, m)
		}
	}
	return out
}

// eventMember is the member an "Added member NAME ..." or "Removed member NAME ..." Event message names.
func eventMember(message string) string {
	if f := strings.Fields(message); len(f) > 2 {
		return f[2]
	}
	return ""
}

// waitRebalanced waits until the cluster has settled with its members spread over nodes as want says (spreadOf of
// the members per node, every node counted), and returns it.
func waitRebalanced(t *testing.T, key client.ObjectKey, nodes []testbed.Node, want string, timeout time.Duration) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var got *etcdv1alpha1.EtcdCluster
	framework.Poll(t, "EtcdCluster "+key.String()+" settled with members spread "+want, timeout, func() error {
		c, err := framework.Settled(key)
		if err != nil {
			return err
		}
		got = c
		// The next step (a rebalancing learner) may have begun since status read as settled: its Pod, not yet
		// scheduled, is on no node, which is not yet a spread to judge. One list of the Pods for both looks: a
		// Pod created between two lists was once taken for a member off the dedicated nodes.
		pods := framework.MemberPodsOf(t, c)
		perNode, _, stray := podsPerDomain(pods.Items, nodes)
		if len(stray) > 0 {
			return fmt.Errorf("member Pods %v not on a dedicated node (yet): %s", stray, framework.Describe(c))
		}
		if spreadOf(perNode) != want {
			return fmt.Errorf("members per node %v: %s", perNode, framework.Describe(c))
		}
		return nil
	})
	return got
}

// TestDrainEachNodeInTurn drains the three nodes of a 3-member cluster one after the other with `kubectl
// drain`, uncordoning each after, under client load. Each eviction goes through the cluster's budget; Steward
// sees a member whose Pod was evicted and whose local volume is on a cordoned node, removes it and a successor
// joins on another node, so the drain finishes and the cluster keeps quorum throughout. At the end the cluster
// is healthy with 3 members, the history is linearizable and no acknowledged write is lost.
func TestDrainEachNodeInTurn(t *testing.T) {
	nodes := parallelOnDedicatedNodes(t)
	key, got, load := dedicatedClusterUnderLoad(t, "drain", 3, 0)
	kubectl := nodeKubectl
	t.Cleanup(func() { // the next multi-node test needs the nodes
		for _, n := range nodes {
			if err := kubectl("uncordon", n.Name); err != nil {
				t.Error(err)
			}
		}
	})
	for _, n := range nodes {
		begin := time.Now()
		before := map[string]string{}
		for _, m := range got.Status.Members {
			before[m.Name] = m.Node
		}
		if err := kubectl("drain", n.Name, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=5m"); err != nil {
			t.Fatalf("drain %s: %v; cluster: %s", n.Name, err, framework.Describe(got))
		}
		drained := time.Since(begin)
		got = framework.WaitSettled(t, key, 5*time.Minute)
		for _, m := range got.Status.Members {
			if m.Node == n.Name {
				t.Errorf("member %s is on drained node %s", m.Name, n.Name)
			}
			if prev, ok := before[m.Name]; ok && prev == n.Name {
				t.Errorf("member %s came back on drained node %s", m.Name, n.Name)
			}
		}
		framework.CheckStatusMatchesEtcd(t, got)
		t.Logf("drained %s in %s, settled in %s: members %s", n.Name, drained.Round(100*time.Millisecond),
			time.Since(begin).Round(100*time.Millisecond), framework.Describe(got))
		if err := kubectl("uncordon", n.Name); err != nil {
			t.Fatal(err)
		}
	}
	// The last node uncordoned, Steward moves a member back onto it (the others have been, each time the next
	// drain began).
	got = waitRebalanced(t, key, nodes, "[1 1 1]", 5*time.Minute)
	framework.RequireNoLostWrites(t, load, "a drain of each node in turn")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestMajorityAndAllNodesLostAndBack stops the nodes of two of three members, then of all three, each time past
// replaceUnhealthyAfter, and starts them again. Without quorum Steward changes nothing (no member removed, no Pod
// or volume deleted or created: a replacement needs a quorum to agree, and the members' data is on the stopped
// nodes' disks), and says so: Available=False, QuorumLost. When the nodes return, the same members come back
// on their volumes by themselves (their Pods were never deleted). No acknowledged write is lost.
func TestMajorityAndAllNodesLostAndBack(t *testing.T) {
	nodes := parallelOnDedicatedNodes(t)
	ctx := context.Background()
	key, got, load := dedicatedClusterUnderLoad(t, "nodesdown", 3, 15*time.Second)
	members := map[string]bool{}
	for _, m := range got.Status.Members {
		members[m.Name] = true
	}
	for _, down := range [][]testbed.Node{nodes[:2], nodes} {
		before := framework.OwnedState(t, got)
		stopped := map[string]bool{}
		t.Cleanup(func() { // the next multi-node test needs the nodes
			for name := range stopped {
				if err := framework.Bed.StartNode(context.Background(), name); err != nil {
					t.Errorf("start node %s again: %v", name, err)
				}
			}
		})
		for _, n := range down {
			stopped[n.Name] = true // a stop that fails half-way leaves a node to start again
			if err := framework.Bed.StopNode(n.Name); err != nil {
				t.Fatal(err)
			}
		}
		framework.Poll(t, fmt.Sprintf("QuorumLost with %d of 3 nodes down", len(down)), 3*time.Minute, func() error {
			if err := framework.K8s.Get(ctx, key, got); err != nil {
				return err
			}
			a := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionAvailable)
			if a == nil || a.Status != metav1.ConditionFalse || a.Reason != etcdv1alpha1.ReasonQuorumLost {
				return fmt.Errorf("conditions: %s", framework.Describe(got))
			}
			return nil
		})
		t.Logf("%d of 3 nodes down: %s", len(down), framework.Describe(got))
		time.Sleep(30 * time.Second) // twice replaceUnhealthyAfter: nothing may be replaced without a quorum
		if after := framework.OwnedState(t, got); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("Pods or volumes changed without a quorum:\nbefore %v\nafter  %v", before, after)
		}
		for _, n := range down {
			if err := framework.Bed.StartNode(ctx, n.Name); err != nil {
				t.Fatal(err)
			}
			delete(stopped, n.Name)
		}
		got = framework.WaitSettled(t, key, 5*time.Minute)
		framework.CheckStatusMatchesEtcd(t, got)
		for _, m := range got.Status.Members {
			if !members[m.Name] {
				t.Errorf("member %s is new: the members should have come back on their volumes", m.Name)
			}
		}
	}
	framework.RequireNoLostWrites(t, load, "a majority and then all nodes stopped and started")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// nodeKubectl runs kubectl as the admin, for what a human does to nodes (drain, cordon, uncordon).
func nodeKubectl(args ...string) error {
	out, err := exec.Command(framework.Bed.KubectlPath(), append([]string{"--kubeconfig", framework.Bed.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %v: %w: %s", args, err, out)
	}
	return nil
}

// nodeOf is the node status names for member name, "" when none.
func nodeOf(c *etcdv1alpha1.EtcdCluster, name string) string {
	for _, m := range c.Status.Members {
		if m.Name == name {
			return m.Node
		}
	}
	return ""
}

// waitReplaced waits until etcd no longer lists member victim and voters healthy voters other than it serve.
func waitReplaced(t *testing.T, key client.ObjectKey, victim string, voters int) {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	framework.Poll(t, "member "+victim+" replaced on another node", 5*time.Minute, func() error {
		if err := framework.K8s.Get(context.Background(), key, &c); err != nil {
			return err
		}
		healthy := 0
		for _, m := range c.Status.Members {
			if m.Name == victim && m.ID != "" {
				return fmt.Errorf("member %s still in etcd: %s", victim, framework.Describe(&c))
			}
			if m.Name != victim && m.Healthy && m.Role != etcdv1alpha1.RoleLearner {
				healthy++
			}
		}
		if healthy != voters {
			return fmt.Errorf("%d healthy voters, want %d: %s", healthy, voters, framework.Describe(&c))
		}
		return nil
	})
}

// TestNodeLostWhileOperatorStopped: the node of a follower of a 3-member cluster stops while Steward is not
// running, and stays down past replaceUnhealthyAfter (15 s) twice over. Started again, Steward replaces the member
// on one of the two nodes left (it counts the member unhealthy from what the Pod and etcd show, not from its own
// memory); the node returns, the old member's Pod and volume go, it never rejoins, and the spread is evened out
// again (one member per node). Client load throughout: linearizable, no acknowledged write lost.
func TestNodeLostWhileOperatorStopped(t *testing.T) {
	nodes := parallelOnDedicatedNodes(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "opstopped")
	stopOperator := framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "unattended", 3)
	onDedicatedNodes(c)
	c.Spec.ReplaceUnhealthyAfter = &metav1.Duration{Duration: 15 * time.Second}
	key, got := framework.Settle(t, c)
	load := framework.StartLoad(t, got)
	victim, _ := framework.AFollower(t, got)
	node := nodeOf(got, victim)
	stopOperator()
	if err := framework.Bed.StopNode(node); err != nil {
		t.Fatal(err)
	}
	started := false
	t.Cleanup(func() {
		if !started { // the next multi-node test needs the node
			if err := framework.Bed.StartNode(context.Background(), node); err != nil {
				t.Errorf("start node %s again: %v", node, err)
			}
		}
	})
	t.Logf("operator stopped, then node %s of follower %s", node, victim)
	time.Sleep(30 * time.Second)
	begin := time.Now()
	framework.StartOperator(t, ns)
	waitReplaced(t, key, victim, 3)
	t.Logf("replaced %s after the operator started, node still down", time.Since(begin).Round(time.Second))
	if err := framework.Bed.StartNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	started = true
	got = waitRebalanced(t, key, nodes, "[1 1 1]", 6*time.Minute)
	for _, m := range got.Status.Members {
		if m.Name == victim {
			t.Errorf("the lost member %s came back: %+v", victim, m)
		}
	}
	var old corev1.Pod
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, &old); !apierrors.IsNotFound(err) {
		t.Errorf("the lost member's Pod %s is still there: %v", victim, err)
	}
	framework.RequireNoLostWrites(t, load, "a follower's node lost while the operator was stopped")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestPartitionedNodeMember cuts the node of a follower of a 3-member cluster off the network (IsolateNode): the
// member keeps running but reaches nothing, and the node goes NotReady. Past replaceUnhealthyAfter (15 s) Steward
// replaces it on another node as for a lost node. When the node is reconnected, the old member, still running on
// its data, learns from its peers that it was removed and stops; its Pod and volume go, it never rejoins, and the
// spread is evened out again (one member per node). Client load throughout: linearizable, no acknowledged write
// lost.
func TestPartitionedNodeMember(t *testing.T) {
	nodes := parallelOnDedicatedNodes(t)
	ctx := context.Background()
	key, got, load := dedicatedClusterUnderLoad(t, "partition", 3, 15*time.Second)
	victim, victimID := framework.AFollower(t, got)
	node := nodeOf(got, victim)
	if err := framework.Bed.IsolateNode(node); err != nil {
		t.Fatal(err)
	}
	reconnected := false
	t.Cleanup(func() {
		if !reconnected { // the next multi-node test needs the node
			if err := framework.Bed.ReconnectNode(node); err != nil {
				t.Errorf("reconnect node %s: %v", node, err)
			}
		}
	})
	begin := time.Now()
	t.Logf("cut node %s of follower %s off the network", node, victim)
	waitReplaced(t, key, victim, 3)
	t.Logf("replaced in %s while the node was cut off", time.Since(begin).Round(time.Second))
	if err := framework.Bed.ReconnectNode(node); err != nil {
		t.Fatal(err)
	}
	reconnected = true
	got = waitRebalanced(t, key, nodes, "[1 1 1]", 6*time.Minute)
	for _, m := range got.Status.Members {
		if m.Name == victim || m.ID == victimID {
			t.Errorf("the partitioned member %s (%s) came back: %+v", victim, victimID, m)
		}
	}
	var old corev1.Pod
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: victim}, &old); !apierrors.IsNotFound(err) {
		t.Errorf("the partitioned member's Pod %s is still there: %v", victim, err)
	}
	framework.CheckStatusMatchesEtcd(t, got)
	framework.RequireNoLostWrites(t, load, "a follower's node cut off the network and reconnected")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestUnsatisfiableSpreadIsReported: a cluster whose own placement the nodes cannot meet: three members required
// on three different nodes (a pod anti-affinity on the hostname) and one of the three nodes cordoned. Two members
// start and form the cluster; the third waits unscheduled, Degraded is MemberPodsFailing in the scheduler's words,
// and Steward removes, replaces and deletes nothing, even past replaceUnhealthyAfter (a successor would meet the
// same rules). Uncordoned, the node takes the third member and the cluster settles with one member per node.
func TestUnsatisfiableSpreadIsReported(t *testing.T) {
	nodes := parallelOnDedicatedNodes(t)
	ctx := context.Background()
	cordoned := nodes[len(nodes)-1].Name
	if err := nodeKubectl("cordon", cordoned); err != nil {
		t.Fatal(err)
	}
	uncordoned := false
	t.Cleanup(func() { // the next multi-node test needs the node
		if !uncordoned {
			if err := nodeKubectl("uncordon", cordoned); err != nil {
				t.Error(err)
			}
		}
	})
	ns := framework.NewNamespace(t, "unsatisfiable")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "unsatisfiable", 3)
	onDedicatedNodes(c)
	c.Spec.ReplaceUnhealthyAfter = &metav1.Duration{Duration: 10 * time.Second}
	c.Spec.Pod.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: resources.TopologyKeyHostname,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{resources.LabelCluster: c.Name}}}}}}
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	var cur etcdv1alpha1.EtcdCluster
	framework.Poll(t, "Degraded "+etcdv1alpha1.ReasonMemberPodsFailing+" with the scheduler's words", 4*time.Minute, func() error {
		if err := framework.K8s.Get(ctx, key, &cur); err != nil {
			return err
		}
		d := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if d == nil || d.Status != metav1.ConditionTrue || d.Reason != etcdv1alpha1.ReasonMemberPodsFailing ||
			!strings.Contains(d.Message, "anti-affinity") || !strings.Contains(d.Message, "unschedulable") {
			return fmt.Errorf("conditions: %s; %s", framework.Describe(&cur), framework.PodStates(&cur))
		}
		if cur.Status.ReadyReplicas != 2 {
			return fmt.Errorf("%d ready members, want the 2 that could be placed: %s", cur.Status.ReadyReplicas, framework.Describe(&cur))
		}
		return nil
	})
	t.Logf("reported: %s", framework.Describe(&cur))
	before := framework.OwnedState(t, &cur)
	// Past replaceUnhealthyAfter (10 s) twice over.
	framework.RequireOwnedStateFor(t, &cur, before, 25*time.Second)
	if err := nodeKubectl("uncordon", cordoned); err != nil {
		t.Fatal(err)
	}
	uncordoned = true
	got := framework.WaitSettled(t, key, 4*time.Minute)
	if perNode, _ := membersPerDomain(t, got, nodes); spreadOf(perNode) != "[1 1 1]" {
		t.Errorf("members per node %v, want one on each", perNode)
	}
	if now := framework.OwnedState(t, got); fmt.Sprint(now) != fmt.Sprint(before) {
		t.Errorf("the waiting member was replaced rather than scheduled: %v -> %v", before, now)
	}
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestRestoreAcrossNodes: backups of a cluster on the dedicated nodes, one to a ReadWriteOnce claim (its local
// volume on the node the backup Job ran on, the first node, which the dedicated clusters do not use) and one to
// S3, restored into new clusters.
//   - Into a cluster on the dedicated nodes from the claim: no node of the cluster can mount it. The restore waits
//     before creating anything, Degraded BackupNotMountable says which node could and what to do, and nothing
//     is created for a while.
//   - Into a cluster that tolerates the dedicated nodes (and may use the first one) from the claim: one member
//     starts from the snapshot where the claim is, the restore completes with it, and the other two join it as
//     learners on other nodes: three nodes, every key.
//   - From S3 onto the dedicated nodes: one member each, every key.
func TestRestoreAcrossNodes(t *testing.T) {
	nodes := parallelOnDedicatedNodes(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "acrossnodes")
	framework.StartOperator(t, ns)
	framework.CreateS3Secret(t, ns)
	framework.CreateBackupClaim(t, ns, "512Mi")
	origin := framework.NewCluster(ns, "origin", 3)
	onDedicatedNodes(origin)
	if err := framework.K8s.Create(ctx, origin); err != nil {
		t.Fatal(err)
	}
	origin = framework.WaitSettled(t, client.ObjectKeyFromObject(origin), 3*time.Minute)
	keys := framework.WriteBackupKeys(t, origin)
	backupTo := func(name string, d etcdv1alpha1.BackupDestination) *etcdv1alpha1.EtcdBackup {
		b := framework.NewBackup(ns, name, origin.Name, d)
		if err := framework.K8s.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		b = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 2*time.Minute)
		framework.RequireComplete(t, b, origin)
		return b
	}
	toPVC := backupTo("to-pvc", etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "origin.db"}})
	toS3 := backupTo("to-s3", framework.S3Destination(ns+"/origin.db"))

	unreadable := framework.FromBackup(ns, "unreadable", 3, toPVC.Name)
	onDedicatedNodes(unreadable)
	if err := framework.K8s.Create(ctx, unreadable); err != nil {
		t.Fatal(err)
	}
	var cur etcdv1alpha1.EtcdCluster
	framework.Poll(t, "Degraded "+etcdv1alpha1.ReasonBackupNotMountable, 4*time.Minute, func() error {
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(unreadable), &cur); err != nil {
			return err
		}
		d := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if d == nil || d.Status != metav1.ConditionTrue || d.Reason != etcdv1alpha1.ReasonBackupNotMountable ||
			!strings.Contains(d.Message, "claim backups") || !strings.Contains(d.Message, "only node(s)") {
			return fmt.Errorf("conditions: %s; %s", framework.Describe(&cur), framework.PodStates(&cur))
		}
		return nil
	})
	t.Logf("restore from a ReadWriteOnce claim no node of the cluster can mount, reported: %s", framework.Describe(&cur))
	before := framework.OwnedState(t, &cur)
	framework.RequireOwnedStateFor(t, &cur, before, 20*time.Second)
	if objs := framework.PodAndVolumeUIDs(t, &cur); len(objs) != 0 {
		t.Fatalf("a restore whose snapshot cannot be read created members: %v", objs)
	}
	framework.DeleteAndCheckNothingLeft(t, &cur)

	fromPVC := framework.FromBackup(ns, "from-pvc", 3, toPVC.Name)
	fromPVC.Spec.Pod.Tolerations = []corev1.Toleration{{Key: testbed.DedicatedTaint, Operator: corev1.TolerationOpEqual, Value: "true",
		Effect: corev1.TaintEffectNoSchedule}}
	start := time.Now()
	if err := framework.K8s.Create(ctx, fromPVC); err != nil {
		t.Fatal(err)
	}
	got := framework.WaitSettled(t, client.ObjectKeyFromObject(fromPVC), 4*time.Minute)
	t.Logf("restored from %s into 3 members across nodes in %s", toPVC.Status.Location, time.Since(start).Round(100*time.Millisecond))
	r := framework.WaitRestoreFinished(t, client.ObjectKey{Namespace: ns, Name: etcdcluster.FromBackupRestoreName(fromPVC)}, time.Minute)
	framework.RequireRestoreReason(t, r, etcdv1alpha1.ConditionComplete, etcdv1alpha1.ReasonRestoreSucceeded)
	if len(r.Status.Members) != 1 {
		t.Errorf("restore members %v, want the one seed (a ReadWriteOnce claim)", r.Status.Members)
	}
	onNodes := map[string]bool{}
	for _, m := range got.Status.Members {
		onNodes[m.Node] = true
	}
	if len(onNodes) != 3 {
		t.Errorf("members on nodes %v, want three nodes: %+v", onNodes, got.Status.Members)
	}
	read, _ := framework.ReadKeys(t, got, framework.BackupKeyPrefix)
	framework.RequireSameKeys(t, "restored from a ReadWriteOnce claim across nodes", read, keys)
	framework.CheckStatusMatchesEtcd(t, got)
	framework.DeleteAndCheckNothingLeft(t, got)

	fromS3 := framework.FromBackup(ns, "from-s3", 3, toS3.Name)
	onDedicatedNodes(fromS3)
	if err := framework.K8s.Create(ctx, fromS3); err != nil {
		t.Fatal(err)
	}
	got = framework.WaitSettled(t, client.ObjectKeyFromObject(fromS3), 4*time.Minute)
	if perNode, _ := membersPerDomain(t, got, nodes); spreadOf(perNode) != "[1 1 1]" {
		t.Errorf("members per node %v, want one on each", perNode)
	}
	read, _ = framework.ReadKeys(t, got, framework.BackupKeyPrefix)
	framework.RequireSameKeys(t, "restored from S3 across nodes", read, keys)
	framework.DeleteAndCheckNothingLeft(t, got)
	framework.DeleteAndCheckNothingLeft(t, origin)
}
