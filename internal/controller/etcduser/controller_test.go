package etcduser

import (
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/event"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func TestCertificateAllowed(t *testing.T) {
	for provider, want := range map[string]bool{"": true, etcdv1alpha1.TLSProviderSteward: true,
		etcdv1alpha1.TLSProviderCertManager: true, etcdv1alpha1.TLSProviderSecrets: false, etcdv1alpha1.TLSProviderNone: false} {
		c := &etcdv1alpha1.EtcdCluster{}
		c.Name = "c"
		if provider != "" {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: provider}
		}
		p, ok := certificateAllowed(c)
		if ok != want {
			t.Errorf("provider %q: allowed %v, want %v", provider, ok, want)
		}
		if !ok && (p.reason != etcdv1alpha1.ReasonCertificateNotSupported || !strings.Contains(p.message, provider)) {
			t.Errorf("provider %q: %+v, want reason %s naming the provider", provider, p, etcdv1alpha1.ReasonCertificateNotSupported)
		}
	}
}

func TestHealthyVoters(t *testing.T) {
	c := &etcdv1alpha1.EtcdCluster{Status: etcdv1alpha1.EtcdClusterStatus{Members: []etcdv1alpha1.MemberStatus{
		{Name: "a", Healthy: true, Role: etcdv1alpha1.RoleLeader},
		{Name: "b", Healthy: false, Role: etcdv1alpha1.RoleFollower},
		{Name: "c", Healthy: true, Role: etcdv1alpha1.RoleLearner},
		{Name: "e", Healthy: true, Role: etcdv1alpha1.RoleFollower},
	}}}
	if got, want := healthyVoters(c), map[string]bool{"a": true, "e": true}; !reflect.DeepEqual(got, want) {
		t.Fatalf("healthyVoters = %v, want %v (healthy, not learners)", got, want)
	}
}

// TestPromotionWakesUsers: a standby's promotion done (status only, no generation change) passes the predicate,
// so that its users get their declared write permissions at once rather than at their next periodic pass.
func TestPromotionWakesUsers(t *testing.T) {
	standby := &etcdv1alpha1.EtcdCluster{Spec: etcdv1alpha1.EtcdClusterSpec{Standby: &etcdv1alpha1.StandbySpec{Promote: true}},
		Status: etcdv1alpha1.EtcdClusterStatus{Standby: &etcdv1alpha1.StandbyStatus{Phase: etcdv1alpha1.StandbyPromoting}}}
	promoted := standby.DeepCopy()
	promoted.Status.Standby.Phase = etcdv1alpha1.StandbyPromoted
	if !etcdv1alpha1.WritesFenced(standby) || etcdv1alpha1.WritesFenced(promoted) {
		t.Fatalf("fenced while promoting %v, once promoted %v", etcdv1alpha1.WritesFenced(standby), etcdv1alpha1.WritesFenced(promoted))
	}
	if !clusterChangeForUsers.Update(event.UpdateEvent{ObjectOld: standby, ObjectNew: promoted}) {
		t.Fatal("the promotion does not wake the cluster's users")
	}
	if clusterChangeForUsers.Update(event.UpdateEvent{ObjectOld: standby, ObjectNew: standby.DeepCopy()}) {
		t.Fatal("an unchanged standby wakes its users")
	}
}
