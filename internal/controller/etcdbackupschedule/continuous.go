package etcdbackupschedule

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/agentjob"
	"steward.dev/steward/internal/controller/etcdbackup"
	"steward.dev/steward/internal/pitr"
	"steward.dev/steward/internal/resources"
)

// requeueContinuous is how often the follower's report is read into status while continuous backup is on.
const requeueContinuous = 15 * time.Second

// annotationFollowerSpec is the hash of the follower Pod template Steward wrote: a changed hash rolls it.
const annotationFollowerSpec = "etcd.steward.dev/follower-spec"

// reconcileContinuous keeps the follower running (or removes it), reads its report into status, and asks for a
// snapshot at once when no Complete snapshot starts the follower's chain. It returns whether a snapshot is needed
// now, and the condition to show. cluster is nil when it does not exist.
func (r *Reconciler) reconcileContinuous(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, cluster *etcdv1alpha1.EtcdCluster, backups []etcdv1alpha1.EtcdBackup) (bool, *metav1.Condition, error) {
	if s.Spec.Continuous == nil || !s.Spec.Continuous.Enabled {
		s.Status.Continuous = nil
		meta.RemoveStatusCondition(&s.Status.Conditions, etcdv1alpha1.ConditionContinuousBackup)
		return false, nil, r.removeFollower(ctx, s, "continuous backup is off")
	}
	cond := &metav1.Condition{Type: etcdv1alpha1.ConditionContinuousBackup, Status: metav1.ConditionFalse, Reason: etcdv1alpha1.ReasonFollowerStarting}
	if cluster == nil {
		cond.Message = fmt.Sprintf("EtcdCluster %s does not exist", s.Spec.ClusterName)
		return false, cond, nil
	}
	if phase, ok := hibernationOf(cluster); ok {
		// No member runs to follow. status.continuous stays as it was: its window is still recoverable, and no
		// snapshot is asked for (none could be taken).
		cond.Reason, cond.Message = etcdv1alpha1.ReasonHibernated, hibernatedContinuousMessage(cluster, phase)
		return false, cond, r.removeFollower(ctx, s, fmt.Sprintf("EtcdCluster %s is hibernated", cluster.Name))
	}
	if err := r.ensureFollower(ctx, s, cluster, resources.AgentAccessFor(cluster), pruneBefore(backups, cluster.Status.ClusterID)); err != nil {
		return false, nil, err
	}
	if s.Status.Continuous == nil {
		s.Status.Continuous = &etcdv1alpha1.ContinuousBackupStatus{}
	}
	cs := s.Status.Continuous
	cs.Follower = resources.FollowerName(s)
	rep, err := r.readFollower(ctx, s)
	if err != nil {
		cond.Message = err.Error()
		// Without its ServiceAccount the Deployment gets no Pod, and the follower would only be "starting".
		reader := r.APIReader
		if reader == nil {
			reader = r.Client
		}
		missing, err := etcdbackup.MissingServiceAccount(ctx, reader, s.Namespace, s.Spec.Destination, "the follower and the backup Jobs")
		if err != nil {
			return false, nil, err
		}
		if missing != "" {
			cond.Reason, cond.Message = etcdv1alpha1.ReasonDestinationNotFound, missing
		}
		return false, cond, nil
	}
	next := *cs
	next.Location, next.ClusterID, next.ChainStart = rep.Location, rep.ClusterID, rep.ChainStart
	next.PendingRevisions = max(rep.CurrentRevision-rep.LastRevision, 0)
	if rep.CompactedAt != nil {
		next.CompactedAt = &metav1.Time{Time: *rep.CompactedAt}
		if cs.CompactedAt == nil || rep.CompactedAt.After(cs.CompactedAt.Time) {
			r.Recorder.Eventf(s, corev1.EventTypeWarning, "ContinuousBackupGap",
				"etcd compacted revisions up to %d before the follower read them (it was away longer than the cluster's compaction retention): "+
					"the segments have a gap, points before it stay recoverable from older snapshots, and a new window starts from a snapshot taken now",
				rep.CompactedRevision)
		}
	}
	next.RecoverableFrom, next.RecoverableTo = window(backups, rep)
	if !equality.Semantic.DeepEqual(&next, cs) {
		next.ObservedTime = &metav1.Time{Time: r.Now()}
		*cs = next
	}
	switch {
	case rep.Error != "":
		cond.Reason, cond.Message = etcdv1alpha1.ReasonFollowerFailing, rep.Error
	case !rep.Watching:
		cond.Message = "the follower is connecting to the cluster"
	case cs.RecoverableFrom == nil:
		cond.Reason = etcdv1alpha1.ReasonWaitingForSnapshot
		cond.Message = fmt.Sprintf("no Complete snapshot at or after revision %d starts the follower's segments; taking one", rep.ChainStart-1)
		if rep.CompactedAt != nil {
			cond.Message += fmt.Sprintf(" (etcd compacted revision %d before the follower read it, at %s)", rep.CompactedRevision, rep.CompactedAt.UTC().Format(time.RFC3339))
		}
		return true, cond, nil
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, etcdv1alpha1.ReasonFollowing
		cond.Message = fmt.Sprintf("recoverable: revisions %d..%d; %d revisions pending", cs.RecoverableFrom.Revision, cs.RecoverableTo.Revision, cs.PendingRevisions)
	}
	return false, cond, nil
}

// window is the recoverable window the follower's current chain gives: from the oldest Complete snapshot of the
// same etcd cluster at or after the chain's start (minus one: a snapshot at revision R needs R+1 onwards), to
// the end of the newest stored segment.
func window(backups []etcdv1alpha1.EtcdBackup, rep pitr.FollowerStatus) (from, to *etcdv1alpha1.RecoveryPoint) {
	var snaps []*etcdv1alpha1.EtcdBackup
	for i := range backups {
		b := &backups[i]
		if meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) && b.DeletionTimestamp.IsZero() &&
			b.Status.ClusterID == rep.ClusterID && b.Status.Revision >= rep.ChainStart-1 && b.Status.Revision <= rep.LastRevision {
			snaps = append(snaps, b)
		}
	}
	if len(snaps) == 0 {
		return nil, nil
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].Status.Revision < snaps[j].Status.Revision })
	first := snaps[0]
	from = &etcdv1alpha1.RecoveryPoint{Revision: first.Status.Revision, Backup: first.Name, Time: first.Status.StartTime}
	to = &etcdv1alpha1.RecoveryPoint{Revision: rep.LastRevision}
	if !rep.LastTime.IsZero() {
		to.Time = &metav1.Time{Time: rep.LastTime}
	}
	return from, to
}

// pruneBefore is the revision of the oldest Complete snapshot of the current cluster identity: segments ending
// before it extend nothing that is kept. 0 (keep all) without one.
func pruneBefore(backups []etcdv1alpha1.EtcdBackup, clusterID string) int64 {
	var oldest int64
	for i := range backups {
		b := &backups[i]
		if meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) && b.DeletionTimestamp.IsZero() &&
			b.Status.ClusterID == clusterID && (oldest == 0 || b.Status.Revision < oldest) {
			oldest = b.Status.Revision
		}
	}
	return oldest
}

// ensureFollower creates or updates the follower's ConfigMap and Deployment.
func (r *Reconciler) ensureFollower(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, cluster *etcdv1alpha1.EtcdCluster, access resources.AgentAccess, prune int64) error {
	log := ctrl.LoggerFrom(ctx)
	wantCM := resources.FollowerConfigMap(s, prune)
	cm := &corev1.ConfigMap{}
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(wantCM), cm); {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, wantCM); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create follower ConfigMap: %w", err)
		}
	case err != nil:
		return fmt.Errorf("get follower ConfigMap: %w", err)
	case cm.Data[resources.FollowerPruneKey] != wantCM.Data[resources.FollowerPruneKey] && prune > 0:
		// Only forward: a snapshot pruned meanwhile never makes older segments needed again.
		if old, _ := strconv.ParseInt(cm.Data[resources.FollowerPruneKey], 10, 64); prune > old {
			cm.Data = wantCM.Data
			if err := r.Client.Update(ctx, cm); err != nil {
				return fmt.Errorf("update follower ConfigMap: %w", err)
			}
			log.Info("Segments before the oldest kept snapshot may go", "EtcdBackupSchedule", klog.KObj(s), "revision", prune)
		}
	}
	want := resources.FollowerDeployment(s, cluster, access, r.Options)
	want.Spec.Template.Annotations = map[string]string{annotationFollowerSpec: resources.Hash(&want.Spec.Template)}
	dep := &appsv1.Deployment{}
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), dep); {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create follower Deployment: %w", err)
		}
		log.Info("Started continuous backup", "EtcdBackupSchedule", klog.KObj(s), "deployment", want.Name)
		r.Recorder.Eventf(s, corev1.EventTypeNormal, "FollowerStarted", "Deployment %s follows cluster %s and stores segments at %s",
			want.Name, cluster.Name, resources.SegmentsBase(s))
	case err != nil:
		return fmt.Errorf("get follower Deployment: %w", err)
	case dep.Spec.Template.Annotations[annotationFollowerSpec] != want.Spec.Template.Annotations[annotationFollowerSpec] ||
		dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1:
		// Also a follower scaled away by hand: continuous backup that is on must follow.
		dep.Spec.Template, dep.Spec.Replicas = want.Spec.Template, want.Spec.Replicas
		if err := r.Client.Update(ctx, dep); err != nil {
			return fmt.Errorf("update follower Deployment: %w", err)
		}
		log.Info("Updated the follower", "EtcdBackupSchedule", klog.KObj(s), "deployment", dep.Name)
		r.Recorder.Eventf(s, corev1.EventTypeNormal, "FollowerUpdated", "Deployment %s restarted with new settings; it resumes from its last segment", dep.Name)
	}
	return nil
}

// removeFollower deletes the follower when continuous backup is turned off, or its cluster hibernates (why says
// which, for the Event); the stored segments stay.
func (r *Reconciler) removeFollower(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, why string) error {
	name := resources.FollowerName(s)
	dep := &appsv1.Deployment{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, dep); {
	case err == nil && metav1.IsControlledBy(dep, s):
		if err := r.Client.Delete(ctx, dep); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete follower Deployment: %w", err)
		}
		r.Recorder.Eventf(s, corev1.EventTypeNormal, "FollowerStopped", "%s; Deployment %s deleted, its segments kept", why, name)
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("get follower Deployment: %w", err)
	}
	cm := &corev1.ConfigMap{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, cm); {
	case err == nil && metav1.IsControlledBy(cm, s):
		if err := r.Client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete follower ConfigMap: %w", err)
		}
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("get follower ConfigMap: %w", err)
	}
	return nil
}

// readFollower asks the ready follower Pod for its report.
func (r *Reconciler) readFollower(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule) (pitr.FollowerStatus, error) {
	read := r.ReadFollower
	if read == nil {
		read = FetchFollowerStatus
	}
	var st pitr.FollowerStatus
	err := agentjob.ReadReport(ctx, r.Client, s.Namespace, resources.FollowerLabels(s), func(ctx context.Context, ip string) (err error) {
		st, err = read(ctx, ip)
		return err
	})
	if errors.Is(err, agentjob.ErrNoReadyPod) {
		return st, fmt.Errorf("no ready follower Pod of Deployment %s yet", resources.FollowerName(s))
	}
	if err != nil {
		return st, fmt.Errorf("follower: %w", err)
	}
	return st, nil
}

// FetchFollowerStatus is GET http://<podIP>:8080/status: a follower Pod's report.
func FetchFollowerStatus(ctx context.Context, podIP string) (pitr.FollowerStatus, error) {
	var st pitr.FollowerStatus
	err := agentjob.FetchReport(ctx, podIP, &st)
	return st, err
}
