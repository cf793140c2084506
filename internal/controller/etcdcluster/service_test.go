package etcdcluster

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

// TestServiceRefusedIsDegraded: a client Service the API server refuses as spec.service shapes it makes the
// cluster Degraded with the reason and the API server's words, after the problems of the members themselves.
func TestServiceRefusedIsDegraded(t *testing.T) {
	obs := obsOf(true, true, "a", "b", "c")
	obs.serviceRefused = "the API server refuses the client Service as spec.service shapes it (provided port is already allocated)"
	d := degradedCondition(obs, plan.Action{Kind: plan.None}, nil, metav1.Condition{Status: metav1.ConditionTrue})
	if d.Status != metav1.ConditionTrue || d.Reason != etcdv1alpha1.ReasonClientServiceRefused || d.Message != obs.serviceRefused {
		t.Errorf("Degraded %+v, want ClientServiceRefused with the API server's words", d)
	}
	obs.plan.Members[0].Healthy = false
	if d := degradedCondition(obs, plan.Action{Kind: plan.None}, nil, metav1.Condition{Status: metav1.ConditionTrue}); d.Reason != etcdv1alpha1.ReasonMembersUnhealthy {
		t.Errorf("Degraded %+v: an unhealthy member comes before the Service", d)
	}
}
