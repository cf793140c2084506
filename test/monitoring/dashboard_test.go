package monitoring

import (
	"encoding/json"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/panel-queries.json from the dashboard")

const dashboardFile = "../../config/grafana/dashboards/steward.json"

// sloTargets are the recorded SLO targets, which carry no labels.
var sloTargets = map[string]bool{"steward:etcd_availability_slo:target": true, "steward:etcd_latency_slo:target": true}

// dashboardVars are values for the dashboard's variables, as Grafana would substitute them.
var dashboardVars = map[string]string{"namespace": "team-a", "cluster": "main", "__rate_interval": "1m"}

func dashboardQueries(t *testing.T) []Query {
	t.Helper()
	queries, err := PanelQueries(readFile(t, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) == 0 {
		t.Fatal("the dashboard has no query")
	}
	return queries
}

// TestPanelQueries: every panel query is PromQL Prometheus parses once Grafana has substituted the variables,
// reads only Steward's and etcd's metrics, and reads them for the EtcdCluster the dashboard shows.
func TestPanelQueries(t *testing.T) {
	queries := dashboardQueries(t)
	for _, q := range queries {
		where := q.Panel + "/" + q.RefID
		expr := Substitute(q.Expr, dashboardVars)
		if strings.Contains(expr, "$") {
			t.Errorf("%s: a variable the dashboard does not define is left in %q", where, expr)
		}
		sels, err := selectors(expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		if unknown := unknownMetrics(sels); len(unknown) > 0 {
			t.Errorf("%s reads metrics that are neither Steward's nor etcd's: %q", where, unknown)
		}
		checkSelectorLabels(t, where, sels)
		for _, s := range sels {
			ns, _ := s.matcher("namespace")
			cluster, _ := s.matcher("cluster")
			switch {
			case sloTargets[s.Name]:
				// One per Prometheus, for every cluster.
			case ns != dashboardVars["namespace"] || cluster != dashboardVars["cluster"]:
				t.Errorf("%s: %s is not selected by namespace=\"$namespace\", cluster=\"$cluster\"", where, s.Name)
			}
		}
	}
	t.Logf("%d queries", len(queries))
}

// grafanaDashboard is the part of the dashboard's JSON model TestDashboardModel checks.
type grafanaDashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *struct {
				UID string `json:"uid"`
			} `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

// TestDashboardModel: the dashboard reads from the ${datasource} variable everywhere (so it works with any
// Prometheus data source), picks the EtcdCluster with namespace and cluster variables from Steward's metrics,
// and every panel has an id of its own, a place on the 24-column grid and a description.
func TestDashboardModel(t *testing.T) {
	var d grafanaDashboard
	if err := json.Unmarshal(readFile(t, dashboardFile), &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: both are needed for a stable link", d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type != "query" {
			continue
		}
		if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
			t.Errorf("variable %s does not query ${datasource}", v.Name)
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Errorf("variable %s: query: %v", v.Name, err)
			continue
		}
		m := regexp.MustCompile(`^label_values\((.+), ([a-z_]+)\)$`).FindStringSubmatch(q.Query)
		if m == nil || m[2] != v.Name {
			t.Errorf("variable %s: query %q is not label_values(<selector>, %s)", v.Name, q.Query, v.Name)
			continue
		}
		sels, err := selectors(Substitute(m[1], dashboardVars))
		if err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
			continue
		}
		if unknown := unknownMetrics(sels); len(unknown) > 0 {
			t.Errorf("variable %s reads unknown metrics %q", v.Name, unknown)
		}
	}
	for name, typ := range map[string]string{"datasource": "datasource", "namespace": "query", "cluster": "query"} {
		if vars[name] != typ {
			t.Errorf("variable %s is %q, want a %s variable", name, vars[name], typ)
		}
	}
	ids := map[int]string{}
	var check func(ps []grafanaPanel)
	check = func(ps []grafanaPanel) {
		for _, p := range ps {
			if other, dup := ids[p.ID]; dup || p.ID == 0 {
				t.Errorf("panel %q: id %d (also %q)", p.Title, p.ID, other)
			}
			ids[p.ID] = p.Title
			if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("panel %q: gridPos %+v off the 24-column grid", p.Title, p.GridPos)
			}
			if p.Type == "row" {
				check(p.Panels)
				continue
			}
			if p.Title == "" || p.Description == "" {
				t.Errorf("panel %d: title %q, description %q: both are needed", p.ID, p.Title, p.Description)
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q does not read from ${datasource}", p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for i, tg := range p.Targets {
				if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
					t.Errorf("panel %q, query %d does not read from ${datasource}", p.Title, i)
				}
			}
		}
	}
	check(d.Panels)
}

// TestPanelQueriesFile: testdata/panel-queries.json is PanelQueries' output for the dashboard, for tests in
// other modules (the end-to-end test runs each query against the test bed's Prometheus); `go test ./...
// -update` rewrites it.
func TestPanelQueriesFile(t *testing.T) {
	b, err := json.MarshalIndent(dashboardQueries(t), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got := string(b) + "\n"
	const file = "testdata/panel-queries.json"
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want := string(readFile(t, file)); got != want {
		t.Errorf("%s is stale: run go test ./... -update in test/monitoring", file)
	}
}

func TestSubstitute(t *testing.T) {
	for in, want := range map[string]string{
		`up{cluster="$cluster"}`:                            `up{cluster="main"}`,
		`up{cluster="${cluster}"}`:                          `up{cluster="main"}`,
		`rate(x{namespace="$namespace"}[$__rate_interval])`: `rate(x{namespace="team-a"}[1m])`,
		`up{cluster="$clusters"}`:                           `up{cluster="mains"}`,
		`up`:                                                `up`,
	} {
		if got := Substitute(in, dashboardVars); got != want {
			t.Errorf("Substitute(%q) = %q, want %q", in, got, want)
		}
	}
}
