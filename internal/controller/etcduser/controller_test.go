package etcduser

import (
	"reflect"
	"strings"
	"testing"

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
