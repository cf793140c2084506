package plan

// BudgetMinAvailable is the PodDisruptionBudget's minAvailable for an observation: the member Pods that are not
// being deleted, less the voters that may go without losing quorum (healthy voters beyond the quorum of the
// voters etcd lists), and never below Quorum(replicas). The budget counts Ready Pods, and etcd's quorum counts
// voters: while a member is being replaced, a learner's Pod can count as Ready without holding a vote, and a
// budget of Quorum(replicas) let a drain evict a voter the remaining ones needed (TestDrainEachNodeInTurn). Every
// Pod counts, Ready or not, so that a Pod turning Ready after this pass cannot make room for an eviction. In a
// settled cluster this is Quorum(replicas); while a member is replaced, or one is unhealthy, or etcd gives no
// member list, nothing may be evicted (a drain waits the seconds a replacement takes).
func BudgetMinAvailable(replicas int, obs Observation) int {
	pods := 0
	for _, m := range obs.Members {
		if m.HasPod && !m.PodDeleting {
			pods++
		}
	}
	if !obs.EtcdReachable {
		return max(pods, Quorum(replicas))
	}
	voters, healthy := HealthyVoters(obs.Members)
	spare := healthy - Quorum(voters)
	return max(pods-max(spare, 0), Quorum(replicas))
}
