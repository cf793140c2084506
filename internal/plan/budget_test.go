package plan

import "testing"

func TestBudgetMinAvailable(t *testing.T) {
	voter := func(name string, healthy bool) Member {
		return Member{Name: name, HasPod: true, InEtcd: true, Healthy: healthy}
	}
	learner := Member{Name: "l", HasPod: true, InEtcd: true, IsLearner: true, Healthy: true}
	source := func(name string, healthy bool) Member {
		return Member{Name: name, External: true, InEtcd: true, Healthy: healthy}
	}
	// A member whose Pod is being deleted, removed from etcd already.
	deleting := func(name string) Member { return Member{Name: name, HasPod: true, PodDeleting: true} }
	obsOf := func(reachable bool, members ...Member) Observation {
		return Observation{EtcdReachable: reachable, Members: members}
	}
	tests := map[string]struct {
		replicas int
		obs      Observation
		want     int
	}{
		"settled: quorum, one may go":     {3, obsOf(true, voter("a", true), voter("b", true), voter("c", true)), 2},
		"settled, 5 members: two may go":  {5, obsOf(true, voter("a", true), voter("b", true), voter("c", true), voter("d", true), voter("e", true)), 3},
		"a member unhealthy: none may go": {3, obsOf(true, voter("a", true), voter("b", true), voter("c", false)), 3},
		"a voter removed, its learner in": {3, obsOf(true, voter("a", true), voter("b", true), learner, deleting("c")), 3},
		"a fourth voter during a move":    {3, obsOf(true, voter("a", true), voter("b", true), voter("c", true), voter("d", true)), 3},
		"three voters and a learner":      {3, obsOf(true, voter("a", true), voter("b", true), voter("c", true), learner), 3},
		"no member list: none may go":     {3, obsOf(false, voter("a", false), voter("b", false), voter("c", false)), 3},
		"no Pods yet: quorum":             {3, obsOf(false), 2},
		// During an adoption the source's voters count toward quorum and have no Pod of Steward's to evict.
		"adopting, beside 3 source voters": {3, obsOf(true, source("s1", true), source("s2", true), source("s3", true),
			voter("a", true), voter("b", true), learner), 2},
		"adopting, a source voter down": {3, obsOf(true, source("s1", true), source("s2", true), source("s3", false),
			voter("a", true), voter("b", true), learner), 2},
		"adopting, two source voters down": {3, obsOf(true, source("s1", true), source("s2", false), source("s3", false),
			voter("a", true), voter("b", true), learner), 3},
		"retiring, 6 voters": {3, obsOf(true, source("s1", true), source("s2", true), source("s3", true),
			voter("a", true), voter("b", true), voter("c", true)), 2},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := BudgetMinAvailable(tt.replicas, tt.obs); got != tt.want {
				t.Errorf("BudgetMinAvailable = %d, want %d", got, tt.want)
			}
		})
	}
}
