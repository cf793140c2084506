package monitoring

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

var (
	promtoolOnce sync.Once
	promtoolPath string
	promtoolErr  error
)

// promtool returns the promtool of the Prometheus go.mod pins (tools.go keeps it required): `make promtool`'s
// bin/promtool-<version> when it is there (the unit tier and make verify build it first, outside go test's
// timeout), else one this test binary builds into a temporary directory, once.
func promtool(t *testing.T) string {
	t.Helper()
	promtoolOnce.Do(func() {
		if v := prometheusVersion(); v != "" {
			built := filepath.Join("..", "..", "bin", "promtool-"+v)
			if _, err := os.Stat(built); err == nil {
				promtoolPath, promtoolErr = filepath.Abs(built)
				return
			}
		}
		dir, err := os.MkdirTemp("", "steward-promtool-")
		if err != nil {
			promtoolErr = err
			return
		}
		promtoolPath = filepath.Join(dir, "promtool")
		start := time.Now()
		// The flags of `make promtool` and of the test bed's Prometheus build: they share compiled packages.
		cmd := exec.Command("go", "build", "-trimpath", "-o", promtoolPath, "github.com/prometheus/prometheus/cmd/promtool")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			promtoolErr = fmt.Errorf("go build promtool: %w\n%s", err, out)
			return
		}
		fmt.Fprintf(os.Stderr, "built promtool in %s\n", time.Since(start).Round(time.Second))
	})
	if promtoolErr != nil {
		t.Fatal(promtoolErr)
	}
	return promtoolPath
}

// prometheusVersion is the version of github.com/prometheus/prometheus go.mod requires.
func prometheusVersion() string {
	b, err := os.ReadFile("go.mod")
	if err != nil {
		return ""
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/prometheus/prometheus\s+(v\S+)`).FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

func TestMain(m *testing.M) {
	code := m.Run()
	if dir := filepath.Dir(promtoolPath); strings.Contains(dir, "steward-promtool-") {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "remove the test's promtool: %v\n", err)
		}
	}
	os.Exit(code)
}

func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPromtoolCheckRules: Prometheus loads the rules file and the chart's copy, and promtool's linter (duplicate
// rules, and so on) finds nothing.
func TestPromtoolCheckRules(t *testing.T) {
	out := runPromtool(t, "check", "rules", "--lint=all", "--lint-fatal", rulesFile, "../../charts/steward/files/prometheus-rules.yaml")
	t.Log(out)
}

// TestPromtoolTestRules runs the rules' unit tests (testdata/*.test.yaml) with promtool.
func TestPromtoolTestRules(t *testing.T) {
	files, err := filepath.Glob("testdata/*.test.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool test files: %v", err)
	}
	out := runPromtool(t, append([]string{"test", "rules"}, files...)...)
	if strings.Count(out, "SUCCESS") != len(files) {
		t.Errorf("promtool test rules did not report SUCCESS for each of %d files:\n%s", len(files), out)
	}
	t.Log(out)
}

// TestScrapeConfigs: Prometheus loads config/prometheus/scrape-configs.yaml (the scrape configs for a Prometheus
// without the Prometheus Operator) and the rules it names, and its jobs are the ones the rules select.
// The operator's job scrapes over HTTPS with the token of Prometheus's ServiceAccount, which promtool wants to
// find: it checks a copy whose token is a file here.
func TestScrapeConfigs(t *testing.T) {
	const file = "../../config/prometheus/scrape-configs.yaml"
	const podToken = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	copied := strings.ReplaceAll(string(readFile(t, file)), podToken, token)
	for name, data := range map[string][]byte{"token": []byte("t"), "scrape-configs.yaml": []byte(copied), "rules.yaml": readFile(t, "../../config/prometheus/rules.yaml")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Log(runPromtool(t, "check", "config", filepath.Join(dir, "scrape-configs.yaml")))
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			HonorLabels   bool   `yaml:"honor_labels"`
			Scheme        string `yaml:"scheme"`
			Authorization struct {
				CredentialsFile string `yaml:"credentials_file"`
			} `yaml:"authorization"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(readFile(t, file), &cfg); err != nil {
		t.Fatal(err)
	}
	jobs := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		jobs[sc.JobName] = sc.HonorLabels
		if sc.JobName == operatorJob && (sc.Scheme != "https" || sc.Authorization.CredentialsFile != podToken) {
			t.Errorf("job %s: scheme %q, token %q; the operator serves its metrics over HTTPS to a token allowed to get /metrics", sc.JobName, sc.Scheme, sc.Authorization.CredentialsFile)
		}
	}
	if honor, ok := jobs[operatorJob]; !ok || !honor {
		t.Errorf("no job %q with honor_labels (the steward_* series' namespace label must win)", operatorJob)
	}
	if _, ok := jobs[etcdJob]; !ok {
		t.Errorf("no job %q", etcdJob)
	}
}
