package resources

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"steward.dev/steward/internal/plan"
)

// AnnotationVolumeCapacity is on a member Pod whose volume has grown under it: the volume's capacity in bytes
// when Steward last saw its file system resize pending (VolumeResizeRefresh). A CSI driver that grows file
// systems online does so on the node when the kubelet syncs the Pod, which the kubelet does by itself once every
// syncFrequency plus jitter (60-90 s by default), or at once when the Pod object changes. Steward changes this
// annotation when a member's claim reports FileSystemResizePending, so an expansion finishes within seconds per
// member instead of a minute or more each. Only metadata changes: no container restarts, the Pod spec stays.
const AnnotationVolumeCapacity = "etcd.steward.dev/volume-capacity"

// VolumeResizeRefresh decides whether member Pod p, on volume v, is to be annotated (AnnotationVolumeCapacity),
// and with which value: when v's file system resize is pending and p runs (or is about to) and does not carry
// v's capacity yet. A pass that sees the same claim again writes nothing; a later expansion to another capacity
// annotates again.
func VolumeResizeRefresh(p *corev1.Pod, v plan.Volume) (string, bool) {
	if p == nil || v.Resize != string(corev1.PersistentVolumeClaimFileSystemResizePending) || v.Capacity <= 0 {
		return "", false
	}
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return "", false
	}
	value := strconv.FormatInt(v.Capacity, 10)
	if p.Annotations[AnnotationVolumeCapacity] == value {
		return "", false
	}
	return value, true
}
