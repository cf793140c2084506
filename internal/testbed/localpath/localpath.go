// Package localpath is the test bed's dynamic volume provisioner: for every PVC of its StorageClass that the
// scheduler has placed on its node, it creates a directory and a `local` PersistentVolume bound to that claim,
// and when a released volume's reclaim policy is Delete it removes the directory and the PersistentVolume.
// It is the volumes' resizer too, doing what a CSI driver's external-resizer does: when a bound claim requests
// more than its volume has (the API server admits that only where the class allows expansion), it grows the
// PersistentVolume and marks the claim FileSystemResizePending; the kubelet then finishes the expansion on the
// node (a no-op for a directory, which has no size of its own) and records the new capacity on the claim.
// A class whose parameter "medium" is "tmpfs" gets volumes of the size their claim requests: a tmpfs of that
// size is mounted on the directory, so a volume fills up and writes fail with ENOSPC as on a real disk (the
// directory of the other classes shares the host's file system). They hold data in memory: for small claims.
// One runs per node of the test bed, each serving that node's volumes; it is not part of Steward.
package localpath

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Annotations the PV controller and scheduler set on claims with delayed binding.
const (
	annSelectedNode       = "volume.kubernetes.io/selected-node"
	annStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	annProvisionedBy      = "pv.kubernetes.io/provisioned-by"
)

// ParameterMedium is the StorageClass parameter that asks for volumes of the claim's size (MediumSized).
const (
	ParameterMedium = "medium"
	MediumSized     = "tmpfs"
)

// Config is what the provisioner serves.
type Config struct {
	Provisioner string // provisioner name of the StorageClass
	Node        string // the node whose volumes this provisioner creates
	VolumeDir   string // where volume directories are created
}

// Run provisions and deletes volumes until ctx ends.
func Run(ctx context.Context, cs kubernetes.Interface, cfg Config) error {
	factory := informers.NewSharedInformerFactory(cs, 30*time.Second)
	claims := factory.Core().V1().PersistentVolumeClaims()
	volumes := factory.Core().V1().PersistentVolumes()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueue := func(prefix string) func(any) {
		return func(obj any) {
			if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
				queue.Add(prefix + key)
			}
		}
	}
	handler := func(prefix string) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{AddFunc: enqueue(prefix), UpdateFunc: func(_, obj any) { enqueue(prefix)(obj) }}
	}
	if _, err := claims.Informer().AddEventHandler(handler("pvc/")); err != nil {
		return err
	}
	if _, err := volumes.Informer().AddEventHandler(handler("pv/")); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), claims.Informer().HasSynced, volumes.Informer().HasSynced) {
		return errors.New("caches did not sync")
	}
	p := &provisioner{cs: cs, cfg: cfg}
	go func() { <-ctx.Done(); queue.ShutDown() }()
	for {
		key, quit := queue.Get()
		if quit {
			return nil
		}
		var err error
		switch {
		case len(key) > 4 && key[:4] == "pvc/":
			var obj any
			var exists bool
			obj, exists, err = claims.Informer().GetIndexer().GetByKey(key[4:])
			if err == nil && exists {
				err = p.provision(ctx, obj.(*corev1.PersistentVolumeClaim))
			}
			if err == nil && exists {
				err = p.resize(ctx, obj.(*corev1.PersistentVolumeClaim))
			}
		case len(key) > 3 && key[:3] == "pv/":
			var obj any
			var exists bool
			obj, exists, err = volumes.Informer().GetIndexer().GetByKey(key[3:])
			if err == nil && exists {
				err = p.reclaim(ctx, obj.(*corev1.PersistentVolume))
			}
		}
		if err != nil {
			klog.ErrorS(err, "Volume operation failed, will retry", "key", key)
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

type provisioner struct {
	cs  kubernetes.Interface
	cfg Config
}

func (p *provisioner) volumeName(claim *corev1.PersistentVolumeClaim) string {
	return "pvc-" + string(claim.UID)
}

func (p *provisioner) provision(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeName != "" || claim.Status.Phase != corev1.ClaimPending ||
		claim.Annotations[annStorageProvisioner] != p.cfg.Provisioner || claim.Annotations[annSelectedNode] != p.cfg.Node {
		return nil
	}
	if claim.Spec.StorageClassName == nil {
		return nil
	}
	class, err := p.cs.StorageV1().StorageClasses().Get(ctx, *claim.Spec.StorageClassName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get StorageClass of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	name := p.volumeName(claim)
	dir := filepath.Join(p.cfg.VolumeDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create volume dir: %w", err)
	}
	if class.Parameters[ParameterMedium] == MediumSized {
		if err := mountSized(dir, claim.Spec.Resources.Requests[corev1.ResourceStorage]); err != nil {
			return fmt.Errorf("volume of claim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
	}
	// World-writable like a fresh disk formatted for any user: a `local` volume cannot be chowned to the pod's
	// fsGroup reliably, and the pods the tests run are non-root.
	if err := os.Chmod(dir, 0o777); err != nil { //nolint:gosec // see comment above
		return err
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	fs := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: p.cfg.Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   claim.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			VolumeMode:                    &fs,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{p.cfg.Node}}},
			}}}},
		},
	}
	if _, err := p.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create PersistentVolume %s: %w", name, err)
	}
	klog.InfoS("Provisioned volume", "pv", name, "pvc", klog.KObj(claim), "path", dir)
	return nil
}

func (p *provisioner) reclaim(ctx context.Context, pv *corev1.PersistentVolume) error {
	if pv.Annotations[annProvisionedBy] != p.cfg.Provisioner || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		pv.Status.Phase != corev1.VolumeReleased || pv.Spec.Local == nil || pv.DeletionTimestamp != nil || !p.onMyNode(pv) {
		return nil
	}
	dir := pv.Spec.Local.Path
	if filepath.Dir(dir) != filepath.Clean(p.cfg.VolumeDir) {
		return fmt.Errorf("refusing to delete %s: not under %s", dir, p.cfg.VolumeDir)
	}
	// A sized volume's tmpfs goes first (not a mount point: EINVAL, nothing to do).
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("unmount volume dir: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("delete volume dir: %w", err)
	}
	if err := p.cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete PersistentVolume %s: %w", pv.Name, err)
	}
	klog.InfoS("Deleted released volume", "pv", pv.Name, "path", dir)
	return nil
}

// onMyNode reports whether a volume lives on this provisioner's node: on a test bed with several nodes, each
// node's provisioner deletes and grows only its own volumes, as a node-local driver does.
func (p *provisioner) onMyNode(pv *corev1.PersistentVolume) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return false
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, req := range term.MatchExpressions {
			if req.Key == "kubernetes.io/hostname" && req.Operator == corev1.NodeSelectorOpIn && slices.Contains(req.Values, p.cfg.Node) {
				return true
			}
		}
	}
	return false
}

// resize grows the volume of a bound claim that requests more than the volume has, the way the external-resizer
// does with a driver whose volumes need a file system expansion on the node: the claim's status first (allocated
// size, NodeResizePending, condition FileSystemResizePending), so that the kubelet, which expands only claims
// marked so, acts as soon as it sees the volume's larger capacity; then the volume.
func (p *provisioner) resize(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	if claim.Spec.VolumeName == "" || claim.Status.Phase != corev1.ClaimBound || claim.DeletionTimestamp != nil {
		return nil
	}
	want, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil
	}
	pv, err := p.cs.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get PersistentVolume of claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	if pv.Annotations[annProvisionedBy] != p.cfg.Provisioner || pv.Spec.Local == nil || !p.onMyNode(pv) {
		return nil
	}
	have := pv.Spec.Capacity[corev1.ResourceStorage]
	if have.Cmp(want) >= 0 {
		// Grown: done, unless an earlier pass grew the volume and failed to mark the claim.
		allocated := claim.Status.AllocatedResources[corev1.ResourceStorage]
		if allocated.Cmp(want) >= 0 || claim.Status.Capacity.Storage().Cmp(want) >= 0 {
			return nil
		}
	}
	class, err := p.cs.StorageV1().StorageClasses().Get(ctx, pv.Spec.StorageClassName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get StorageClass of volume %s: %w", pv.Name, err)
	}
	if class.AllowVolumeExpansion == nil || !*class.AllowVolumeExpansion {
		return nil // the API server refuses such requests; one that got through anyway is not ours to honour
	}
	updated := claim.DeepCopy()
	updated.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: want}
	updated.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{
		corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizePending}
	var conditions []corev1.PersistentVolumeClaimCondition
	for _, c := range updated.Status.Conditions {
		if c.Type != corev1.PersistentVolumeClaimResizing && c.Type != corev1.PersistentVolumeClaimFileSystemResizePending {
			conditions = append(conditions, c)
		}
	}
	updated.Status.Conditions = append(conditions, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		Message: "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
	})
	// The volume first, then the claim, as the external-resizer does: the kubelet grows a file system to the
	// PersistentVolume's capacity, so a claim marked FileSystemResizePending before its volume has grown would
	// send the kubelet (and Steward's annotation, which makes it sync the Pod) to a volume of the old size.
	if have.Cmp(want) < 0 {
		pv.Spec.Capacity[corev1.ResourceStorage] = want
		if _, err := p.cs.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("grow PersistentVolume %s to %s: %w", pv.Name, want.String(), err)
		}
	}
	if _, err := p.cs.CoreV1().PersistentVolumeClaims(claim.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("mark claim %s/%s for a file system resize: %w", claim.Namespace, claim.Name, err)
	}
	klog.InfoS("Expanded volume", "pv", pv.Name, "pvc", klog.KObj(claim), "from", have.String(), "to", want.String())
	return nil
}

// mountSized mounts a tmpfs of size on dir, unless one is mounted there already (a retried provision).
func mountSized(dir string, size resource.Quantity) error {
	bytes, ok := size.AsInt64()
	if !ok || bytes <= 0 {
		return fmt.Errorf("a sized volume needs a storage request in bytes, got %q", size.String())
	}
	var st, parent syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return err
	}
	if err := syscall.Stat(filepath.Dir(dir), &parent); err != nil {
		return err
	}
	if st.Dev != parent.Dev {
		return nil // mounted by an earlier try
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(bytes, 10)+",mode=0777"); err != nil {
		return fmt.Errorf("mount a tmpfs of %d bytes on %s: %w", bytes, dir, err)
	}
	return nil
}
