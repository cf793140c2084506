package main

import (
	"bytes"
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
