package etcdbackup

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/metrics"
	"steward.dev/steward/internal/resources"
)

type phase int

const (
	phasePending phase = iota
	phaseWaiting
	phaseRunning
	phaseSucceeded
	phaseFailed
)

// outcome is what one pass found out; status is computed from it alone.
type outcome struct {
	phase           phase
	reason, message string
	result          *backup.Result
	space           backup.Space // the destination claim's, as the Job left it (zero: not measured)
	started         bool         // the Job was created in this pass
	jobStart        time.Time    // creation of an existing Job
	err             error
}

// storedAs says how a snapshot was stored when it was not in the clear and uncompressed.
func storedAs(r *backup.Result) string {
	var how []string
	if r.Compression == string(etcdv1alpha1.CompressionZstd) {
		how = append(how, "zstd-compressed")
	}
	if r.EncryptionRecipient != "" {
		how = append(how, "encrypted to "+r.EncryptionRecipient)
	}
	if len(how) == 0 {
		return ""
	}
	return " (" + strings.Join(how, ", ") + ")"
}

// conditions computes Complete and Failed from the outcome; both are always written.
func conditions(o *outcome) (complete, failed metav1.Condition) {
	complete = metav1.Condition{Type: etcdv1alpha1.ConditionComplete, Status: metav1.ConditionFalse}
	failed = metav1.Condition{Type: etcdv1alpha1.ConditionFailed, Status: metav1.ConditionFalse}
	switch o.phase {
	case phaseSucceeded:
		complete.Status, complete.Reason = metav1.ConditionTrue, etcdv1alpha1.ReasonBackupSucceeded
		complete.Message = fmt.Sprintf("%d bytes at revision %d from %s stored at %s%s, etcd checksum verified",
			o.result.SizeBytes, o.result.Revision, o.result.Member, o.result.Location, storedAs(o.result))
		if o.result.Message != "" {
			complete.Message += ": " + o.result.Message
		}
		if o.result.Member == backup.PointInTimeMember {
			// The agent says which snapshot it carried forward and how far.
			complete.Message = fmt.Sprintf("%d bytes stored at %s, etcd checksum verified: %s", o.result.SizeBytes, o.result.Location, o.result.Message)
		}
		failed.Reason, failed.Message = etcdv1alpha1.ReasonBackupSucceeded, "the backup succeeded"
	case phaseFailed:
		failed.Status, failed.Reason, failed.Message = metav1.ConditionTrue, o.reason, o.message
		if o.reason == etcdv1alpha1.ReasonDestinationFull && o.space.Capacity > 0 {
			failed.Message += fmt.Sprintf(" (the claim has %d of %d bytes free without this snapshot)", o.space.Available, o.space.Capacity)
		}
		complete.Reason, complete.Message = o.reason, "the backup failed: "+o.message
	case phaseRunning:
		complete.Reason, complete.Message = etcdv1alpha1.ReasonBackupRunning, "the backup Job is running"
		failed.Reason, failed.Message = etcdv1alpha1.ReasonBackupRunning, "the backup Job is running"
	default:
		reason, msg := etcdv1alpha1.ReasonBackupPending, "admission checks under way"
		if o.reason != "" {
			reason, msg = o.reason, o.message
		}
		complete.Reason, complete.Message = reason, msg
		failed.Reason, failed.Message = reason, msg
	}
	if o.err != nil {
		complete.Message += fmt.Sprintf(" (last pass failed: %v)", o.err)
	}
	return complete, failed
}

// writeStatus writes the pass's outcome once, emits an Event when the backup finishes, and records a success
// on the cluster.
func (r *Reconciler) writeStatus(ctx context.Context, b *etcdv1alpha1.EtcdBackup, o *outcome) error {
	log := ctrl.LoggerFrom(ctx)
	before := b.DeepCopy()
	st := &b.Status
	now := metav1.NewTime(r.Now())
	if st.StartTime == nil && (o.started || !o.jobStart.IsZero()) {
		start := now
		if !o.jobStart.IsZero() {
			start = metav1.NewTime(o.jobStart)
		}
		st.StartTime = &start
	}
	st.JobName = ""
	if o.started || !o.jobStart.IsZero() {
		st.JobName = resources.BackupJobName(b)
	}
	if res := o.result; res != nil {
		st.Location, st.SizeBytes, st.SHA256, st.Revision = res.Location, res.SizeBytes, res.SHA256, res.Revision
		st.EtcdVersion, st.StorageVersion, st.ClusterID, st.Member = res.EtcdVersion, res.StorageVersion, res.ClusterID, res.Member
		st.SnapshotSizeBytes, st.Compression, st.EncryptionRecipient = res.SnapshotSizeBytes, etcdv1alpha1.BackupCompression(res.Compression), res.EncryptionRecipient
		st.Path = res.Path
	}
	if sp := o.space; sp.Capacity > 0 {
		st.ClaimSpace = &etcdv1alpha1.ClaimSpace{AvailableBytes: sp.Available, CapacityBytes: sp.Capacity}
	}
	if o.phase == phaseSucceeded || o.phase == phaseFailed {
		st.CompletionTime = &now
	}
	complete, failed := conditions(o)
	for _, c := range []metav1.Condition{complete, failed} {
		c.ObservedGeneration = b.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
	if o.err == nil {
		st.ObservedGeneration = b.Generation
	}
	// The write that ends the backup carries the resourceVersion read: if the cache was behind (a previous pass
	// already ended it), it fails and is retried from the fresh object, which is finished. So the Event and the
	// count below happen once per backup, not once per pass that saw it end.
	patch := client.MergeFrom(before)
	ends := o.phase == phaseSucceeded || o.phase == phaseFailed
	if ends {
		patch = client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	}
	if err := r.Client.Status().Patch(ctx, b, patch); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	switch o.phase {
	case phaseSucceeded:
		metrics.BackupEnded(b.Namespace, b.Spec.ClusterName, metrics.ResultComplete, "")
		r.Recorder.Event(b, corev1.EventTypeNormal, complete.Reason, complete.Message)
		log.Info("Backup complete", "EtcdBackup", klog.KObj(b), "location", st.Location, "sizeBytes", st.SizeBytes, "revision", st.Revision)
		if err := r.recordLastBackup(ctx, b); err != nil {
			log.Error(err, "Recording the cluster's last backup failed", "EtcdBackup", klog.KObj(b))
		}
	case phaseFailed:
		metrics.BackupEnded(b.Namespace, b.Spec.ClusterName, metrics.ResultFailed, failed.Reason)
		r.Recorder.Event(b, corev1.EventTypeWarning, failed.Reason, failed.Message)
		log.Info("Backup failed", "EtcdBackup", klog.KObj(b), "reason", failed.Reason, "message", failed.Message)
	}
	return nil
}

// recordLastBackup sets the cluster's status.lastBackup to b if b is Complete and newer than what it names.
// Only that field is patched (a merge patch of it alone), so the cluster controller's own status writes and
// this one never overwrite each other.
func (r *Reconciler) recordLastBackup(ctx context.Context, b *etcdv1alpha1.EtcdBackup) error {
	// A standby's seed is its primary's snapshot, not a backup of the standby.
	if !meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) || b.Status.CompletionTime == nil || b.Spec.StandbySeed != nil {
		return nil
	}
	cluster := &etcdv1alpha1.EtcdCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, cluster); err != nil {
		return client.IgnoreNotFound(err)
	}
	if lb := cluster.Status.LastBackup; lb != nil && lb.Time != nil && !lb.Time.Before(b.Status.CompletionTime) {
		return nil
	}
	before := cluster.DeepCopy()
	cluster.Status.LastBackup = &etcdv1alpha1.BackupRef{Name: b.Name, Time: b.Status.CompletionTime.DeepCopy()}
	if err := r.Client.Status().Patch(ctx, cluster, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("record last backup on EtcdCluster %s: %w", cluster.Name, err)
	}
	return nil
}

// notAdmitted records an admission verdict that stops the backup here (wait, or refuse), and reports whether it
// did.
func (o *outcome) notAdmitted(v backup.Verdict, reason, message string) bool {
	switch v {
	case backup.Wait:
		o.phase, o.reason, o.message = phaseWaiting, reason, message
	case backup.Refuse:
		o.phase, o.reason, o.message = phaseFailed, reason, message
	default:
		return false
	}
	return true
}
