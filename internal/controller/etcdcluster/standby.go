package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	"steward.dev/steward/internal/pitr"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// requeueStandby is how often a standby's pass reads its applier's report into status (lag, last segment): the
// report changes with the source, which no Kubernetes event tells.
const requeueStandby = 10 * time.Second

// defaultFencingWindow is spec.standby.fencingWindow's default (the CRD's, for objects admitted without it).
const defaultFencingWindow = 3 * time.Minute

// annotationApplierSpec is the hash of the applier Pod template Steward wrote: a changed hash rolls it.
const annotationApplierSpec = "etcd.steward.dev/applier-spec"

// standbyPass is what a pass decided for a standby, and what status records of it.
type standbyPass struct {
	decision plan.StandbyDecision
	// report is the applier's report read this pass, nil when it did not answer.
	report *pitr.StandbyStatus
	// sourceClusterID is the primary's etcd cluster ID the standby follows: status' memory, or at bootstrap
	// its seed backup's record.
	sourceClusterID string
	// promotedRevision is set by the pass that recorded the promotion.
	promotedRevision int64
}

// reconcileStandby keeps a standby's applier as plan.DecideStandby says: running while it follows, stopped for
// a promotion, and once stopped, the promotion recorded. It records the pass in obs for status. A paused cluster
// is observed and reported only.
func (r *Reconciler) reconcileStandby(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) error {
	spec := cluster.Spec.Standby
	if spec == nil {
		return nil
	}
	pass := &standbyPass{sourceClusterID: sourceClusterID(cluster, obs)}
	exists, err := r.applierExists(ctx, cluster)
	if err != nil {
		return err
	}
	if exists {
		pass.report = r.readApplier(ctx, cluster)
	}
	window := defaultFencingWindow
	if spec.FencingWindow != nil {
		window = spec.FencingWindow.Duration
	}
	var phase etcdv1alpha1.StandbyPhase
	var recorded bool
	if st := cluster.Status.Standby; st != nil {
		phase, recorded = st.Phase, st.PromotedRevision > 0
	}
	fence := &fenceRecord{}
	if phase != etcdv1alpha1.StandbyPromoted && phase != etcdv1alpha1.StandbyPromoting {
		if fence, err = r.readFence(ctx, cluster); err != nil {
			return err
		}
	}
	pass.decision = plan.DecideStandby(plan.StandbyObservation{Now: r.Now(), Promote: spec.Promote, Force: spec.ForcePromotion, FencingWindow: window,
		Formed: obs.plan.Bootstrapped && pass.sourceClusterID != "", Fenced: fence.fenced(), RevisionRecorded: recorded,
		Phase: phase, ApplierExists: exists, Report: pass.report})
	obs.standby = pass
	if cluster.Spec.Paused {
		return nil
	}
	if err := r.ensureSeed(ctx, cluster, obs); err != nil {
		return err
	}
	switch pass.decision.Step {
	case plan.StandbyFence:
		return r.fenceWrites(ctx, cluster, obs, fence)
	case plan.StandbyRunApplier:
		return r.ensureApplier(ctx, cluster, pass.sourceClusterID)
	case plan.StandbyStopApplier:
		return r.stopApplier(ctx, cluster, pass.decision)
	case plan.StandbyRecordPromotion:
		if err := r.recordPromotion(ctx, cluster, obs); err != nil {
			return err
		}
		return r.openWrites(ctx, cluster, obs, pass)
	case plan.StandbyOpenWrites:
		return r.openWrites(ctx, cluster, obs, pass)
	}
	return nil
}

// sourceClusterID is the primary's etcd cluster ID: status remembers it once known; before that, the seed backup
// recorded it (a point-in-time snapshot keeps its source's ID).
func sourceClusterID(cluster *etcdv1alpha1.EtcdCluster, obs *observation) string {
	if st := cluster.Status.Standby; st != nil && st.SourceClusterID != "" {
		return st.SourceClusterID
	}
	if obs.plan.StandbySeedComplete {
		return obs.standbySeed.Status.ClusterID
	}
	return ""
}

// seedRetryAfter is how long a failed seed stays (its condition says why) before Steward deletes it to try again:
// the source may not hold a snapshot yet, or its credentials may be fixed meanwhile.
const seedRetryAfter = time.Minute

// ensureSeed creates the seed backup a new standby starts from (its primary's newest snapshot the primary's
// segments continue, found by the backup controller's Job), and replaces a failed one after seedRetryAfter. Once
// the cluster has formed the seed is history: kept, never replaced.
func (r *Reconciler) ensureSeed(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) error {
	if obs.plan.Bootstrapped || obs.plan.Restore != nil {
		return nil
	}
	src := cluster.Spec.Standby.Source
	if seed := obs.standbySeed; seed != nil {
		failed := meta.FindStatusCondition(seed.Status.Conditions, etcdv1alpha1.ConditionFailed)
		if failed == nil || failed.Status != metav1.ConditionTrue || !metav1.IsControlledBy(seed, cluster) ||
			seed.Status.CompletionTime == nil || r.Now().Sub(seed.Status.CompletionTime.Time) < seedRetryAfter {
			return nil
		}
		if err := r.Client.Delete(ctx, seed, client.Preconditions{UID: &seed.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete failed standby seed: %w", err)
		}
		ctrl.LoggerFrom(ctx).Info("Retrying the standby seed", "EtcdCluster", klog.KObj(cluster), "EtcdBackup", klog.KObj(seed), "reason", failed.Reason)
		return nil
	}
	seed := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: etcdv1alpha1.StandbySeedName(cluster.Name),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cluster, etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))}},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: cluster.Name, Destination: *src.Destination.DeepCopy(), DeletionPolicy: etcdv1alpha1.DeletionPolicyRetain,
			StandbySeed: &etcdv1alpha1.StandbySeedSource{ClusterName: src.ClusterName}, Encryption: src.Encryption.DeepCopy()},
	}
	if err := r.Client.Create(ctx, seed); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create standby seed: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Created the standby seed", "EtcdCluster", klog.KObj(cluster), "EtcdBackup", klog.KObj(seed))
	r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "StandbySeedCreated", "EtcdBackup %s finds the newest snapshot of %s that its continuous backup continues",
		seed.Name, src.ClusterName)
	return nil
}

// seedNote says how the seed is doing while the standby bootstraps, for the Standby condition.
func seedNote(obs *observation) string {
	seed := obs.standbySeed
	if seed == nil || obs.plan.Bootstrapped {
		return ""
	}
	if c := meta.FindStatusCondition(seed.Status.Conditions, etcdv1alpha1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
		return fmt.Sprintf("; seed %s failed (%s: %s), retried %s after it ended", seed.Name, c.Reason, c.Message, seedRetryAfter)
	}
	if c := meta.FindStatusCondition(seed.Status.Conditions, etcdv1alpha1.ConditionComplete); c != nil {
		return fmt.Sprintf("; seed %s: %s", seed.Name, c.Message)
	}
	return ""
}

// applierExists reports whether the applier's Deployment, or a Pod of it, still exists: a Pod that is going may
// still be applying a segment.
func (r *Reconciler) applierExists(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster) (bool, error) {
	dep := &appsv1.Deployment{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: etcdv1alpha1.StandbyApplierName(cluster.Name)}, dep); {
	case err == nil:
		return true, nil
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("get standby applier Deployment: %w", err)
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(cluster.Namespace), client.MatchingLabels(resources.StandbyApplierLabels(cluster))); err != nil {
		return false, fmt.Errorf("list standby applier Pods: %w", err)
	}
	return len(pods.Items) > 0, nil
}

// readApplier is the applier's report, nil when no ready Pod answers (the decision treats that as "not reported").
func (r *Reconciler) readApplier(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster) *pitr.StandbyStatus {
	read := r.ReadApplier
	if read == nil {
		read = func(ctx context.Context, ip string) (st pitr.StandbyStatus, err error) {
			return st, agentjob.FetchReport(ctx, ip, &st)
		}
	}
	var st pitr.StandbyStatus
	err := agentjob.ReadReport(ctx, r.Client, cluster.Namespace, resources.StandbyApplierLabels(cluster), func(ctx context.Context, ip string) (err error) {
		st, err = read(ctx, ip)
		return err
	})
	if err != nil {
		if !errors.Is(err, agentjob.ErrNoReadyPod) {
			ctrl.LoggerFrom(ctx).V(1).Info("Standby applier did not report", "EtcdCluster", klog.KObj(cluster), "error", err.Error())
		}
		return nil
	}
	return &st
}

// ensureApplier creates the applier's Deployment, or rolls it when what it should run changed.
func (r *Reconciler) ensureApplier(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, sourceClusterID string) error {
	want := resources.StandbyApplierDeployment(cluster, sourceClusterID, resources.AgentAccessFor(cluster), r.Options)
	want.Spec.Template.Annotations = map[string]string{annotationApplierSpec: resources.Hash(&want.Spec.Template)}
	dep := &appsv1.Deployment{}
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), dep); {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create standby applier Deployment: %w", err)
		}
		ctrl.LoggerFrom(ctx).Info("Started the standby applier", "EtcdCluster", klog.KObj(cluster), "deployment", want.Name, "sourceClusterID", sourceClusterID)
		r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "StandbyApplierStarted", "Deployment %s replays the segments of etcd cluster %s from %s",
			want.Name, sourceClusterID, resources.StandbySegments(cluster, sourceClusterID))
	case err != nil:
		return fmt.Errorf("get standby applier Deployment: %w", err)
	case !metav1.IsControlledBy(dep, cluster):
		return fmt.Errorf("deployment %s exists and is not this cluster's: Steward does not take it over", dep.Name)
	case dep.Spec.Template.Annotations[annotationApplierSpec] != want.Spec.Template.Annotations[annotationApplierSpec] ||
		dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1:
		// Also an applier scaled away by hand: a standby that is not promoted must follow.
		dep.Spec.Template, dep.Spec.Replicas = want.Spec.Template, want.Spec.Replicas
		if err := r.Client.Update(ctx, dep); err != nil {
			return fmt.Errorf("update standby applier Deployment: %w", err)
		}
		ctrl.LoggerFrom(ctx).Info("Updated the standby applier", "EtcdCluster", klog.KObj(cluster), "deployment", dep.Name)
	}
	return nil
}

// stopApplier deletes the applier for a promotion. The phase Promoting is written to status first: it is the
// memory that the promotion has begun, so that no later pass, finding the applier gone and no report, starts it
// again (a Wait for the fencing window would) and leaves the standby neither following nor promoted.
func (r *Reconciler) stopApplier(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, d plan.StandbyDecision) error {
	if st := cluster.Status.Standby; st == nil || st.Phase != d.Phase {
		before := cluster.DeepCopy()
		if cluster.Status.Standby == nil {
			cluster.Status.Standby = &etcdv1alpha1.StandbyStatus{}
		}
		cluster.Status.Standby.Phase = d.Phase
		if err := r.Client.Status().Patch(ctx, cluster, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("record the promotion's start: %w", err)
		}
		r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "StandbyPromoting", "%s", d.Message)
	}
	dep := &appsv1.Deployment{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: etcdv1alpha1.StandbyApplierName(cluster.Name)}, dep); {
	case apierrors.IsNotFound(err):
		return nil // its Pod is still going: the next pass waits for it
	case err != nil:
		return fmt.Errorf("get standby applier Deployment: %w", err)
	case !metav1.IsControlledBy(dep, cluster) || !dep.DeletionTimestamp.IsZero():
		return nil
	}
	// Foreground: the Deployment goes only after its Pods, so that "gone" means nothing applies any more.
	if err := r.Client.Delete(ctx, dep, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete standby applier Deployment: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Stopping the standby applier for promotion", "EtcdCluster", klog.KObj(cluster), "deployment", dep.Name)
	return nil
}

// recordPromotion reads the revision the standby reached, now that nothing writes to it, and records it in
// status before writes open: a client's write after openWrites must not be counted in it.
func (r *Reconciler) recordPromotion(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) error {
	if len(obs.endpoints) == 0 {
		return errors.New("promotion: no member answers to read the revision reached from")
	}
	rev, err := r.Etcd.Revision(ctx, client.ObjectKeyFromObject(cluster).String(), obs.endpoints)
	if err != nil {
		return fmt.Errorf("promotion: %w", err)
	}
	before := cluster.DeepCopy()
	if cluster.Status.Standby == nil {
		cluster.Status.Standby = &etcdv1alpha1.StandbyStatus{}
	}
	cluster.Status.Standby.Phase, cluster.Status.Standby.PromotedRevision = etcdv1alpha1.StandbyPromoting, rev
	if err := r.Client.Status().Patch(ctx, cluster, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("record the promoted revision: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Recorded the standby's promoted revision", "EtcdCluster", klog.KObj(cluster), "revision", rev)
	return nil
}

// stoppingReasons are the Standby reasons after which the applier applies nothing more.
var stoppingReasons = map[string]bool{etcdv1alpha1.ReasonSegmentGap: true, etcdv1alpha1.ReasonSegmentCorrupt: true,
	etcdv1alpha1.ReasonDiverged: true, etcdv1alpha1.ReasonSourceChanged: true}

// statusStandby writes status.standby and the Standby condition from the pass, with a Warning when the standby
// stops or a promotion is refused.
func (r *Reconciler) statusStandby(cluster *etcdv1alpha1.EtcdCluster, obs *observation) {
	pass := obs.standby
	if pass == nil {
		return
	}
	st := cluster.Status.Standby
	if st == nil {
		st = &etcdv1alpha1.StandbyStatus{}
	}
	next := *st.DeepCopy()
	d := pass.decision
	next.Phase, next.SourceClusterID = d.Phase, pass.sourceClusterID
	if rep := pass.report; rep != nil {
		next.AppliedRevision, next.SourceRevision, next.LagRevisions = rep.AppliedRevision, rep.SourceRevision, rep.LagRevisions
		next.LagSeconds, next.LastSegment = int64(math.Round(rep.LagSeconds)), rep.LastSegment
		if !rep.SourceChanged.IsZero() {
			next.SourceChangedTime = &metav1.Time{Time: rep.SourceChanged}
		}
	}
	if pass.promotedRevision > 0 {
		now := metav1.NewTime(r.Now())
		next.Phase, next.PromotedRevision, next.PromotedTime = etcdv1alpha1.StandbyPromoted, pass.promotedRevision, &now
		next.AppliedRevision, next.LagRevisions, next.LagSeconds = pass.promotedRevision, 0, 0
		d.Reason, d.Message = etcdv1alpha1.ReasonPromoted, fmt.Sprintf("promoted at revision %d: an ordinary cluster, writes open", pass.promotedRevision)
	}
	if !equality.Semantic.DeepEqual(&next, st) {
		if pass.report != nil {
			next.ObservedTime = &metav1.Time{Time: r.Now()}
		}
		cluster.Status.Standby = &next
	}
	if d.Phase == etcdv1alpha1.StandbyBootstrapping {
		d.Message += seedNote(obs)
	}
	status := metav1.ConditionFalse
	if d.Following {
		status = metav1.ConditionTrue
	}
	was := meta.FindStatusCondition(cluster.Status.Conditions, etcdv1alpha1.ConditionStandby)
	if (was == nil || was.Reason != d.Reason) && (stoppingReasons[d.Reason] || d.Reason == etcdv1alpha1.ReasonSourceStillAdvancing) {
		r.Recorder.Eventf(cluster, corev1.EventTypeWarning, d.Reason, "%s", d.Message)
	}
	meta.SetStatusCondition(&cluster.Status.Conditions, metav1.Condition{Type: etcdv1alpha1.ConditionStandby, Status: status, Reason: d.Reason,
		Message: d.Message, ObservedGeneration: cluster.Generation, LastTransitionTime: metav1.NewTime(r.Now())})
}

// standbyRequeue is how soon a standby's pass looks again, at most: its report's pace, or when a refused
// promotion's fencing window ends.
func standbyRequeue(obs *observation, requeue time.Duration) time.Duration {
	if obs.standby == nil || obs.standby.decision.Phase == etcdv1alpha1.StandbyPromoted {
		return requeue
	}
	requeue = min(requeue, requeueStandby)
	if after := obs.standby.decision.RecheckAfter; after > 0 {
		requeue = min(requeue, after)
	}
	return requeue
}
