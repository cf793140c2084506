package etcdbackup

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
)

// reconcileDelete deletes the stored snapshot of a backup with deletionPolicy Delete, then lets the backup go.
// Order: a running snapshot Job is stopped first (its agent removes its temporary file or aborts its upload on
// SIGTERM), so that no snapshot lands after the deletion; then a delete Job removes the committed snapshot;
// only when that Job succeeded is the finalizer removed. A failed delete Job keeps the finalizer (the data
// would otherwise be orphaned) and is retried; an operator can remove the finalizer by hand to give up.
func (r *Reconciler) reconcileDelete(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, Finalizer) {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	snapJob := &batchv1.Job{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupJobName(b)}, snapJob)
	switch {
	case err == nil && JobFinished(snapJob) == nil:
		if snapJob.DeletionTimestamp.IsZero() {
			log.Info("Stopping the running backup Job before deleting the backup", "EtcdBackup", klog.KObj(b), "job", snapJob.Name)
			if err := r.Client.Delete(ctx, snapJob, client.PropagationPolicy("Foreground")); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("delete running backup Job: %w", err)
			}
		}
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("get backup Job: %w", err)
	}
	// A snapshot is committed under its final name only when the agent reports success; a backup that never
	// succeeded has nothing there that is its own (an existing file it refused to overwrite is someone else's).
	if b.Status.Location == "" {
		return ctrl.Result{}, r.removeFinalizer(ctx, b)
	}
	job := &batchv1.Job{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: resources.DeleteJobName(b)}, job)
	if apierrors.IsNotFound(err) {
		job = resources.DeleteJob(b, r.AgentImage)
		log.Info("Deleting the stored snapshot", "EtcdBackup", klog.KObj(b), "location", b.Status.Location, "job", job.Name)
		if err := r.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("create delete Job: %w", err)
		}
		r.Recorder.Eventf(b, corev1.EventTypeNormal, "DeletingSnapshot", "Job %s deletes %s", job.Name, b.Status.Location)
		return ctrl.Result{RequeueAfter: requeueRunning}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get delete Job: %w", err)
	}
	cond := JobFinished(job)
	switch {
	case cond == nil:
		return ctrl.Result{RequeueAfter: requeueRunning}, nil
	case cond.Type == batchv1.JobFailed:
		msg, _ := r.terminationMessage(ctx, job)
		r.Recorder.Eventf(b, corev1.EventTypeWarning, "SnapshotDeletionFailed", "deleting %s failed, retrying: %s %s", b.Status.Location, cond.Message, msg)
		if err := r.Client.Delete(ctx, job, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete failed delete Job: %w", err)
		}
		return ctrl.Result{RequeueAfter: requeueDeleteRetry}, nil
	}
	r.Recorder.Eventf(b, corev1.EventTypeNormal, "SnapshotDeleted", "deleted %s", b.Status.Location)
	log.Info("Deleted the stored snapshot", "EtcdBackup", klog.KObj(b), "location", b.Status.Location)
	return ctrl.Result{}, r.removeFinalizer(ctx, b)
}

func (r *Reconciler) removeFinalizer(ctx context.Context, b *etcdv1alpha1.EtcdBackup) error {
	before := b.DeepCopy()
	controllerutil.RemoveFinalizer(b, Finalizer)
	if err := r.Client.Patch(ctx, b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}
