package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"steward.dev/steward/internal/testbed"
)

// scrapeClusters is how many clusters the operator manages while its metrics endpoint is scraped.
const scrapeClusters = 20

// benchMetricsScrape measures what a Prometheus scrape of the operator costs with scrapeClusters 1-member
// clusters (every one with TLS, so every certificate gauge is there): the size of the answer, the number of
// steward_* series, and the time until the last byte, next to scraping one etcd member's own /metrics.
func benchMetricsScrape(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	kubectl := kubectlOn(ctx, c)
	if _, err := kubectl("", "create", "namespace", "bench-scrape"); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
		return section{}, err
	}
	defer func() { _, _ = kubectl("", "delete", "namespace", "bench-scrape", "--wait=true", "--timeout=5m") }()
	var manifest strings.Builder
	for i := 0; i < scrapeClusters; i++ {
		fmt.Fprintf(&manifest, "---\napiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: scraped-%02d, namespace: bench-scrape}\n"+
			"spec: {replicas: 1, version: %q, storage: {size: 512Mi}}\n", i, testbed.EtcdVersions[0])
	}
	if _, err := kubectl(manifest.String(), "apply", "-f", "-"); err != nil {
		return section{}, err
	}
	if _, err := kubectl("", "wait", "-n", "bench-scrape", "--for=condition=Available", "etcdcluster", "--all", "--timeout=10m"); err != nil {
		return section{}, err
	}
	// The gauges come from status; give every cluster a pass after it became Available.
	time.Sleep(10 * time.Second)
	member, err := kubectl("", "get", "pods", "-n", "bench-scrape", "-l", "etcd.steward.dev/member", "-o", "jsonpath={.items[0].status.podIP}")
	if err != nil {
		return section{}, err
	}
	targets := []struct{ name, url string }{
		{fmt.Sprintf("Steward's /metrics, %d clusters", scrapeClusters), operatorMetrics},
		{"one etcd member's /metrics (for scale)", "http://" + net.JoinHostPort(member, "2381") + "/metrics"},
	}
	var rows []row
	var sizes []string
	for _, target := range targets {
		var times []time.Duration
		var size, series, own int
		for i := 0; i < runs; i++ {
			begin := time.Now()
			size, series, own, err = scrape(ctx, target.url)
			if err != nil {
				return section{}, err
			}
			times = append(times, time.Since(begin))
		}
		if target.url == operatorMetrics && own == 0 {
			return section{}, fmt.Errorf("the operator exported no steward_* series at %s", target.url)
		}
		rows = append(rows, row{target.name + ": scrape", times})
		sizes = append(sizes, fmt.Sprintf("| %s | %d KiB | %d | %d |", target.name, size/1024, series, own))
	}
	return render("metrics-scrape", map[string]any{"Clusters": scrapeClusters, "Version": testbed.EtcdVersions[0], "Runs": runs, "Table": table(rows), "Sizes": strings.Join(sizes, "\n")})
}

var scrapeClient = sync.OnceValue(func() *http.Client { return &http.Client{Timeout: 30 * time.Second} })

// scrape reads a Prometheus text endpoint: its size in bytes, its series and those named steward_*.
func scrape(ctx context.Context, url string) (size, series, steward int, err error) {
	size, err = scrapeLines(ctx, url, func(line string) {
		series++
		if strings.HasPrefix(line, "steward_") {
			steward++
		}
	})
	return size, series, steward, err
}

// scrapeLines GETs a Prometheus text endpoint and hands each sample line (not comments, not blank lines) to
// each; it returns the size of the answer in bytes.
func scrapeLines(ctx context.Context, url string, each func(line string)) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := scrapeClient().Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape %s: HTTP %d", url, resp.StatusCode)
	}
	counted := &countingReader{r: resp.Body}
	lines := bufio.NewScanner(counted)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		if line := lines.Text(); line != "" && !strings.HasPrefix(line, "#") {
			each(line)
		}
	}
	if err := lines.Err(); err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	return counted.n, nil
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
