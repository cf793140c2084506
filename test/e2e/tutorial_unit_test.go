package e2e

import (
	"reflect"
	"strings"
	"testing"
)

// TestShellBlocks: only ```sh fences are taken, verbatim, with the line they open on; an unclosed one is an
// error. Runs without the test bed.
func TestShellBlocks(t *testing.T) {
	for _, tt := range []struct {
		name, markdown string
		want           []shellBlock
		wantErr        bool
	}{
		{name: "none", markdown: "# Title\n\ntext\n"},
		{name: "sh blocks in order, other fences skipped",
			markdown: "intro\n```sh\necho one\n  indented | cat\n```\n```shell\nexport X=1\n```\n```yaml\na: b\n```\n\n```sh\necho two\n```\n",
			want:     []shellBlock{{line: 2, text: "echo one\n  indented | cat\n"}, {line: 13, text: "echo two\n"}}},
		{name: "heredoc with a yaml body", markdown: "```sh\ncat <<'EOF'\nkind: X\nEOF\n```\n",
			want: []shellBlock{{line: 1, text: "cat <<'EOF'\nkind: X\nEOF\n"}}},
		{name: "unclosed", markdown: "```sh\necho one\n", wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := shellBlocks(tt.markdown)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestTutorialPageParses: the page TestGettingStartedTutorial runs has its blocks closed, and none of them names
// a namespace (the test runs them in its own through the kubeconfig). Runs without the test bed.
func TestTutorialPageParses(t *testing.T) {
	for _, b := range tutorialBlocks(t) {
		for _, flag := range []string{" -n ", "--namespace", " -A", "--all-namespaces"} {
			if strings.Contains(b.text, flag) {
				t.Errorf("%s:%d: the block names a namespace (%q); the test runs the page in its own:\n%s", tutorialPage, b.line, flag, b.text)
			}
		}
	}
}
