package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// BuildOnce runs build the first time a test asks for the tool name and returns its result to every test; a
// failed build fails each test that needs the tool.
func BuildOnce(t *testing.T, name string, build func() (string, error)) string {
	t.Helper()
	v, _ := builds.LoadOrStore(name, &toolBuild{})
	b := v.(*toolBuild)
	b.once.Do(func() { b.path, b.err = build() })
	if b.err != nil {
		t.Fatalf("build %s: %v", name, b.err)
	}
	return b.path
}

// MustHelm runs Helm like Helm and fails t if it fails.
func MustHelm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := Helm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// PluginBinary builds kubectl-steward once per run.
func PluginBinary(t *testing.T) string {
	t.Helper()
	return BuildOnce(t, "kubectl-steward", func() (string, error) {
		dir, err := os.MkdirTemp("", "kubectl-steward-")
		if err != nil {
			return "", err
		}
		path := filepath.Join(dir, "kubectl-steward")
		cmd := exec.Command("go", "build", "-o", path, "./cmd/kubectl-steward")
		cmd.Dir = RepoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", errors.Join(err, errors.New(string(out)))
		}
		return path, nil
	})
}

// builds holds one *toolBuild per tool name: what BuildOnce built, or why it could not.
var builds sync.Map

type toolBuild struct {
	once sync.Once
	path string
	err  error
}

// Helm runs Helm against the test bed from the repository root; it returns the output and the error, which
// the caller expects or not.
func Helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Dir = RepoRoot(t)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+Bed.Kubeconfig, "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(),
		"HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// helmBinary builds the Helm the chart is tested with (`make helm`: the version test/chart/go.mod pins) once per
// run.
func helmBinary(t *testing.T) string {
	t.Helper()
	return BuildOnce(t, "helm", func() (string, error) {
		// LOCALBIN named here, because a `make test LOCALBIN=...` passes its own to this make through MAKEFLAGS, and
		// the Helm would land there rather than in bin/.
		bin := filepath.Join(RepoRoot(t), "bin")
		cmd := exec.Command("make", "--no-print-directory", "helm", "LOCALBIN="+bin)
		cmd.Dir = RepoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("make helm: %w\n%s", err, out)
		}
		matches, _ := filepath.Glob(filepath.Join(bin, "helm-v*"))
		if len(matches) != 1 {
			return "", fmt.Errorf("make helm left %v in %s, want one helm-v*", matches, bin)
		}
		return matches[0], nil
	})
}
