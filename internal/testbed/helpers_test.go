package testbed

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestSplitRule(t *testing.T) {
	tests := map[string]struct {
		rule string
		want []string
	}{
		"plain": {rule: "FORWARD -s 10.244.0.0/24 -j DROP", want: []string{"FORWARD", "-s", "10.244.0.0/24", "-j", "DROP"}},
		"quoted comment": {rule: `CNI-HOSTPORT-DNAT -m comment --comment "dnat name: \steward\" -j X`,
			want: []string{"CNI-HOSTPORT-DNAT", "-m", "comment", "--comment", `dnat name: \steward\`, "-j", "X"}},
		"extra spaces": {rule: "  A   B ", want: []string{"A", "B"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := splitRule(tt.rule); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("splitRule(%q) = %q, want %q", tt.rule, got, tt.want)
			}
		})
	}
}

func TestUnescapeMount(t *testing.T) {
	tests := map[string]string{
		`/var/lib/x`:             "/var/lib/x",
		`/var/lib/with\040space`: "/var/lib/with space",
		`/tab\011end`:            "/tab\tend",
		`/trailing\`:             `/trailing\`,
	}
	for in, want := range tests {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHashTreeChangesWithContent(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module a\n")
	first, err := hashTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := hashTree(dir)
	if first != again {
		t.Fatal("hash of unchanged tree changed")
	}
	write("go.sum", "x\n")
	second, _ := hashTree(dir)
	write("go.mod", "module b\n")
	third, _ := hashTree(dir)
	if first == second || second == third {
		t.Fatalf("hash did not follow content: %s %s %s", first, second, third)
	}
}

// TestNodeLayout checks the nodes Options describe: node 0 keeps the single-node test bed's names and addresses
// (the playground's and every existing user's), the others get their own, zones go round, the last
// DedicatedNodes carry the taint, and options outside the ranges are refused.
func TestNodeLayout(t *testing.T) {
	tests := map[string]struct {
		opts    Options
		want    []Node
		wantErr bool
	}{
		"default: one node": {opts: Options{}, want: []Node{
			{Name: NodeName, IP: NodeIP, PodCIDR: PodCIDR, Zone: "zone-a"}}},
		"four nodes, three zones, three dedicated": {opts: Options{Nodes: 4, Zones: 3, DedicatedNodes: 3}, want: []Node{
			{Name: "steward-node", IP: "10.245.0.1", PodCIDR: "10.244.0.0/24", Zone: "zone-a"},
			{Name: "steward-node-2", IP: "10.245.0.2", PodCIDR: "10.244.1.0/24", Zone: "zone-b", Dedicated: true, index: 1},
			{Name: "steward-node-3", IP: "10.245.0.3", PodCIDR: "10.244.2.0/24", Zone: "zone-c", Dedicated: true, index: 2},
			{Name: "steward-node-4", IP: "10.245.0.4", PodCIDR: "10.244.3.0/24", Zone: "zone-a", Dedicated: true, index: 3}}},
		"too many nodes":           {opts: Options{Nodes: 10}, wantErr: true},
		"more zones than nodes":    {opts: Options{Nodes: 2, Zones: 3}, wantErr: true},
		"every node dedicated":     {opts: Options{Nodes: 3, DedicatedNodes: 3}, wantErr: true},
		"negative dedicated nodes": {opts: Options{Nodes: 3, DedicatedNodes: -1}, wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tt.opts.ModuleRoot, tt.opts.CacheDir = t.TempDir(), t.TempDir() // no go command, no home needed
			opts, err := tt.opts.withDefaults()
			if (err != nil) != tt.wantErr {
				t.Fatalf("withDefaults: %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got := nodesOf(opts); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("nodes = %+v, want %+v", got, tt.want)
			}
		})
	}
}
