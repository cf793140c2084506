package monitoring

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Query is one target (one PromQL query) of a dashboard panel.
type Query struct {
	// Panel is the panel's title; Row the title of the row it is under ("" before the first row).
	Panel string `json:"panel"`
	Row   string `json:"row,omitempty"`
	// RefID is the target's letter within its panel.
	RefID string `json:"refId"`
	// Expr is the query as the dashboard holds it, with Grafana's variables ($namespace, $cluster,
	// $__rate_interval) in place: Substitute replaces them.
	Expr string `json:"expr"`
	// Instant: Grafana runs the query at one instant (stat and table panels) rather than over the time range.
	Instant bool `json:"instant,omitempty"`
}

// dashboard is the part of a Grafana dashboard's JSON model the queries live in.
type dashboard struct {
	Panels []panel `json:"panels"`
}

type panel struct {
	Type    string   `json:"type"`
	Title   string   `json:"title"`
	Targets []target `json:"targets"`
	// Panels of a collapsed row live inside it.
	Panels []panel `json:"panels"`
}

type target struct {
	RefID   string `json:"refId"`
	Expr    string `json:"expr"`
	Instant bool   `json:"instant"`
}

// PanelQueries returns every query of a Grafana dashboard's JSON model, in the order of its panels (rows
// included, also collapsed ones).
func PanelQueries(dashboardJSON []byte) ([]Query, error) {
	var d dashboard
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		return nil, fmt.Errorf("parse dashboard: %w", err)
	}
	var out []Query
	row := ""
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				row = p.Title
				walk(p.Panels)
				continue
			}
			for _, t := range p.Targets {
				out = append(out, Query{Panel: p.Title, Row: row, RefID: t.RefID, Expr: t.Expr, Instant: t.Instant})
			}
		}
	}
	walk(d.Panels)
	return out, nil
}

// Substitute replaces Grafana's variables in a query: vars maps a name (without "$") to its value, and each
// name is replaced in both forms, $name and ${name}. Longer names go first, so that $cluster does not eat a
// $clusters.
func Substitute(expr string, vars map[string]string) string {
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, name := range names {
		expr = strings.ReplaceAll(expr, "${"+name+"}", vars[name])
		expr = strings.ReplaceAll(expr, "$"+name, vars[name])
	}
	return expr
}
