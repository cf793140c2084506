package plan

import etcdv1alpha1 "steward.dev/steward/api/v1alpha1"

// Authentication steps: etcd's auth is turned on or off on a settled cluster (every member healthy, as many
// voters as specified, nothing else to do), so that the switch never races a membership or version step.
const (
	// EnableAuth makes sure the root user holds the root role (Steward's own identity) and turns auth on.
	EnableAuth ActionKind = "EnableAuth"
	// DisableAuth turns auth off; users and roles stay in etcd for the next time.
	DisableAuth ActionKind = "DisableAuth"
	// EnsureOperatorUser makes Steward's password user (with the password it keeps) through its client
	// certificate, where etcd refused that password.
	EnsureOperatorUser ActionKind = "EnsureOperatorUser"
)

// operatorPasswordStep is what Steward does when etcd refused its password (the operator credentials): with a
// member that verifies client certificates, it makes its password user again through its certificate, before
// anything else (a switch to plaintext needs the user before the first member stops taking certificates).
// Without one it waits: without an identity, etcd answers it no member's status, so everything else it observed
// looks like a dead cluster, and acting on that would be destructive.
func operatorPasswordStep(obs Observation) Action {
	for _, m := range obs.Members {
		if m.InEtcd && m.HasPod && !m.PodDeleting && m.PodTLS == TLSOn && m.PodClientCertAuth {
			return Action{Kind: EnsureOperatorUser, Reason: etcdv1alpha1.ReasonRestoringOperatorUser,
				Message: "etcd refused Steward's password (the operator credentials Secret): making the etcd user steward:operator with it again, through Steward's client certificate"}
		}
	}
	return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonOperatorPasswordRejected,
		Message: "etcd refuses the password of steward:operator, the user Steward acts as (Secret in status.operatorCredentialsSecret), " +
			"so Steward sees no member's status and changes nothing. It happens after a restore from a backup of another cluster, " +
			"whose store holds that cluster's password, or after the Secret was edited or deleted. Put the password etcd knows into the Secret " +
			"(for a restored cluster: the source cluster's <cluster>-operator-credentials), or set the Secret's password in etcd as a user " +
			"with the root role: etcdctl --user <user> user passwd steward:operator"}
}

// authStep turns etcd's authentication on or off to match spec.Auth, once it is known whether it is on.
func authStep(spec Spec, obs Observation) (Action, bool) {
	if obs.AuthEnabled == nil || *obs.AuthEnabled == spec.Auth {
		return Action{}, false
	}
	if !spec.Auth {
		return Action{Kind: DisableAuth, Reason: etcdv1alpha1.ReasonDisablingAuth,
			Message: "turning etcd's authentication off (spec.auth.enabled is false): every client may do anything again"}, true
	}
	if !spec.TLS {
		return Action{Kind: EnableAuth, Reason: etcdv1alpha1.ReasonEnablingAuth,
			Message: "turning etcd's authentication on (spec.auth.enabled) without TLS: Steward acts as the password user steward:operator; " +
				"clients need an EtcdUser's password from now on, and passwords cross the network unencrypted"}, true
	}
	return Action{Kind: EnableAuth, Reason: etcdv1alpha1.ReasonEnablingAuth,
		Message: "turning etcd's authentication on (spec.auth.enabled): clients need an EtcdUser's certificate or password from now on"}, true
}
