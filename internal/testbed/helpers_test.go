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
