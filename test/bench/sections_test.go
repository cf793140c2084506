package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestPageSectionsHaveTemplates checks benchmarks.md against sections.md.tmpl: every section of the page is
// written from a template of its name, and the page starts with the header a new page gets.
func TestPageSectionsHaveTemplates(t *testing.T) {
	data, err := os.ReadFile("../../docs/development/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	header, err := renderText("header", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc, header) {
		t.Errorf("benchmarks.md does not start with the header template:\n%s", header)
	}
	if sectionTemplates.Lookup("stamp") == nil {
		t.Error("no stamp template")
	}
	markers := regexp.MustCompile(`<!-- bench:([a-z-]+) -->`).FindAllStringSubmatch(doc, -1)
	if len(markers) == 0 {
		t.Fatal("no bench sections in benchmarks.md")
	}
	for _, m := range markers {
		if sectionTemplates.Lookup(m[1]) == nil {
			t.Errorf("section %s of benchmarks.md has no template in sections.md.tmpl", m[1])
		}
	}
}
