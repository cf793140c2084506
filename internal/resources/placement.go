package resources

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

// Topology keys of the default spread: the well-known labels the kubelet and cloud providers set on nodes.
const (
	TopologyKeyHostname = corev1.LabelHostname
	TopologyKeyZone     = corev1.LabelTopologyZone
)

// DefaultMemberRequests is the floor of what a member's etcd container requests when spec.resources sets no
// memory (MemberResources). Without requests a member Pod is BestEffort: the first Pod the kubelet evicts under
// memory pressure, and one the scheduler packs onto a node as if it needed nothing. CPU is a share under
// contention, not a limit, and etcd takes what is idle beyond it; memory is what a member serving clients with a
// database of about 100 MiB used on the test bed, below which MemberMemoryNeed never sets the request.
var DefaultMemberRequests = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("50m"),
	corev1.ResourceMemory: resource.MustParse("256Mi"),
}

// MemberResources are the etcd container's resources: the spec's, with a memory request of MemberMemoryNeed (at
// least DefaultMemberRequests') where it sets no memory, and DefaultMemberRequests' CPU where it sets nothing at
// all. Sized so, the scheduler puts a member only where its raft log can grow to what its settings allow, and
// three members of a large database never share a node too small for them. No default limit: a memory limit
// turns a large range read into an OOM kill of a voting member, and a CPU limit throttles heartbeats into
// elections. A changed need (a new quota or snapshotCount) applies to member Pods created afterwards.
func MemberResources(cluster *etcdv1alpha1.EtcdCluster) corev1.ResourceRequirements {
	r := *cluster.Spec.Resources.DeepCopy()
	setNothing := len(r.Requests) == 0 && len(r.Limits) == 0 && len(r.Claims) == 0
	_, requested := r.Requests[corev1.ResourceMemory]
	_, limited := r.Limits[corev1.ResourceMemory]
	if requested || limited {
		return r
	}
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	if setNothing {
		r.Requests[corev1.ResourceCPU] = DefaultMemberRequests[corev1.ResourceCPU].DeepCopy()
	}
	memory := DefaultMemberRequests[corev1.ResourceMemory].DeepCopy()
	if need := MemberMemoryNeed(cluster); need.Bytes > memory.Value() {
		memory = *resource.NewQuantity(need.Bytes, resource.BinarySI)
	}
	r.Requests[corev1.ResourceMemory] = memory
	return r
}

// MemberMemoryNeed is the most memory a member of cluster may hold with its settings (plan.MemberMemory): the
// quota members run with, spec.etcd's snapshotCount and maxRequestBytes, and the spec's version for etcd's
// default snapshotCount.
func MemberMemoryNeed(cluster *etcdv1alpha1.EtcdCluster) plan.MemoryNeed {
	in := plan.MemoryInputs{Quota: QuotaBackendBytes(cluster), Version: cluster.Spec.Version}
	if c := cluster.Spec.Etcd.SnapshotCount; c != nil {
		in.SnapshotCount = *c
	}
	if m := cluster.Spec.Etcd.MaxRequestBytes; m != nil {
		in.MaxRequestBytes = m.Value()
	}
	return plan.MemberMemory(in)
}

// AgentRequests is what Steward's own agent containers request: backup, verify and point-in-time Jobs, the
// continuous-backup follower, and the init containers that restore a snapshot into a member's data dir. They
// stream a snapshot or a change feed and keep little in memory. Without requests they would be BestEffort,
// starved of CPU by the members beside them (which request CPU) and the first Pods evicted under memory pressure.
var AgentRequests = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("50m"),
	corev1.ResourceMemory: resource.MustParse("64Mi"),
}

// agentResources are an agent container's resources: AgentRequests, no limits (a memory limit would kill a
// restore of a large database half-way).
func agentResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: AgentRequests.DeepCopy()}
}

// UserPlacesMembers reports whether the spec says how members are placed relative to each other (spread
// constraints or a pod anti-affinity), which replaces Steward's default spread. A node selector or node affinity
// says only which nodes, and the default spread then spreads members across those.
func UserPlacesMembers(cluster *etcdv1alpha1.EtcdCluster) bool {
	p := cluster.Spec.Pod
	return len(p.TopologySpreadConstraints) > 0 || (p.Affinity != nil && p.Affinity.PodAntiAffinity != nil)
}

// MemberSpread is the member Pods' topology spread: the spec's when UserPlacesMembers, else the default:
//   - across nodes, required with a skew of at most 1: one member per node while there are enough nodes, evenly
//     otherwise (on one node, all of them). Nodes the Pod may not run on do not count (their taints, a cordon,
//     the spec's node selector and affinity), so a cordoned or unreachable node does not hold a replacement back.
//   - across zones, preferred: nodes without a zone label are not refused, as a required spread would.
func MemberSpread(cluster *etcdv1alpha1.EtcdCluster) []corev1.TopologySpreadConstraint {
	if UserPlacesMembers(cluster) {
		return cluster.Spec.Pod.TopologySpreadConstraints
	}
	spread := func(key string, when corev1.UnsatisfiableConstraintAction) corev1.TopologySpreadConstraint {
		return corev1.TopologySpreadConstraint{
			MaxSkew:            1,
			TopologyKey:        key,
			WhenUnsatisfiable:  when,
			LabelSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{LabelCluster: cluster.Name}},
			NodeAffinityPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
			NodeTaintsPolicy:   ptr.To(corev1.NodeInclusionPolicyHonor),
		}
	}
	return []corev1.TopologySpreadConstraint{
		spread(TopologyKeyHostname, corev1.DoNotSchedule),
		spread(TopologyKeyZone, corev1.ScheduleAnyway),
	}
}
