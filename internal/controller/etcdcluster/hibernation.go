package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

// stopMember deletes the Pod of Members[0] for hibernation (plan.StopMember): etcd stops on the Pod's SIGTERM,
// and its volume, identity and certificates stay for the member to come back on.
func (r *Reconciler) stopMember(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	pod := obs.pods[action.Members[0]]
	if pod == nil {
		return nil
	}
	// The UID precondition makes sure the Pod deleted is the one observed, not a successor of the same name.
	if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("stop member %s for hibernation: %w", pod.Name, err)
	}
	r.tookStep(ctx, cluster, action, "Stopped member for hibernation", corev1.EventTypeNormal, "MemberStopped",
		fmt.Sprintf("Stopped member %s for hibernation: its Pod is deleted, its volume %s kept", pod.Name, pvcNames([]string{pod.Name})[0]), "pod", pod.Name)
	return nil
}

// hibernationStep reports whether action is a step or wait of hibernation.
func hibernationStep(action plan.Action) bool {
	return action.Reason == etcdv1alpha1.ReasonHibernating || action.Reason == etcdv1alpha1.ReasonHibernated
}

// statusHibernation writes status.hibernation from the spec, the pass's step and the Available condition this
// pass wrote: Hibernating while members stop, Hibernated once none runs, Resuming from the moment the spec no
// longer asks for it until the cluster is Available again, then nothing. Each new phase records an Event.
func (r *Reconciler) statusHibernation(cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) {
	st := &cluster.Status
	prev := st.Hibernation
	var phase etcdv1alpha1.HibernationPhase
	switch {
	case etcdv1alpha1.HibernationRequested(cluster) && action.Reason == etcdv1alpha1.ReasonHibernated:
		phase = etcdv1alpha1.HibernationHibernated
	case etcdv1alpha1.HibernationRequested(cluster):
		phase = etcdv1alpha1.HibernationHibernating
	case prev != nil && !meta.IsStatusConditionTrue(st.Conditions, etcdv1alpha1.ConditionAvailable):
		phase = etcdv1alpha1.HibernationResuming
	default:
		if prev != nil {
			st.Hibernation = nil
			if prev.Phase == etcdv1alpha1.HibernationResuming {
				r.Recorder.Event(cluster, corev1.EventTypeNormal, "Resumed", fmt.Sprintf("resumed from hibernation: %s", availableMessage(st.Conditions)))
			}
		}
		return
	}
	next := etcdv1alpha1.HibernationStatus{Phase: phase, Since: metav1.NewTime(r.Now())}
	if prev != nil {
		next = *prev.DeepCopy()
		if prev.Phase != phase {
			next.Phase, next.Since = phase, metav1.NewTime(r.Now())
		}
	}
	if phase != etcdv1alpha1.HibernationResuming {
		next.Members = plan.KeptMembers(obs.plan.Members)
		next.Revision = st.Revision
		// The size is read while members answer (the largest answer of the pass), and kept once they have stopped.
		var size int64
		for _, s := range obs.statusOf {
			if s.Err == nil {
				size = max(size, s.DBSizeBytes)
			}
		}
		if size > 0 {
			next.DataSizeBytes = size
		}
	}
	st.Hibernation = &next
	if prev != nil && prev.Phase == phase {
		return
	}
	switch phase {
	case etcdv1alpha1.HibernationHibernated:
		r.Recorder.Event(cluster, corev1.EventTypeNormal, etcdv1alpha1.ReasonHibernated, action.Message)
	case etcdv1alpha1.HibernationHibernating:
		r.Recorder.Event(cluster, corev1.EventTypeNormal, etcdv1alpha1.ReasonHibernating,
			"spec.hibernation.enabled is set: stopping the members one at a time, the leader last; their volumes stay")
	case etcdv1alpha1.HibernationResuming:
		r.Recorder.Event(cluster, corev1.EventTypeNormal, "Resuming",
			fmt.Sprintf("spec.hibernation.enabled is unset: members %v come back on their volumes", prev.Members))
	}
}

// availableMessage is the Available condition's message, "" without one.
func availableMessage(conditions []metav1.Condition) string {
	if c := meta.FindStatusCondition(conditions, etcdv1alpha1.ConditionAvailable); c != nil {
		return c.Message
	}
	return ""
}
