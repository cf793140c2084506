package chart

import (
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"
)

const (
	// chartDir is the chart under test; the tests run in test/chart.
	chartDir = "../../charts/steward"
	// The release the golden files are rendered as: `helm install steward charts/steward -n steward-system`,
	// the names docs/operations/install.md uses.
	releaseName      = "steward"
	releaseNamespace = "steward-system"
)

// minKube is the oldest Kubernetes the chart claims (Chart.yaml's kubeVersion). The tests render for it, so a
// template that needs a newer API fails here rather than on a user's cluster.
var minKube = chartutil.KubeVersion{Version: "v1.34.0", Major: "1", Minor: "34"}

// object is one document of the rendered chart.
type object struct {
	Source string // the template it came from, as `helm template` prints it
	Doc    string
	Kind   string
	Name   string
	NS     string
}

// rendered is the chart's output for one set of values.
type rendered struct {
	Objects []object
	Notes   string
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart %s: %v", chartDir, err)
	}
	return c
}

// readValues reads a values file of testdata; "" means the chart's defaults.
func readValues(t *testing.T, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	vals, err := chartutil.ReadValuesFile(file)
	if err != nil {
		t.Fatalf("read values %s: %v", file, err)
	}
	return vals.AsMap()
}

// parseValues parses values written inline in a test.
func parseValues(t *testing.T, text string) map[string]any {
	t.Helper()
	vals, err := chartutil.ReadValues([]byte(text))
	if err != nil {
		t.Fatalf("parse values %q: %v", text, err)
	}
	return vals.AsMap()
}

// render renders the chart as `helm template steward charts/steward -n steward-system` does.
func render(t *testing.T, vals map[string]any) (rendered, error) {
	t.Helper()
	return renderFor(t, releaseName, releaseNamespace, minKube, vals)
}

// renderWith renders the chart for a cluster that also serves the given API versions (group/version), as
// `helm template --api-versions` does.
func renderWith(t *testing.T, apis []string, vals map[string]any) (rendered, error) {
	t.Helper()
	return renderAPIs(t, releaseName, releaseNamespace, minKube, apis, vals)
}

// renderFor renders the chart for a cluster that serves Kubernetes' own APIs only.
func renderFor(t *testing.T, name, namespace string, kube chartutil.KubeVersion, vals map[string]any) (rendered, error) {
	t.Helper()
	return renderAPIs(t, name, namespace, kube, nil, vals)
}

// renderAPIs renders the chart the way `helm template` does, through the same code: an install in client-only
// dry-run mode, which checks Chart.yaml's kubeVersion against the given Kubernetes, merges the values with the
// chart's defaults, validates them against values.schema.json and runs the templates, with the capabilities of
// a cluster that serves Kubernetes' APIs and apis. CRDs are left out, as `helm template` leaves them without
// --include-crds; TestCRDsAreTheGeneratedOnes covers them.
func renderAPIs(t *testing.T, name, namespace string, kube chartutil.KubeVersion, apis []string, vals map[string]any) (rendered, error) {
	t.Helper()
	if vals == nil {
		vals = map[string]any{}
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = name
	install.Namespace = namespace
	install.KubeVersion = &kube
	install.APIVersions = chartutil.VersionSet(apis)
	rel, err := install.Run(loadChart(t), vals)
	if err != nil {
		return rendered{}, fmt.Errorf("helm template: %w", err)
	}
	if len(rel.Hooks) != 0 {
		return rendered{}, fmt.Errorf("the chart renders %d hooks; the golden files do not show hooks", len(rel.Hooks))
	}
	out := rendered{Notes: rel.Info.Notes}
	for _, doc := range docSeparator.Split(rel.Manifest, -1) {
		doc = strings.TrimSpace(doc)
		if doc == "" {
			continue
		}
		source, body, ok := strings.Cut(doc, "\n")
		if !ok || !strings.HasPrefix(source, "# Source: ") {
			return rendered{}, fmt.Errorf("manifest document without a # Source line:\n%s", doc)
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(body), &meta); err != nil {
			return rendered{}, fmt.Errorf("%s renders invalid YAML: %w\n%s", source, err, body)
		}
		out.Objects = append(out.Objects, object{Source: strings.TrimPrefix(source, "# Source: "), Doc: body + "\n",
			Kind: meta.Kind, Name: meta.Metadata.Name, NS: meta.Metadata.Namespace})
	}
	return out, nil
}

// mustRender renders values the chart must accept.
func mustRender(t *testing.T, vals map[string]any) rendered {
	t.Helper()
	out, err := render(t, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return out
}

// manifest prints the objects as `helm template` does, followed by the notes `helm install` would show.
func (r rendered) manifest() string {
	var b strings.Builder
	for _, o := range r.Objects {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s", o.Source, o.Doc)
	}
	b.WriteString("---\n# NOTES.txt:\n")
	for _, line := range strings.Split(strings.TrimRight(r.Notes, "\n"), "\n") {
		b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
	return b.String()
}

// find returns the rendered objects of a kind.
func (r rendered) find(kind string) []object {
	var out []object
	for _, o := range r.Objects {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the only rendered object of a kind and name.
func (r rendered) one(t *testing.T, kind, name string) object {
	t.Helper()
	var found []object
	for _, o := range r.find(kind) {
		if o.Name == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s %s, rendered %d", kind, name, len(found))
	}
	return found[0]
}

// decode parses a rendered object into its API type, strictly: a field the type does not have is a template
// mistake (a misspelt or misplaced key) the API server would drop or refuse.
func decode[T any](t *testing.T, o object) T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict([]byte(o.Doc), &v); err != nil {
		t.Fatalf("decode %s %s from %s: %v\n%s", o.Kind, o.Name, o.Source, err, o.Doc)
	}
	return v
}

// readRepoFile reads a file of the tree, relative to its root.
func readRepoFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(path.Join("../..", name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return b
}
