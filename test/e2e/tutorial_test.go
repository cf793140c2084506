package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
)

// tutorialPage is the getting-started page whose shell blocks TestGettingStartedTutorial runs.
const tutorialPage = "docs/getting-started.md"

// shellBlock is one fenced block of a page: its text and the line its fence opens on.
type shellBlock struct {
	line int
	text string
}

// shellBlocks returns the blocks of markdown fenced as ```sh, in order. Other fences (```shell, ```yaml, ...)
// are not run: the page uses ```shell for what a reader does that the test sets up itself.
func shellBlocks(markdown string) ([]shellBlock, error) {
	var blocks []shellBlock
	var cur *shellBlock
	var body []string
	s := bufio.NewScanner(strings.NewReader(markdown))
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```sh":
			cur, body = &shellBlock{line: n}, nil
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.text = strings.Join(body, "\n") + "\n"
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			body = append(body, line)
		}
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("the block opened on line %d is not closed", cur.line)
	}
	return blocks, nil
}

// tutorialBlocks returns the ```sh blocks of the tutorial page, failing t when the page has an unclosed block or
// too few to be the tutorial (a fence spelt otherwise would leave the test running nothing).
func tutorialBlocks(t *testing.T) []shellBlock {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(framework.RepoRoot(t), tutorialPage))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := shellBlocks(string(page))
	if err != nil {
		t.Fatalf("%s: %v", tutorialPage, err)
	}
	if len(blocks) < 5 {
		t.Fatalf("%s has %d sh blocks; the tutorial has more", tutorialPage, len(blocks))
	}
	return blocks
}

// tutorialKubeconfig writes the test bed's admin kubeconfig with ns as its current context's namespace, so that
// the page's commands, which name no namespace, run in the test's.
func tutorialKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(framework.Bed.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		t.Fatalf("kubeconfig %s has no current context %q", framework.Bed.Kubeconfig, cfg.CurrentContext)
	}
	ctx.Namespace = ns
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGettingStartedTutorial runs the ```sh blocks of docs/getting-started.md, verbatim and in order, each with
// bash -euo pipefail, in a namespace of its own watched by its own operator: PATH has the test bed's kubectl,
// kubectl-steward built from this tree and the etcdctl of the default etcd release, as the page's setup tells a
// reader to have; KUBECONFIG is the admin's with the test's namespace as the current one. A block that fails
// fails the test with its text and output, and the blocks after it do not run.
func TestGettingStartedTutorial(t *testing.T) {
	parallel(t)
	blocks := tutorialBlocks(t)
	ns := framework.NewNamespace(t, "tutorial")
	framework.StartOperator(t, ns)
	env := append(os.Environ(),
		"KUBECONFIG="+tutorialKubeconfig(t, ns),
		"PATH="+strings.Join([]string{filepath.Dir(framework.PluginBinary(t)), filepath.Dir(framework.Bed.KubectlPath()),
			framework.Bed.EtcdBinDir(testbed.EtcdVersions[0]), os.Getenv("PATH")}, string(os.PathListSeparator)))
	dir := t.TempDir()
	for i, b := range blocks {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", b.text)
		cmd.Env, cmd.Dir = env, dir
		began := time.Now()
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("block %d of %d (%s:%d) failed after %s: %v\n--- block\n%s--- output\n%s", i+1, len(blocks),
				tutorialPage, b.line, time.Since(began).Round(time.Second), err, b.text, out)
		}
		t.Logf("block %d of %d (%s:%d), %s:\n%s%s", i+1, len(blocks), tutorialPage, b.line,
			time.Since(began).Round(time.Second), indent("$ ", b.text), indent("  ", string(out)))
	}
}

// indent puts prefix before every line of s.
func indent(prefix, s string) string {
	if s == "" {
		return ""
	}
	lines := strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "") + "\n"
}
