// Package monitoring tests Steward's monitoring artefacts: the alerting rules (config/prometheus/rules.yaml and
// the PrometheusRule and chart copies generated from it), their promtool unit tests, and the Grafana dashboard
// (config/grafana/dashboards/steward.json). It builds the promtool of the Prometheus release go.mod pins and runs
// `promtool check rules` and `promtool test rules` with it, and parses every rule and panel query with the same
// Prometheus' PromQL parser, checking each metric name against the metrics contract (docs/reference/metrics.md) and a
// fixed list of etcd's metrics, so that a misspelt name fails here instead of showing an empty panel or an alert
// that never fires.
//
// It is its own module so that Prometheus' dependencies stay out of the operator's go.mod; it reads the tree's
// files and never imports its packages. The tests run `make promtool`'s bin/promtool-<version> when it is there
// (make monitoring-test and the unit tier build it first) and build one themselves otherwise; on a fresh machine
// that first build compiles much of Prometheus for several minutes, so a bare `go test` then needs -timeout 30m. PanelQueries (dashboard.go, standard library only) is what an end-to-end
// test uses to run every panel's queries against a real Prometheus; testdata/panel-queries.json holds its output
// for tests outside this module.
package monitoring
