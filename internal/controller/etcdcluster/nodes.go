package etcdcluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get
// +kubebuilder:rbac:groups="",resources=nodes,verbs=list;watch

// observeVolumeNodes finds the members whose Pod is missing or not scheduled and whose volume can only be
// mounted on nodes that are cordoned or gone: a local volume on a drained or deleted node. A Pod re-created on
// such a volume could never start, so the planner replaces the member on another node instead
// (plan.Member.VolumeNodeGone). The volume and the nodes are read past the cache, and only for such members:
// none in a steady cluster, so no cache of every node in the cluster is kept for them. Without permission to
// read PersistentVolumes and Nodes (a namespace-scoped install, or rules narrowed by hand) nothing is learnt, and the members are
// re-created on their volumes as before.
func (r *Reconciler) observeVolumeNodes(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, pvcs []corev1.PersistentVolumeClaim) error {
	if r.Nodes == nil {
		// A namespace-scoped install may read neither (both are cluster-scoped): asking would be refused on every
		// pass that finds a member without a placed Pod, refusals that StewardAPIAccessDenied counts as a cut RBAC.
		return nil
	}
	var nodes []corev1.Node
	listed := false
	for i := range pvcs {
		pvc := &pvcs[i]
		if !isMemberObject(pvc, cluster) || pvc.DeletionTimestamp != nil || pvc.Spec.VolumeName == "" {
			continue
		}
		name := pvc.Labels[resources.LabelMember]
		if p := obs.pods[name]; p != nil && p.Spec.NodeName != "" {
			continue // its Pod is on a node: whatever that node's state, the member's health says the rest
		}
		var pv corev1.PersistentVolume
		err := r.reader().Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv)
		switch {
		case apierrors.IsForbidden(err):
			log.FromContext(ctx).V(1).Info("Cannot read PersistentVolumes; members are re-created on their volumes wherever those are", "error", err.Error())
			return nil
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("get PersistentVolume %s of member %s: %w", pvc.Spec.VolumeName, name, err)
		}
		if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
			continue // mountable anywhere
		}
		if !listed {
			var list corev1.NodeList
			err := r.reader().List(ctx, &list)
			if apierrors.IsForbidden(err) {
				log.FromContext(ctx).V(1).Info("Cannot list Nodes; members are re-created on their volumes wherever those are", "error", err.Error())
				return nil
			}
			if err != nil {
				return fmt.Errorf("list nodes: %w", err)
			}
			nodes, listed = list.Items, true
		}
		why, err := volumeNodeGone(pv.Spec.NodeAffinity.Required, nodes)
		if err != nil {
			return fmt.Errorf("node affinity of PersistentVolume %s: %w", pv.Name, err)
		}
		for j := range obs.plan.Members {
			if obs.plan.Members[j].Name == name {
				obs.plan.Members[j].VolumeNodeGone = why
			}
		}
	}
	return nil
}

// volumeNodeGone says why no Pod can mount a volume whose nodes are those that required selects: each is
// cordoned (drained, most likely), or none exists any more. Empty when some node it selects takes new Pods.
// Pure, for table tests.
func volumeNodeGone(required *corev1.NodeSelector, nodes []corev1.Node) (string, error) {
	sel, err := nodeaffinity.NewNodeSelector(required)
	if err != nil {
		return "", err
	}
	var cordoned []string
	for i := range nodes {
		n := &nodes[i]
		if !sel.Match(n) {
			continue
		}
		if !n.Spec.Unschedulable {
			return "", nil
		}
		cordoned = append(cordoned, n.Name)
	}
	if len(cordoned) == 0 {
		return "its node no longer exists", nil
	}
	sort.Strings(cordoned)
	if len(cordoned) == 1 {
		return fmt.Sprintf("its node %s is cordoned", cordoned[0]), nil
	}
	return fmt.Sprintf("its nodes %s are cordoned", strings.Join(cordoned, ", ")), nil
}

// nodesReadTimeout bounds a read of the Node cache: an informer that cannot sync (permission to list or watch
// Nodes taken away) would otherwise hold the pass forever. Without nodes, members are not moved for balance.
const nodesReadTimeout = 10 * time.Second

// observeNodes reads the Nodes from the cache, where Steward may read them (r.Nodes: not in a namespace-scoped
// install), for where a new member may go under Steward's default spread (plan.Placement), so that the planner can
// move members off a node or zone that holds too many: after a lost zone healed into the others and came back,
// say. Only for clusters on the default spread (the user's own constraints mean the user places members).
func (r *Reconciler) observeNodes(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) {
	if r.Nodes == nil || resources.UserPlacesMembers(cluster) || cluster.Spec.Replicas < 2 {
		return
	}
	if nodes, ok := r.cachedNodes(ctx, "members are not moved for balance"); ok {
		obs.plan.Placement = placementOf(cluster, nodes)
	}
}

// cachedNodes lists the Nodes from the cache, where Steward may read them (r.Nodes); false, logged with what is
// not done without them, when it may not or the read fails.
func (r *Reconciler) cachedNodes(ctx context.Context, without string) ([]corev1.Node, bool) {
	if r.Nodes == nil {
		return nil, false
	}
	readCtx, cancel := context.WithTimeout(ctx, nodesReadTimeout)
	defer cancel()
	var list corev1.NodeList
	if err := r.Nodes.List(readCtx, &list); err != nil {
		log.FromContext(ctx).Info("Cannot read Nodes; "+without, "error", err.Error())
		return nil, false
	}
	return list.Items, true
}

// placementOf is the nodes a member Pod of cluster may be scheduled to now, with their zones, as the scheduler's
// topology spread counts them (NodeAffinityPolicy and NodeTaintsPolicy Honor, resources.MemberSpread): Ready,
// not cordoned, carrying the hostname label, matching the spec's node selector and required node affinity, and
// with every NoSchedule and NoExecute taint tolerated. Pure, for table tests.
func placementOf(cluster *etcdv1alpha1.EtcdCluster, nodes []corev1.Node) *plan.Placement {
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: cluster.Spec.Pod.NodeSelector, Affinity: cluster.Spec.Pod.Affinity,
		Tolerations: cluster.Spec.Pod.Tolerations}}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	scheduling := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	p := &plan.Placement{Zones: map[string]string{}}
	for i := range nodes {
		n := &nodes[i]
		if n.Spec.Unschedulable || !nodeReady(n) || n.Labels[resources.TopologyKeyHostname] == "" {
			continue
		}
		if ok, err := required.Match(n); err != nil || !ok {
			continue
		}
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(n.Spec.Taints, pod.Spec.Tolerations, scheduling); untolerated {
			continue
		}
		p.Zones[n.Name] = n.Labels[resources.TopologyKeyZone]
	}
	return p
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeCacheTransform keeps of a cached Node only what placement reads (labels, spec, conditions), what the
// agent's delivery reads (the container runtime's version, memberPodOptions) and what members' memory is compared
// with (allocatable memory, observeMemory): a Node's status also lists every image it holds and every volume
// attached, which in a large cluster would make the cache of Nodes many times larger than it needs to be.
func NodeCacheTransform(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	var allocatable corev1.ResourceList
	if m, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok {
		allocatable = corev1.ResourceList{corev1.ResourceMemory: m}
	}
	n.Status = corev1.NodeStatus{Conditions: n.Status.Conditions, Allocatable: allocatable,
		NodeInfo: corev1.NodeSystemInfo{ContainerRuntimeVersion: n.Status.NodeInfo.ContainerRuntimeVersion}}
	return n, nil
}
