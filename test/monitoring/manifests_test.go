package monitoring

import (
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

// strict decodes a manifest of config/ into its Prometheus Operator type, refusing fields the type lacks (a
// misspelt or misplaced key the API server would drop).
func strict[T any](t *testing.T, file string) T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(readFile(t, file), &v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return v
}

// TestScrapeManifests: config/prometheus's PodMonitor and ServiceMonitor are valid Prometheus Operator objects
// that give the series the jobs and labels the rules and the dashboard expect.
func TestScrapeManifests(t *testing.T) {
	pm := strict[monitoringv1.PodMonitor](t, "../../config/prometheus/podmonitor.yaml")
	if pm.Kind != "PodMonitor" || !pm.Spec.NamespaceSelector.Any || len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("PodMonitor: kind %q, namespaceSelector %+v, %d endpoints", pm.Kind, pm.Spec.NamespaceSelector, len(pm.Spec.PodMetricsEndpoints))
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	if ep.Port == nil || *ep.Port != "metrics" {
		t.Errorf("PodMonitor scrapes port %v, want metrics (the member container's port 2381)", ep.Port)
	}
	wantTargets := map[string]string{
		"cluster": "__meta_kubernetes_pod_label_etcd_steward_dev_cluster",
		"member":  "__meta_kubernetes_pod_label_etcd_steward_dev_member",
		"job":     "",
	}
	checkRelabelings(t, "PodMonitor", ep.RelabelConfigs, wantTargets, etcdJob)

	sm := strict[monitoringv1.ServiceMonitor](t, "../../config/prometheus/servicemonitor.yaml")
	if sm.Kind != "ServiceMonitor" || len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor: kind %q, %d endpoints", sm.Kind, len(sm.Spec.Endpoints))
	}
	sep := sm.Spec.Endpoints[0]
	if sep.Port != "metrics" || !sep.HonorLabels {
		t.Errorf("ServiceMonitor endpoint port %q honorLabels %v, want port metrics with honorLabels", sep.Port, sep.HonorLabels)
	}
	checkRelabelings(t, "ServiceMonitor", sep.RelabelConfigs, map[string]string{"job": ""}, operatorJob)

	rule := strict[monitoringv1.PrometheusRule](t, "../../config/prometheus/prometheusrule.yaml")
	if rule.Kind != "PrometheusRule" || len(rule.Spec.Groups) != len(loadRules(t, rulesFile).Groups) {
		t.Errorf("PrometheusRule: kind %q, %d groups", rule.Kind, len(rule.Spec.Groups))
	}
}

// checkRelabelings: each wanted target label is written, from its source label (job from a fixed replacement).
func checkRelabelings(t *testing.T, kind string, rcs []monitoringv1.RelabelConfig, want map[string]string, job string) {
	t.Helper()
	for target, source := range want {
		found := false
		for _, rc := range rcs {
			if rc.TargetLabel != target {
				continue
			}
			found = true
			switch {
			case source == "" && (rc.Replacement == nil || *rc.Replacement != job):
				t.Errorf("%s sets %s to %v, want %q", kind, target, rc.Replacement, job)
			case source != "" && (len(rc.SourceLabels) != 1 || string(rc.SourceLabels[0]) != source):
				t.Errorf("%s sets %s from %v, want %s", kind, target, rc.SourceLabels, source)
			}
		}
		if !found {
			t.Errorf("%s does not set label %s", kind, target)
		}
	}
}
