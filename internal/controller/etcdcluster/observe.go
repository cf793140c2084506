package etcdcluster

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// observation is one pass's view of a cluster: its own objects from the cache and etcd's answers.
type observation struct {
	plan plan.Observation
	pods map[string]*corev1.Pod
	view etcd.ClusterView
	// statusOf maps member name to its status answer.
	statusOf map[string]etcd.Status
	// nameOf maps etcd member ID to member name.
	nameOf map[uint64]string
	// unhealthySince is when each unhealthy member was first seen unhealthy, to be remembered in status.
	unhealthySince map[string]time.Time
	// endpoints are the client URLs (by Pod IP) of the members that answered as voters, for membership calls.
	endpoints []string
	// versionMark is the cluster version and the raft index from which the cluster has run it, to remember in
	// status.
	versionMark *etcdv1alpha1.ClusterVersionMark
	// defragmented is each member's last defragmentation, as its volume records it.
	defragmented map[string]*etcdv1alpha1.Defragmented
	// quorumLostSince is when the formed cluster lost quorum, to remember in status; nil while it has quorum.
	quorumLostSince *time.Time
	// restore is the EtcdRestore of obs.plan.Restore, and restoreBackup its EtcdBackup (nil when not found).
	restore       *etcdv1alpha1.EtcdRestore
	restoreBackup *etcdv1alpha1.EtcdBackup
	// tls is the pass's view of the cluster's TLS; nil for a plaintext cluster or when it could not be read.
	tls *tlsState
	// hashCheck is the last comparison of members' key-space hashes: this pass's, or the one status holds.
	hashCheck *etcdv1alpha1.HashCheck
	// users is this pass's comparison of etcd's users with the cluster's EtcdUsers, nil when none was made.
	users *userCheck
	// admitted: this pass's step admitted an adopted source (plan.AdoptSource), for status to record.
	admitted bool
	// source is how the pass reads an adopted source (as the credentials Secret's user, or not);
	// operatorUserAdded and operatorUserRemoved: this pass's step added or deleted Steward's own user on it, for
	// status to record.
	source                                 sourceAccess
	operatorUserAdded, operatorUserRemoved bool
	// operator is the password Steward keeps for its password user, from the Secret operatorSecret names (both
	// empty when there is no such Secret).
	operator       etcd.Password
	operatorSecret string
	// replaceMismatched: spec.maintenance.corruptionCheck.replaceMismatchedMembers.
	replaceMismatched bool
	// window is spec.maintenance.window as this pass computed it, for status; nil without one.
	window *etcdv1alpha1.MaintenanceWindowStatus
	// externalAccess is the client Service's access from outside the cluster, for status, once serviceObserved
	// (the pass looked at the Service); serviceRefused why the API server refused the Service spec.service asks
	// for ("" when it did not).
	serviceObserved bool
	externalAccess  *etcdv1alpha1.ExternalAccess
	serviceRefused  string
	// memory is why members may run out of memory before they do (observeMemory); empty when nothing is found.
	memory memoryProblem
	// standbySeed is a standby's seed backup (spec.standby) in whatever state, nil while there is none; standby
	// what the pass decided for a standby and the applier's report it decided from (standby.go), nil for other
	// clusters.
	standbySeed *etcdv1alpha1.EtcdBackup
	standby     *standbyPass
}

// objects are the cluster's Pods and PVCs as a pass reads them, once, before anything is written: the TLS
// decision and the observation both read these.
type objects struct {
	pods []corev1.Pod
	pvcs []corev1.PersistentVolumeClaim
}

// observeObjects reads the cluster's Pods and PVCs (anything with its label; assemble keeps its members').
func (r *Reconciler) observeObjects(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster) (objects, error) {
	sel := client.MatchingLabels{resources.LabelCluster: cluster.Name}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(cluster.Namespace), sel); err != nil {
		return objects{}, fmt.Errorf("list member Pods: %w", err)
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &pvcs, client.InNamespace(cluster.Namespace), sel); err != nil {
		return objects{}, fmt.Errorf("list member PVCs: %w", err)
	}
	return objects{pods: pods.Items, pvcs: pvcs.Items}, nil
}

// observe asks etcd (through the client certificate the first act stage ensured) and joins its answers with the
// cluster's objects into the pass's observation. It writes nothing.
func (r *Reconciler) observe(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, objs objects, source sourceAccess) (*observation, error) {
	pods, pvcs := objs.pods, objs.pvcs
	endpoints := resources.MemberClientEndpoints(cluster, pods)
	list := make([]string, 0, len(endpoints))
	for ep := range endpoints {
		list = append(list, ep)
	}
	for _, ep := range sourceEndpoints(cluster) {
		if _, ok := endpoints[ep]; !ok {
			list = append(list, ep)
		}
	}
	sort.Strings(list)
	key := client.ObjectKeyFromObject(cluster).String()
	view, err := r.Etcd.Observe(ctx, key, list)
	if err != nil {
		return nil, err
	}
	if more := unaskedSourceURLs(cluster, view, list); len(more) > 0 {
		// An adoption's preflight asks every source member, also those the spec's endpoints do not name.
		list = append(list, more...)
		sort.Strings(list)
		if view, err = r.Etcd.Observe(ctx, key, list); err != nil {
			return nil, err
		}
	}
	taken := map[string]bool{}
	for _, m := range cluster.Status.Members {
		taken[m.Name] = true
	}
	obs := assemble(cluster, pods, pvcs, view, r.Options, r.Now(), func(used map[string]bool) []string {
		for n := range used {
			taken[n] = true
		}
		return newMemberNames(cluster.Name, int(cluster.Spec.Replicas), taken)
	})
	// Read after Observe, which dialed: etcd refuses a password only while auth is on.
	obs.plan.PasswordRejected = r.Etcd.PasswordRejected(key)
	obs.source = source
	obs.endpoints = view.VoterEndpoints
	if len(obs.endpoints) == 0 {
		obs.endpoints = list
	}
	if err := r.observeRestores(ctx, cluster, obs); err != nil {
		return nil, err
	}
	if err := r.observeExpandable(ctx, obs, storageGoal(cluster)); err != nil {
		return nil, err
	}
	if err := r.observeVolumeNodes(ctx, cluster, obs, pvcs); err != nil {
		return nil, err
	}
	r.observeNodes(ctx, cluster, obs)
	r.observeMemory(ctx, cluster, obs)
	r.observeNoSpace(ctx, cluster, obs)
	r.observeHashCheck(ctx, cluster, obs)
	r.observeAuth(ctx, cluster, obs)
	r.observeSourceUser(ctx, cluster, obs)
	r.observePeerIdentity(ctx, cluster, obs)
	obs.plan.Window, obs.window = maintenanceWindow(cluster, r.Now())
	observeAdoption(cluster, obs)
	return obs, nil
}

// isMemberObject reports whether a Pod or PVC is one of the cluster's members': labelled with a member name and
// controlled by the cluster. Anything else with the cluster's label is never touched.
func isMemberObject(obj client.Object, cluster *etcdv1alpha1.EtcdCluster) bool {
	return obj.GetLabels()[resources.LabelMember] != "" && metav1.IsControlledBy(obj, cluster)
}

func readInitial(m *plan.Member, annotations map[string]string) {
	if s := annotations[resources.AnnotationInitialCluster]; s != "" {
		if initial, err := resources.ParseInitialCluster(s); err == nil {
			m.InitialCluster = initial
			m.InitialState = annotations[resources.AnnotationInitialClusterState]
		}
	}
}

// etcdImages returns the image the etcd container is set to run and the one its running container was started
// from (empty until the kubelet reports it).
func etcdImages(p *corev1.Pod) (spec, running string) {
	for _, c := range p.Spec.Containers {
		if c.Name == resources.EtcdContainer {
			spec = c.Image
		}
	}
	if cs := etcdContainerStatus(p); cs != nil && cs.State.Running != nil {
		running = cs.Image
	}
	return spec, running
}

// etcdContainerStatus is what the kubelet reports of p's etcd container (nil: no Pod, or nothing reported yet).
func etcdContainerStatus(p *corev1.Pod) *corev1.ContainerStatus {
	if p == nil {
		return nil
	}
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == resources.EtcdContainer {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// specStuckReasons are the kubelet's waiting reasons of a container that cannot start because of what its Pod
// asks for (image, configuration): a successor built from the same spec would be stuck the same way.
var specStuckReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true,
}

// stuckOf says why the etcd container does not run because of what its Pod asks for, or "": the kubelet reports
// a pull or create failure, or the Pod was switched to an image its container has not run yet (while the kubelet
// still pulls, its status shows the previous container, not yet a reason; a successor would be in the same spot).
func stuckOf(p *corev1.Pod) string {
	spec, _ := etcdImages(p)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != resources.EtcdContainer || cs.State.Running != nil {
			continue
		}
		if w := cs.State.Waiting; w != nil && specStuckReasons[w.Reason] {
			return w.Reason
		}
		if cs.Image != "" && spec != "" && !plan.SameImage(cs.Image, spec) {
			return plan.PodStuckImageNotStarted
		}
	}
	return ""
}

// unschedulable reports whether the scheduler found no node for p. Such a member is stuck on what its spec asks
// (placement, resources, a storage class) when its volume does not exist yet: a successor would meet the same
// rules and wait the same way, so it is not replaced however long it waits (assemble sets PodStuck). A member
// whose volume is bound may be held by where that volume is (a local volume on a node that is down), and a
// successor on a new volume could run elsewhere: that one is replaced as any unhealthy member.
func unschedulable(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// etcdStartedAt is when the etcd container of p (nil: no Pod) last started, while it runs; zero otherwise.
func etcdStartedAt(p *corev1.Pod) time.Time {
	if cs := etcdContainerStatus(p); cs != nil && cs.State.Running != nil {
		return cs.State.Running.StartedAt.Time
	}
	return time.Time{}
}

// placedAt is when the scheduler placed p on a node (its PodScheduled condition), or zero.
func placedAt(p *corev1.Pod) time.Time {
	return podConditionSince(p, corev1.PodScheduled, corev1.ConditionTrue)
}

// etcdHasRun reports whether p's etcd container has run at all: running now, ended, or restarted.
func etcdHasRun(p *corev1.Pod) bool {
	cs := etcdContainerStatus(p)
	return cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil || cs.RestartCount > 0)
}

// dataLossOf reads the etcd container's termination message of its current or last end: the evidence that the
// member's data dir was emptied or corrupted, from the report steward-agent run-etcd wrote (plan.DataLossEvidence),
// or "".
func dataLossOf(p *corev1.Pod) string {
	cs := etcdContainerStatus(p)
	if cs == nil {
		return ""
	}
	for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
		if t == nil {
			continue
		}
		if e := plan.DataLossEvidence(t.Message); e != "" {
			return e
		}
	}
	return ""
}

// clusterVersionMark updates the memory of when the cluster reached its cluster version. The first cluster
// version Steward sees is one the cluster has run from its start (index 0): Steward creates every cluster it
// manages, and a new cluster reports no decided version (3.5: "not_decided", 3.6: a 3.0.0 placeholder) until it
// has formed. A change of cluster version Steward sees later is marked at the leader's commit index then (at or
// after the real change: a later mark only waits longer). An unreadable answer keeps the old mark.
func clusterVersionMark(prev *etcdv1alpha1.ClusterVersionMark, cv string, leaderCommit uint64) *etcdv1alpha1.ClusterVersionMark {
	v, err := plan.ParseVersion(cv)
	if err != nil {
		return prev
	}
	placeholder := func(v plan.Version) bool { return v.Less(plan.Version{Major: 3, Minor: 5}) }
	switch {
	case prev != nil && prev.Version == cv:
		return prev
	case prev == nil:
		return &etcdv1alpha1.ClusterVersionMark{Version: cv}
	case placeholder(v):
		return prev
	}
	pv, err := plan.ParseVersion(prev.Version)
	if err == nil && placeholder(pv) {
		return &etcdv1alpha1.ClusterVersionMark{Version: cv, RaftIndex: prev.RaftIndex}
	}
	if err == nil && v.Less(pv) {
		// A downgrade: the log holds entries written under cv and under the minor the cluster came down from,
		// and the way back up goes to that minor, which reads both. Marking it would hold the next upgrade
		// until every member had taken a snapshot past it: 100,000 entries on 3.5, for ever on a quiet cluster.
		return &etcdv1alpha1.ClusterVersionMark{Version: cv}
	}
	// The index is etcd's answer: one beyond int64 (no real cluster gets there; a broken or hostile one might
	// say so) is held at the largest mark, which only makes Steward wait longer, never shorter.
	if leaderCommit > math.MaxInt64 {
		leaderCommit = math.MaxInt64
	}
	return &etcdv1alpha1.ClusterVersionMark{Version: cv, RaftIndex: int64(leaderCommit)}
}

// containersNotReadySince is when the kubelet last reported p's containers not ready (its ContainersReady
// condition turned False); zero while they are ready or without a Pod.
func containersNotReadySince(p *corev1.Pod) time.Time {
	return podConditionSince(p, corev1.ContainersReady, corev1.ConditionFalse)
}

// podConditionSince is when p's condition t last turned to status; zero if it has another status, or without a
// Pod.
func podConditionSince(p *corev1.Pod, t corev1.PodConditionType, status corev1.ConditionStatus) time.Time {
	if p == nil {
		return time.Time{}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == t && c.Status == status {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// memberAt maps each member's client URL, as its status answer was asked at, to its name.
func (obs *observation) memberAt() map[string]string {
	at := make(map[string]string, len(obs.statusOf))
	for name, s := range obs.statusOf {
		at[s.Endpoint] = name
	}
	return at
}
