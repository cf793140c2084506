package v1alpha1

// Condition types of EtcdCluster status. Every condition is written on the first reconcile (Unknown until
// known), with a CamelCase reason from the constants below.
const (
	// ConditionAvailable is True when the cluster has quorum and serves clients.
	ConditionAvailable = "Available"
	// ConditionProgressing is True while Steward works toward the spec (bootstrap, scaling, upgrade); its
	// message names the step under way.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when members are unhealthy or Steward cannot act safely; its reason says why.
	ConditionDegraded = "Degraded"
)
