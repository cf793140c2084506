package testbed

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestPrometheusConfig: the test bed's Prometheus scrapes etcd members on their metrics port and operators on
// their port named metrics, labels them as Steward's rules expect, scrapes the kubelets with the test bed's
// certificates, and loads the rules it is given.
func TestPrometheusConfig(t *testing.T) {
	raw, err := prometheusConfig("/tmp/kubeconfig", "/tmp/token", 5*time.Second, []string{"/repo/config/prometheus/rules.yaml"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Global struct {
			ScrapeInterval     string `json:"scrape_interval"`
			EvaluationInterval string `json:"evaluation_interval"`
		} `json:"global"`
		RuleFiles     []string `json:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			HonorLabels   bool   `json:"honor_labels"`
			Scheme        string `json:"scheme"`
			Authorization struct {
				CredentialsFile string `json:"credentials_file"`
			} `json:"authorization"`
			TLS struct {
				CA                 string `json:"ca_file"`
				Cert               string `json:"cert_file"`
				Key                string `json:"key_file"`
				InsecureSkipVerify bool   `json:"insecure_skip_verify"`
			} `json:"tls_config"`
			MetricRelabel []struct {
				Regex  string   `json:"regex"`
				Action string   `json:"action"`
				Source []string `json:"source_labels"`
			} `json:"metric_relabel_configs"`
			SD []struct {
				Role       string `json:"role"`
				Kubeconfig string `json:"kubeconfig_file"`
			} `json:"kubernetes_sd_configs"`
			Relabel []struct {
				Source      []string `json:"source_labels"`
				Target      string   `json:"target_label"`
				Replacement string   `json:"replacement"`
				Regex       string   `json:"regex"`
				Action      string   `json:"action"`
			} `json:"relabel_configs"`
		} `json:"scrape_configs"`
	}
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	if cfg.Global.ScrapeInterval != "5s" || cfg.Global.EvaluationInterval != "5s" || len(cfg.RuleFiles) != 1 {
		t.Errorf("intervals %+v, rule files %v", cfg.Global, cfg.RuleFiles)
	}
	targets := map[string]map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName == "kubelet" {
			if len(sc.SD) != 1 || sc.SD[0].Role != "node" || sc.SD[0].Kubeconfig != "/tmp/kubeconfig" || !sc.HonorLabels ||
				sc.Scheme != "https" || sc.TLS.CA != "/tmp/pki/ca.crt" || sc.TLS.Cert != "/tmp/pki/admin.crt" || sc.TLS.Key != "/tmp/pki/admin.key" {
				t.Errorf("job kubelet: discovery %+v, honor_labels %v, scheme %q, TLS %+v", sc.SD, sc.HonorLabels, sc.Scheme, sc.TLS)
			}
			if len(sc.MetricRelabel) != 1 || sc.MetricRelabel[0].Action != "keep" || sc.MetricRelabel[0].Regex != "kubelet_volume_stats_.+" {
				t.Errorf("job kubelet keeps %+v, want only kubelet_volume_stats_*", sc.MetricRelabel)
			}
			continue
		}
		if len(sc.SD) != 1 || sc.SD[0].Role != "pod" || sc.SD[0].Kubeconfig != "/tmp/kubeconfig" {
			t.Errorf("job %s: discovery %+v", sc.JobName, sc.SD)
		}
		if sc.HonorLabels != (sc.JobName == "steward") {
			t.Errorf("job %s: honor_labels %v (only the operator's series carry their own namespace label)", sc.JobName, sc.HonorLabels)
		}
		// The operator serves its metrics over HTTPS to a token allowed to get /metrics; etcd in plain HTTP.
		if operator := sc.JobName == "steward"; (sc.Scheme == "https") != operator || (sc.Authorization.CredentialsFile == "/tmp/token") != operator || sc.TLS.InsecureSkipVerify != operator {
			t.Errorf("job %s: scheme %q, token %q, TLS %+v", sc.JobName, sc.Scheme, sc.Authorization.CredentialsFile, sc.TLS)
		}
		targets[sc.JobName] = map[string]bool{}
		for _, r := range sc.Relabel {
			if r.Target != "" {
				targets[sc.JobName][r.Target] = true
			}
			if r.Action == "keep" && r.Source[0] == "__meta_kubernetes_pod_container_port_name" && r.Regex != "metrics" {
				t.Errorf("job %s keeps port %q, want the port named metrics", sc.JobName, r.Regex)
			}
		}
	}
	for job, want := range map[string][]string{"steward-etcd": {"namespace", "cluster", "member", "pod"}, "steward": {"namespace", "pod"}} {
		for _, l := range want {
			if !targets[job][l] {
				t.Errorf("job %s does not set label %s (sets %v)", job, l, targets[job])
			}
		}
	}
	noRules, err := prometheusConfig("/tmp/kubeconfig", "/tmp/token", 5*time.Second, nil, false)
	if err != nil || strings.Contains(string(noRules), "rule_files") {
		t.Errorf("without rule files: %v\n%s", err, noRules)
	}
}

// TestPrometheusConfigLabelledOnly: with ScrapeLabelledNamespacesOnly, both Pod jobs attach the namespaces'
// metadata and keep only targets in namespaces labelled ScrapeLabel=true, and the kubelets are scraped every
// 30 s; without it, no Pod is filtered by its namespace.
func TestPrometheusConfigLabelledOnly(t *testing.T) {
	type job struct {
		JobName        string `json:"job_name"`
		ScrapeInterval string `json:"scrape_interval"`
		SD             []struct {
			AttachMetadata struct {
				Namespace bool `json:"namespace"`
			} `json:"attach_metadata"`
		} `json:"kubernetes_sd_configs"`
		Relabel []struct {
			Source []string `json:"source_labels"`
			Regex  string   `json:"regex"`
			Action string   `json:"action"`
		} `json:"relabel_configs"`
	}
	for _, labelledOnly := range []bool{false, true} {
		raw, err := prometheusConfig("/tmp/kubeconfig", "/tmp/token", 5*time.Second, nil, labelledOnly)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			ScrapeConfigs []job `json:"scrape_configs"`
		}
		if err := yaml.Unmarshal(raw, &cfg); err != nil {
			t.Fatal(err)
		}
		for _, sc := range cfg.ScrapeConfigs {
			if sc.JobName == "kubelet" {
				if want := map[bool]string{false: "", true: "30s"}[labelledOnly]; sc.ScrapeInterval != want {
					t.Errorf("labelledOnly %v: kubelet scrape interval %q, want %q", labelledOnly, sc.ScrapeInterval, want)
				}
				continue
			}
			filtered := false
			for _, r := range sc.Relabel {
				if r.Action == "keep" && len(r.Source) == 1 && r.Source[0] == "__meta_kubernetes_namespace_label_testbed_steward_dev_scrape" && r.Regex == "true" {
					filtered = true
				}
			}
			if filtered != labelledOnly || sc.SD[0].AttachMetadata.Namespace != labelledOnly {
				t.Errorf("labelledOnly %v: job %s filters by the namespace label %v, attaches namespace metadata %v",
					labelledOnly, sc.JobName, filtered, sc.SD[0].AttachMetadata.Namespace)
			}
		}
	}
}
