package plan

// Authentication steps: etcd's auth is turned on or off on a settled cluster (every member healthy, as many
// voters as specified, nothing else to do), so that the switch never races a membership or version step.
const (
	// EnableAuth makes sure the root user holds the root role (Steward's own identity) and turns auth on.
	EnableAuth ActionKind = "EnableAuth"
	// DisableAuth turns auth off; users and roles stay in etcd for the next time.
	DisableAuth ActionKind = "DisableAuth"
)

// Reasons of authentication steps and waits.
const (
	ReasonEnablingAuth  = "EnablingAuth"
	ReasonDisablingAuth = "DisablingAuth"
	// ReasonAuthNeedsTLS: auth is asked for on a cluster whose members do not all serve TLS yet: Steward
	// authenticates with its client certificate, so auth waits for the switch to TLS to finish.
	ReasonAuthNeedsTLS = "AuthNeedsTLS"
)

// authStep turns etcd's authentication on or off to match spec.Auth, once it is known whether it is on.
func authStep(spec Spec, obs Observation) (Action, bool) {
	if obs.AuthEnabled == nil || *obs.AuthEnabled == spec.Auth {
		return Action{}, false
	}
	if !spec.Auth {
		return Action{Kind: DisableAuth, Reason: ReasonDisablingAuth,
			Message: "turning etcd's authentication off (spec.auth.enabled is false): every client may do anything again"}, true
	}
	if !spec.TLS {
		return Action{Kind: Wait, Reason: ReasonAuthNeedsTLS,
			Message: "spec.auth.enabled needs TLS: Steward authenticates to etcd with its client certificate"}, true
	}
	return Action{Kind: EnableAuth, Reason: ReasonEnablingAuth,
		Message: "turning etcd's authentication on (spec.auth.enabled): clients need an EtcdUser's certificate or password from now on"}, true
}
