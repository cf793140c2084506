package monitoring

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"go.yaml.in/yaml/v3"
)

const (
	// rulesFile is the one source of the alerting rules; the tests run in test/monitoring.
	rulesFile = "../../config/prometheus/rules.yaml"
	// runbookBase is where every alert's runbook_url points, followed by "#" and the alert's name in lower case.
	runbookBase = "https://github.com/steward-dev/steward/blob/main/docs/operations/alerts-and-runbooks.md"
	// The jobs the rules select: etcd's metrics from the member Pods, Steward's from the operator.
	etcdJob     = "steward-etcd"
	operatorJob = "steward"
)

// loadRules parses a rules file as Prometheus does when it loads it: unknown fields, invalid PromQL and
// annotation templates that do not parse are errors.
func loadRules(t *testing.T, file string) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, promqlParser, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, err := range errs {
		t.Errorf("load %s: %v", file, err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatalf("%s holds no rule group", file)
	}
	return groups
}

// alertNames returns the names of the alerts of the rules file, each once, in file order.
func alertNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, g := range loadRules(t, rulesFile).Groups {
		for _, r := range g.Rules {
			if r.Alert != "" && !slices.Contains(names, r.Alert) {
				names = append(names, r.Alert)
			}
		}
	}
	return names
}

// TestRulesFollowTheConventions: every alert has a severity, a summary and a description that use the alert's
// labels, and a runbook_url to its section of docs/operations/alerts-and-runbooks.md; recording rules are named
// level:metric:operations, as Prometheus' naming practice has it, and carry no labels of their own.
func TestRulesFollowTheConventions(t *testing.T) {
	for _, g := range loadRules(t, rulesFile).Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				if !regexp.MustCompile(`^[a-z_]+:[a-z_]+:[a-z0-9_]+$`).MatchString(r.Record) {
					t.Errorf("recording rule %q is not named level:metric:operations", r.Record)
				}
				if len(r.Labels) > 0 || len(r.Annotations) > 0 {
					t.Errorf("recording rule %q has labels %v, annotations %v", r.Record, r.Labels, r.Annotations)
				}
				continue
			}
			if !regexp.MustCompile(`^(Etcd|Steward)[A-Z][A-Za-z]+$`).MatchString(r.Alert) {
				t.Errorf("alert %s: name is not Etcd... or Steward... in CamelCase", r.Alert)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if !strings.Contains(r.Annotations[a], "$labels.") {
					t.Errorf("alert %s: %s %q does not use the alert's labels", r.Alert, a, r.Annotations[a])
				}
			}
			if want := runbookBase + "#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
				t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			}
			if len(r.Annotations) != 3 {
				t.Errorf("alert %s: annotations %v, want summary, description and runbook_url", r.Alert, r.Annotations)
			}
		}
	}
}

// TestRuleQueriesUseKnownMetrics: every metric a rule reads is Steward's (the contract) or etcd's, etcd's are
// read from the job the PodMonitor gives them, and Steward's only with the labels they carry.
func TestRuleQueriesUseKnownMetrics(t *testing.T) {
	for _, g := range loadRules(t, rulesFile).Groups {
		for _, r := range g.Rules {
			name := "alert " + r.Alert
			if r.Record != "" {
				name = "recording rule " + r.Record
			}
			sels, err := selectors(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if unknown := unknownMetrics(sels); len(unknown) > 0 {
				t.Errorf("%s reads metrics that are neither Steward's nor etcd's: %q", name, unknown)
			}
			checkSelectorLabels(t, name, sels)
		}
	}
}

// checkSelectorLabels: etcd's metrics are selected by their job (another etcd, such as Kubernetes' own, is
// none of Steward's business), up by one of the two jobs, the operator's controller-runtime metrics by the
// operator's job, and Steward's metrics, the kubelet's and the recorded series only by labels they carry.
func checkSelectorLabels(t *testing.T, where string, sels []selector) {
	t.Helper()
	onlyBy := func(s selector, labelsOf []string) {
		for _, m := range s.Matchers {
			if !slices.Contains(labelsOf, m.Name) {
				t.Errorf("%s: %s selected by label %q, which it does not carry (it has %q)", where, s.Name, m.Name, labelsOf)
			}
		}
	}
	for _, s := range sels {
		job, hasJob := s.matcher("job")
		labelsOf, isSteward := contractMetrics[s.Name]
		switch {
		case isSteward:
			onlyBy(s, labelsOf)
		case kubeletMetrics[s.Name]:
			onlyBy(s, []string{"namespace", "persistentvolumeclaim"})
		case recordedMetrics[s.Name]:
			onlyBy(s, []string{"namespace", "cluster"})
		case operatorMetrics[s.Name] != nil:
			if !hasJob || job != operatorJob {
				t.Errorf("%s: %s without job=%q", where, s.Name, operatorJob)
			}
			onlyBy(s, append([]string{"job", "namespace"}, operatorMetrics[s.Name]...))
		case s.Name == "up":
			if !hasJob || (job != etcdJob && job != operatorJob) {
				t.Errorf("%s: up without job=%q or job=%q", where, etcdJob, operatorJob)
			}
		default:
			if !hasJob || job != etcdJob {
				t.Errorf("%s: %s without job=%q", where, s.Name, etcdJob)
			}
		}
	}
}

// TestRunbooksCoverEveryAlert: docs/operations/alerts-and-runbooks.md has a section for every alert, its anchor
// the runbook_url's, saying what the alert means, how to confirm it, what to do and when not to act.
func TestRunbooksCoverEveryAlert(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations/alerts-and-runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	var current string
	for _, line := range strings.Split(string(doc), "\n") {
		if name, ok := strings.CutPrefix(line, "## "); ok {
			current = strings.TrimSpace(name)
			sections[current] = ""
			continue
		}
		if current != "" {
			sections[current] += line + "\n"
		}
	}
	alerts := alertNames(t)
	for _, name := range alerts {
		body, ok := sections[name]
		if !ok {
			t.Errorf("docs/operations/alerts-and-runbooks.md has no section \"## %s\" (anchor #%s)", name, strings.ToLower(name))
			continue
		}
		for _, sub := range []string{"### Meaning", "### Confirm", "### Act", "### When not to act"} {
			if !strings.Contains(body, sub+"\n") {
				t.Errorf("docs/operations/alerts-and-runbooks.md, %s: no %q subsection", name, sub)
			}
		}
	}
	for name := range sections {
		if regexp.MustCompile(`^(Etcd|Steward)[A-Z]`).MatchString(name) && !slices.Contains(alerts, name) {
			t.Errorf("docs/operations/alerts-and-runbooks.md has a section for %s, which is no alert", name)
		}
	}
}

// yamlValue parses YAML into plain values, for comparing documents whatever their layout.
func yamlValue(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("parse YAML: %v", err)
	}
	return v
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCopiesAreGenerated: the PrometheusRule and the chart hold exactly rules.yaml's groups (make manifests
// writes them; make verify also fails on a stale copy, this says which one).
func TestCopiesAreGenerated(t *testing.T) {
	want := yamlValue(t, readFile(t, rulesFile))
	var rule struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Spec       any    `yaml:"spec"`
	}
	if err := yaml.Unmarshal(readFile(t, "../../config/prometheus/prometheusrule.yaml"), &rule); err != nil {
		t.Fatal(err)
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" {
		t.Errorf("prometheusrule.yaml is a %s %s", rule.APIVersion, rule.Kind)
	}
	if !reflect.DeepEqual(rule.Spec, want) {
		t.Error("config/prometheus/prometheusrule.yaml's spec differs from rules.yaml: run make manifests")
	}
	if got := yamlValue(t, readFile(t, "../../charts/steward/files/prometheus-rules.yaml")); !reflect.DeepEqual(got, want) {
		t.Error("charts/steward/files/prometheus-rules.yaml differs from config/prometheus/rules.yaml: run make manifests")
	}
	dashboards, _ := filepath.Glob("../../config/grafana/dashboards/*.json")
	copies, _ := filepath.Glob("../../charts/steward/files/dashboards/*.json")
	if len(dashboards) == 0 || len(dashboards) != len(copies) {
		t.Fatalf("dashboards %q, chart copies %q: run make manifests", dashboards, copies)
	}
	for _, d := range dashboards {
		c := filepath.Join("../../charts/steward/files/dashboards", filepath.Base(d))
		if string(readFile(t, d)) != string(readFile(t, c)) {
			t.Errorf("%s differs from %s: run make manifests", c, d)
		}
	}
}

// unitTests is the part of a promtool test file TestEveryAlertIsTested reads.
type unitTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			AlertName string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `yaml:"exp_labels"`
				ExpAnnotations map[string]string `yaml:"exp_annotations"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestEveryAlertIsTested: the promtool tests check every alert both ways, firing (with its labels and
// annotations rendered) and silent, and they load the rules file itself.
func TestEveryAlertIsTested(t *testing.T) {
	files, err := filepath.Glob("testdata/*.test.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool test files in testdata: %v", err)
	}
	fires, silent := map[string]int{}, map[string]int{}
	for _, f := range files {
		var u unitTests
		if err := yaml.Unmarshal(readFile(t, f), &u); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !reflect.DeepEqual(u.RuleFiles, []string{"../" + rulesFile}) {
			t.Errorf("%s: rule_files %q, want [%q]", f, u.RuleFiles, "../"+rulesFile)
		}
		for _, tc := range u.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) == 0 {
					silent[a.AlertName]++
					continue
				}
				fires[a.AlertName]++
				for _, e := range a.ExpAlerts {
					if e.ExpLabels["severity"] == "" || e.ExpAnnotations["summary"] == "" ||
						e.ExpAnnotations["description"] == "" || e.ExpAnnotations["runbook_url"] == "" {
						t.Errorf("%s, %q: an expected %s alert without its severity or annotations", f, tc.Name, a.AlertName)
					}
				}
			}
		}
	}
	alerts := alertNames(t)
	for _, name := range alerts {
		if fires[name] == 0 {
			t.Errorf("no promtool test expects %s to fire", name)
		}
		if silent[name] == 0 {
			t.Errorf("no promtool test expects %s to stay silent", name)
		}
	}
	for name := range fires {
		if !slices.Contains(alerts, name) {
			t.Errorf("promtool tests expect %s, which is no alert", name)
		}
	}
	t.Logf("%d alerts: %d firing checks, %d silent checks", len(alerts), sum(fires), sum(silent))
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// docSection returns a "## " section of a page of docs/, up to the next one.
func docSection(t *testing.T, page, title string) string {
	t.Helper()
	doc := string(readFile(t, "../../docs/"+page))
	_, rest, ok := strings.Cut(doc, "\n## "+title+"\n")
	if !ok {
		t.Fatalf("docs/%s has no section %q", page, title)
	}
	section, _, _ := strings.Cut(rest, "\n## ")
	return section
}

// TestObservabilityDocListsEveryAlertAndPanel: the Alerts table of docs/operations/alerts-and-runbooks.md has a
// row per alert and the Dashboard section of docs/operations/observability.md one per panel, so that neither
// drifts from the files.
func TestObservabilityDocListsEveryAlertAndPanel(t *testing.T) {
	alerts := docSection(t, "operations/alerts-and-runbooks.md", "Alerts")
	for _, name := range alertNames(t) {
		if !strings.Contains(alerts, "\n| "+name+" |") {
			t.Errorf("docs/operations/alerts-and-runbooks.md, Alerts: no row for %s", name)
		}
	}
	dashboard := docSection(t, "operations/observability.md", "Dashboard")
	seen := map[string]bool{}
	for _, q := range dashboardQueries(t) {
		if seen[q.Panel] {
			continue
		}
		seen[q.Panel] = true
		if !strings.Contains(dashboard, "\n| "+q.Panel+" (") {
			t.Errorf("docs/operations/observability.md, Dashboard: no row for panel %q", q.Panel)
		}
	}
}
