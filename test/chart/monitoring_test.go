package chart

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// monitoringAPI is the Prometheus Operator's API: PodMonitor, ServiceMonitor and PrometheusRule render only on
// a cluster that serves it.
const monitoringAPI = "monitoring.coreos.com/v1"

// allMonitoring turns every monitoring object on.
const allMonitoring = `monitoring: {podMonitor: {enabled: true}, serviceMonitor: {enabled: true},
  prometheusRule: {enabled: true}, grafanaDashboard: {enabled: true}}`

var monitoringKinds = []string{"PodMonitor", "ServiceMonitor", "PrometheusRule"}

// manifestOf returns a document of config/ as plain values, for comparing with the chart's.
func manifestOf(t *testing.T, name string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal(readRepoFile(t, name), &v); err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return v
}

func docOf(t *testing.T, o object) map[string]any {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal([]byte(o.Doc), &v); err != nil {
		t.Fatalf("parse %s %s: %v", o.Kind, o.Name, err)
	}
	return v
}

// TestMonitoringWithoutTheAPIChangesNothing: on a cluster without the Prometheus Operator's CRDs, turning
// monitoring on renders none of its objects (the install would fail on them) and changes nothing else; only the
// dashboard's ConfigMap, which needs no CRD, is added.
func TestMonitoringWithoutTheAPIChangesNothing(t *testing.T) {
	plain := mustRender(t, nil)
	on := mustRender(t, parseValues(t, allMonitoring))
	for _, kind := range monitoringKinds {
		if n := len(on.find(kind)); n != 0 {
			t.Errorf("without %s, %d %s rendered", monitoringAPI, n, kind)
		}
	}
	var rest []object
	for _, o := range on.Objects {
		if o.Kind == "ConfigMap" && o.Name == "steward-dashboard" {
			continue
		}
		rest = append(rest, o)
	}
	if !reflect.DeepEqual(rest, plain.Objects) {
		t.Error("monitoring on, without the API, renders other objects than the defaults (besides the dashboard)")
	}
	// And with the API but monitoring off (the defaults), nothing either.
	off, err := renderWith(t, []string{monitoringAPI}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(off.Objects, plain.Objects) {
		t.Error("the defaults render differently on a cluster with the Prometheus Operator")
	}
}

// TestMonitoringObjectsAreConfigs: with the API, the chart's PodMonitor, ServiceMonitor and PrometheusRule scrape
// and alert exactly as config/prometheus's do (the rules come from the same file), the ServiceMonitor selects the
// chart's metrics Service, additionalLabels land on each, and the dashboard is config/grafana's file.
func TestMonitoringObjectsAreConfigs(t *testing.T) {
	out, err := renderWith(t, []string{monitoringAPI}, parseValues(t, `monitoring: {
  podMonitor: {enabled: true, additionalLabels: {release: prom}},
  serviceMonitor: {enabled: true, additionalLabels: {release: prom}},
  prometheusRule: {enabled: true, additionalLabels: {release: prom}},
  grafanaDashboard: {enabled: true, namespace: monitoring, labels: {grafana_dashboard: "1", team: db}, annotations: {grafana_folder: etcd}}}`))
	if err != nil {
		t.Fatal(err)
	}
	pm := docOf(t, out.one(t, "PodMonitor", "steward-etcd"))
	if want := manifestOf(t, "config/prometheus/podmonitor.yaml")["spec"]; !reflect.DeepEqual(pm["spec"], want) {
		t.Errorf("PodMonitor spec differs from config/prometheus/podmonitor.yaml:\ngot  %v\nwant %v", pm["spec"], want)
	}
	sm := docOf(t, out.one(t, "ServiceMonitor", "steward"))
	smSpec, _ := sm["spec"].(map[string]any)
	want := manifestOf(t, "config/prometheus/servicemonitor.yaml")["spec"].(map[string]any)
	if !reflect.DeepEqual(smSpec["endpoints"], want["endpoints"]) {
		t.Errorf("ServiceMonitor endpoints differ from config/prometheus/servicemonitor.yaml:\ngot  %v\nwant %v", smSpec["endpoints"], want["endpoints"])
	}
	svc := decode[corev1.Service](t, out.one(t, "Service", "steward-metrics"))
	selector, _ := smSpec["selector"].(map[string]any)
	matchLabels, _ := selector["matchLabels"].(map[string]any)
	if len(matchLabels) == 0 {
		t.Error("ServiceMonitor selects no labels")
	}
	for k, v := range matchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%v, which the metrics Service (labels %v) lacks", k, v, svc.Labels)
		}
	}
	if svc.Spec.Ports[0].Name != "metrics" {
		t.Errorf("metrics Service port %q, the ServiceMonitor scrapes port metrics", svc.Spec.Ports[0].Name)
	}
	rule := docOf(t, out.one(t, "PrometheusRule", "steward"))
	if want := manifestOf(t, "config/prometheus/rules.yaml"); !reflect.DeepEqual(rule["spec"], want) {
		t.Error("PrometheusRule spec differs from config/prometheus/rules.yaml (make manifests copies it to files/)")
	}
	for _, o := range []map[string]any{pm, sm, rule} {
		labels := o["metadata"].(map[string]any)["labels"].(map[string]any)
		if labels["release"] != "prom" || labels["app.kubernetes.io/instance"] != releaseName {
			t.Errorf("%s labels %v, want the chart's and additionalLabels' release: prom", o["kind"], labels)
		}
	}
	cm := decode[corev1.ConfigMap](t, out.one(t, "ConfigMap", "steward-dashboard"))
	if cm.Namespace != "monitoring" || cm.Labels["grafana_dashboard"] != "1" || cm.Labels["team"] != "db" ||
		cm.Annotations["grafana_folder"] != "etcd" {
		t.Errorf("dashboard ConfigMap %s/%s labels %v annotations %v", cm.Namespace, cm.Name, cm.Labels, cm.Annotations)
	}
	if want := strings.TrimRight(string(readRepoFile(t, "config/grafana/dashboards/steward.json")), "\n"); cm.Data["steward.json"] != want {
		t.Error("the dashboard ConfigMap's steward.json differs from config/grafana/dashboards/steward.json")
	}
}

// TestSLOTargets: monitoring.slo's targets replace the defaults of the rules' recorded targets, and nothing else
// of the rules changes.
func TestSLOTargets(t *testing.T) {
	out, err := renderWith(t, []string{monitoringAPI}, parseValues(t, `monitoring: {prometheusRule: {enabled: true},
  slo: {availabilityTarget: 0.9995, latencyTarget: 0.95}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := docOf(t, out.one(t, "PrometheusRule", "steward"))["spec"]
	want := manifestOf(t, "config/prometheus/rules.yaml")
	found := 0
	for _, g := range want["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			switch rule["record"] {
			case "steward:etcd_availability_slo:target":
				rule["expr"], found = "vector(0.9995)", found+1
			case "steward:etcd_latency_slo:target":
				rule["expr"], found = "vector(0.95)", found+1
			}
		}
	}
	if found != 2 {
		t.Fatalf("rules.yaml records %d of the two SLO targets", found)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PrometheusRule spec with the SLO values is not rules.yaml with the two targets replaced:\n%v", got)
	}
}

// TestServiceMonitorNeedsMetrics: a ServiceMonitor without the metrics Service would scrape nothing; the chart
// says so instead of rendering it.
func TestServiceMonitorNeedsMetrics(t *testing.T) {
	_, err := renderWith(t, []string{monitoringAPI}, parseValues(t, "{metrics: {enabled: false}, monitoring: {serviceMonitor: {enabled: true}}}"))
	if err == nil || !strings.Contains(err.Error(), "monitoring.serviceMonitor.enabled needs metrics.enabled") {
		t.Errorf("serviceMonitor without metrics: %v, want refused", err)
	}
}
