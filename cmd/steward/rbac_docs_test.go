package main

import (
	"os"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestSecurityDocListsTheRole: the permissions table of docs/operations/security.md and the generated ClusterRole
// (config/rbac/role.yaml, from the +kubebuilder:rbac markers) grant the same verbs on the same resources, so
// that what the docs say Steward may do, and may not, cannot drift from what it is given.
func TestSecurityDocListsTheRole(t *testing.T) {
	raw, err := os.ReadFile("../../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(raw, &role); err != nil {
		t.Fatal(err)
	}
	granted := map[string]map[string]bool{}
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					add(granted, g, res, v)
				}
			}
		}
	}
	doc, err := os.ReadFile("../../docs/operations/security.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := permissionsTable(t, string(doc))
	for _, key := range keys(granted, documented) {
		if g, d := verbs(granted[key]), verbs(documented[key]); g != d {
			t.Errorf("%s: the role grants [%s], docs/operations/security.md lists [%s]", key, g, d)
		}
	}
}

// permissionsTable reads the rows of the table under "## Permissions": API group, resources, verbs.
func permissionsTable(t *testing.T, doc string) map[string]map[string]bool {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## Permissions\n")
	if !ok {
		t.Fatal("docs/operations/security.md has no Permissions section")
	}
	_, table, ok := strings.Cut(section, "| API group | resource | verbs |")
	if !ok {
		t.Fatal("docs/operations/security.md: no permissions table")
	}
	out := map[string]map[string]bool{}
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("row %q has no verbs column", line)
		}
		group := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if group == "core" {
			group = ""
		}
		for _, res := range strings.Split(cells[2], ",") {
			for _, v := range strings.Split(cells[3], ",") {
				add(out, group, strings.Trim(strings.TrimSpace(res), "`"), strings.TrimSpace(v))
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/operations/security.md: empty permissions table")
	}
	return out
}

func add(m map[string]map[string]bool, group, resource, verb string) {
	key := resource
	if group != "" {
		key = resource + "." + group
	}
	if m[key] == nil {
		m[key] = map[string]bool{}
	}
	m[key][verb] = true
}

func keys(ms ...map[string]map[string]bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

func verbs(set map[string]bool) string {
	var out []string
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
