package monitoring

import (
	"fmt"
	"io"
	"log/slog"
	"sort"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// contractMetrics are Steward's metrics with the labels each carries, read from the metrics contract: the tables
// of docs/reference/metrics.md (contract.go). The rules and the dashboard are written against these; a name or
// label outside them fails.
var contractMetrics = mustReadContract()

// etcdMetrics are the etcd metrics the rules and the dashboard may use: each is served on the metrics port by
// etcd 3.5, 3.6 and 3.7 (read from their /metrics), some only once they have something to count (peer
// metrics in a cluster of more than one member, failures once one happened) or, for
// grpc_server_handling_seconds, only with --metrics=extensive. Histograms are listed with their series'
// suffixes.
var etcdMetrics = map[string]bool{
	"etcd_server_has_leader":                           true,
	"etcd_server_is_leader":                            true,
	"etcd_server_is_learner":                           true,
	"etcd_server_leader_changes_seen_total":            true,
	"etcd_server_proposals_committed_total":            true,
	"etcd_server_proposals_applied_total":              true,
	"etcd_server_proposals_pending":                    true,
	"etcd_server_proposals_failed_total":               true,
	"etcd_server_quota_backend_bytes":                  true,
	"etcd_server_apply_duration_seconds_bucket":        true,
	"etcd_server_slow_apply_total":                     true,
	"etcd_server_heartbeat_send_failures_total":        true,
	"etcd_mvcc_db_total_size_in_bytes":                 true,
	"etcd_mvcc_db_total_size_in_use_in_bytes":          true,
	"etcd_disk_wal_fsync_duration_seconds_bucket":      true,
	"etcd_disk_wal_fsync_duration_seconds_count":       true,
	"etcd_disk_backend_commit_duration_seconds_bucket": true,
	"etcd_network_peer_sent_failures_total":            true,
	"etcd_network_peer_received_failures_total":        true,
	"etcd_network_peer_round_trip_time_seconds_bucket": true,
	"etcd_network_peer_sent_bytes_total":               true,
	"etcd_network_peer_received_bytes_total":           true,
	"etcd_network_client_grpc_sent_bytes_total":        true,
	"etcd_network_client_grpc_received_bytes_total":    true,
	"grpc_server_started_total":                        true,
	"grpc_server_handled_total":                        true,
	"grpc_server_handling_seconds_bucket":              true,
	"process_resident_memory_bytes":                    true,
	// Prometheus' own series of every scrape target.
	"up": true,
}

// kubeletMetrics are the kubelet's volume stats the volume alerts and panels read. They come from whatever job
// scrapes the kubelet (kube-prometheus-stack's is "kubelet"), so they are selected by the claim's labels, namespace
// and persistentvolumeclaim, which the kubelet gives them, never by job.
var kubeletMetrics = map[string]bool{
	"kubelet_volume_stats_available_bytes": true,
	"kubelet_volume_stats_capacity_bytes":  true,
	"kubelet_volume_stats_used_bytes":      true,
}

// operatorMetrics are controller-runtime's metrics of the operator (v0.22) the alerts on Steward itself read,
// with the labels they carry: selected by job="steward" and the operator's namespace (the scrape target's).
var operatorMetrics = map[string][]string{
	"controller_runtime_reconcile_total":        {"controller", "result"},
	"controller_runtime_reconcile_errors_total": {"controller"},
	"workqueue_depth":                           {"name", "controller", "priority"},
	"workqueue_queue_duration_seconds_bucket":   {"name", "controller", "le"},
	"workqueue_unfinished_work_seconds":         {"name", "controller"},
	"leader_election_master_status":             {"name"},
	"rest_client_requests_total":                {"code", "method", "host"},
}

// recordedMetrics are the series the rules file records (the SLO group's ratios and targets), read back by its
// alerts and by the dashboard.
var recordedMetrics = func() map[string]bool {
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, promqlParser, slog.New(slog.NewTextHandler(io.Discard, nil)))
	out := map[string]bool{}
	if len(errs) > 0 {
		return out
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				out[r.Record] = true
			}
		}
	}
	return out
}()

// promqlParser parses as Prometheus does by default (no experimental functions).
var promqlParser = parser.NewParser(parser.Options{})

// selector is one vector selector of a query: its metric name and its label matchers.
type selector struct {
	Name     string
	Matchers []*labels.Matcher
}

// selectors parses a PromQL expression and returns its vector selectors.
func selectors(expr string) ([]selector, error) {
	e, err := promqlParser.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	var out []selector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			s := selector{Name: vs.Name}
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					if m.Type == labels.MatchEqual {
						s.Name = m.Value
					}
					continue
				}
				s.Matchers = append(s.Matchers, m)
			}
			out = append(out, s)
		}
		return nil
	})
	return out, nil
}

// unknownMetrics returns the metric names of the selectors that are none of Steward's, etcd's, the kubelet's volume
// stats, the operator's controller-runtime metrics the rules use, or the rules' recorded series.
func unknownMetrics(sels []selector) []string {
	var out []string
	for _, s := range sels {
		if _, ok := contractMetrics[s.Name]; !ok && !etcdMetrics[s.Name] && !kubeletMetrics[s.Name] && operatorMetrics[s.Name] == nil && !recordedMetrics[s.Name] {
			out = append(out, s.Name)
		}
	}
	sort.Strings(out)
	return out
}

// matcher returns the value a selector requires of a label with =, and whether it does.
func (s selector) matcher(name string) (string, bool) {
	for _, m := range s.Matchers {
		if m.Name == name && m.Type == labels.MatchEqual {
			return m.Value, true
		}
	}
	return "", false
}
