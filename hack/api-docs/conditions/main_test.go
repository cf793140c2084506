package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteConstant(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    constant
		want string
	}{{
		name: "reason",
		c:    constant{name: "ReasonJobFailed", value: "JobFailed", doc: "ReasonJobFailed: the Job failed (killed,\ndeadline exceeded)."},
		want: "- **`JobFailed`** (reason): the Job failed (killed,\n  deadline exceeded).\n",
	}, {
		name: "condition type",
		c:    constant{name: "ConditionReady", value: "Ready", doc: "ConditionReady is True when the schedule is valid."},
		want: "- **`Ready`** (condition type) is True when the schedule is valid.\n",
	}, {
		name: "a part of the block heads the comment",
		c:    constant{name: "ReasonNotContinuous", value: "NotContinuous", doc: "Point-in-time backups.\nReasonNotContinuous: not continuous."},
		want: "\nPoint-in-time backups.\n\n- **`NotContinuous`** (reason): not continuous.\n",
	}, {
		name: "comment that does not start with the name",
		c:    constant{name: "ReasonX", value: "X", doc: "Something <cluster> says."},
		want: "- **`X`** (reason): Something \\<cluster> says.\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			writeConstant(&b, tc.c)
			if got := b.String(); got != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestParseRefusesUndocumented(t *testing.T) {
	for _, tc := range []struct {
		name, src, wantErr string
	}{{
		name:    "constant without doc",
		src:     "package p\n\n// Reasons of X.\nconst (\n\tReasonA = \"A\"\n)\n",
		wantErr: "ReasonA has no doc comment",
	}, {
		name:    "block without doc",
		src:     "package p\n\nconst (\n\t// ReasonA: a.\n\tReasonA = \"A\"\n)\n",
		wantErr: "without a doc comment",
	}, {
		name:    "not a string",
		src:     "package p\n\n// Reasons of X.\nconst (\n\t// ReasonA: a.\n\tReasonA = 1\n)\n",
		wantErr: "not a string literal",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "conditions.go")
			if err := os.WriteFile(path, []byte(tc.src), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := parse(path)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("parse: got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestAPIConditions reads the real conditions.go: every constant there must make it into the reference.
func TestAPIConditions(t *testing.T) {
	var b bytes.Buffer
	if err := write(&b, "../../../api/v1alpha1/conditions.go"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Condition types of EtcdCluster status", "- **`Available`** (condition type) is True", "- **`RoleConflict`** (reason):"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestReasonsOnlyInAPI keeps one vocabulary: a reason a user reads (in a condition, an Event, a metric label) is
// declared in api/v1alpha1/conditions.go, with its doc comment, and so in the API reference. A Reason constant
// declared anywhere else in the module's code would be missing from the reference, or a second name for one.
func TestReasonsOnlyInAPI(t *testing.T) {
	root := "../../.."
	api := filepath.Join(root, "api", "v1alpha1")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Nested modules (the test bed's third-party sources, test/bundle, ...) are not Steward's code.
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "third_party" || exists(filepath.Join(path, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == api {
			return nil
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				for _, name := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(name.Name, "Reason") {
						t.Errorf("%s: %s: declare reasons in api/v1alpha1/conditions.go, with a doc comment saying when it is set", strings.TrimPrefix(path, root+"/"), name.Name)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
