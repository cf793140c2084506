package plan

import (
	"fmt"
	"sort"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// TLSProviderCertManager is the API's provider CertManager (spec.tls.provider), whose members may trust the
// user's issuer's CA (TLSDecision.SharedTrust).
const TLSProviderCertManager = "CertManager"

// TLSSpec is the part of the spec the TLS decision reads.
type TLSSpec struct {
	// Enabled: the spec asks for TLS (any provider but None); Provider is the one it asks for.
	Enabled  bool
	Provider string
	Paused   bool
	// StatusTLS: status still reports the cluster's TLS (the previous pass saw certificates).
	StatusTLS bool
}

// TLSPod is what one member Pod the cluster controls says of its TLS.
type TLSPod struct {
	Name     string
	Deleting bool
	// PredatesTLS: the Pod was created by a Steward without TLS (it carries no TLS mark at all).
	PredatesTLS bool
	// Holds: the Pod holds certificates (TLS mode Bridge or TLS), of provider Provider.
	Holds    bool
	Provider string
	// TrustsClusterCA: the Pod trusts the cluster's own CA (provider CertManager), not the user's issuer's.
	TrustsClusterCA bool
}

// TLSDecision is what a pass does about the cluster's TLS before it observes etcd (which needs the client
// certificate): decided from the spec and the member Pods alone, before any write.
type TLSDecision struct {
	// Wait, when set, is the step of this pass (Observation.TLSBlocked): the members' certificates and the spec
	// disagree, and nothing is touched, not even a Secret.
	Wait *Action
	// MarkPlaintext are the Pods that predate TLS in Steward to be marked as plaintext members (the spec says
	// None): from then on a later switch to TLS moves them like any other.
	MarkPlaintext []string
	// Provider is the provider whose certificates the members need ("" for none), and Holding whether any
	// member Pod holds certificates.
	Provider string
	Holding  bool
	// SharedTrust are the Pods holding certificates of provider CertManager that trust the CA of the user's
	// issuer (created before Steward gave each such cluster a CA of its own): while there are any, the cluster's
	// certificates keep coming from that issuer, or the Pods would refuse them.
	SharedTrust []string
	// DropTLS: the last member has switched to plaintext, and the certificates Steward made go.
	DropTLS bool
}

// DecideTLS decides the TLS step of a pass from the spec and the member Pods: the Wait of a legacy plaintext
// cluster or of mixed providers, the Pods to mark, the provider whose material must be in place, and whether
// the material of a finished switch to plaintext goes.
func DecideTLS(spec TLSSpec, pods []TLSPod) TLSDecision {
	if wait, ok := legacyPlaintext(spec, pods); ok {
		return TLSDecision{Wait: &wait}
	}
	var d TLSDecision
	if !spec.Enabled && !spec.Paused {
		for _, p := range pods {
			if !p.Deleting && p.PredatesTLS {
				d.MarkPlaintext = append(d.MarkPlaintext, p.Name)
			}
		}
	}
	if wait, ok := mixedProviders(spec, pods); ok {
		d.Wait = &wait
		return d
	}
	d.Provider, d.Holding = tlsProvider(spec, pods)
	d.DropTLS = d.Provider == "" && spec.StatusTLS && !spec.Paused
	d.SharedTrust = sharedTrust(pods)
	return d
}

// legacyPlaintext returns a Wait when a member Pod predates TLS in Steward and the spec asks for TLS.
func legacyPlaintext(spec TLSSpec, pods []TLSPod) (Action, bool) {
	if !spec.Enabled {
		return Action{}, false
	}
	for _, p := range pods {
		if p.Deleting {
			continue
		}
		if p.PredatesTLS {
			return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonTLSProviderMismatch, Message: fmt.Sprintf(
				"member %s was created by a Steward without TLS and runs plaintext, but spec.tls.provider is %s (the default): Steward changes nothing rather than switch its clients to TLS unasked; set spec.tls.provider to None to keep it plaintext, and later back to %s to switch it to TLS as a rolling change (see docs/user/tls.md#switching-a-running-cluster-between-plaintext-and-tls)",
				p.Name, spec.Provider, spec.Provider)}, true
		}
	}
	return Action{}, false
}

// mixedProviders returns a Wait when the spec asks for a TLS provider while member Pods hold certificates of
// another: the spec was changed to another provider before a switch to plaintext had finished. The two CAs do
// not trust each other, so no member may start with the new provider's certificates until every member has
// left the old one.
func mixedProviders(spec TLSSpec, pods []TLSPod) (Action, bool) {
	if !spec.Enabled {
		return Action{}, false
	}
	want := spec.Provider
	for _, p := range pods {
		if p.Holds && p.Provider != want {
			return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonTLSProviderMismatch, Message: fmt.Sprintf(
				"member %s holds certificates of TLS provider %s but spec.tls.provider is %s: members trust only their own CA, so Steward changes nothing; set spec.tls.provider back to None and let every member switch to plaintext first (status.members[].tls), then to %s",
				p.Name, p.Provider, want, want)}, true
		}
	}
	return Action{}, false
}

// tlsProvider is the provider whose certificates the cluster's members need: the spec's, or while members switch
// back to plaintext the one whose certificates they still hold; "" when none. holding reports whether any member
// Pod holds certificates.
func tlsProvider(spec TLSSpec, pods []TLSPod) (provider string, holding bool) {
	if spec.Enabled {
		provider = spec.Provider
	}
	for _, p := range pods {
		if p.Holds {
			holding = true
			if provider == "" {
				provider = p.Provider
			}
		}
	}
	return provider, holding
}

// sharedTrust names the member Pods holding certificates of provider CertManager that trust the CA of the
// user's issuer (TLSDecision.SharedTrust).
func sharedTrust(pods []TLSPod) []string {
	var shared []string
	for _, p := range pods {
		if p.Holds && p.Provider == TLSProviderCertManager && !p.TrustsClusterCA {
			shared = append(shared, p.Name)
		}
	}
	sort.Strings(shared)
	return shared
}
