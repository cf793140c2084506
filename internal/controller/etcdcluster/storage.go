package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// Storage changes (spec.storage.size, spec.storage.storageClassName) on a running cluster: internal/plan decides
// between expanding PVCs in place and replacing members onto new volumes (plan/storage.go); this file reads what
// that decision needs (PVC sizes and resize conditions, whether a StorageClass allows expansion) and expands a PVC.
// Replacements need nothing of their own here: they are the membership steps, and a new member's PVC is built
// from the spec.

// It reads a StorageClass by name to learn whether it allows volume expansion (uncached: one Get per pass, only
// while a volume would grow in its own class).
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get

// storageGoal is the plan's view of spec.storage: nothing to change for an ephemeral cluster.
func storageGoal(c *etcdv1alpha1.EtcdCluster) plan.StorageGoal {
	if c.Spec.Storage.Ephemeral {
		return plan.StorageGoal{}
	}
	return plan.StorageGoal{Size: c.Spec.Storage.Size.Value(), Class: ptr.Deref(c.Spec.Storage.StorageClassName, "")}
}

// ResizeConditions are the conditions of a claim whose resize is not finished (or failed), the errors first: a
// claim may carry Resizing and an error at once. Others (from Kubernetes 1.37 every claim has Unused) say nothing
// of its size.
var ResizeConditions = []corev1.PersistentVolumeClaimConditionType{corev1.PersistentVolumeClaimControllerResizeError,
	corev1.PersistentVolumeClaimNodeResizeError, corev1.PersistentVolumeClaimFileSystemResizePending, corev1.PersistentVolumeClaimResizing}

// volumeOf reads a member's PVC: its class, requested size, capacity and resize condition (and since when a file
// system resize has been pending).
func volumeOf(pvc *corev1.PersistentVolumeClaim, now time.Time) plan.Volume {
	v := plan.Volume{Class: ptr.Deref(pvc.Spec.StorageClassName, "")}
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		v.Request = q.Value()
	}
	if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
		v.Capacity = q.Value()
	}
	for _, t := range ResizeConditions {
		for _, c := range pvc.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue && v.Resize == "" {
				v.Resize, v.ResizeMessage = string(t), c.Message
				if t == corev1.PersistentVolumeClaimFileSystemResizePending && !c.LastTransitionTime.IsZero() && now.After(c.LastTransitionTime.Time) {
					v.ResizePendingFor = now.Sub(c.LastTransitionTime.Time)
				}
			}
		}
	}
	return v
}

// observeExpandable marks the volumes that would grow in their own class with whether that class allows
// expansion. A class Steward cannot read (deleted, or not readable with a namespace-scoped install) is taken as
// one that does not: its members are replaced onto new volumes instead, which every class supports.
func (r *Reconciler) observeExpandable(ctx context.Context, obs *observation, goal plan.StorageGoal) error {
	known := map[string]bool{}
	for i := range obs.plan.Members {
		m := &obs.plan.Members[i]
		v := &m.Volume
		if !m.HasPVC || v.Class == "" || v.Request == 0 || v.Request >= goal.Size || (goal.Class != "" && v.Class != goal.Class) {
			continue
		}
		expandable, ok := known[v.Class]
		if !ok {
			sc := &storagev1.StorageClass{}
			err := r.reader().Get(ctx, client.ObjectKey{Name: v.Class}, sc)
			switch {
			case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
			case err != nil:
				return fmt.Errorf("get StorageClass %s: %w", v.Class, err)
			default:
				expandable = ptr.Deref(sc.AllowVolumeExpansion, false)
			}
			known[v.Class] = expandable
		}
		v.Expandable = expandable
	}
	return nil
}

// expandVolume raises the requested size of a member's PVC to the spec's size; the volume's provisioner grows it
// under the running member. The patch carries the observed resourceVersion, so it never applies to a PVC that
// changed since it was read.
func (r *Reconciler) expandVolume(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, action plan.Action) error {
	name := action.Members[0]
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: resources.PVCName(name)}, pvc); err != nil {
		return fmt.Errorf("get volume of member %s: %w", name, err)
	}
	size := cluster.Spec.Storage.Size
	from := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if from.Cmp(size) >= 0 {
		return nil // the cache was behind: this pass's view of the request is already out of date
	}
	patch := client.MergeFromWithOptions(pvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if pvc.Spec.Resources.Requests == nil {
		pvc.Spec.Resources.Requests = corev1.ResourceList{}
	}
	pvc.Spec.Resources.Requests[corev1.ResourceStorage] = size
	if err := r.Client.Patch(ctx, pvc, patch); err != nil {
		return fmt.Errorf("expand volume of member %s to %s: %w", name, size.String(), err)
	}
	r.tookStep(ctx, cluster, action, "Expanding member volume", corev1.EventTypeNormal, "VolumeExpanding",
		fmt.Sprintf("Expanding the volume of member %s from %s to %s in place", name, from.String(), size.String()),
		"persistentVolumeClaim", pvc.Name, "from", from.String(), "to", size.String())
	return nil
}

// refreshResizedVolumes annotates the Pods of the members whose volume has grown and waits for its file system
// to follow (resources.VolumeResizeRefresh): the Pod update makes the kubelet sync the Pod now, which grows a file
// system its driver can grow online, instead of on its periodic sync a minute or more later. An expansion goes one
// member at a time, so each member's wait adds up. Nothing restarts; a driver that can only grow file systems
// offline leaves the claim pending, and the plan restarts the member after FileSystemResizeGrace as before.
func (r *Reconciler) refreshResizedVolumes(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) error {
	var refreshed []string
	var errs []error
	for _, m := range obs.plan.Members {
		pod := obs.pods[m.Name]
		value, refresh := resources.VolumeResizeRefresh(pod, m.Volume)
		if !refresh || !memberPodOf(cluster, pod) {
			continue
		}
		if err := r.annotateMemberPod(ctx, pod, resources.AnnotationVolumeCapacity, value); err != nil {
			errs = append(errs, fmt.Errorf("annotate member %s with its volume's capacity: %w", m.Name, err))
			continue
		}
		refreshed = append(refreshed, m.Name)
	}
	if len(refreshed) > 0 {
		ctrl.LoggerFrom(ctx).Info("Asked the kubelet to grow member file systems", "EtcdCluster", klog.KObj(cluster), "members", refreshed)
		r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "VolumeFileSystemResizeRequested",
			"Annotated the Pods of members %v with their grown volumes' capacity: the kubelet grows their file systems now, while they run", refreshed)
	}
	return errors.Join(errs...)
}

// annotateMemberPod sets one of Steward's annotations on a member Pod, by a merge patch of that key alone and
// without the resourceVersion: the kubelet's status writes would make an optimistic lock fail often, and the key
// is Steward's alone. A Pod already gone is no error.
func (r *Reconciler) annotateMemberPod(ctx context.Context, pod *corev1.Pod, key, value string) error {
	p := pod.DeepCopy()
	patch := client.MergeFrom(pod)
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[key] = value
	return client.IgnoreNotFound(r.Client.Patch(ctx, p, patch))
}
