package plan

import (
	"fmt"
	"sort"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Placement is where a new member may go under Steward's default spread (resources.MemberSpread: across nodes
// required with a skew of at most 1, across zones preferred): the nodes a member Pod may be scheduled to now
// (Ready, not cordoned, matching the spec's node selector and node affinity, their taints tolerated) and each
// one's zone. Nil when the user's own spread or anti-affinity places members, or when Steward cannot read nodes
// (a namespace-scoped install): then members are never moved for balance.
type Placement struct {
	// Zones maps each eligible node to its zone label ("" when it has none).
	Zones map[string]string
}

// spread is how many voters each eligible node and zone holds. Voters on a node that is not eligible (cordoned,
// unready, not matching the spec) are not counted: the scheduler does not count them either, and they are not
// moved for balance (a drain or a replacement moves them).
type spread struct {
	node map[string]int
	zone map[string]int
}

func countSpread(p *Placement, voters []Member) spread {
	s := spread{node: map[string]int{}, zone: map[string]int{}}
	for n, z := range p.Zones {
		s.node[n] = 0
		s.zone[z] += 0
	}
	for _, m := range voters {
		if z, ok := p.Zones[m.Node]; ok {
			s.node[m.Node]++
			s.zone[z]++
		}
	}
	return s
}

// fewest returns the eligible nodes holding the fewest voters, sorted, and that number: the nodes the default
// spread lets the scheduler put a new member on (a node holding more would make the skew exceed 1).
func (s spread) fewest() ([]string, int) {
	least := -1
	var nodes []string
	for n, c := range s.node {
		switch {
		case least < 0 || c < least:
			least, nodes = c, []string{n}
		case c == least:
			nodes = append(nodes, n)
		}
	}
	sort.Strings(nodes)
	return nodes, least
}

// mostCrowded orders voters by how crowded their place is, most first: voters on nodes that are not eligible
// (cordoned, unready, no longer matching the spec: the scheduler would not put a member there now), then those
// on the node holding most, and among equally crowded nodes those in the zone holding most; then followers before
// the leader, then the last by name (as a scale-down without placement takes).
func (s spread) mostCrowded(p *Placement, voters []Member, leaderID uint64) []Member {
	out := append([]Member(nil), voters...)
	const ineligible = int(^uint(0) >> 1)
	key := func(m Member) (int, int) {
		z, ok := p.Zones[m.Node]
		if !ok {
			return ineligible, ineligible
		}
		return s.node[m.Node], s.zone[z]
	}
	sort.SliceStable(out, func(i, j int) bool {
		ni, zi := key(out[i])
		nj, zj := key(out[j])
		if ni != nj {
			return ni > nj
		}
		if zi != zj {
			return zi > zj
		}
		if li, lj := out[i].ID == leaderID, out[j].ID == leaderID; li != lj {
			return lj
		}
		return out[i].Name > out[j].Name
	})
	return out
}

// imbalance says why the voters should be spread differently, empty when they need not be. A move is one
// learner added, which the default spread can only place on one of the fewest nodes, then the voter on the most
// crowded node removed. It is asked for only when that move is sure to even things out, so that rebalancing
// never goes round in circles:
//   - a node holds at least two voters more than the fewest does: the move takes one from it to one of those;
//   - a zone holds at least two voters more than any zone that has one of the fewest nodes: whichever of those
//     nodes the learner lands on, the most crowded node left afterwards is in that zone.
//
// A zone that is crowded while its nodes are not (several nodes per zone) stays as it is when every fewest node
// is in a zone nearly as crowded: the default spread prefers the emptier zone but does not require it, so the
// move would not be sure to help.
func (s spread) imbalance(p *Placement) string {
	nodes, least := s.fewest()
	if len(nodes) == 0 {
		return ""
	}
	most, crowded := -1, ""
	for n, c := range s.node {
		if c > most || (c == most && n < crowded) {
			most, crowded = c, n
		}
	}
	if most-least >= 2 {
		return fmt.Sprintf("node %s holds %d members and node %s %d", crowded, most, nodes[0], least)
	}
	// The zone of the fewest nodes that holds the most voters: the worst the learner can land in.
	worst := -1
	for _, n := range nodes {
		if c := s.zone[p.Zones[n]]; c > worst {
			worst = c
		}
	}
	mostZone, crowdedZone := -1, ""
	for z, c := range s.zone {
		if c > mostZone || (c == mostZone && z < crowdedZone) {
			mostZone, crowdedZone = c, z
		}
	}
	if mostZone-worst >= 2 {
		return fmt.Sprintf("zone %s holds %d members and a node with room is in a zone holding %d", crowdedZone, mostZone, worst)
	}
	return ""
}

// rebalanceStep adds a learner when the voters of a settled cluster are spread so unevenly that one move would
// surely even them out (spread.imbalance): after the learner is promoted, the cluster has a voter more than
// specified and the scale-down step removes the one on the most crowded node (pickRemoval with a Placement).
// Only with Steward's default spread (obs.Placement set), one member at a time, never more voters than one over
// the spec, and with every member healthy (the steps before this one).
func rebalanceStep(spec Spec, obs Observation, members, voters []Member) (Action, bool) {
	p := obs.Placement
	if p == nil || len(voters) != spec.Replicas || len(voters) < 2 {
		return Action{}, false
	}
	s := countSpread(p, voters)
	why := s.imbalance(p)
	if why == "" {
		return Action{}, false
	}
	if len(obs.NewMemberNames) == 0 {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonRebalancing, Message: "no new member name"}, true
	}
	name := obs.NewMemberNames[0]
	var from Member
	for _, m := range s.mostCrowded(p, voters, obs.LeaderID) {
		if _, eligible := p.Zones[m.Node]; eligible {
			from = m
			break
		}
	}
	return Action{Kind: AddLearner, Members: []string{name}, PeerURL: withScheme(obs.PeerURL(name), newPeerURLScheme(spec, members)),
		Reason: etcdv1alpha1.ReasonRebalancing,
		Message: fmt.Sprintf("adding member %s as a learner on a node with fewer members, to move member %s off node %s once it has joined: %s",
			name, from.Name, from.Node, why)}, true
}
