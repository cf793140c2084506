package etcdcluster

import (
	"errors"
	"sort"
	"testing"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// bytesReader hands out fuzz input a byte at a time; zeros once it runs out.
type bytesReader []byte

func (b *bytesReader) next() byte {
	if len(*b) == 0 {
		return 0
	}
	c := (*b)[0]
	*b = (*b)[1:]
	return c
}

// FuzzAssemble feeds assemble arbitrary answers from etcd (member lists with duplicate, empty, foreign and
// hostile names, peer URLs of known, unknown and malformed members, repeated IDs, status answers that
// contradict the list) next to the Pods and PVCs Steward created, and checks what the planner is given:
//   - every member name appears once, sorted;
//   - every etcd member ID belongs to exactly one member, and nameOf agrees with it: no member is mapped to two
//     names and no name to two IDs;
//   - a member etcd lists without a name, whose peer URL names no member of this cluster, is plan.StrayMemberName(id);
//   - a status answer makes a member healthy only if it came from that member (its ID is the member's ID);
//   - status and conditions are computed without panicking and name at most one leader.
func FuzzAssemble(f *testing.F) {
	f.Add([]byte{3, 3, 1, 0, 0, 2, 1, 0, 3, 2, 0, 1, 1, 1, 1, 1, 2, 1, 1, 1, 3, 1})
	f.Add([]byte{2, 4, 1, 0, 0, 1, 0, 0, 2, 3, 0, 4, 3, 0, 1, 1, 4, 4})
	f.Add([]byte{0, 6, 1, 4, 0, 1, 5, 0, 2, 6, 1, 2, 3, 7, 0, 3, 4, 3, 0, 5, 2})
	f.Add([]byte{1, 2, 5, 8, 0, 0, 5, 9, 0, 0, 1, 5, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := bytesReader(data)
		c := testCluster()
		ours := []string{"db-aaaaa", "db-bbbbb", "db-ccccc"}
		pods, pvcs := fixture(c, ours, int(in.next()%4))
		// Names etcd may report: ours, empty (not started), another cluster's, a name that looks like Steward's
		// fallback, a dotted name, one Steward recognises by prefix but never created.
		namePool := []string{"", ours[0], ours[1], ours[2], "stranger", "unknown-1", "unknown:2", "unknown:3", "db-aaaaa.evil", "db-zzzzz"}
		urlPool := []string{
			resources.PeerURL(c, ours[0], testOpts), resources.PeerURL(c, ours[1], testOpts), resources.PeerURL(c, ours[2], testOpts),
			resources.PeerURL(c, "db-zzzzz", testOpts), resources.PeerURL(c, "db-aaaaa.evil", testOpts), "http://stranger:2380", "", "::",
		}
		view := etcd.ClusterView{Statuses: map[string]etcd.Status{}}
		n := int(in.next() % 7)
		for i := 0; i < n; i++ {
			m := etcd.Member{ID: uint64(1 + in.next()%6), Name: namePool[int(in.next())%len(namePool)], IsLearner: in.next()%4 == 0}
			for k := int(in.next() % 3); k > 0; k-- {
				m.PeerURLs = append(m.PeerURLs, urlPool[int(in.next())%len(urlPool)])
			}
			view.Members = append(view.Members, m)
		}
		sort.SliceStable(view.Members, func(i, j int) bool { return view.Members[i].ID < view.Members[j].ID })
		for i := range pods {
			b := in.next()
			if b%3 == 0 {
				continue // no answer asked
			}
			s := etcd.Status{MemberID: uint64(1 + in.next()%6), LeaderID: uint64(in.next() % 7), Version: "3.6.16"}
			if b%3 == 2 {
				s = etcd.Status{Err: errors.New("deadline exceeded")}
			}
			view.Statuses[resources.Scheme(c)+"://"+pods[i].Status.PodIP+":2379"] = s
		}
		if in.next()%5 == 0 {
			view.ListErr = errors.New("no quorum")
			view.Members = nil
		}

		obs := assemble(c, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)

		byName := map[string]plan.Member{}
		byID := map[uint64]string{}
		for i, m := range obs.plan.Members {
			if _, dup := byName[m.Name]; dup {
				t.Fatalf("member %q twice: %+v", m.Name, obs.plan.Members)
			}
			if i > 0 && obs.plan.Members[i-1].Name > m.Name {
				t.Fatalf("members not sorted: %+v", obs.plan.Members)
			}
			byName[m.Name] = m
			if m.InEtcd {
				if other, dup := byID[m.ID]; dup {
					t.Fatalf("etcd member %x named both %q and %q", m.ID, other, m.Name)
				}
				byID[m.ID] = m.Name
			}
		}
		for _, em := range view.Members {
			name, ok := byID[em.ID]
			if !ok {
				t.Fatalf("etcd member %x (%q) missing from %+v", em.ID, em.Name, obs.plan.Members)
			}
			if obs.nameOf[em.ID] != name {
				t.Fatalf("nameOf[%x] = %q, member is %q", em.ID, obs.nameOf[em.ID], name)
			}
		}
		for _, em := range uniqueByID(view.Members) {
			if em.Name != "" {
				continue
			}
			known := false
			for _, u := range em.PeerURLs {
				for _, n := range []string{ours[0], ours[1], ours[2], "db-zzzzz"} {
					known = known || u == resources.PeerURL(c, n, testOpts)
				}
			}
			if want := plan.StrayMemberName(em.ID); !known && byID[em.ID] != want && byName[want].ID == em.ID {
				t.Fatalf("nameless foreign member %x named %q, want %q", em.ID, byID[em.ID], want)
			}
		}
		for name, m := range byName {
			if !m.Healthy {
				continue
			}
			s, ok := obs.statusOf[name]
			if !ok || !s.Healthy() {
				t.Fatalf("%s healthy without a healthy answer of its own", name)
			}
			if m.InEtcd && s.MemberID != m.ID {
				t.Fatalf("%s (etcd member %x) made healthy by the answer of member %x", name, m.ID, s.MemberID)
			}
		}

		leaders := 0
		for _, ms := range memberStatuses(c, obs, testOpts) {
			if ms.Role == "Leader" {
				leaders++
			}
		}
		if leaders > 1 {
			t.Fatalf("%d leaders in status", leaders)
		}
		_ = conditions(obs, plan.Next(specOf(c, testOpts), obs.plan), nil)
	})
}

// uniqueByID keeps the first entry of each ID (etcd's list is sorted by ID before assemble sees it).
func uniqueByID(ms []etcd.Member) []etcd.Member {
	seen := map[uint64]bool{}
	var out []etcd.Member
	for _, m := range ms {
		if !seen[m.ID] {
			seen[m.ID] = true
			out = append(out, m)
		}
	}
	return out
}

// FuzzClusterVersionMark: the cluster version and commit index come from etcd. The mark never goes negative,
// always names a version that parses, keeps the previous mark for an unreadable answer, and is only created
// from nothing at index 0 (Steward created the cluster at that version).
func FuzzClusterVersionMark(f *testing.F) {
	f.Add("3.5.0", int64(0), "3.6.0", uint64(500), true)
	f.Add("3.0.0", int64(7), "3.6.0", uint64(500), true)
	f.Add("", int64(0), "not_decided", uint64(0), false)
	f.Add("3.6.0", int64(1), "3.7.0", uint64(1)<<63, true)
	f.Fuzz(func(t *testing.T, prevVersion string, prevIndex int64, cv string, commit uint64, hasPrev bool) {
		var prev *etcdv1alpha1.ClusterVersionMark
		if hasPrev {
			if _, err := plan.ParseVersion(prevVersion); err != nil || prevIndex < 0 {
				return // Steward only ever stores marks it made
			}
			prev = &etcdv1alpha1.ClusterVersionMark{Version: prevVersion, RaftIndex: prevIndex}
		}
		got := clusterVersionMark(prev, cv, commit)
		if _, err := plan.ParseVersion(cv); err != nil {
			if got != prev {
				t.Fatalf("unreadable %q replaced the mark %+v with %+v", cv, prev, got)
			}
			return
		}
		if got == nil {
			t.Fatalf("no mark for readable version %q", cv)
		}
		if _, err := plan.ParseVersion(got.Version); err != nil || got.RaftIndex < 0 {
			t.Fatalf("mark %+v from %+v, %q, %d", got, prev, cv, commit)
		}
		if prev == nil && got.RaftIndex != 0 {
			t.Fatalf("first mark %+v not at 0", got)
		}
	})
}

// FuzzLowestVersion: the version status reports as current is one the members reported, and no reported
// version that parses is lower.
func FuzzLowestVersion(f *testing.F) {
	f.Add("3.6.16", "3.5.35", "3.5.9")
	f.Add("3.5.10", "3.5.9", "garbage")
	f.Add("", "3.6.0", "v3.6.0")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		set := map[string]bool{a: true, b: true, c: true}
		got := lowestVersion(set)
		if !set[got] {
			t.Fatalf("lowestVersion(%v) = %q, not one of them", set, got)
		}
		gv, gerr := plan.ParseVersion(got)
		for s := range set {
			if v, err := plan.ParseVersion(s); err == nil && gerr == nil && v.Less(gv) {
				t.Fatalf("lowestVersion(%v) = %q, but %q is lower", set, got, s)
			}
		}
		if lowestVersion(set) != got {
			t.Fatalf("lowestVersion(%v) is not deterministic", set)
		}
	})
}
