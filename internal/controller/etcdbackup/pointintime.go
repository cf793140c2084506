package etcdbackup

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/pitr"
	"steward.dev/steward/internal/resources"
)

// startPointInTime admits a point-in-time backup and starts its Job: the agent picks a snapshot of the schedule
// and replays its segments up to the target.
func (r *Reconciler) startPointInTime(ctx context.Context, b *etcdv1alpha1.EtcdBackup, o *outcome) error {
	if _, err := b.Spec.PointInTime.TargetTime(); err != nil {
		// Admission checks the format (date-time); this is what the agent would refuse anyway.
		o.phase, o.reason, o.message = phaseFailed, etcdv1alpha1.ReasonInvalidTarget, err.Error()
		return nil
	}
	in, cluster, sched, err := r.pointInTimeInput(ctx, b)
	if err != nil {
		return err
	}
	d := backup.DecidePointInTime(in)
	if o.notAdmitted(d.Verdict, d.Reason, d.Message) {
		return nil
	}
	if cluster == nil {
		// A deleted cluster: the release's image from the operator's repository.
		cluster = &etcdv1alpha1.EtcdCluster{}
	}
	job, err := resources.PointInTimeJob(b, sched, d.Candidates, in.ClusterID, resources.ImageFor(cluster, d.Version, r.Options), r.AgentImage)
	if err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Starting point-in-time backup Job", "EtcdBackup", klog.KObj(b), "job", job.Name,
		"schedule", sched.Name, "candidates", len(d.Candidates), "target", targetOf(b.Spec.PointInTime))
	if err := r.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create point-in-time backup Job: %w", err)
	}
	r.Recorder.Eventf(b, corev1.EventTypeNormal, "Started", "Job %s carries a snapshot of schedule %s to %s", job.Name, sched.Name, targetOf(b.Spec.PointInTime))
	o.phase, o.started = phaseRunning, true
	return nil
}

// targetOf is the target for logs and Events (the Job gets it from the spec; an unparsable time is refused
// before that).
func targetOf(p *etcdv1alpha1.PointInTimeSource) pitr.Target {
	at, _ := p.TargetTime()
	return pitr.Target{Revision: p.Revision, Time: at}
}

// pointInTimeInput gathers what DecidePointInTime looks at, from the cache.
func (r *Reconciler) pointInTimeInput(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (backup.PointInTimeInput, *etcdv1alpha1.EtcdCluster, *etcdv1alpha1.EtcdBackupSchedule, error) {
	in := backup.PointInTimeInput{ClusterName: b.Spec.ClusterName}
	sched := &etcdv1alpha1.EtcdBackupSchedule{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.PointInTime.ScheduleName}, sched); {
	case apierrors.IsNotFound(err):
		return in, nil, nil, nil
	case err != nil:
		return in, nil, nil, fmt.Errorf("get EtcdBackupSchedule: %w", err)
	}
	if cs := sched.Status.Continuous; cs != nil {
		in.ClusterID = cs.ClusterID
	}
	var cluster *etcdv1alpha1.EtcdCluster
	c := &etcdv1alpha1.EtcdCluster{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, c); {
	case err == nil:
		cluster = c
		in.ClusterFound, in.ClusterID, in.Version = true, c.Status.ClusterID, c.Status.CurrentVersion
		if in.Version == "" {
			in.Version = c.Spec.Version
		}
	case !apierrors.IsNotFound(err):
		return in, nil, nil, fmt.Errorf("get EtcdCluster: %w", err)
	}
	in.ScheduleCluster = sched.Spec.ClusterName
	in.Continuous = sched.Spec.Continuous != nil && sched.Spec.Continuous.Enabled
	in.SameStorage = sameStorage(b.Spec.Destination, sched.Spec.Destination)
	problem, err := r.destinationProblem(ctx, b)
	if err != nil {
		return in, nil, nil, err
	}
	in.DestinationProblem = problem
	list := &etcdv1alpha1.EtcdBackupList{}
	if err := r.Client.List(ctx, list, client.InNamespace(b.Namespace), client.MatchingLabels{resources.LabelSchedule: sched.Name}); err != nil {
		return in, nil, nil, fmt.Errorf("list EtcdBackups: %w", err)
	}
	for i := range list.Items {
		sb := &list.Items[i]
		if !meta.IsStatusConditionTrue(sb.Status.Conditions, etcdv1alpha1.ConditionComplete) || !sb.DeletionTimestamp.IsZero() || sb.Status.StartTime == nil {
			continue
		}
		in.Snapshots = append(in.Snapshots, backup.SnapshotRecord{ClusterID: sb.Status.ClusterID, EtcdVersion: sb.Status.EtcdVersion, Candidate: pitr.Candidate{
			Name: sb.Name, Path: resources.DestinationPath(sb.Spec.Destination), SizeBytes: sb.Status.SizeBytes,
			SHA256: sb.Status.SHA256, SnapshotSizeBytes: sb.Status.SnapshotSizeBytes, Revision: sb.Status.Revision, Time: sb.Status.StartTime.Time,
		}})
	}
	return in, cluster, sched, nil
}

// sameStorage: a and b are on the same claim, or the same endpoint and bucket reached with the same credentials.
func sameStorage(a, b etcdv1alpha1.BackupDestination) bool {
	switch {
	case a.PVC != nil && b.PVC != nil:
		return a.PVC.ClaimName == b.PVC.ClaimName
	case a.S3 != nil && b.S3 != nil:
		return a.S3.Endpoint == b.S3.Endpoint && a.S3.Bucket == b.S3.Bucket && ptr.Equal(a.S3.CredentialsSecret, b.S3.CredentialsSecret) && a.S3.ServiceAccountName == b.S3.ServiceAccountName
	case a.GCS != nil && b.GCS != nil:
		return a.GCS.Endpoint == b.GCS.Endpoint && a.GCS.Bucket == b.GCS.Bucket &&
			ptr.Equal(a.GCS.CredentialsSecret, b.GCS.CredentialsSecret) && a.GCS.ServiceAccountName == b.GCS.ServiceAccountName
	case a.Azure != nil && b.Azure != nil:
		return a.Azure.Endpoint == b.Azure.Endpoint && a.Azure.StorageAccount == b.Azure.StorageAccount && a.Azure.Container == b.Azure.Container &&
			ptr.Equal(a.Azure.CredentialsSecret, b.Azure.CredentialsSecret) && a.Azure.ServiceAccountName == b.Azure.ServiceAccountName
	}
	return false
}
