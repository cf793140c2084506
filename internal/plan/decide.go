package plan

// Decision is the plan of one pass: its one step, and what the pass keeps in step with the observation besides,
// none of which disrupts a member (the disruption budget, the marks members' volumes carry for later passes).
type Decision struct {
	Action Action
	// BudgetMinAvailable is the PodDisruptionBudget's minAvailable (BudgetMinAvailable).
	BudgetMinAvailable int
	// VolumeTLS are the members whose volumes are to record the TLS mode their running Pod was created in
	// (VolumeTLSToRecord), and RunsToRecord those whose volumes are to record that they have run (RunsToRecord).
	VolumeTLS    []Member
	RunsToRecord []Member
}

// Decide is the one call a pass makes to plan after observing: Next's step and the rest of the Decision.
func Decide(spec Spec, obs Observation) Decision {
	return Decision{Action: Next(spec, obs), BudgetMinAvailable: BudgetMinAvailable(spec.Replicas, obs),
		VolumeTLS: VolumeTLSToRecord(obs), RunsToRecord: RunsToRecord(obs)}
}

// VolumeTLSToRecord are the members whose volumes do not yet record the TLS mode their running Pod was created
// in (volumes created before Steward recorded it): a Pod re-created without a member list listens as its volume
// says.
func VolumeTLSToRecord(obs Observation) []Member {
	var out []Member
	for _, m := range obs.Members {
		if m.HasPod && !m.PodDeleting && m.HasPVC && m.PodTLS != "" && m.VolumeTLS != m.PodTLS {
			out = append(out, m)
		}
	}
	return out
}
