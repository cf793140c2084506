package etcdcluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// memoryProblem is why members may run out of memory before they do, for Degraded: a reason of
// plan.MemoryLimitProblem or plan.MemoryFitProblem and its message; empty when none is found.
type memoryProblem struct {
	reason, message string
}

// observeMemory compares what a member may need with its settings (resources.MemberMemoryNeed) with the memory
// limit spec.resources gives members, and with the allocatable memory of the nodes they run on or may be
// scheduled to, read from the Node cache where Steward may read Nodes (r.Nodes); without them only the limit is
// compared. Steward only reports what it finds: a limit, a request or a placement is the user's to change.
func (r *Reconciler) observeMemory(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) {
	need := resources.MemberMemoryNeed(cluster)
	res := resources.MemberResources(cluster)
	request, limit := res.Requests.Memory().Value(), res.Limits.Memory().Value()
	if reason, msg := plan.MemoryLimitProblem(need, limit); reason != "" {
		obs.memory = memoryProblem{reason, msg}
		return
	}
	nodes, ok := r.cachedNodes(ctx, "members' memory is not compared with their nodes'")
	if !ok {
		return
	}
	reason, msg := plan.MemoryFitProblem(need, request, limit, nodeMemoryOf(cluster, nodes, obs.pods))
	obs.memory = memoryProblem{reason, msg}
}

// nodeMemoryOf is each node's allocatable memory, whether a member Pod may be scheduled to it now (placementOf's
// nodes), and the members whose Pods are on it (Pods being deleted no longer count). Pure, for table tests.
func nodeMemoryOf(cluster *etcdv1alpha1.EtcdCluster, nodes []corev1.Node, pods map[string]*corev1.Pod) []plan.NodeMemory {
	eligible := placementOf(cluster, nodes).Zones
	on := map[string][]string{}
	for name, p := range pods {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			on[p.Spec.NodeName] = append(on[p.Spec.NodeName], name)
		}
	}
	out := make([]plan.NodeMemory, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		_, ok := eligible[n.Name]
		out = append(out, plan.NodeMemory{Name: n.Name, Allocatable: n.Status.Allocatable.Memory().Value(), Eligible: ok, Members: on[n.Name]})
	}
	return out
}
