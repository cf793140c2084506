package etcdbackup

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
)

// HoldFinalizer keeps an EtcdBackup, its record and its stored snapshot, while a restore reads it. The restore
// controller adds it; this controller removes it once no restore that has not ended names the backup
// (backup.HeldBy), however the restore ended: Complete, Failed, deleted, or gone with its namespace. Until
// then the snapshot is not deleted with the backup, and retention does not retire the backup.
const HoldFinalizer = "etcd.steward.dev/restore-in-progress"

// RestoreUses lists the namespace's EtcdRestores as the holds on the backups they read see them.
func RestoreUses(ctx context.Context, c client.Reader, namespace string) ([]backup.RestoreUse, error) {
	var list etcdv1alpha1.EtcdRestoreList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list EtcdRestores: %w", err)
	}
	uses := make([]backup.RestoreUse, 0, len(list.Items))
	for i := range list.Items {
		rs := &list.Items[i]
		uses = append(uses, backup.RestoreUse{Name: rs.Name, Backup: etcdv1alpha1.RestoreBackupName(rs),
			Ended: etcdv1alpha1.Finished(rs.Status.Conditions) || !rs.DeletionTimestamp.IsZero()})
	}
	return uses, nil
}

// Hold puts the restore's hold on b: from then on b and its snapshot stay until the restore ends. A backup
// already being deleted cannot take a new finalizer; its snapshot is still kept while the restore has not ended
// (the deletion waits for backup.HeldBy), only its object goes if nothing else holds it.
func Hold(ctx context.Context, c client.Client, b *etcdv1alpha1.EtcdBackup) error {
	if !b.DeletionTimestamp.IsZero() || controllerutil.ContainsFinalizer(b, HoldFinalizer) {
		return nil
	}
	before := b.DeepCopy()
	controllerutil.AddFinalizer(b, HoldFinalizer)
	if err := c.Patch(ctx, b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("hold EtcdBackup %s: %w", b.Name, err)
	}
	return nil
}

// holds returns the restores holding b, and lets go of b (removes HoldFinalizer) when there are none.
func (r *Reconciler) holds(ctx context.Context, b *etcdv1alpha1.EtcdBackup) ([]string, error) {
	uses, err := RestoreUses(ctx, r.Client, b.Namespace)
	if err != nil {
		return nil, err
	}
	held := backup.HeldBy(b.Name, uses)
	if len(held) > 0 || !controllerutil.ContainsFinalizer(b, HoldFinalizer) {
		return held, nil
	}
	before := b.DeepCopy()
	controllerutil.RemoveFinalizer(b, HoldFinalizer)
	if err := r.Client.Patch(ctx, b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("release EtcdBackup %s: %w", b.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Backup no longer held by a restore", "EtcdBackup", klog.KObj(b))
	return nil, nil
}

// waitForRestores is the deletion of a backup a restore still reads: nothing is deleted before it ends.
func (r *Reconciler) waitForRestores(ctx context.Context, b *etcdv1alpha1.EtcdBackup, held []string) ctrl.Result {
	ctrl.LoggerFrom(ctx).Info("Deletion waits for the restores reading the backup", "EtcdBackup", klog.KObj(b), "restores", held)
	r.Recorder.Eventf(b, corev1.EventTypeNormal, "SnapshotInUse", "%s is kept until restore %s ends (Complete, Failed or deleted); then the deletion goes on",
		b.Status.Location, strings.Join(held, ", "))
	return ctrl.Result{RequeueAfter: requeueRunning}
}

// backupOfRestore maps a restore to the backup it reads, whose hold its progress (or its end) may change.
func backupOfRestore(_ context.Context, o client.Object) []ctrl.Request {
	rs, ok := o.(*etcdv1alpha1.EtcdRestore)
	if !ok {
		return nil
	}
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: rs.Namespace, Name: etcdv1alpha1.RestoreBackupName(rs)}}}
}
