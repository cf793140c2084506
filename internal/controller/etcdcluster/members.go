package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// The membership steps: members' Pods and volumes created, stopped and deleted, learners added and promoted,
// members removed and restarted, leadership moved; and the marks members' volumes carry for later passes.

// retireMembers stops the members a re-seed replaces (plan.RetireMembers): each volume says first that the
// re-seed stops its member, so that its missing Pod is not brought back, then the Pod goes.
func (r *Reconciler) retireMembers(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	for _, name := range action.Members {
		pod := obs.pods[name]
		if pod == nil {
			continue
		}
		if err := r.markVolume(ctx, cluster, name, resources.AnnotationRetiredBy, action.Restore); err != nil {
			return err
		}
		if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("stop member %s for restore %s: %w", name, action.Restore, err)
		}
	}
	r.tookStep(ctx, cluster, action, "Stopped members for a re-seed", corev1.EventTypeWarning, "MembersRetired",
		fmt.Sprintf("Deleted the Pods of members %v: %s", action.Members, action.Message), "restore", action.Restore)
	return nil
}

// addLearner adds Members[0] to etcd as a learner, at the peer URL the plan chose (or the spec's).
func (r *Reconciler) addLearner(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	name, url := action.Members[0], action.PeerURL
	if url == "" {
		url = resources.PeerURL(cluster, name, r.Options)
	}
	id, err := r.Etcd.AddLearner(ctx, client.ObjectKeyFromObject(cluster).String(), obs.endpoints, url)
	if err != nil {
		return err
	}
	r.tookStep(ctx, cluster, action, "Added learner", corev1.EventTypeNormal, "MemberAdded",
		fmt.Sprintf("Added member %s (%s) as a learner (%s): %s", name, etcd.FormatID(id), action.Reason, action.Message),
		"memberID", etcd.FormatID(id), "peerURL", url)
	return nil
}

// promoteLearner asks etcd to promote the learner; etcd refuses until it has caught up, which is no failure.
func (r *Reconciler) promoteLearner(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	err := r.Etcd.PromoteLearner(ctx, client.ObjectKeyFromObject(cluster).String(), obs.endpoints, action.MemberID)
	if errors.Is(err, etcd.ErrLearnerNotReady) {
		ctrl.LoggerFrom(ctx).Info("Learner not caught up yet", "EtcdCluster", klog.KObj(cluster), "member", action.Members[0])
		return nil
	}
	if err != nil {
		return err
	}
	r.tookStep(ctx, cluster, action, "Promoted learner", corev1.EventTypeNormal, "MemberPromoted",
		fmt.Sprintf("Promoted learner %s to voting member", action.Members[0]), "memberID", etcd.FormatID(action.MemberID))
	return nil
}

// removeMember removes member MemberID from etcd.
func (r *Reconciler) removeMember(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	if err := r.Etcd.RemoveMember(ctx, client.ObjectKeyFromObject(cluster).String(), obs.endpoints, action.MemberID); err != nil {
		return err
	}
	r.tookStep(ctx, cluster, action, "Removed member", corev1.EventTypeNormal, "MemberRemoved",
		fmt.Sprintf("Removed member %s (%s) from etcd (%s): %s", action.Members[0], etcd.FormatID(action.MemberID), action.Reason, action.Message),
		"memberID", etcd.FormatID(action.MemberID))
	return nil
}

// deleteMemberPod deletes the Pod of a member etcd no longer lists.
func (r *Reconciler) deleteMemberPod(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	pod := obs.pods[action.Members[0]]
	if pod == nil {
		return nil
	}
	// etcd no longer lists the member: its volume says so before the Pod goes, so that no pass without a
	// member list takes the volume left behind for a member to bring back.
	if err := r.markVolume(ctx, cluster, pod.Name, resources.AnnotationRemovedMember, memberIDOf(cluster, pod.Name)); err != nil {
		return err
	}
	// The UID precondition makes sure the Pod deleted is the one observed, not a successor of the same name.
	if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete Pod of removed member %s: %w", pod.Name, err)
	}
	r.tookStep(ctx, cluster, action, "Deleted Pod of removed member", corev1.EventTypeNormal, "MemberPodDeleted",
		fmt.Sprintf("Deleted Pod of removed member %s", pod.Name), "pod", pod.Name)
	return nil
}

// deleteMemberPVC deletes the volume of a member etcd no longer lists.
func (r *Reconciler) deleteMemberPVC(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, action plan.Action) error {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: resources.PVCName(action.Members[0])}, pvc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if err := r.Client.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete volume of removed member %s: %w", action.Members[0], err)
	}
	r.tookStep(ctx, cluster, action, "Deleted volume of removed member", corev1.EventTypeNormal, "MemberVolumeDeleted",
		fmt.Sprintf("Deleted volume of removed member %s", action.Members[0]), "persistentVolumeClaim", pvc.Name)
	return nil
}

// restartMember deletes the Pod of Members[0] (plan.RestartMember): the next pass re-creates it on its volume.
func (r *Reconciler) restartMember(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	pod := obs.pods[action.Members[0]]
	if pod == nil {
		return nil
	}
	// Deleted, not patched: a Pod's command and volumes cannot change. The next pass re-creates it on the
	// member's volume, in the TLS mode the planner then derives from the member's peer URL and the spec.
	if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("restart member %s in TLS mode %s: %w", pod.Name, action.TLS, err)
	}
	switch action.Reason {
	case etcdv1alpha1.ReasonExpandingVolume:
		// The same mode: the restart is for the kubelet to finish the volume's file system resize (storage.go).
		r.tookStep(ctx, cluster, action, "Restarting member for a file system resize", corev1.EventTypeNormal, "MemberRestarting", action.Message)
	case etcdv1alpha1.ReasonRestartingForQuota:
		// The same mode: the re-created Pod starts with the quota in force (maintenance.go).
		r.tookStep(ctx, cluster, action, "Restarting member for its quota", corev1.EventTypeNormal, "MemberRestarting", action.Message)
	case etcdv1alpha1.ReasonRestartingLoneBootstrapMember:
		// The same mode: the re-created Pod asks its peers, were its data dir ever emptied.
		r.tookStep(ctx, cluster, action, "Restarting the member that bootstrapped the cluster alone", corev1.EventTypeNormal, "MemberRestarting", action.Message)
	case etcdv1alpha1.ReasonRestartingForPeerAuth:
		// The same mode: the re-created Pod accepts only member certificates on its peer port, or any of the CA's.
		r.tookStep(ctx, cluster, action, "Restarting member for its peer authentication", corev1.EventTypeNormal, "MemberRestarting", action.Message)
	case etcdv1alpha1.ReasonRestartingForClientAuth:
		// The same mode: the re-created Pod requires client certificates, or not, as spec.tls.clientAuth says.
		r.tookStep(ctx, cluster, action, "Restarting member for its client authentication", corev1.EventTypeNormal, "MemberRestarting", action.Message)
	default:
		r.tookStep(ctx, cluster, action, "Restarting member for TLS", corev1.EventTypeNormal, "MemberRestarting",
			fmt.Sprintf("Restarting member %s in TLS mode %s: %s", pod.Name, action.TLS, action.Message), "tlsMode", action.TLS)
	}
	return nil
}

// moveLeader hands leadership from Members[0] to Members[1] (TargetID).
func (r *Reconciler) moveLeader(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	from, to := action.Members[0], action.Members[1]
	// The leader answered this pass's status request (that is how it is known to lead), at its endpoint.
	leaderEndpoint := obs.statusOf[from].Endpoint
	if leaderEndpoint == "" {
		return fmt.Errorf("move leadership from %s: it has no address", from)
	}
	if err := r.Etcd.MoveLeader(ctx, client.ObjectKeyFromObject(cluster).String(), leaderEndpoint, action.TargetID); err != nil {
		return err
	}
	r.tookStep(ctx, cluster, action, "Moved leadership", corev1.EventTypeNormal, "LeaderMoved",
		fmt.Sprintf("Moved leadership from %s to %s", from, to), "from", from, "to", to, "memberID", etcd.FormatID(action.TargetID))
	return nil
}

// createMembers creates every member's PVC first and only then the Pods: once any Pod of a bootstrap exists,
// every bootstrap PVC exists, which is what lets the planner tell an interrupted bootstrap from lost data. A PVC
// that exists already records the TLS mode of the Pod about to start on it.
func (r *Reconciler) createMembers(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	if action.Kind == plan.Bootstrap {
		started, err := r.bootstrapStarted(ctx, cluster)
		if err != nil || started {
			return err
		}
	}
	src, err := restoreSource(obs, action.Restore)
	if err != nil {
		return err
	}
	// Whether the new Pods check the peer identity: only once every running member's certificate carries it.
	peerCheck := plan.PeerCheckForNewPods(specOf(cluster, r.Options), obs.plan.Members)
	var members []resources.Member
	for _, name := range action.Members {
		members = append(members, resources.Member{Name: name, InitialCluster: action.InitialCluster, State: action.State,
			HasRun: slices.Contains(action.HaveRun, name), Version: action.Version, Image: action.Image, Restore: src, TLS: action.TLS,
			TLSProvider: obs.tls.providerOrNone(), PeerCheck: peerCheck, ClusterCA: obs.tls.ownCA()})
	}
	if action.Kind == plan.RecreateMemberPods {
		members, action.TLS = nil, plan.TLSPlaintext
		for _, p := range action.Pods {
			seed, err := restoreSource(obs, p.Restore)
			if err != nil {
				return fmt.Errorf("re-create member %s: %w", p.Name, err)
			}
			members = append(members, resources.Member{Name: p.Name, InitialCluster: p.InitialCluster, State: p.State, HasRun: p.HasRun,
				Version: p.Version, Image: p.Image, Restore: seed, TLS: p.TLS, TLSProvider: obs.tls.providerOrNone(), PeerCheck: peerCheck,
				ClusterCA: obs.tls.ownCA()})
			if p.TLS != plan.TLSPlaintext {
				action.TLS = p.TLS // certificates are needed for the members that hold them
			}
		}
	}
	// Certificates before Pods: a Pod whose Secret volume is missing waits in ContainerCreating, with the
	// kubelet's retry backoff, for it to appear. Certificates Steward does not issue (cert-manager's) may take a
	// while: then the volumes are created (they hold a bootstrap's member names) and the Pods next pass.
	certsReady, err := r.ensureNewMemberCerts(ctx, cluster, obs.tls, action)
	if err != nil {
		return err
	}
	if !cluster.Spec.Storage.Ephemeral {
		for _, m := range members {
			if err := r.createIfMissing(ctx, cluster, resources.MemberPVC(cluster, m, r.Options), &corev1.PersistentVolumeClaim{}); err != nil {
				return fmt.Errorf("create volume of member %s: %w", m.Name, err)
			}
			if err := r.markVolume(ctx, cluster, m.Name, resources.AnnotationTLSMode, resources.MemberTLSOf(cluster, m)); err != nil {
				return err
			}
		}
	}
	if !certsReady {
		return nil // the next pass looks again (obs.tls.waiting says why in Progressing)
	}
	opts := r.memberPodOptions(ctx)
	for _, m := range members {
		// The certificates as the pass saw or issued them: a new Pod's volume starts with the Secret as it is.
		m.Certificates = obs.tls.certificates()
		if err := r.create(ctx, cluster, resources.MemberPod(cluster, m, opts)); err != nil {
			return fmt.Errorf("create member %s: %w", m.Name, err)
		}
		r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "MemberCreated", "Created Pod of member %s", m.Name)
	}
	// The step's own record once its Pods exist (a pass that waits for certificates takes it again).
	switch action.Kind {
	case plan.Bootstrap:
		r.tookStep(ctx, cluster, action, "Created bootstrap members", corev1.EventTypeNormal, "Bootstrapping",
			fmt.Sprintf("Creating %d members: %v", len(members), action.Members), "restore", action.Restore)
	case plan.RecreateMemberPods:
		r.tookStep(ctx, cluster, action, "Re-created member Pods on their volumes", corev1.EventTypeNormal, "MemberRecreated",
			fmt.Sprintf("Re-creating the Pods of members %v on their intact volumes (same names, member IDs and data)", action.Members))
	default:
		// One MemberCreated Event per Pod, above, names each member.
		r.tookStep(ctx, cluster, action, "Created member Pods", "", "", "")
	}
	return nil
}

// bootstrapStarted reports whether the cluster has a member Pod or PVC (isMemberObject, as observe counts them)
// that the cache may not show yet. A bootstrap draws fresh member names, so a pass that planned it from a cache
// behind the previous pass's creations would start a second, disjoint cluster beside the first: two members,
// each with its own initial cluster. The Pod and PVC watches can lag behind the EtcdCluster's own, whose status
// write wakes the next pass at once; so the one step that cannot be repeated safely reads past the cache, once
// per bootstrap pass.
func (r *Reconciler) bootstrapStarted(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster) (bool, error) {
	sel := []client.ListOption{client.InNamespace(cluster.Namespace), client.MatchingLabels{resources.LabelCluster: cluster.Name}}
	for _, list := range []client.ObjectList{&corev1.PersistentVolumeClaimList{}, &corev1.PodList{}} {
		if err := r.reader().List(ctx, list, sel...); err != nil {
			return false, fmt.Errorf("check for members created before the bootstrap: %w", err)
		}
		objs, err := meta.ExtractList(list)
		if err != nil {
			return false, fmt.Errorf("check for members created before the bootstrap: %w", err)
		}
		for _, o := range objs {
			if obj, ok := o.(client.Object); ok && isMemberObject(obj, cluster) {
				ctrl.LoggerFrom(ctx).Info("Bootstrap already started: waiting for the cache to show its members",
					"EtcdCluster", klog.KObj(cluster), "kind", fmt.Sprintf("%T", obj), "name", obj.GetName())
				return true, nil
			}
		}
	}
	return false, nil
}

// markVolume sets annotation key to value on the PVC of member name (no-op when it has it, or has no PVC): what
// the volume must tell a later pass that cannot ask etcd. The patch carries the observed resourceVersion, so a
// mark is never written over a change the cache has not seen yet (the pass fails, and the next one retries).
func (r *Reconciler) markVolume(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, name, key, value string) error {
	if cluster.Spec.Storage.Ephemeral {
		return nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: resources.PVCName(name)}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("get volume of member %s: %w", name, err)
	}
	if pvc.Annotations[key] == value || !metav1.IsControlledBy(pvc, cluster) {
		return nil
	}
	patch := client.MergeFromWithOptions(pvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[key] = value
	if err := r.Client.Patch(ctx, pvc, patch); err != nil {
		return fmt.Errorf("record %s=%s on volume of member %s: %w", key, value, name, err)
	}
	return nil
}

// recordVolumeTLS writes on the volumes of members (plan.VolumeTLSToRecord) the TLS mode their running Pod was
// created in. Not disruptive, so it runs on every pass.
func (r *Reconciler) recordVolumeTLS(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, members []plan.Member) error {
	for _, m := range members {
		if err := r.markVolume(ctx, cluster, m.Name, resources.AnnotationTLSMode, m.PodTLS); err != nil {
			return err
		}
	}
	return nil
}

// recordRuns writes on the volumes of members (plan.RunsToRecord) that the member has run: once its member list
// is gone, a Pod re-created on the volume still knows, and refuses an emptied data dir. Not disruptive, so it
// runs on every pass.
func (r *Reconciler) recordRuns(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, members []plan.Member) error {
	for _, m := range members {
		id := memberIDOf(cluster, m.Name)
		if m.ID != 0 {
			id = etcd.FormatID(m.ID)
		}
		if err := r.markVolume(ctx, cluster, m.Name, resources.AnnotationHasRun, id); err != nil {
			return err
		}
	}
	return nil
}

// memberIDOf is the etcd member ID status last recorded for member name ("unknown" when it has none): what the
// removal mark on its volume says.
func memberIDOf(cluster *etcdv1alpha1.EtcdCluster, name string) string {
	for _, m := range cluster.Status.Members {
		if m.Name == name && m.ID != "" {
			return m.ID
		}
	}
	return "unknown"
}

// memberPodOptions are the Options member Pods are created with. Under --agent-delivery=auto they mount the agent
// image only while every node's runtime can (nodes come and go, so this is read at each creation, from the
// cache); without the right to read Nodes (a namespace-scoped install) or with a node that cannot, the agent is
// copied in by an init container.
func (r *Reconciler) memberPodOptions(ctx context.Context) resources.Options {
	o := r.Options
	if !o.AgentDeliveryAuto {
		return o
	}
	o.AgentImageVolume = false
	if r.Nodes == nil {
		return o
	}
	var nodes corev1.NodeList
	if err := r.Nodes.List(ctx, &nodes); err != nil {
		ctrl.LoggerFrom(ctx).Info("Cannot read Nodes; member Pods get the agent from an init container", "error", err.Error())
		return o
	}
	var why string
	o.AgentImageVolume, why = resources.ImageVolumesOnNodes(nodes.Items)
	ctrl.LoggerFrom(ctx).V(1).Info("Agent delivery for new member Pods", "imageVolume", o.AgentImageVolume, "why", why)
	return o
}
