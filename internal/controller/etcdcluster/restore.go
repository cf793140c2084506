package etcdcluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// LabelAutoRestore is on EtcdRestores the quorum-loss policy created: the cluster's name.
const LabelAutoRestore = "etcd.steward.dev/auto-restore"

// FromBackupRestoreName is the EtcdRestore Steward creates for a cluster with spec.bootstrap.fromBackup (its
// point-in-time backup, for fromBackup.pointInTime, is etcdv1alpha1.BootstrapBackupName).
func FromBackupRestoreName(cluster *etcdv1alpha1.EtcdCluster) string {
	return etcdv1alpha1.BootstrapRestoreName(cluster.Name)
}

// observeRestores reads the cluster's EtcdRestores and EtcdBackups from the cache into the observation: the
// restore under way (if any), the newest backup of this cluster, and whether the quorum-loss policy already
// tried a restore during the current loss of quorum.
func (r *Reconciler) observeRestores(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) error {
	var restores etcdv1alpha1.EtcdRestoreList
	if err := r.Client.List(ctx, &restores, client.InNamespace(cluster.Namespace)); err != nil {
		return fmt.Errorf("list EtcdRestores: %w", err)
	}
	var backups etcdv1alpha1.EtcdBackupList
	if err := r.Client.List(ctx, &backups, client.InNamespace(cluster.Namespace)); err != nil {
		return fmt.Errorf("list EtcdBackups: %w", err)
	}
	picked := pickRestore(cluster, restores.Items, obs.quorumLostSince)
	obs.plan.Restore, obs.restore = picked.restore, picked.object
	obs.plan.AutoRestoreTried = picked.autoTried
	if obs.restore != nil {
		for i := range backups.Items {
			if backups.Items[i].Name == etcdv1alpha1.RestoreBackupName(obs.restore) {
				obs.restoreBackup = &backups.Items[i]
			}
		}
	}
	obs.plan.LatestBackup = latestBackup(cluster, backups.Items)
	obs.plan.BackupRunning = backupRunning(cluster, backups.Items)
	if cluster.Spec.Standby != nil {
		for i := range backups.Items {
			if b := &backups.Items[i]; b.Name == etcdv1alpha1.StandbySeedName(cluster.Name) {
				obs.standbySeed = b
			}
		}
		obs.plan.StandbySeedComplete = obs.standbySeed != nil && meta.IsStatusConditionTrue(obs.standbySeed.Status.Conditions, etcdv1alpha1.ConditionComplete)
	}
	return r.observeSnapshotReach(ctx, cluster, obs)
}

// observeSnapshotReach reads where the snapshot of the restore under way can be read from. A backup on a claim
// that one node at a time can mount (any access mode but ReadWriteMany and ReadOnlyMany) seeds one member, which
// the scheduler puts where the claim's volume is, and the others join it as learners (plan.Restore.OneSeed).
// A claim whose volume only nodes the cluster's members may not use now can mount (a local volume on a cordoned
// node, or outside spec.pod's node selector) makes the restore wait, before any member is created or stopped
// (plan.Restore.NotMountable). That check needs the PersistentVolume and the Nodes: without permission to read
// them (a namespace-scoped install) the members' Pods report the scheduler's words instead.
func (r *Reconciler) observeSnapshotReach(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) error {
	rs, b := obs.plan.Restore, obs.restoreBackup
	if rs == nil || b == nil || b.Spec.Destination.PVC == nil {
		return nil
	}
	claim := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: b.Spec.Destination.PVC.ClaimName}, claim); err != nil {
		// A missing claim fails the restore's verify Job, which says so.
		return client.IgnoreNotFound(err)
	}
	rs.OneSeed = !mountableOnManyNodes(claim)
	if claim.Spec.VolumeName == "" || r.Nodes == nil {
		// Without Nodes (a namespace-scoped install) the PersistentVolume, cluster-scoped too, is not asked for.
		return nil
	}
	var pv corev1.PersistentVolume
	err := r.reader().Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, &pv)
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get PersistentVolume %s of backup claim %s: %w", claim.Spec.VolumeName, claim.Name, err)
	}
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	nodes, ok := r.cachedNodes(ctx, "a restore from a claim is not checked for a node that can mount it")
	if !ok {
		return nil
	}
	why, err := backupNotMountable(cluster, claim.Name, &pv, nodes)
	if err != nil {
		return fmt.Errorf("node affinity of PersistentVolume %s: %w", pv.Name, err)
	}
	rs.NotMountable = why
	return nil
}

// mountableOnManyNodes reports whether claim's volume can be mounted on several nodes at once.
func mountableOnManyNodes(claim *corev1.PersistentVolumeClaim) bool {
	modes := claim.Status.AccessModes
	if len(modes) == 0 {
		modes = claim.Spec.AccessModes
	}
	for _, m := range modes {
		if m == corev1.ReadWriteMany || m == corev1.ReadOnlyMany {
			return true
		}
	}
	return false
}

// backupNotMountable says why no node that takes the cluster's members now (placementOf) can mount pv, the
// volume of the backup's claim; empty when one can. Pure, for table tests.
func backupNotMountable(cluster *etcdv1alpha1.EtcdCluster, claim string, pv *corev1.PersistentVolume, nodes []corev1.Node) (string, error) {
	sel, err := nodeaffinity.NewNodeSelector(pv.Spec.NodeAffinity.Required)
	if err != nil {
		return "", err
	}
	eligible := placementOf(cluster, nodes).Zones
	var mountable []string
	for i := range nodes {
		if !sel.Match(&nodes[i]) {
			continue
		}
		if _, ok := eligible[nodes[i].Name]; ok {
			return "", nil
		}
		mountable = append(mountable, nodes[i].Name)
	}
	fix := "restore from a copy of the backup in a bucket (S3, GCS or Azure), or on a claim that the cluster's nodes can mount"
	if len(mountable) == 0 {
		return fmt.Sprintf("the backup's claim %s is on PersistentVolume %s, which no existing node can mount; %s", claim, pv.Name, fix), nil
	}
	sort.Strings(mountable)
	return fmt.Sprintf("the backup's claim %s is on PersistentVolume %s, which only node(s) %s can mount, and none of them takes this cluster's members now "+
		"(cordoned, not Ready, a taint not tolerated, or outside spec.pod's node selector and affinity): make one of them available to the cluster, or %s",
		claim, pv.Name, strings.Join(mountable, ", "), fix), nil
}

type pickedRestore struct {
	restore   *plan.Restore
	object    *etcdv1alpha1.EtcdRestore
	autoTried string
}

// pickRestore chooses the restore the planner acts on: the oldest unfinished one of the cluster whose mode the
// restore controller has decided; else, for a cluster that has not formed and names a backup in
// bootstrap.fromBackup, its restore even when it failed (so the cluster reports why it cannot start).
func pickRestore(cluster *etcdv1alpha1.EtcdCluster, restores []etcdv1alpha1.EtcdRestore, quorumLostSince *time.Time) pickedRestore {
	var out pickedRestore
	items := append([]etcdv1alpha1.EtcdRestore(nil), restores...)
	sort.Slice(items, func(i, j int) bool {
		if !items[i].CreationTimestamp.Equal(&items[j].CreationTimestamp) {
			return items[i].CreationTimestamp.Before(&items[j].CreationTimestamp)
		}
		return items[i].Name < items[j].Name
	})
	for i := range items {
		rs := &items[i]
		if rs.Spec.ClusterName != cluster.Name || rs.DeletionTimestamp != nil {
			continue
		}
		if rs.Labels[LabelAutoRestore] == cluster.Name && quorumLostSince != nil && !rs.CreationTimestamp.Time.Before(quorumLostSince.Add(-time.Second)) {
			out.autoTried = rs.Name
		}
		if out.object != nil || etcdv1alpha1.Finished(rs.Status.Conditions) || rs.Status.Mode == "" {
			continue
		}
		out.object = rs
		out.restore = &plan.Restore{
			Name:   rs.Name,
			Reseed: rs.Status.Mode == etcdv1alpha1.RestoreReseed,
			Ready: meta.IsStatusConditionTrue(rs.Status.Conditions, etcdv1alpha1.ConditionVerified) &&
				(rs.Status.Mode == etcdv1alpha1.RestoreNewCluster || rs.Spec.Confirm == cluster.Name),
			// The restore controller verifies a rollback's snapshot only after its safety backup is Complete.
			Rollback: rs.Spec.AllowRollbackOfHealthyCluster && rs.Status.SafetyBackup != "",
		}
	}
	if out.object == nil && !cluster.Status.Bootstrapped && etcdv1alpha1.BootstrapBackupName(cluster) != "" {
		for i := range items {
			rs := &items[i]
			if rs.Name != FromBackupRestoreName(cluster) || rs.Spec.ClusterName != cluster.Name {
				continue
			}
			out.object = rs
			out.restore = &plan.Restore{Name: rs.Name}
			if c := meta.FindStatusCondition(rs.Status.Conditions, etcdv1alpha1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
				out.restore.Failed, out.restore.Message = true, c.Reason+": "+c.Message
			}
		}
	}
	return out
}

// latestBackup is the newest Complete EtcdBackup of this cluster: named after it and taken under one of its
// etcd cluster IDs (the current one or one it had before a re-seed).
func latestBackup(cluster *etcdv1alpha1.EtcdCluster, backups []etcdv1alpha1.EtcdBackup) string {
	ids := map[string]bool{}
	if cluster.Status.ClusterID != "" {
		ids[cluster.Status.ClusterID] = true
	}
	for _, id := range cluster.Status.FormerClusterIDs {
		ids[id] = true
	}
	var best *etcdv1alpha1.EtcdBackup
	for i := range backups {
		b := &backups[i]
		if b.Spec.ClusterName != cluster.Name || !ids[b.Status.ClusterID] || b.Status.CompletionTime == nil || b.DeletionTimestamp != nil ||
			!meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) {
			continue
		}
		if best == nil || best.Status.CompletionTime.Before(b.Status.CompletionTime) ||
			(best.Status.CompletionTime.Equal(b.Status.CompletionTime) && best.Name < b.Name) {
			best = b
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}

// createRestore creates the EtcdRestore a step asks for: the one of spec.bootstrap.fromBackup, or a confirmed
// re-seed by the quorum-loss policy. Both are owned by the cluster.
func (r *Reconciler) createRestore(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, action plan.Action) error {
	rs := &etcdv1alpha1.EtcdRestore{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       cluster.Namespace,
			Name:            FromBackupRestoreName(cluster),
			Labels:          map[string]string{resources.LabelCluster: cluster.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cluster, etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))},
		},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: cluster.Name, BackupName: action.Backup},
	}
	if b := cluster.Spec.Bootstrap; !action.Reseed && b != nil && b.FromBackup != nil && b.FromBackup.PointInTime != nil {
		// The restore makes its point-in-time backup (<restore>-pit, the name the plan waits for) and restores it.
		rs.Spec.BackupName, rs.Spec.PointInTime = "", b.FromBackup.PointInTime.DeepCopy()
	}
	if action.Reseed {
		rs.Name = autoRestoreName(cluster.Name, r.Now())
		rs.Labels[LabelAutoRestore] = cluster.Name
		rs.Spec.Confirm = cluster.Name
	}
	if err := r.create(ctx, cluster, rs); err != nil {
		return err
	}
	if action.Reseed {
		r.tookStep(ctx, cluster, action, "Created EtcdRestore", corev1.EventTypeWarning, "QuorumLossRecovery",
			fmt.Sprintf("Created EtcdRestore %s: %s", rs.Name, action.Message), "EtcdRestore", klog.KObj(rs), "backup", action.Backup)
	} else {
		r.tookStep(ctx, cluster, action, "Created EtcdRestore", corev1.EventTypeNormal, "RestoreCreated",
			fmt.Sprintf("Created EtcdRestore %s of backup %s for the cluster's first members", rs.Name, action.Backup), "EtcdRestore", klog.KObj(rs), "backup", action.Backup)
	}
	return nil
}

func autoRestoreName(cluster string, now time.Time) string {
	return etcdv1alpha1.DerivedName(cluster, "-auto-"+strings.ToLower(now.UTC().Format("20060102t150405")))
}

// restoreSource resolves the restore a Bootstrap or CreateMemberPods step names into what member Pods need.
func restoreSource(obs *observation, name string) (*resources.RestoreSource, error) {
	if name == "" {
		return nil, nil
	}
	if obs.restore == nil || obs.restore.Name != name {
		return nil, fmt.Errorf("restore %s is not the one under way", name)
	}
	if obs.restoreBackup == nil {
		return nil, fmt.Errorf("restore %s: backup %s not found", name, etcdv1alpha1.RestoreBackupName(obs.restore))
	}
	src := &resources.RestoreSource{Restore: name, Backup: obs.restoreBackup}
	if obs.restore.Status.Mode == etcdv1alpha1.RestoreReseed {
		src.BumpRevision = resources.ReseedBumpRevision
	}
	return src, nil
}

// retireVolumes sets aside the volumes of members a re-seed replaced: the cluster's labels give way to
// LabelRetiredFrom, so no controller counts them as members, and the data stays for a human.
func (r *Reconciler) retireVolumes(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, action plan.Action) error {
	for _, name := range action.Members {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: resources.PVCName(name)}, pvc); err != nil {
			if client.IgnoreNotFound(err) == nil {
				continue
			}
			return fmt.Errorf("get volume of replaced member %s: %w", name, err)
		}
		patch := client.MergeFromWithOptions(pvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		delete(pvc.Labels, resources.LabelCluster)
		delete(pvc.Labels, resources.LabelMember)
		pvc.Labels[resources.LabelRetiredFrom] = cluster.Name
		if pvc.Annotations == nil {
			pvc.Annotations = map[string]string{}
		}
		pvc.Annotations[resources.AnnotationRetiredBy] = action.Restore
		if err := r.Client.Patch(ctx, pvc, patch); err != nil {
			return fmt.Errorf("set aside volume of replaced member %s: %w", name, err)
		}
	}
	r.tookStep(ctx, cluster, action, "Set aside volumes of replaced members", corev1.EventTypeNormal, "VolumesRetired",
		fmt.Sprintf("Set aside the volumes of replaced members %v (kept; label %s=%s)", action.Members, resources.LabelRetiredFrom, cluster.Name),
		"restore", action.Restore)
	return nil
}
