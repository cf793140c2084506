package plan

import (
	"strings"
	"testing"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

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
		"asked for on a settled TLS cluster: enable":      {withAuth(true, true), settled(&off, healthy...), EnableAuth, etcdv1alpha1.ReasonEnablingAuth},
		"asked for off while on: disable":                 {withAuth(false, true), settled(&on, healthy...), DisableAuth, etcdv1alpha1.ReasonDisablingAuth},
		"as asked: nothing":                               {withAuth(true, true), settled(&on, healthy...), None, etcdv1alpha1.ReasonReconciled},
		"not known whether on: nothing is switched":       {withAuth(true, true), settled(nil, healthy...), None, etcdv1alpha1.ReasonReconciled},
		"asked for without TLS: enable (with a password)": {withAuth(true, false), settled(&off, healthy...), EnableAuth, etcdv1alpha1.ReasonEnablingAuth},
		"a scale-up goes first: auth waits its turn":      {func() Spec { s := withAuth(true, true); s.Replicas = 5; return s }(), settled(&off, healthy...), AddLearner, etcdv1alpha1.ReasonScalingUp},
		"an unhealthy member is replaced/waited first":    {withAuth(true, true), settled(&off, with(healthy, "c-b", func(m *Member) { m.Healthy = false })...), Wait, ""},
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

// TestOperatorPasswordStep: a password etcd refuses comes before anything else. With a member that verifies
// client certificates Steward makes its user again through its certificate; without one it waits and says what a
// human does, even while its observation (no member's status answered) looks like a dead cluster.
func TestOperatorPasswordStep(t *testing.T) {
	on := true
	tlsMember := func(name string, id uint64) Member {
		m := at(name, id, "3.6.16")
		m.PodTLS, m.PodClientCertAuth = TLSOn, true
		return m
	}
	dead := func(m Member) Member {
		m.Healthy, m.PodReady, m.UnhealthyFor = false, false, time.Hour
		return m
	}
	plain := []Member{at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")}
	for i := range plain {
		plain[i].PodTLS = TLSPlaintext
	}
	tests := map[string]struct {
		spec     Spec
		members  []Member
		rejected bool
		wantKind ActionKind
		wantText string
	}{
		"TLS members: the user is made again through the certificate": {
			specAt("3.6.16"), []Member{tlsMember("c-a", 1), tlsMember("c-b", 2), tlsMember("c-c", 3)}, true, EnsureOperatorUser, "client certificate"},
		"switching to plaintext, one member left on TLS: made first": {
			specAt("3.6.16"), []Member{plain[0], plain[1], tlsMember("c-c", 3)}, true, EnsureOperatorUser, ""},
		"plaintext members look dead: wait, nothing replaced": {
			func() Spec { s := specAt("3.6.16"); s.ReplaceUnhealthyAfter = time.Minute; return s }(),
			[]Member{dead(plain[0]), dead(plain[1]), dead(plain[2])}, true, Wait, "etcdctl --user <user> user passwd steward:operator"},
		"password taken: the plan goes on": {specAt("3.6.16"), plain, false, None, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			obs := clusterAt("3.6.0", tt.members...)
			obs.AuthEnabled, obs.PasswordRejected = &on, tt.rejected
			spec := tt.spec
			spec.Auth = true
			a := Next(spec, obs)
			if a.Kind != tt.wantKind || !strings.Contains(a.Message, tt.wantText) {
				t.Fatalf("Next() = %s/%s (%s), want %s mentioning %q", a.Kind, a.Reason, a.Message, tt.wantKind, tt.wantText)
			}
		})
	}
	paused := specAt("3.6.16")
	paused.Paused = true
	obs := clusterAt("3.6.0", tlsMember("c-a", 1))
	obs.PasswordRejected = true
	if a := Next(paused, obs); a.Kind != Wait || a.Reason != etcdv1alpha1.ReasonPaused {
		t.Fatalf("paused: %s/%s, want the pause to hold", a.Kind, a.Reason)
	}
}
