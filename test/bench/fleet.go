package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
)

// fleetSizes are the numbers of EtcdClusters the fleet benchmark runs one operator against.
var fleetSizes = []int{50, 100}

// fleetWindow is how long the steady state is observed for its rates.
const fleetWindow = 60 * time.Second

// fleetResult is what one fleet size measured.
type fleetResult struct {
	clusters int
	// allAvailable: from the apply of every cluster at once until the last is Available.
	allAvailable time.Duration
	// Over the steady window: the operator's CPU (cores) and its resident memory at the end (bytes).
	cpu float64
	rss float64
	// apiRequests and apiWrites are the operator's API requests per second (its client-go counter), all and
	// those that change something (POST, PUT, PATCH, DELETE); reconciles per second of the EtcdCluster controller.
	apiRequests, apiWrites, reconciles float64
	// etcdRPCs is the gRPC requests per second the members served (every one from Steward: nothing else talks to them).
	etcdRPCs float64
	// memberBack: a member Pod deleted (its volume kept) until its cluster is Available again with a new Pod.
	memberBack time.Duration
}

// benchFleet runs one operator against many 1-member clusters created at once, as users who run a cluster per
// tenant do: how long until all are Available, what the steady state costs (operator CPU and memory, API and
// etcd requests per second), and how fast one failed member is brought back while the rest are steady.
func benchFleet(ctx context.Context, c *testbed.Cluster, _ int) (section, error) {
	var results []fleetResult
	for _, n := range fleetSizes {
		r, err := measureFleet(ctx, c, n)
		if err != nil {
			return section{}, fmt.Errorf("%d clusters: %w", n, err)
		}
		results = append(results, r)
	}
	var b strings.Builder
	b.WriteString("| clusters | apply to all Available | operator CPU | operator RSS | API requests/s (writes/s) | reconciles/s | etcd RPCs/s | one member Pod deleted to Available |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %d | %s | %.0fm | %.0f MiB | %.1f (%.2f) | %.2f | %.1f | %s |\n", r.clusters, round(r.allAvailable), r.cpu*1000, r.rss/(1<<20),
			r.apiRequests, r.apiWrites, r.reconciles, r.etcdRPCs, round(r.memberBack))
	}
	if len(results) >= 2 {
		lo, hi := results[0], results[len(results)-1]
		d := float64(hi.clusters - lo.clusters)
		fmt.Fprintf(&b, "| growth per added cluster (%d to %d) | %s | %.1fm | %.2f MiB | %.3f (%.4f) | %.4f | %.3f | |\n", lo.clusters, hi.clusters,
			round(time.Duration(float64(hi.allAvailable-lo.allAvailable)/d)), (hi.cpu-lo.cpu)*1000/d, (hi.rss-lo.rss)/(1<<20)/d,
			(hi.apiRequests-lo.apiRequests)/d, (hi.apiWrites-lo.apiWrites)/d, (hi.reconciles-lo.reconciles)/d, (hi.etcdRPCs-lo.etcdRPCs)/d)
	}
	return render("fleet", map[string]any{"Version": testbed.EtcdVersions[0], "Window": fleetWindow, "FlagsNote": flagsNote(), "Table": b.String()})
}

func measureFleet(ctx context.Context, c *testbed.Cluster, n int) (fleetResult, error) {
	res := fleetResult{clusters: n}
	kubectl := kubectlOn(ctx, c)
	ns := fmt.Sprintf("bench-fleet-%d", n)
	if _, err := kubectl("", "create", "namespace", ns); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
		return res, err
	}
	defer func() { _, _ = kubectl("", "delete", "namespace", ns, "--wait=true", "--timeout=10m") }()
	var manifest strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&manifest, "---\napiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: fleet-%03d, namespace: %s}\n"+
			"spec: {replicas: 1, version: %q, storage: {size: 512Mi}, resources: {requests: {cpu: 5m, memory: 32Mi}}}\n", i, ns, testbed.EtcdVersions[0])
	}
	begin := time.Now()
	if _, err := kubectl(manifest.String(), "apply", "-f", "-"); err != nil {
		return res, err
	}
	available := func() (int, error) {
		out, err := kubectl("", "get", "etcdclusters", "-n", ns, "-o",
			`jsonpath={range .items[*]}{.status.conditions[?(@.type=="Available")].status}{"\n"}{end}`)
		if err != nil {
			return 0, err
		}
		return strings.Count(out, "True"), nil
	}
	if err := testbed.Eventually(ctx, 20*time.Minute, time.Second, func() error {
		got, err := available()
		if err != nil {
			return err
		}
		if got < n {
			return fmt.Errorf("%d of %d clusters Available", got, n)
		}
		return nil
	}); err != nil {
		return res, err
	}
	res.allAvailable = time.Since(begin)

	time.Sleep(30 * time.Second)
	ips, err := kubectl("", "get", "pods", "-n", ns, "-l", resources.LabelMember, "-o", "jsonpath={.items[*].status.podIP}")
	if err != nil {
		return res, err
	}
	members := strings.Fields(ips)
	before, err := fleetCounters(ctx, members)
	if err != nil {
		return res, err
	}
	time.Sleep(fleetWindow)
	after, err := fleetCounters(ctx, members)
	if err != nil {
		return res, err
	}
	secs := after.at.Sub(before.at).Seconds()
	res.cpu = (after.cpuSeconds - before.cpuSeconds) / secs
	res.rss = after.rss
	res.apiRequests = (after.requests - before.requests) / secs
	res.apiWrites = (after.writes - before.writes) / secs
	res.reconciles = (after.reconciles - before.reconciles) / secs
	res.etcdRPCs = (after.etcdRPCs - before.etcdRPCs) / secs

	// One member lost while the others are steady: its Pod is deleted, its volume kept.
	victim := "fleet-000"
	oldUID, err := kubectl("", "get", "pod", "-n", ns, "-l", resources.LabelCluster+"="+victim, "-o", "jsonpath={.items[0].metadata.uid}")
	if err != nil {
		return res, err
	}
	begin = time.Now()
	if _, err := kubectl("", "delete", "pod", "-n", ns, "-l", resources.LabelCluster+"="+victim, "--wait=false"); err != nil {
		return res, err
	}
	if err := testbed.Eventually(ctx, 5*time.Minute, 100*time.Millisecond, func() error {
		pods, err := kubectl("", "get", "pods", "-n", ns, "-l", resources.LabelCluster+"="+victim, "-o",
			`jsonpath={range .items[*]}{.metadata.uid}={.status.conditions[?(@.type=="Ready")].status}{" "}{end}`)
		if err != nil {
			return err
		}
		if err := fleetMemberBack(pods, oldUID); err != nil {
			return err
		}
		cond, err := kubectl("", "get", "etcdcluster", "-n", ns, victim, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
		if err != nil {
			return err
		}
		if cond != "True" {
			return fmt.Errorf("cluster %s Available=%s", victim, cond)
		}
		return nil
	}); err != nil {
		return res, err
	}
	res.memberBack = time.Since(begin)
	return res, nil
}

// fleetMemberBack checks kubectl's "uid=ready" list of a cluster's member Pods: one Pod, not the deleted one, Ready.
func fleetMemberBack(pods, oldUID string) error {
	fields := strings.Fields(pods)
	if len(fields) != 1 {
		return fmt.Errorf("%d member Pods", len(fields))
	}
	uid, ready, _ := strings.Cut(fields[0], "=")
	if uid == oldUID {
		return fmt.Errorf("the deleted Pod is still there")
	}
	if ready != "True" {
		return fmt.Errorf("the new Pod is not Ready")
	}
	return nil
}

// fleetSample is the operator's and the members' counters at one moment.
type fleetSample struct {
	at                                     time.Time
	cpuSeconds, rss                        float64
	requests, writes, reconciles, etcdRPCs float64
}

func fleetCounters(ctx context.Context, members []string) (fleetSample, error) {
	s := fleetSample{at: time.Now()}
	op, err := scrapeSeries(ctx, operatorMetrics)
	if err != nil {
		return s, err
	}
	for _, m := range op {
		switch m.name {
		case "process_cpu_seconds_total":
			s.cpuSeconds += m.value
		case "process_resident_memory_bytes":
			s.rss = m.value
		case "rest_client_requests_total":
			s.requests += m.value
			switch m.labels["method"] {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				s.writes += m.value
			}
		case "controller_runtime_reconcile_total":
			if m.labels["controller"] == "etcdcluster" {
				s.reconciles += m.value
			}
		}
	}
	for _, ip := range members {
		series, err := scrapeSeries(ctx, "http://"+net.JoinHostPort(ip, strconv.Itoa(resources.MetricsPort))+"/metrics")
		if err != nil {
			return s, err
		}
		for _, m := range series {
			if m.name == "grpc_server_handled_total" {
				s.etcdRPCs += m.value
			}
		}
	}
	return s, nil
}

// metricSample is one line of the Prometheus text format.
type metricSample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrapeSeries reads every sample of a Prometheus text endpoint (label values without escapes, as these have).
func scrapeSeries(ctx context.Context, url string) ([]metricSample, error) {
	var out []metricSample
	_, err := scrapeLines(ctx, url, func(line string) {
		if m, ok := parseSample(line); ok {
			out = append(out, m)
		}
	})
	return out, err
}

// parseSample parses `name{k="v",...} value [timestamp]`.
func parseSample(line string) (metricSample, bool) {
	m := metricSample{labels: map[string]string{}}
	rest := line
	if i := strings.IndexAny(line, "{ "); i >= 0 {
		m.name, rest = line[:i], line[i:]
	} else {
		return m, false
	}
	if strings.HasPrefix(rest, "{") {
		end := strings.LastIndex(rest, "}")
		if end < 0 {
			return m, false
		}
		for _, kv := range strings.Split(rest[1:end], ",") {
			k, v, ok := strings.Cut(kv, "=")
			if ok {
				m.labels[strings.TrimSpace(k)] = strings.Trim(v, `"`)
			}
		}
		rest = rest[end+1:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return m, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return m, false
	}
	m.value = v
	return m, true
}

// flagsNote says which operator flags a run was given beyond the test bed's, if any.
func flagsNote() string {
	if len(operatorFlags) == 0 {
		return " Operator flags: the defaults."
	}
	return " Operator flags: `" + strings.Join(operatorFlags, " ") + "`."
}
