package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
)

// bedOptions is the test bed the suite runs on: four nodes in three zones. Every test but the multi-node ones
// runs on the first node; the other three carry testbed.DedicatedTaint, one per zone, and only clusters that
// useDedicatedNodes places there run on them, so that a test that stops, cuts off or drains one of them
// disturbs no other test.
var bedOptions = testbed.Options{Nodes: 4, Zones: 3, DedicatedNodes: 3}

// dedicatedNodes is held by the test that uses the dedicated nodes: one at a time, since each changes what
// the nodes can run (a stopped node, a cordon) or counts where members land.
var dedicatedNodes sync.Mutex

// useDedicatedNodes gives t the dedicated nodes until it ends and returns them.
func useDedicatedNodes(t *testing.T) []testbed.Node {
	t.Helper()
	dedicatedNodes.Lock()
	t.Cleanup(dedicatedNodes.Unlock)
	var out []testbed.Node
	for _, n := range bed.Nodes() {
		if n.Dedicated {
			out = append(out, n)
		}
	}
	if len(out) < 3 {
		t.Fatalf("the test bed has %d dedicated nodes, the multi-node tests need 3", len(out))
	}
	return out
}

// onDedicatedNodes places a cluster's members on the dedicated nodes, the way a user gives etcd nodes of its
// own: a node selector and a toleration. Neither replaces Steward's default spread across nodes and zones.
func onDedicatedNodes(c *etcdv1alpha1.EtcdCluster) {
	c.Spec.Pod.NodeSelector = map[string]string{testbed.DedicatedTaint: "true"}
	c.Spec.Pod.Tolerations = []corev1.Toleration{{Key: testbed.DedicatedTaint, Operator: corev1.TolerationOpEqual, Value: "true",
		Effect: corev1.TaintEffectNoSchedule}}
}

// membersPerDomain counts a cluster's member Pods per node and per zone, and fails t for a Pod not on one of
// nodes.
func membersPerDomain(t *testing.T, c *etcdv1alpha1.EtcdCluster, nodes []testbed.Node) (perNode, perZone map[string]int) {
	t.Helper()
	zoneOf := map[string]string{}
	perNode, perZone = map[string]int{}, map[string]int{}
	for _, n := range nodes {
		zoneOf[n.Name] = n.Zone
		perNode[n.Name], perZone[n.Zone] = 0, 0
	}
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		zone, ok := zoneOf[p.Spec.NodeName]
		if !ok {
			t.Errorf("member Pod %s is on node %q, not on one of the dedicated nodes", p.Name, p.Spec.NodeName)
			continue
		}
		perNode[p.Spec.NodeName]++
		perZone[zone]++
	}
	return perNode, perZone
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
	parallel(t)
	nodes := useDedicatedNodes(t)
	ctx := context.Background()
	ns := newNamespace(t, "spread")
	startOperator(t, ns)
	c := newCluster(ns, "spread", 3)
	onDedicatedNodes(c)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	got := waitSettled(t, key, 4*time.Minute)
	load := startLoad(t, got)
	for _, step := range []struct {
		replicas int32
		want     string
	}{{3, "[1 1 1]"}, {5, "[2 2 1]"}} {
		if got.Spec.Replicas != step.replicas {
			begin := time.Now()
			patchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = step.replicas })
			got = waitSettled(t, key, 5*time.Minute)
			t.Logf("scaled to %d in %s", step.replicas, time.Since(begin).Round(100*time.Millisecond))
		}
		checkDefaultPlacement(t, got)
		perNode, perZone := membersPerDomain(t, got, nodes)
		if spreadOf(perNode) != step.want || spreadOf(perZone) != step.want {
			t.Errorf("%d members: per node %v, per zone %v; want %s in both", step.replicas, perNode, perZone, step.want)
		}
	}
	requireNoLostWrites(t, load, "spread 3->5")
	deleteAndCheckNothingLeft(t, got)
}
