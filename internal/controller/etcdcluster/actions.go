package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/metrics"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// ensureServices creates the peer and client Services and the PodDisruptionBudget when missing, and keeps the
// budget's minAvailable at what the plan decided (plan.BudgetMinAvailable). None of this disrupts members, so it
// runs on every pass.
func (r *Reconciler) ensureServices(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, minAvailable int) error {
	for _, svc := range []*corev1.Service{resources.PeerService(cluster), resources.ClientService(cluster)} {
		if err := r.createIfMissing(ctx, cluster, svc, &corev1.Service{}); err != nil {
			return err
		}
	}
	want := resources.PodDisruptionBudget(cluster)
	budget := intstr.FromInt32(int32(minAvailable)) //nolint:gosec // at most a few members
	want.Spec.MinAvailable = &budget
	var have policyv1.PodDisruptionBudget
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), &have)
	switch {
	case apierrors.IsNotFound(err):
		return r.create(ctx, cluster, want)
	case err != nil:
		return fmt.Errorf("get PodDisruptionBudget: %w", err)
	}
	if have.Spec.MinAvailable == nil || *have.Spec.MinAvailable != *want.Spec.MinAvailable {
		patch := client.MergeFrom(have.DeepCopy())
		have.Spec.MinAvailable = want.Spec.MinAvailable
		if err := r.Client.Patch(ctx, &have, patch); err != nil {
			return fmt.Errorf("update PodDisruptionBudget minAvailable: %w", err)
		}
	}
	return nil
}

func (r *Reconciler) createIfMissing(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, want, have client.Object) error {
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		return r.create(ctx, cluster, want)
	}
	if err != nil {
		return fmt.Errorf("get %T %s: %w", want, want.GetName(), err)
	}
	return nil
}

func (r *Reconciler) create(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obj client.Object) error {
	if err := r.Client.Create(ctx, obj); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // the cache was behind; the next pass sees it
		}
		return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
	}
	ctrl.LoggerFrom(ctx).Info("Created object", "EtcdCluster", klog.KObj(cluster), "kind", fmt.Sprintf("%T", obj), "name", obj.GetName())
	return nil
}

// tookStep records a step Steward took, once its change is made: one log line (msg, with the cluster, the
// step's kind, reason and message, its member or members, and kv), the step's Event on the cluster (none when reason is
// empty: the step recorded an Event per object already), and the steps counter of internal/metrics.
func (r *Reconciler) tookStep(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, action plan.Action, msg, eventType, reason, note string, kv ...any) {
	keys := []any{"EtcdCluster", klog.KObj(cluster), "step", metrics.StepKind(action.Kind), "reason", action.Reason, "message", action.Message}
	switch len(action.Members) {
	case 0:
	case 1:
		keys = append(keys, "member", action.Members[0])
	default:
		keys = append(keys, "members", action.Members)
	}
	ctrl.LoggerFrom(ctx).Info(msg, append(keys, kv...)...)
	if reason != "" {
		r.Recorder.Event(cluster, eventType, reason, note)
	}
	metrics.StepTaken(cluster.Namespace, cluster.Name, action)
}

// act executes the planned step.
func (r *Reconciler) act(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	log := ctrl.LoggerFrom(ctx).WithValues("EtcdCluster", klog.KObj(cluster))
	key := client.ObjectKeyFromObject(cluster).String()
	endpoints := obs.endpoints
	switch action.Kind {
	case plan.Bootstrap, plan.CreateMemberPods, plan.RecreateMemberPods:
		return r.createMembers(ctx, cluster, obs, action)
	case plan.CreateRestore:
		return r.createRestore(ctx, cluster, action)
	case plan.RetireMembers:
		for _, name := range action.Members {
			pod := obs.pods[name]
			if pod == nil {
				continue
			}
			// The volume says first that the re-seed stops this member: its missing Pod is not to be brought back.
			if err := r.markVolume(ctx, cluster, name, resources.AnnotationRetiredBy, action.Restore); err != nil {
				return err
			}
			if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("stop member %s for restore %s: %w", name, action.Restore, err)
			}
		}
		r.tookStep(ctx, cluster, action, "Stopped members for a re-seed", corev1.EventTypeWarning, "MembersRetired",
			fmt.Sprintf("Deleted the Pods of members %v: %s", action.Members, action.Message), "restore", action.Restore)
	case plan.RetireVolumes:
		return r.retireVolumes(ctx, cluster, action)
	case plan.AddLearner:
		name, url := action.Members[0], action.PeerURL
		if url == "" {
			url = resources.PeerURL(cluster, name, r.Options)
		}
		id, err := r.Etcd.AddLearner(ctx, key, endpoints, url)
		if err != nil {
			return err
		}
		r.tookStep(ctx, cluster, action, "Added learner", corev1.EventTypeNormal, "MemberAdded",
			fmt.Sprintf("Added member %s (%s) as a learner (%s): %s", name, etcd.FormatID(id), action.Reason, action.Message),
			"memberID", etcd.FormatID(id), "peerURL", url)
	case plan.PromoteLearner:
		err := r.Etcd.PromoteLearner(ctx, key, endpoints, action.MemberID)
		if errors.Is(err, etcd.ErrLearnerNotReady) {
			log.Info("Learner not caught up yet", "member", action.Members[0])
			return nil
		}
		if err != nil {
			return err
		}
		r.tookStep(ctx, cluster, action, "Promoted learner", corev1.EventTypeNormal, "MemberPromoted",
			fmt.Sprintf("Promoted learner %s to voting member", action.Members[0]), "memberID", etcd.FormatID(action.MemberID))
	case plan.RemoveMember:
		if err := r.Etcd.RemoveMember(ctx, key, endpoints, action.MemberID); err != nil {
			return err
		}
		r.tookStep(ctx, cluster, action, "Removed member", corev1.EventTypeNormal, "MemberRemoved",
			fmt.Sprintf("Removed member %s (%s) from etcd (%s): %s", action.Members[0], etcd.FormatID(action.MemberID), action.Reason, action.Message),
			"memberID", etcd.FormatID(action.MemberID))
	case plan.DeleteMemberPod:
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
	case plan.DeleteMemberPVC:
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: resources.PVCName(action.Members[0])}, pvc); err != nil {
			return client.IgnoreNotFound(err)
		}
		if err := r.Client.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete volume of removed member %s: %w", action.Members[0], err)
		}
		r.tookStep(ctx, cluster, action, "Deleted volume of removed member", corev1.EventTypeNormal, "MemberVolumeDeleted",
			fmt.Sprintf("Deleted volume of removed member %s", action.Members[0]), "persistentVolumeClaim", pvc.Name)
	case plan.RollMember:
		return r.rollMember(ctx, cluster, obs, action)
	case plan.ExpandVolume:
		return r.expandVolume(ctx, cluster, action)
	case plan.RestartMember:
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
		case plan.ReasonExpandingVolume:
			// The same mode: the restart is for the kubelet to finish the volume's file system resize (storage.go).
			r.tookStep(ctx, cluster, action, "Restarting member for a file system resize", corev1.EventTypeNormal, "MemberRestarting", action.Message)
			return nil
		case plan.ReasonRestartingForQuota:
			// The same mode: the re-created Pod starts with the quota in force (maintenance.go).
			r.tookStep(ctx, cluster, action, "Restarting member for its quota", corev1.EventTypeNormal, "MemberRestarting", action.Message)
			return nil
		case plan.ReasonRestartingLoneBootstrapMember:
			// The same mode: the re-created Pod asks its peers, were its data dir ever emptied.
			r.tookStep(ctx, cluster, action, "Restarting the member that bootstrapped the cluster alone", corev1.EventTypeNormal, "MemberRestarting", action.Message)
			return nil
		case plan.ReasonRestartingForPeerAuth:
			// The same mode: the re-created Pod accepts only member certificates on its peer port, or any of the CA's.
			r.tookStep(ctx, cluster, action, "Restarting member for its peer authentication", corev1.EventTypeNormal, "MemberRestarting", action.Message)
			return nil
		case plan.ReasonRestartingForClientAuth:
			// The same mode: the re-created Pod requires client certificates, or not, as spec.tls.clientAuth says.
			r.tookStep(ctx, cluster, action, "Restarting member for its client authentication", corev1.EventTypeNormal, "MemberRestarting", action.Message)
			return nil
		}
		r.tookStep(ctx, cluster, action, "Restarting member for TLS", corev1.EventTypeNormal, "MemberRestarting",
			fmt.Sprintf("Restarting member %s in TLS mode %s: %s", pod.Name, action.TLS, action.Message), "tlsMode", action.TLS)
	case plan.UpdatePeerURL:
		if err := r.Etcd.UpdatePeerURL(ctx, key, endpoints, action.MemberID, action.PeerURL); err != nil {
			return err
		}
		r.tookStep(ctx, cluster, action, "Changed peer URL", corev1.EventTypeNormal, "PeerURLChanged",
			fmt.Sprintf("Changed the peer URL of member %s to %s (%s)", action.Members[0], action.PeerURL, action.Reason),
			"memberID", etcd.FormatID(action.MemberID), "peerURL", action.PeerURL)
	case plan.MoveLeader:
		from, to := action.Members[0], action.Members[1]
		// The leader answered this pass's status request (that is how it is known to lead), at its endpoint.
		leaderEndpoint := obs.statusOf[from].Endpoint
		if leaderEndpoint == "" {
			return fmt.Errorf("move leadership from %s: it has no address", from)
		}
		if err := r.Etcd.MoveLeader(ctx, key, leaderEndpoint, action.TargetID); err != nil {
			return err
		}
		r.tookStep(ctx, cluster, action, "Moved leadership", corev1.EventTypeNormal, "LeaderMoved",
			fmt.Sprintf("Moved leadership from %s to %s", from, to), "from", from, "to", to, "memberID", etcd.FormatID(action.TargetID))
	case plan.EnableAuth, plan.DisableAuth:
		return r.switchAuth(ctx, cluster, obs, action)
	case plan.EnsureOperatorUser:
		return r.ensureOperatorUser(ctx, cluster, obs, action)
	case plan.Defragment, plan.CompactForSpace, plan.DisarmNoSpace, plan.RaiseQuota:
		return r.maintain(ctx, cluster, obs, action)
	case plan.EnableDowngrade:
		if err := r.Etcd.EnableDowngrade(ctx, key, endpoints, action.Version); err != nil {
			return err
		}
		r.tookStep(ctx, cluster, action, "Enabled downgrade", corev1.EventTypeNormal, "DowngradeEnabled",
			fmt.Sprintf("Enabled etcd's downgrade to %s: the cluster version comes down, then members restart one at a time", action.Version),
			"targetVersion", action.Version)
	case plan.CancelDowngrade:
		if err := r.Etcd.CancelDowngrade(ctx, key, endpoints); err != nil {
			return err
		}
		r.tookStep(ctx, cluster, action, "Cancelled downgrade", corev1.EventTypeNormal, "DowngradeCancelled", action.Message)
	case plan.Wait:
		if waitStarts(cluster.Status.Conditions, action.Reason) {
			r.Recorder.Event(cluster, corev1.EventTypeWarning, action.Reason, action.Message)
		}
	}
	return nil
}

// waitStarts reports whether a Wait for reason needs a human and has just begun: its reason is one that only a
// human ends (lost data, an inconsistent bootstrap, a refused version change), and the Degraded condition as
// read at the start of this pass, which the previous pass wrote, does not carry it yet. So the warning is recorded
// once per wait, not on every pass.
func waitStarts(conditions []metav1.Condition, reason string) bool {
	if !humanWaits[reason] {
		return false
	}
	degraded := meta.FindStatusCondition(conditions, etcdv1alpha1.ConditionDegraded)
	return degraded == nil || degraded.Status != metav1.ConditionTrue || degraded.Reason != reason
}

// rollMember restarts a member in place on a new release: first its volume records the release (a Pod
// re-created on it from now on starts on it), then the Pod's image changes and the kubelet restarts the etcd
// container with the same volume, name and member ID. The patch carries the observed resourceVersion, so it
// never applies to a Pod that changed since it was observed.
func (r *Reconciler) rollMember(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	name := action.Members[0]
	pod := obs.pods[name]
	if pod == nil {
		return nil
	}
	version, image := action.Version, action.Image
	from := pod.Annotations[resources.AnnotationVersion]
	if !cluster.Spec.Storage.Ephemeral {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: resources.PVCName(name)}, pvc); err != nil {
			return fmt.Errorf("get volume of member %s: %w", name, err)
		}
		if pvc.Annotations[resources.AnnotationVersion] != version || pvc.Annotations[resources.AnnotationImage] != image {
			patch := client.MergeFromWithOptions(pvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
			pvc.Annotations[resources.AnnotationVersion], pvc.Annotations[resources.AnnotationImage] = version, image
			if err := r.Client.Patch(ctx, pvc, patch); err != nil {
				return fmt.Errorf("record release %s on volume of member %s: %w", version, name, err)
			}
		}
	}
	if why := resources.RollNeedsNewPod(cluster, pod, version, image); why != "" {
		// The new image alone will not do (other flags, or the kubelet's back-off): the Pod goes, and the next
		// pass re-creates it on its volume with the release the volume now records (RecreateMemberPods).
		if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Pod of member %s to re-create it on %s: %w", name, version, err)
		}
		r.tookStep(ctx, cluster, action, "Re-creating member on new release", corev1.EventTypeNormal, "MemberRestarting",
			fmt.Sprintf("Re-creating the Pod of member %s on its volume to run etcd %s (was %s), because %s: %s", name, version, from, why, action.Message),
			"fromVersion", from, "targetVersion", version, "image", image, "why", why)
		return nil
	}
	updated := pod.DeepCopy()
	updated.Annotations[resources.AnnotationVersion] = version
	updated.Annotations[resources.AnnotationRolledTo] = resources.RolledTo(pod, image)
	for i := range updated.Spec.Containers {
		if updated.Spec.Containers[i].Name == resources.EtcdContainer {
			updated.Spec.Containers[i].Image = image
		}
	}
	if err := r.Client.Patch(ctx, updated, client.MergeFromWithOptions(pod, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("restart member %s on %s: %w", name, version, err)
	}
	r.tookStep(ctx, cluster, action, "Restarting member on new release", corev1.EventTypeNormal, "MemberRestarting",
		fmt.Sprintf("Restarting member %s on etcd %s (was %s): %s", name, version, from, action.Message),
		"fromVersion", from, "targetVersion", version, "image", image)
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
	for _, m := range members {
		if err := r.create(ctx, cluster, resources.MemberPod(cluster, m, r.Options)); err != nil {
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
