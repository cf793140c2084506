package plan

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// on is voter name (ID id) with its Pod on node.
func on(name string, id uint64, node string) Member {
	m := voter(name, id)
	m.Node = node
	return m
}

// zones is a Placement: "node=zone" pairs, the eligible nodes.
func zones(pairs ...string) *Placement {
	p := &Placement{Zones: map[string]string{}}
	for _, kv := range pairs {
		var n, z string
		for i := range kv {
			if kv[i] == '=' {
				n, z = kv[:i], kv[i+1:]
			}
		}
		p.Zones[n] = z
	}
	return p
}

func TestRebalance(t *testing.T) {
	threeZones := zones("n1=a", "n2=b", "n3=c")
	placed := func(p *Placement, members ...Member) Observation {
		obs := formed(members...)
		obs.Placement = p
		return obs
	}
	tests := map[string]struct {
		replicas int
		obs      Observation
		want     ActionKind
		reason   string
		member   string
	}{
		"one member per node and zone stays": {3, placed(threeZones, on("c-a", 1, "n1"), on("c-b", 2, "n2"), on("c-c", 3, "n3")),
			None, etcdv1alpha1.ReasonReconciled, ""},
		"a zone that came back empty gets a learner while two members share a node": {3,
			placed(threeZones, on("c-a", 1, "n1"), on("c-b", 2, "n1"), on("c-c", 3, "n2")), AddLearner, etcdv1alpha1.ReasonRebalancing, "c-new"},
		"without the spread's nodes (the user places members, or nodes cannot be read) nothing moves": {3,
			placed(nil, on("c-a", 1, "n1"), on("c-b", 2, "n1"), on("c-c", 3, "n2")), None, etcdv1alpha1.ReasonReconciled, ""},
		"a node that is cordoned, unready or excluded does not count as room": {3,
			placed(zones("n1=a", "n2=b"), on("c-a", 1, "n1"), on("c-b", 2, "n1"), on("c-c", 3, "n2")), None, etcdv1alpha1.ReasonReconciled, ""},
		"two members on one node with no emptier node: a skew of 1 is what the spread allows": {5,
			placed(threeZones, on("c-a", 1, "n1"), on("c-b", 2, "n1"), on("c-c", 3, "n2"), on("c-d", 4, "n2"), on("c-e", 5, "n3")),
			None, etcdv1alpha1.ReasonReconciled, ""},
		"the learner promoted, a follower on the crowded node leaves": {3,
			placed(threeZones, on("c-a", 1, "n1"), on("c-b", 2, "n1"), on("c-c", 3, "n2"), on("c-new", 9, "n3")), RemoveMember, etcdv1alpha1.ReasonScalingDown, "c-b"},
		"the leader on a cordoned node hands leadership over before it leaves": {3,
			placed(threeZones, on("c-a", 1, "n4"), on("c-b", 2, "n1"), on("c-c", 3, "n2"), on("c-d", 4, "n3")),
			MoveLeader, etcdv1alpha1.ReasonMovingLeader, "c-a"},
		"a follower sharing the crowded node with the leader leaves": {3,
			placed(zones("n1=a", "n2=a", "n3=b", "n4=c"), on("c-a", 1, "n1"), on("c-b", 2, "n1"), on("c-c", 3, "n3"), on("c-d", 4, "n4")),
			RemoveMember, etcdv1alpha1.ReasonScalingDown, "c-b"},
		"a scale-down takes a member in the most crowded zone, not the last name": {3,
			placed(zones("n1=a", "n2=b", "n3=b", "n4=c"), on("c-a", 1, "n1"), on("c-b", 2, "n2"), on("c-c", 3, "n3"), on("c-d", 4, "n4")),
			RemoveMember, etcdv1alpha1.ReasonScalingDown, "c-c"},
		"a scale-down takes a member on a cordoned node first": {3,
			placed(threeZones, on("c-a", 1, "n1"), on("c-b", 2, "n2"), on("c-c", 3, "n3"), on("c-d", 4, "n4")), RemoveMember, etcdv1alpha1.ReasonScalingDown, "c-d"},
		"a crowded zone whose every node has a member moves to an empty zone": {3,
			placed(zones("a1=a", "a2=a", "b1=b", "c1=c"), on("c-a", 1, "a1"), on("c-b", 2, "a2"), on("c-c", 3, "b1")), AddLearner, etcdv1alpha1.ReasonRebalancing, "c-new"},
		"a crowded zone stays when the learner could land in a zone nearly as crowded": {3,
			placed(zones("a1=a", "a2=a", "b1=b", "b2=b", "c1=c", "c2=c"), on("c-a", 1, "a1"), on("c-b", 2, "a2"), on("c-c", 3, "b1")),
			None, etcdv1alpha1.ReasonReconciled, ""},
		"nothing moves while a member is unhealthy": {3, placed(threeZones, on("c-a", 1, "n1"), on("c-b", 2, "n1"), func() Member {
			m := on("c-c", 3, "n2")
			m.Healthy = false
			return m
		}()), Wait, etcdv1alpha1.ReasonWaitingForMembers, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := Next(Spec{Replicas: tt.replicas, Version: "3.6.16"}, tt.obs)
			if got.Kind != tt.want || got.Reason != tt.reason {
				t.Fatalf("got %s/%s (%s), want %s/%s", got.Kind, got.Reason, got.Message, tt.want, tt.reason)
			}
			if tt.member != "" && (len(got.Members) == 0 || got.Members[0] != tt.member) {
				t.Fatalf("got members %v (%s), want %s first", got.Members, got.Message, tt.member)
			}
		})
	}
	t.Run("the leader on the crowded node is moved off first", func(t *testing.T) {
		obs := placed(zones("n1=a", "n2=b", "n3=c"), on("c-a", 1, "n1"), on("c-b", 2, "n2"), on("c-c", 3, "n2"), on("c-new", 9, "n3"))
		obs.LeaderID = 2
		got := Next(Spec{Replicas: 3, Version: "3.6.16"}, obs)
		// c-b (the leader) and c-c share n2; the follower c-c goes.
		if got.Kind != RemoveMember || got.Members[0] != "c-c" {
			t.Fatalf("got %s %v (%s), want RemoveMember c-c", got.Kind, got.Members, got.Message)
		}
	})
}

// TestRebalanceSettles plays rebalancing out on random clusters, with the scheduler choosing adversarially among the
// nodes the default spread allows (any of the fewest, the emptier zone not preferred): every run must end with the
// nodes' skew at most 1, within one move per member, and no move may leave the nodes' skew larger than it was.
func TestRebalanceSettles(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for run := 0; run < 3000; run++ {
		nodes := 2 + rng.Intn(6)
		p := &Placement{Zones: map[string]string{}}
		var names []string
		nZones := 1 + rng.Intn(3)
		for i := 0; i < nodes; i++ {
			n := fmt.Sprintf("n%d", i)
			names = append(names, n)
			p.Zones[n] = fmt.Sprintf("z%d", rng.Intn(nZones))
		}
		replicas := []int{3, 5}[rng.Intn(2)]
		var members []Member
		for i := 0; i < replicas; i++ {
			members = append(members, on(fmt.Sprintf("c-%02d", i), uint64(i+1), names[rng.Intn(nodes)]))
		}
		initial := describe(p, members)
		next := replicas
		moves := 0
		var skewBefore int
		for step := 0; ; step++ {
			if step > 40*replicas {
				t.Fatalf("run %d: no end after %d steps, from %s, now %s", run, step, initial, describe(p, members))
			}
			obs := formed(members...)
			obs.Placement = p
			obs.LeaderID = members[0].ID
			newName := fmt.Sprintf("c-%02d", next)
			obs.NewMemberNames = []string{newName}
			a := Next(Spec{Replicas: replicas, Version: "3.6.16"}, obs)
			switch a.Kind {
			case None:
			case AddLearner:
				moves++
				if moves > replicas {
					t.Fatalf("run %d: %d moves for %d members, from %s, now %s", run, moves, replicas, initial, describe(p, members))
				}
				skewBefore, _ = skews(p, members)
				fewest, _ := countSpread(p, members).fewest()
				next++
				members = append(members, on(newName, uint64(next), fewest[rng.Intn(len(fewest))]))
				continue
			case RemoveMember:
				for i := range members {
					if members[i].Name == a.Members[0] {
						members = append(members[:i:i], members[i+1:]...)
						break
					}
				}
				if after, _ := skews(p, members); after > skewBefore {
					t.Fatalf("run %d: a move left the nodes' skew at %d, from %d: from %s to %s", run, after, skewBefore, initial, describe(p, members))
				}
				continue
			case MoveLeader:
				for i := range members {
					if members[i].ID == a.TargetID {
						members[0], members[i] = members[i], members[0]
					}
				}
				continue
			default:
				t.Fatalf("run %d: unexpected %s %s (%s)", run, a.Kind, a.Reason, a.Message)
			}
			break
		}
		if node, _ := skews(p, members); node > 1 {
			t.Fatalf("run %d: settled with a node skew of %d: from %s to %s", run, node, initial, describe(p, members))
		}
	}
}

// skews returns the voters' skew across the eligible nodes and across their zones.
func skews(p *Placement, members []Member) (node, zone int) {
	s := countSpread(p, members)
	span := func(m map[string]int) int {
		lo, hi := -1, -1
		for _, c := range m {
			if lo < 0 || c < lo {
				lo = c
			}
			if c > hi {
				hi = c
			}
		}
		return hi - lo
	}
	return span(s.node), span(s.zone)
}

func describe(p *Placement, members []Member) string {
	s := countSpread(p, members)
	var out []string
	for n, c := range s.node {
		out = append(out, fmt.Sprintf("%s(%s):%d", n, p.Zones[n], c))
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}
