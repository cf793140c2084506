package plan

import "testing"

func TestAuthStep(t *testing.T) {
	on, off := true, false
	settled := func(auth *bool, members ...Member) Observation {
		o := clusterAt("3.6.0", members...)
		o.AuthEnabled = auth
		return o
	}
	healthy := []Member{at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")}
	withAuth := func(auth, tls bool) Spec {
		s := specAt("3.6.16")
		s.Auth, s.TLS = auth, tls
		return s
	}
	tests := map[string]struct {
		spec       Spec
		obs        Observation
		wantKind   ActionKind
		wantReason string
	}{
		"asked for on a settled TLS cluster: enable":   {withAuth(true, true), settled(&off, healthy...), EnableAuth, ReasonEnablingAuth},
		"asked for off while on: disable":              {withAuth(false, true), settled(&on, healthy...), DisableAuth, ReasonDisablingAuth},
		"as asked: nothing":                            {withAuth(true, true), settled(&on, healthy...), None, ReasonReconciled},
		"not known whether on: nothing is switched":    {withAuth(true, true), settled(nil, healthy...), None, ReasonReconciled},
		"asked for without TLS: wait, saying why":      {withAuth(true, false), settled(&off, healthy...), Wait, ReasonAuthNeedsTLS},
		"a scale-up goes first: auth waits its turn":   {func() Spec { s := withAuth(true, true); s.Replicas = 5; return s }(), settled(&off, healthy...), AddLearner, ReasonScalingUp},
		"an unhealthy member is replaced/waited first": {withAuth(true, true), settled(&off, with(healthy, "c-b", func(m *Member) { m.Healthy = false })...), Wait, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			a := Next(tt.spec, tt.obs)
			if a.Kind != tt.wantKind || tt.wantReason != "" && a.Reason != tt.wantReason {
				t.Fatalf("Next() = %s/%s (%s), want %s/%s", a.Kind, a.Reason, a.Message, tt.wantKind, tt.wantReason)
			}
		})
	}
}
