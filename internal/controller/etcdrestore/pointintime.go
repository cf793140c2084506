package etcdrestore

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/controller/etcdbackup"
	"steward.dev/steward/internal/resources"
)

// preparePointInTime makes sure the point-in-time backup of a restore with spec.pointInTime exists, and
// returns its name ("" when it cannot be made) and, when it decides this pass, the step: a refusal (the schedule
// is missing, the backup failed or is not this restore's), which ends the restore through the same path as
// DecideRestore's refusals, or a wait in the pass that created the backup (the cache, which DecideRestore reads,
// has not seen it yet; its creation brings the next pass). Otherwise the restore goes on with that backup as any
// restore does (waiting while it runs).
func (r *Reconciler) preparePointInTime(ctx context.Context, rs *etcdv1alpha1.EtcdRestore) (string, *backup.RestoreDecision, error) {
	refuse := func(reason, msg string) *backup.RestoreDecision {
		return &backup.RestoreDecision{Step: backup.RestoreRefuse, Reason: reason, Message: msg}
	}
	name := etcdv1alpha1.RestoreBackupName(rs)
	eb := &etcdv1alpha1.EtcdBackup{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: rs.Namespace, Name: name}, eb)
	switch {
	case apierrors.IsNotFound(err):
		sched := &etcdv1alpha1.EtcdBackupSchedule{}
		switch err := etcdbackup.GetConfirmed(ctx, r.Client, r.APIReader, client.ObjectKey{Namespace: rs.Namespace, Name: rs.Spec.PointInTime.ScheduleName}, sched); {
		case apierrors.IsNotFound(err):
			return "", refuse(etcdv1alpha1.ReasonScheduleNotFound, fmt.Sprintf("EtcdBackupSchedule %s does not exist", rs.Spec.PointInTime.ScheduleName)), nil
		case err != nil:
			return "", nil, fmt.Errorf("get EtcdBackupSchedule: %w", err)
		}
		file := fmt.Sprintf("%s-pit-%s.db", rs.Name, string(rs.UID)[:min(8, len(rs.UID))])
		dest := resources.WithPath(sched.Spec.Destination, backup.JoinPrefix(resources.DestinationPath(sched.Spec.Destination), file))
		eb = &etcdv1alpha1.EtcdBackup{
			ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name,
				Labels: map[string]string{resources.LabelCluster: sched.Spec.ClusterName}},
			// Retain: the snapshot the cluster was restored from stays, like any backup restored.
			Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: sched.Spec.ClusterName, Destination: dest,
				DeletionPolicy: etcdv1alpha1.DeletionPolicyRetain, PointInTime: rs.Spec.PointInTime.DeepCopy(),
				Compression: sched.Spec.Compression, Encryption: sched.Spec.Encryption.DeepCopy()},
		}
		if err := controllerutil.SetControllerReference(rs, eb, r.Client.Scheme()); err != nil {
			return "", nil, fmt.Errorf("own point-in-time backup: %w", err)
		}
		if err := r.Client.Create(ctx, eb); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", nil, fmt.Errorf("create point-in-time backup: %w", err)
		}
		ctrl.LoggerFrom(ctx).Info("Making the point-in-time backup", "EtcdRestore", klog.KObj(rs), "backup", name, "schedule", sched.Name)
		r.Recorder.Eventf(rs, corev1.EventTypeNormal, "PointInTimeBackup", "EtcdBackup %s carries a snapshot of schedule %s to the target", name, sched.Name)
		return name, &backup.RestoreDecision{Step: backup.RestoreWait, Reason: etcdv1alpha1.ReasonRestorePending,
			Message: fmt.Sprintf("making the point-in-time backup %s from schedule %s", name, sched.Name)}, nil
	case err != nil:
		return "", nil, fmt.Errorf("get point-in-time backup: %w", err)
	case !metav1.IsControlledBy(eb, rs):
		return "", refuse(etcdv1alpha1.ReasonPointInTimeFailed, fmt.Sprintf("EtcdBackup %s exists and is not owned by restore %s", name, rs.Name)), nil
	default:
		if c := meta.FindStatusCondition(eb.Status.Conditions, etcdv1alpha1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
			return name, refuse(etcdv1alpha1.ReasonPointInTimeFailed, fmt.Sprintf("point-in-time backup %s failed: %s: %s", name, c.Reason, c.Message)), nil
		}
	}
	return name, nil, nil
}
