package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/metrics"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// ensureServices creates the peer Service and the PodDisruptionBudget when missing, keeps the client Service as
// spec.service shapes it (ensureClientService), and keeps the budget's minAvailable at what the plan decided
// (plan.BudgetMinAvailable). None of this disrupts members, so it runs on every pass.
func (r *Reconciler) ensureServices(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, minAvailable int) error {
	if err := r.createIfMissing(ctx, cluster, resources.PeerService(cluster), &corev1.Service{}); err != nil {
		return err
	}
	if err := r.ensureClientService(ctx, cluster, obs); err != nil {
		return err
	}
	want := resources.PodDisruptionBudget(cluster)
	budget := intstr.FromInt32(int32(minAvailable)) //nolint:gosec // at most a few members
	want.Spec.MinAvailable = &budget
	var have policyv1.PodDisruptionBudget
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), &have)
	switch {
	case apierrors.IsNotFound(err):
		return r.create(ctx, cluster, want)
	case err != nil:
		return fmt.Errorf("get PodDisruptionBudget: %w", err)
	}
	if have.Spec.MinAvailable == nil || *have.Spec.MinAvailable != *want.Spec.MinAvailable {
		patch := client.MergeFrom(have.DeepCopy())
		have.Spec.MinAvailable = want.Spec.MinAvailable
		if err := r.Client.Patch(ctx, &have, patch); err != nil {
			return fmt.Errorf("update PodDisruptionBudget minAvailable: %w", err)
		}
	}
	return nil
}

func (r *Reconciler) createIfMissing(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, want, have client.Object) error {
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		return r.create(ctx, cluster, want)
	}
	if err != nil {
		return fmt.Errorf("get %T %s: %w", want, want.GetName(), err)
	}
	return nil
}

func (r *Reconciler) create(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obj client.Object) error {
	if err := r.Client.Create(ctx, obj); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // the cache was behind; the next pass sees it
		}
		return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
	}
	ctrl.LoggerFrom(ctx).Info("Created object", "EtcdCluster", klog.KObj(cluster), "kind", fmt.Sprintf("%T", obj), "name", obj.GetName())
	return nil
}

// tookStep records a step Steward took, once its change is made: one log line (msg, with the cluster, the
// step's kind, reason and message, its member or members, and kv), the step's Event on the cluster (none when reason is
// empty: the step recorded an Event per object already), and the steps counter of internal/metrics.
func (r *Reconciler) tookStep(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, action plan.Action, msg, eventType, reason, note string, kv ...any) {
	keys := []any{"EtcdCluster", klog.KObj(cluster), "step", metrics.StepKind(action.Kind), "reason", action.Reason, "message", action.Message}
	switch len(action.Members) {
	case 0:
	case 1:
		keys = append(keys, "member", action.Members[0])
	default:
		keys = append(keys, "members", action.Members)
	}
	ctrl.LoggerFrom(ctx).Info(msg, append(keys, kv...)...)
	if reason != "" {
		r.Recorder.Event(cluster, eventType, reason, note)
	}
	metrics.StepTaken(cluster.Namespace, cluster.Name, action)
}

// act executes the planned step: one function per kind of step, beside its capability (members.go, versions.go,
// tls.go, storage.go, maintenance.go, auth.go, restore.go).
func (r *Reconciler) act(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	switch action.Kind {
	case plan.Bootstrap, plan.CreateMemberPods, plan.RecreateMemberPods:
		return r.createMembers(ctx, cluster, obs, action)
	case plan.CreateRestore:
		return r.createRestore(ctx, cluster, action)
	case plan.RetireMembers:
		return r.retireMembers(ctx, cluster, obs, action)
	case plan.RetireVolumes:
		return r.retireVolumes(ctx, cluster, action)
	case plan.AddLearner:
		return r.addLearner(ctx, cluster, obs, action)
	case plan.AdoptSource:
		return r.adoptSource(ctx, cluster, obs, action)
	case plan.AddSourceOperatorUser:
		return r.addSourceOperatorUser(ctx, cluster, obs, action)
	case plan.RemoveSourceOperatorUser:
		return r.removeSourceOperatorUser(ctx, cluster, obs, action)
	case plan.PromoteLearner:
		return r.promoteLearner(ctx, cluster, obs, action)
	case plan.RemoveMember:
		return r.removeMember(ctx, cluster, obs, action)
	case plan.DeleteMemberPod:
		return r.deleteMemberPod(ctx, cluster, obs, action)
	case plan.StopMember:
		return r.stopMember(ctx, cluster, obs, action)
	case plan.DeleteMemberPVC:
		return r.deleteMemberPVC(ctx, cluster, action)
	case plan.RollMember:
		return r.rollMember(ctx, cluster, obs, action)
	case plan.ExpandVolume:
		return r.expandVolume(ctx, cluster, action)
	case plan.RestartMember:
		return r.restartMember(ctx, cluster, obs, action)
	case plan.UpdatePeerURL:
		return r.updatePeerURL(ctx, cluster, obs, action)
	case plan.MoveLeader:
		return r.moveLeader(ctx, cluster, obs, action)
	case plan.EnableAuth, plan.DisableAuth:
		return r.switchAuth(ctx, cluster, obs, action)
	case plan.EnsureOperatorUser:
		return r.ensureOperatorUser(ctx, cluster, obs, action)
	case plan.Defragment, plan.CompactForSpace, plan.DisarmNoSpace, plan.RaiseQuota:
		return r.maintain(ctx, cluster, obs, action)
	case plan.EnableDowngrade:
		return r.enableDowngrade(ctx, cluster, obs, action)
	case plan.CancelDowngrade:
		return r.cancelDowngrade(ctx, cluster, obs, action)
	case plan.Wait:
		r.warnWaitStart(cluster, action)
	}
	return nil
}

// warnWaitStart records the Warning of a wait that only a human ends, when it begins (waitStarts).
func (r *Reconciler) warnWaitStart(cluster *etcdv1alpha1.EtcdCluster, action plan.Action) {
	if waitStarts(cluster.Status.Conditions, action.Reason) {
		r.Recorder.Event(cluster, corev1.EventTypeWarning, action.Reason, action.Message)
	}
}

// waitStarts reports whether a Wait for reason needs a human and has just begun: its reason is one that only a
// human ends (lost data, an inconsistent bootstrap, a refused version change), and the Degraded condition as
// read at the start of this pass, which the previous pass wrote, does not carry it yet. So the warning is recorded
// once per wait, not on every pass.
func waitStarts(conditions []metav1.Condition, reason string) bool {
	if !humanWaits[reason] {
		return false
	}
	degraded := meta.FindStatusCondition(conditions, etcdv1alpha1.ConditionDegraded)
	return degraded == nil || degraded.Status != metav1.ConditionTrue || degraded.Reason != reason
}
