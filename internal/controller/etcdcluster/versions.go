package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// The version steps: a member restarted on another release, etcd's downgrade enabled or cancelled.

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

// enableDowngrade enables etcd's downgrade to Version: the cluster version comes down, then members restart.
func (r *Reconciler) enableDowngrade(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	if err := r.Etcd.EnableDowngrade(ctx, client.ObjectKeyFromObject(cluster).String(), obs.endpoints, action.Version); err != nil {
		return err
	}
	r.tookStep(ctx, cluster, action, "Enabled downgrade", corev1.EventTypeNormal, "DowngradeEnabled",
		fmt.Sprintf("Enabled etcd's downgrade to %s: the cluster version comes down, then members restart one at a time", action.Version),
		"targetVersion", action.Version)
	return nil
}

// cancelDowngrade cancels etcd's downgrade.
func (r *Reconciler) cancelDowngrade(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	if err := r.Etcd.CancelDowngrade(ctx, client.ObjectKeyFromObject(cluster).String(), obs.endpoints); err != nil {
		return err
	}
	r.tookStep(ctx, cluster, action, "Cancelled downgrade", corev1.EventTypeNormal, "DowngradeCancelled", action.Message)
	return nil
}
