package chart

import (
	"strings"
	"testing"

	yaml3 "sigs.k8s.io/yaml/goyaml.v3"
)

// TestValuesAreDocumented: every value in values.yaml carries a "# --" comment (the helm-docs convention users
// read with `helm show values`), or is a group whose every member does. A value added without a word about it
// fails here; the schema (which refuses values.yaml's own keys if it lacks them) keeps the two in step.
func TestValuesAreDocumented(t *testing.T) {
	var doc yaml3.Node
	if err := yaml3.Unmarshal(readRepoFile(t, "charts/steward/values.yaml"), &doc); err != nil {
		t.Fatalf("parse values.yaml: %v", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml3.MappingNode {
		t.Fatal("values.yaml is not a mapping")
	}
	var check func(prefix string, m *yaml3.Node)
	check = func(prefix string, m *yaml3.Node) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			key, value := m.Content[i], m.Content[i+1]
			name := prefix + key.Value
			if strings.Contains(key.HeadComment, "# -- ") {
				continue
			}
			if value.Kind == yaml3.MappingNode && len(value.Content) > 0 {
				check(name+".", value)
				continue
			}
			t.Errorf("values.yaml: %s has no \"# -- \" comment saying what it does", name)
		}
	}
	check("", doc.Content[0])
}
