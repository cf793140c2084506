// Command conditions writes the "Condition types and reasons" section of docs/reference/api.md (make api-docs)
// from the constants of api/v1alpha1/conditions.go and their doc comments: crd-ref-docs documents types and
// fields only, and a reason a user reads in `kubectl get -o yaml` deserves the same reference as a field.
package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"strconv"
	"strings"
)

func main() {
	src := "api/v1alpha1/conditions.go"
	if len(os.Args) > 1 {
		src = os.Args[1]
	}
	out := bufio.NewWriter(os.Stdout)
	if err := write(out, src); err != nil {
		fmt.Fprintf(os.Stderr, "conditions: %v\n", err)
		os.Exit(1)
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintf(os.Stderr, "conditions: %v\n", err)
		os.Exit(1)
	}
}

// constant is one condition type or reason: its Go name, its value and its doc comment.
type constant struct {
	name, value, doc string
}

// group is one const block: what its doc comment says the constants are for, and the constants.
type group struct {
	doc       string
	constants []constant
}

func write(w io.Writer, path string) error {
	groups, err := parse(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n## Condition types and reasons\n\n")
	fmt.Fprintf(w, "The `type` and `reason` values of the conditions in each kind's `status.conditions`, from `%s`.\n", path)
	for _, g := range groups {
		title, rest := firstSentence(g.doc)
		fmt.Fprintf(w, "\n### %s\n\n", strings.TrimSuffix(title, "."))
		if rest != "" {
			fmt.Fprintf(w, "%s\n\n", prose(rest))
		}
		for _, c := range g.constants {
			writeConstant(w, c)
		}
	}
	return nil
}

// parse reads the string constants of the file's const blocks, in their order.
func parse(path string) ([]group, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	var groups []group
	for _, decl := range file.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		g := group{doc: strings.TrimSpace(gen.Doc.Text())}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					return nil, fmt.Errorf("%s: %s has no value of its own", fset.Position(name.Pos()), name.Name)
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return nil, fmt.Errorf("%s: %s is not a string literal", fset.Position(name.Pos()), name.Name)
				}
				value, err := strconv.Unquote(lit.Value)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", fset.Position(name.Pos()), name.Name, err)
				}
				if strings.TrimSpace(vs.Doc.Text()) == "" {
					return nil, fmt.Errorf("%s: %s has no doc comment: say what it means to a user", fset.Position(name.Pos()), name.Name)
				}
				g.constants = append(g.constants, constant{name: name.Name, value: value, doc: strings.TrimSpace(vs.Doc.Text())})
			}
		}
		if g.doc == "" {
			return nil, fmt.Errorf("%s: a const block without a doc comment: say which kind's conditions it holds", fset.Position(gen.Pos()))
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// writeConstant writes one constant as a list item that starts with its value. A doc comment starts with the
// constant's name ("ReasonX: ...", "ConditionX is True when ..."); lines before the one that does head a part of
// the block ("Point-in-time backups (spec.pointInTime).") and are written as a paragraph of their own.
func writeConstant(w io.Writer, c constant) {
	doc := prose(c.doc)
	if i := strings.Index(doc, c.name); i > 0 && doc[i-1] == '\n' {
		fmt.Fprintf(w, "\n%s\n\n", strings.TrimSpace(doc[:i]))
		doc = doc[i:]
	}
	what := "constant"
	switch {
	case strings.HasPrefix(c.name, "Condition"):
		what = "condition type"
	case strings.HasPrefix(c.name, "Reason"):
		what = "reason"
	}
	head := fmt.Sprintf("**`%s`** (%s)", c.value, what)
	switch {
	case strings.HasPrefix(doc, c.name+":"):
		doc = head + ":" + strings.TrimPrefix(doc, c.name+":")
	case strings.HasPrefix(doc, c.name+" "):
		doc = head + strings.TrimPrefix(doc, c.name)
	default:
		doc = head + ": " + doc
	}
	fmt.Fprintf(w, "- %s\n", strings.ReplaceAll(doc, "\n", "\n  "))
}

// firstSentence splits a doc comment after its first sentence.
func firstSentence(doc string) (string, string) {
	doc = strings.Join(strings.Fields(doc), " ")
	if i := strings.Index(doc, ". "); i >= 0 {
		return doc[:i+1], strings.TrimSpace(doc[i+2:])
	}
	return doc, ""
}

// prose makes comment text Markdown as the templates do: a '<' would open an HTML tag, a '*' emphasis.
func prose(s string) string {
	return strings.NewReplacer("<", `\<`, "*", `\*`).Replace(s)
}
