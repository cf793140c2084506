package etcdcluster

import (
	"regexp"
	"testing"

	"steward.dev/steward/internal/plan"
)

func TestNewMemberNames(t *testing.T) {
	taken := map[string]bool{"db-aaaaa": true}
	names := newMemberNames("db", 50, taken)
	seen := map[string]bool{"db-aaaaa": true}
	valid := regexp.MustCompile(`^db-[a-z0-9]{5}$`)
	for _, n := range names {
		if !valid.MatchString(n) {
			t.Errorf("name %q is not <cluster>-<5 characters>", n)
		}
		if seen[n] {
			t.Errorf("name %q handed out twice or already taken", n)
		}
		seen[n] = true
	}
	if len(names) != 50 {
		t.Fatalf("got %d names, want 50", len(names))
	}
}

func TestLowestVersion(t *testing.T) {
	tests := map[string]struct {
		in   []string
		want string
	}{
		"none":                {nil, ""},
		"one":                 {[]string{"3.6.16"}, "3.6.16"},
		"mixed minors":        {[]string{"3.6.16", "3.5.35"}, "3.5.35"},
		"numeric not lexical": {[]string{"3.5.9", "3.5.10"}, "3.5.9"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			set := map[string]bool{}
			for _, v := range tt.in {
				set[v] = true
			}
			if got := lowestVersion(set); got != tt.want {
				t.Errorf("lowestVersion(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestBootstrapComplete(t *testing.T) {
	initial := map[string]string{"a": "u-a", "b": "u-b"}
	member := func(name string, started bool) *plan.Member {
		return &plan.Member{Name: name, InitialCluster: initial, InitialState: "new", Started: started}
	}
	tests := map[string]struct {
		members   map[string]*plan.Member
		reachable bool
		want      bool
	}{
		"all started":               {map[string]*plan.Member{"a": member("a", true), "b": member("b", true)}, true, true},
		"one not started":           {map[string]*plan.Member{"a": member("a", true), "b": member("b", false)}, true, false},
		"one missing":               {map[string]*plan.Member{"a": member("a", true)}, true, false},
		"etcd unreachable":          {map[string]*plan.Member{"a": member("a", true), "b": member("b", true)}, false, false},
		"no bootstrap member known": {map[string]*plan.Member{"x": {Name: "x", Started: true}}, true, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var members []plan.Member
			for _, m := range tt.members {
				members = append(members, *m)
			}
			if got := plan.BootstrapComplete(members, tt.reachable); got != tt.want {
				t.Errorf("bootstrapComplete = %v, want %v", got, tt.want)
			}
		})
	}
}
