package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// PrometheusVersion is the Prometheus module the test bed's server is built from
// (third_party/prometheus/go.mod; module v0.314.0 is Prometheus 3.14.0).
const PrometheusVersion = "v0.314.0"

// PrometheusRulesFile is the rules file of the repository the test bed's Prometheus evaluates, relative to the
// module root: the alerts Steward ships, so that e2e tests see them fire and resolve.
const PrometheusRulesFile = "config/prometheus/rules.yaml"

// PrometheusServer is the test bed's Prometheus: it discovers Pods through the API server and scrapes every etcd
// member Pod and every Steward operator Pod on their ports named "metrics", with the jobs and labels the
// PodMonitor and ServiceMonitor in config/prometheus give (the test bed has no Prometheus Operator), scrapes the
// kubelets (their volume stats), and evaluates Steward's alerting rules.
type PrometheusServer struct {
	// URL is the base URL of its HTTP API (http://127.0.0.1:<port>).
	URL string
	// ScrapeInterval is how often it scrapes and evaluates rules.
	ScrapeInterval time.Duration
}

func prometheusSet() binarySet {
	// Only the Kubernetes service discovery (plus the built-in file and HTTP ones): the other discoveries pull in
	// every cloud SDK and triple the build.
	return binarySet{name: "prometheus", version: PrometheusVersion, module: "prometheus",
		packages: []string{"github.com/prometheus/prometheus/cmd/prometheus"}, tags: "remove_all_sd,enable_kubernetes_sd",
		ldflags: "-s -w", estimate: "about 4 minutes"}
}

// prometheusConfig is the server's configuration: Pods found with kubeconfig, relabelled to the labels Steward's
// rules and dashboard use (namespace, cluster, member, pod), and the rule files that exist. The operator is
// scraped over HTTPS with the bearer token in tokenFile (prometheusToken).
//
// With labelledOnly, Pods are scraped only in namespaces labelled ScrapeLabel=true, and the kubelets every
// kubeletIntervalLabelledOnly: a suite of many clusters of which few are watched pays for no other scrapes.
func prometheusConfig(kubeconfig, tokenFile string, interval time.Duration, ruleFiles []string, labelledOnly bool) ([]byte, error) {
	podSD := []map[string]any{{"role": "pod", "kubeconfig_file": kubeconfig}}
	label := func(source, target string) map[string]any {
		return map[string]any{"source_labels": []string{source}, "target_label": target}
	}
	keep := func(source, regex string) map[string]any {
		return map[string]any{"source_labels": []string{source}, "regex": regex, "action": "keep"}
	}
	var podFilter []map[string]any
	if labelledOnly {
		podSD[0]["attach_metadata"] = map[string]any{"namespace": true}
		podFilter = append(podFilter, keep("__meta_kubernetes_namespace_label_"+promLabelName(ScrapeLabel), "true"))
	}
	kubeletJob := map[string]any{
		// The kubelets' own metrics, for their kubelet_volume_stats_* series (the volume alerts): each node's
		// kubelet on its HTTPS port, with the test bed's CA and its admin client certificate, which sit
		// beside the admin kubeconfig. honor_labels, as kube-prometheus-stack scrapes the kubelet: the
		// series' namespace and persistentvolumeclaim are the claim's.
		"job_name":              "kubelet",
		"honor_labels":          true,
		"scheme":                "https",
		"kubernetes_sd_configs": []map[string]any{{"role": "node", "kubeconfig_file": kubeconfig}},
		"tls_config": map[string]any{
			"ca_file":   filepath.Join(filepath.Dir(kubeconfig), "pki", "ca.crt"),
			"cert_file": filepath.Join(filepath.Dir(kubeconfig), "pki", "admin.crt"),
			"key_file":  filepath.Join(filepath.Dir(kubeconfig), "pki", "admin.key"),
		},
		"relabel_configs": []map[string]any{label("__meta_kubernetes_node_name", "node")},
		// Only the volume stats: the kubelet's thousands of other series would cost the test bed's
		// Prometheus memory and CPU for nothing.
		"metric_relabel_configs": []map[string]any{keep("__name__", "kubelet_volume_stats_.+")},
	}
	if labelledOnly {
		kubeletJob["scrape_interval"] = kubeletIntervalLabelledOnly.String()
	}
	cfg := map[string]any{
		"global": map[string]any{"scrape_interval": interval.String(), "evaluation_interval": interval.String()},
		"scrape_configs": []map[string]any{
			{
				// As config/prometheus/podmonitor.yaml: member Pods' container port "metrics", job steward-etcd.
				"job_name":              "steward-etcd",
				"kubernetes_sd_configs": podSD,
				"relabel_configs": append(podFilter[:len(podFilter):len(podFilter)],
					keep("__meta_kubernetes_pod_label_etcd_steward_dev_cluster", ".+"),
					keep("__meta_kubernetes_pod_label_etcd_steward_dev_member", ".+"),
					keep("__meta_kubernetes_pod_container_port_name", "metrics"),
					label("__meta_kubernetes_namespace", "namespace"),
					label("__meta_kubernetes_pod_label_etcd_steward_dev_cluster", "cluster"),
					label("__meta_kubernetes_pod_label_etcd_steward_dev_member", "member"),
					label("__meta_kubernetes_pod_name", "pod"),
				),
			},
			{
				// As config/prometheus/servicemonitor.yaml: the operator's port "metrics", job steward, and
				// honor_labels, so that the namespace label of Steward's own series (the EtcdCluster's) is kept.
				// HTTPS with the operator's self-signed certificate, and a token allowed to get /metrics.
				"job_name":              "steward",
				"honor_labels":          true,
				"scheme":                "https",
				"authorization":         map[string]any{"credentials_file": tokenFile},
				"tls_config":            map[string]any{"insecure_skip_verify": true},
				"kubernetes_sd_configs": podSD,
				"relabel_configs": append(podFilter[:len(podFilter):len(podFilter)],
					keep("__meta_kubernetes_pod_label_app_kubernetes_io_name", "steward"),
					keep("__meta_kubernetes_pod_container_port_name", "metrics"),
					label("__meta_kubernetes_namespace", "namespace"),
					label("__meta_kubernetes_pod_name", "pod"),
				),
			},
			kubeletJob,
		},
	}
	if len(ruleFiles) > 0 {
		cfg["rule_files"] = ruleFiles
	}
	return yaml.Marshal(cfg)
}

// ScrapeLabel is the namespace label that, set to "true", has the test bed's Prometheus scrape the namespace's
// Pods when Options.ScrapeLabelledNamespacesOnly is set.
const ScrapeLabel = "testbed.steward.dev/scrape"

// kubeletIntervalLabelledOnly is how often the kubelets are scraped under Options.ScrapeLabelledNamespacesOnly.
const kubeletIntervalLabelledOnly = 30 * time.Second

// promLabelName is name as Prometheus's service discovery writes a Kubernetes label into a meta label: every
// character that is not a letter, digit or underscore becomes an underscore.
func promLabelName(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// startPrometheus starts Prometheus on a free port of the loopback interface, with its data in the state dir.
func (c *Cluster) startPrometheus(ctx context.Context, bin string) error {
	var rules []string
	if f := filepath.Join(c.opts.ModuleRoot, PrometheusRulesFile); fileExists(f) {
		rules = append(rules, f)
	}
	const interval = 5 * time.Second
	dir := c.state("prometheus")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	token, err := c.prometheusToken(ctx)
	if err != nil {
		return fmt.Errorf("prometheus's token: %w", err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return err
	}
	cfg, err := prometheusConfig(c.Kubeconfig, tokenFile, interval, rules, c.opts.ScrapeLabelledNamespacesOnly)
	if err != nil {
		return fmt.Errorf("prometheus configuration: %w", err)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return err
	}
	port, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := c.spawn("prometheus", filepath.Join(bin, "prometheus"),
		"--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--storage.tsdb.retention.time=6h",
		"--web.listen-address="+addr, "--web.enable-lifecycle", "--log.level=warn")
	if err != nil {
		return err
	}
	url := "http://" + addr
	if err := c.waitFor(ctx, p, "prometheus ready on "+addr, time.Minute, HTTPHealthy(url+"/-/ready")); err != nil {
		return err
	}
	c.Prometheus = &PrometheusServer{URL: url, ScrapeInterval: interval}
	return nil
}

// PrometheusServiceAccount is the ServiceAccount whose token the test bed's Prometheus scrapes the operator
// with: bound to a ClusterRole that may get /metrics, as Steward's steward-metrics-reader, which is how a
// Prometheus in a cluster is allowed to scrape the operator (docs/operations/observability.md).
const PrometheusServiceAccount = "prometheus"

// prometheusToken creates the ServiceAccount kube-system/prometheus, allowed to get /metrics, and returns a token
// of it that lasts longer than any test bed.
func (c *Cluster) prometheusToken(ctx context.Context) (string, error) {
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return "", err
	}
	const ns, name = "kube-system", PrometheusServiceAccount
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "testbed:prometheus"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "testbed:prometheus"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}
	for _, f := range []func() error{
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(ctx, f); err != nil {
			return "", err
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64((30 * 24 * time.Hour).Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
