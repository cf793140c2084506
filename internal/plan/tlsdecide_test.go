package plan

import (
	"reflect"
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func TestDecideTLS(t *testing.T) {
	steward := TLSSpec{Enabled: true, Provider: "Steward"}
	none := TLSSpec{Provider: "None"}
	legacy := TLSPod{Name: "db-a", PredatesTLS: true}
	plain := TLSPod{Name: "db-a"}
	holds := func(name, provider string, own bool) TLSPod {
		return TLSPod{Name: name, Holds: true, Provider: provider, TrustsClusterCA: own}
	}
	tests := map[string]struct {
		spec TLSSpec
		pods []TLSPod
		want TLSDecision
		wait string // the Wait's reason, if any
	}{
		"TLS spec, TLS Pods":            {spec: steward, pods: []TLSPod{holds("db-a", "Steward", false)}, want: TLSDecision{Provider: "Steward", Holding: true}},
		"TLS spec, no Pods yet":         {spec: steward, want: TLSDecision{Provider: "Steward"}},
		"legacy Pod, TLS spec":          {spec: steward, pods: []TLSPod{legacy}, wait: etcdv1alpha1.ReasonTLSProviderMismatch},
		"legacy Pod being deleted":      {spec: steward, pods: []TLSPod{{Name: "db-a", PredatesTLS: true, Deleting: true}}, want: TLSDecision{Provider: "Steward"}},
		"legacy Pod, spec None":         {spec: none, pods: []TLSPod{legacy}, want: TLSDecision{MarkPlaintext: []string{"db-a"}}},
		"legacy Pod, spec None, paused": {spec: TLSSpec{Provider: "None", Paused: true}, pods: []TLSPod{legacy}},
		"another provider's certificates": {spec: TLSSpec{Enabled: true, Provider: "Secrets"}, pods: []TLSPod{holds("db-a", "Steward", false)},
			wait: etcdv1alpha1.ReasonTLSProviderMismatch},
		"switching back to plaintext": {spec: none, pods: []TLSPod{holds("db-a", "Steward", false), plain},
			want: TLSDecision{Provider: "Steward", Holding: true}},
		"switched to plaintext, status still TLS": {spec: TLSSpec{Provider: "None", StatusTLS: true}, pods: []TLSPod{plain},
			want: TLSDecision{DropTLS: true}},
		"switched, paused": {spec: TLSSpec{Provider: "None", StatusTLS: true, Paused: true}, pods: []TLSPod{plain}},
		"cert-manager, shared issuer": {spec: TLSSpec{Enabled: true, Provider: "CertManager"},
			pods: []TLSPod{holds("db-b", "CertManager", false), holds("db-a", "CertManager", true)},
			want: TLSDecision{Provider: "CertManager", Holding: true, SharedTrust: []string{"db-b"}}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := DecideTLS(tt.spec, tt.pods)
			if tt.wait != "" {
				if got.Wait == nil || got.Wait.Kind != Wait || got.Wait.Reason != tt.wait {
					t.Fatalf("DecideTLS = %+v, want a Wait %s", got, tt.wait)
				}
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("DecideTLS = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestTLSBlockedIsTheStep: a Wait the cluster's TLS imposes is the step, whatever else the plan would do.
func TestTLSBlockedIsTheStep(t *testing.T) {
	wait := Action{Kind: Wait, Reason: etcdv1alpha1.ReasonTLSProviderMismatch, Message: "m"}
	obs := Observation{TLSBlocked: &wait, NewMemberNames: []string{"db-a"}, PeerURL: func(n string) string { return "http://" + n }}
	if got := Next(Spec{Replicas: 1, Version: "3.6.0"}, obs); !reflect.DeepEqual(got, wait) {
		t.Fatalf("Next = %+v, want %+v", got, wait)
	}
	if got := Decide(Spec{Replicas: 1, Version: "3.6.0"}, obs).Action; !reflect.DeepEqual(got, wait) {
		t.Fatalf("Decide = %+v, want %+v", got, wait)
	}
}
