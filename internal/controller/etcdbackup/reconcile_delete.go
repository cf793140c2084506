package etcdbackup

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/controller/agentjob"
	"steward.dev/steward/internal/resources"
)

// directDeleteTimeout bounds one direct deletion of a bucket's object by the operator: an unreachable endpoint must
// not hold the pass (nor the namespace's deletion) longer.
const directDeleteTimeout = 20 * time.Second

// reconcileDelete is the finalizer of a backup with deletionPolicy Delete: it deletes the stored snapshot the
// way that still works, reports what it could not delete, and lets the backup go (backup.DecideDeletion decides).
// A running snapshot Job is stopped first (its agent removes its temporary file or aborts its upload on SIGTERM),
// so that no snapshot lands after the deletion. While the namespace takes new Jobs, a delete Job removes the
// snapshot, retried while it fails; once the namespace is being deleted (the API server refuses the Job, saying
// so), the operator deletes a bucket's object itself with the credentials Secret, if that is still there (not
// with Workload Identity, which only the Jobs hold). Nothing is waited for longer than backup.DeletionGiveUpAfter.
func (r *Reconciler) reconcileDelete(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, Finalizer) {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	in, snapJob, delJob, secret, err := r.deletionInput(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	// At most three decisions a pass: a refused delete Job says the namespace is being deleted, and a direct
	// deletion's outcome is decided on at once.
	for range 3 {
		step := backup.DecideDeletion(in)
		switch step.Action {
		case backup.StopSnapshotJob:
			if snapJob.DeletionTimestamp.IsZero() {
				log.Info("Stopping the running backup Job before deleting the backup", "EtcdBackup", klog.KObj(b), "job", snapJob.Name)
				if err := r.Client.Delete(ctx, snapJob, client.PropagationPolicy("Foreground")); err != nil && !apierrors.IsNotFound(err) {
					return ctrl.Result{}, fmt.Errorf("delete running backup Job: %w", err)
				}
			}
			return ctrl.Result{RequeueAfter: step.RequeueAfter}, nil
		case backup.CreateDeleteJob:
			job := resources.DeleteJob(b, r.AgentImage)
			err := r.Client.Create(ctx, job)
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				in.NamespaceTerminating = true
				continue
			}
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return ctrl.Result{}, fmt.Errorf("create delete Job: %w", err)
			}
			log.Info("Deleting the stored snapshot", "EtcdBackup", klog.KObj(b), "location", b.Status.Location, "job", job.Name)
			r.Recorder.Eventf(b, corev1.EventTypeNormal, "DeletingSnapshot", "Job %s deletes %s", job.Name, b.Status.Location)
			return ctrl.Result{RequeueAfter: step.RequeueAfter}, nil
		case backup.WaitDeleteJob:
			return ctrl.Result{RequeueAfter: step.RequeueAfter}, nil
		case backup.RetryDeleteJob:
			r.Recorder.Eventf(b, corev1.EventTypeWarning, "SnapshotDeletionFailed", "deleting %s failed, retrying until %s after the deletion: %s",
				b.Status.Location, backup.DeletionGiveUpAfter, step.Reason)
			if err := r.Client.Delete(ctx, delJob, client.PropagationPolicy("Background")); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("delete failed delete Job: %w", err)
			}
			return ctrl.Result{RequeueAfter: step.RequeueAfter}, nil
		case backup.DeleteDirect:
			log.Info("Deleting the stored snapshot directly: the namespace is being deleted and takes no Job", "EtcdBackup", klog.KObj(b),
				"location", b.Status.Location)
			if err := r.deleteDirect(ctx, b, secret); err != nil {
				in.Direct, in.DirectError = backup.DirectFailed, err.Error()
			} else {
				in.Direct = backup.DirectSucceeded
			}
			continue
		case backup.Release:
			r.reportRelease(ctx, b, step)
			return ctrl.Result{}, r.removeFinalizer(ctx, b)
		}
	}
	return ctrl.Result{}, fmt.Errorf("finalizer of EtcdBackup %s: no decision after a refused delete Job", b.Name)
}

// reportRelease says what became of the snapshot as the backup goes: an Event (which a namespace being deleted
// refuses, hence also the log line) and a log line naming what is left behind, and where.
func (r *Reconciler) reportRelease(ctx context.Context, b *etcdv1alpha1.EtcdBackup, step backup.DeletionStep) {
	log := ctrl.LoggerFrom(ctx)
	switch step.Outcome {
	case backup.SnapshotDeleted:
		r.Recorder.Eventf(b, corev1.EventTypeNormal, "SnapshotDeleted", "deleted %s", b.Status.Location)
		log.Info("Deleted the stored snapshot", "EtcdBackup", klog.KObj(b), "location", b.Status.Location)
	case backup.SnapshotLeftBehind:
		r.Recorder.Eventf(b, corev1.EventTypeWarning, "SnapshotLeftBehind", "%s is left behind, delete it by hand: %s", b.Status.Location, step.Reason)
		log.Info("Left a stored snapshot behind", "EtcdBackup", klog.KObj(b), "location", b.Status.Location, "reason", step.Reason)
	}
}

// deletionInput gathers what the finalizer decides on, with the Jobs and the credentials Secret it acts on.
func (r *Reconciler) deletionInput(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (in backup.DeletionInput, snapJob, delJob *batchv1.Job, secret *corev1.Secret, err error) {
	in = backup.DeletionInput{Location: b.Status.Location, Bucket: b.Spec.Destination.PVC == nil, SinceDeletion: r.Now().Sub(b.DeletionTimestamp.Time)}
	snapJob, in.SnapshotJob, err = r.jobState(ctx, b, resources.BackupJobName(b))
	if err != nil {
		return in, nil, nil, nil, err
	}
	if snapJob != nil && in.SnapshotJob != backup.JobRunning {
		in.SnapshotJob = backup.JobAbsent // a finished snapshot Job's result is in status already
	}
	delJob, in.DeleteJob, err = r.jobState(ctx, b, resources.DeleteJobName(b))
	if err != nil {
		return in, nil, nil, nil, err
	}
	if in.DeleteJob == backup.JobFailed {
		msg, _ := agentjob.TerminationMessage(ctx, r.APIReader, delJob)
		in.DeleteJobMessage = strings.TrimSpace(agentjob.Finished(delJob).Message + " " + msg)
	}
	if in.Location == "" {
		return in, snapJob, delJob, nil, nil
	}
	if pvc := b.Spec.Destination.PVC; pvc != nil {
		in.DestinationName = pvc.ClaimName
		claim := &corev1.PersistentVolumeClaim{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: pvc.ClaimName}, claim)
		if err != nil && !apierrors.IsNotFound(err) {
			return in, nil, nil, nil, fmt.Errorf("get PersistentVolumeClaim %s: %w", pvc.ClaimName, err)
		}
		in.DestinationPresent = err == nil && claim.DeletionTimestamp.IsZero()
		return in, snapJob, delJob, nil, nil
	}
	name, need, serviceAccount := destinationCredentials(b.Spec.Destination)
	if name == "" {
		// Ambient credentials (workload identity, the AWS default chain): nothing of the destination's can go
		// missing, and only a Job can delete.
		in.Ambient, in.DestinationPresent, in.DestinationName = true, true, serviceAccount
		return in, snapJob, delJob, nil, nil
	}
	in.DestinationName = name
	secret = &corev1.Secret{}
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: in.DestinationName}, secret)
	if err != nil && !apierrors.IsNotFound(err) {
		return in, nil, nil, nil, fmt.Errorf("get credentials Secret %s: %w", in.DestinationName, err)
	}
	in.DestinationPresent = err == nil && secret.DeletionTimestamp.IsZero() && need.missing(secret.Data) == ""
	if !in.DestinationPresent {
		secret = nil
	}
	return in, snapJob, delJob, secret, nil
}

// jobState reads the backup's Job of that name: absent, running, or how it finished.
func (r *Reconciler) jobState(ctx context.Context, b *etcdv1alpha1.EtcdBackup, name string) (*batchv1.Job, backup.JobState, error) {
	job := &batchv1.Job{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: name}, job)
	switch {
	case apierrors.IsNotFound(err):
		return nil, backup.JobAbsent, nil
	case err != nil:
		return nil, backup.JobAbsent, fmt.Errorf("get Job %s: %w", name, err)
	}
	switch cond := agentjob.Finished(job); {
	case cond == nil:
		return job, backup.JobRunning, nil
	case cond.Type == batchv1.JobFailed:
		return job, backup.JobFailed, nil
	}
	return job, backup.JobSucceeded, nil
}

// deleteDirect deletes the backup's object from the operator, with the credentials Secret. Only where no Job can
// run any more (the namespace is being deleted): the values are used for this one request, never stored, logged or
// copied, and S3 keys are cut out of any error the server sends back.
func (r *Reconciler) deleteDirect(ctx context.Context, b *etcdv1alpha1.EtcdBackup, secret *corev1.Secret) error {
	ctx, cancel := context.WithTimeout(ctx, directDeleteTimeout)
	defer cancel()
	if g := b.Spec.Destination.GCS; g != nil {
		del := r.DeleteGCSObject
		if del == nil {
			del = deleteGCSObject
		}
		cfg := backup.GCSConfig{Bucket: g.Bucket, Endpoint: g.Endpoint, CredentialsJSON: secret.Data[etcdv1alpha1.GCSServiceAccountKey]}
		if err := del(ctx, cfg, g.Key); err != nil {
			return fmt.Errorf("delete %s: %w", b.Status.Location, err)
		}
		return nil
	}
	if a := b.Spec.Destination.Azure; a != nil {
		del := r.DeleteAzureBlob
		if del == nil {
			del = deleteAzureBlob
		}
		// The SDK never puts a shared key or a SAS signature into an error (it redacts the query).
		cfg := backup.AzureConfig{Account: a.StorageAccount, Container: a.Container, Endpoint: a.Endpoint,
			AccountKey: string(secret.Data[etcdv1alpha1.AzureAccountKeyKey]), SASToken: string(secret.Data[etcdv1alpha1.AzureSASTokenKey])}
		if err := del(ctx, cfg, a.Key); err != nil {
			return fmt.Errorf("delete %s: %w", b.Status.Location, err)
		}
		return nil
	}
	d := b.Spec.Destination.S3
	id, key := string(secret.Data[etcdv1alpha1.S3AccessKeyIDKey]), string(secret.Data[etcdv1alpha1.S3SecretAccessKeyKey])
	cfg := backup.S3Config{Endpoint: d.Endpoint, Bucket: d.Bucket, Key: d.Key, Region: d.Region, ForcePathStyle: d.ForcePathStyle,
		Insecure: d.Insecure, CABundle: d.CABundle, AccessKeyID: id, SecretAccessKey: key}
	del := r.DeleteObject
	if del == nil {
		del = deleteS3Object
	}
	if err := del(ctx, cfg); err != nil {
		msg := strings.NewReplacer(key, "<secretAccessKey>", id, "<accessKeyID>").Replace(err.Error())
		return fmt.Errorf("delete %s: %s", b.Status.Location, msg)
	}
	return nil
}

// deleteS3Object deletes cfg's object (a missing object counts as deleted).
func deleteS3Object(ctx context.Context, cfg backup.S3Config) error {
	store, err := backup.NewS3Store(cfg)
	if err != nil {
		return err
	}
	return store.Delete(ctx)
}

// deleteGCSObject deletes key of cfg's bucket (a missing object counts as deleted).
func deleteGCSObject(ctx context.Context, cfg backup.GCSConfig, key string) error {
	b, err := backup.NewGCSBucket(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = b.Close() }()
	return b.Store(key).Delete(ctx)
}

// deleteAzureBlob deletes key of cfg's container (a missing blob counts as deleted).
func deleteAzureBlob(ctx context.Context, cfg backup.AzureConfig, key string) error {
	c, err := backup.NewAzureContainer(cfg)
	if err != nil {
		return err
	}
	return c.Store(key).Delete(ctx)
}

func (r *Reconciler) removeFinalizer(ctx context.Context, b *etcdv1alpha1.EtcdBackup) error {
	before := b.DeepCopy()
	controllerutil.RemoveFinalizer(b, Finalizer)
	if err := r.Client.Patch(ctx, b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}
