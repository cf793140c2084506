// Command membermemory measures how much memory one etcd member holds by the data written to it: it starts a
// single etcd process on loopback (a temporary data dir, free ports), writes a given total as values of a given
// size to distinct keys, and samples the process's memory from /proc while it does (VmHWM, RssAnon, RssFile)
// and etcd's own process_resident_memory_bytes once the writes are done. It is how docs/development/benchmarks.md
// ("Member memory") and the sizing guidance in docs/user/clusters.md were measured, and what the memory estimate
// of internal/resources (MemberMemoryNeed) is checked against.
//
// Usage:
//
//	go run ./hack/membermemory -etcd ~/.cache/steward/bin/etcd-v3.6.16-*/etcd -snapshot-count 10000 -value 1Mi -total 1Gi
//
// It starts nothing but that process, and kills it (and removes its data dir) before it exits.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/resource"

	"steward.dev/steward/internal/testbed"
)

type result struct {
	entries                     int
	peakRSS, peakAnon, peakFile int64 // bytes, sampled every 100ms during the writes
	endAnon, endFile, promRSS   int64 // after the writes (and a second's settling)
	writeTime                   time.Duration
	dbSize                      int64
}

func main() {
	etcdBin := flag.String("etcd", "", "etcd binary")
	snapshotCount := flag.Int64("snapshot-count", 0, "--snapshot-count (0: etcd's default)")
	value := flag.String("value", "1Mi", "size of each value")
	total := flag.String("total", "256Mi", "total of the values written")
	workers := flag.Int("workers", 8, "concurrent writers")
	flag.Parse()
	if *etcdBin == "" {
		fmt.Fprintln(os.Stderr, "membermemory: -etcd is required")
		os.Exit(2)
	}
	vq, tq := resource.MustParse(*value), resource.MustParse(*total)
	valueSize, totalSize := vq.Value(), tq.Value()
	r, err := measure(context.Background(), *etcdBin, *snapshotCount, valueSize, totalSize, *workers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "membermemory:", err)
		os.Exit(1)
	}
	mib := func(b int64) string { return fmt.Sprintf("%.0f", float64(b)/(1<<20)) }
	fmt.Printf("| %s | %d | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", filepath.Base(filepath.Dir(*etcdBin)), *snapshotCount,
		*value, *total, r.entries, mib(r.dbSize), mib(r.peakRSS), mib(r.peakAnon), mib(r.endAnon), mib(r.endFile), mib(r.promRSS),
		r.writeTime.Round(100*time.Millisecond))
}

func measure(ctx context.Context, bin string, snapshotCount, valueSize, total int64, workers int) (result, error) {
	var r result
	dir, err := os.MkdirTemp("", "steward-membermemory-")
	if err != nil {
		return r, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	var ports [3]int // client, peer, metrics
	for i := range ports {
		if ports[i], err = testbed.LoopbackPort(); err != nil {
			return r, err
		}
	}
	cp, pp, mp := ports[0], ports[1], ports[2]
	client, peer := fmt.Sprintf("http://127.0.0.1:%d", cp), fmt.Sprintf("http://127.0.0.1:%d", pp)
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d", mp)
	args := []string{"--name=m0", "--data-dir=" + filepath.Join(dir, "data"), "--listen-client-urls=" + client,
		"--advertise-client-urls=" + client, "--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=m0=" + peer, "--listen-metrics-urls=" + metricsURL, "--quota-backend-bytes=" + strconv.FormatInt(8<<30, 10),
		"--log-level=warn"}
	if snapshotCount > 0 {
		args = append(args, "--snapshot-count="+strconv.FormatInt(snapshotCount, 10))
	}
	cmd := exec.CommandContext(ctx, bin, args...) //nolint:gosec // the etcd binary the user named, with flags of its own
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("start etcd: %w", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, MaxCallSendMsgSize: int(valueSize) + 4096})
	if err != nil {
		return r, err
	}
	defer func() { _ = cli.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Status(sctx, client)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("etcd did not answer: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	pid := cmd.Process.Pid
	stop := make(chan struct{})
	var samplerDone sync.WaitGroup
	samplerDone.Add(1)
	go func() {
		defer samplerDone.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if m, err := testbed.ProcessMemory(pid); err == nil {
				r.peakRSS = max(r.peakRSS, m["VmRSS"])
				r.peakAnon = max(r.peakAnon, m["RssAnon"])
				r.peakFile = max(r.peakFile, m["RssFile"])
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()

	n := int((total + valueSize - 1) / valueSize)
	r.entries = n
	val := strings.Repeat("x", int(valueSize))
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	begin := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := cli.Put(ctx, fmt.Sprintf("/fill/%08d", i), val); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("put %d: %w", i, err) })
					return
				}
			}
		}()
	}
	wg.Wait()
	r.writeTime = time.Since(begin)
	time.Sleep(time.Second)
	close(stop)
	samplerDone.Wait()
	if firstErr != nil {
		return r, firstErr
	}
	if m, err := testbed.ProcessMemory(pid); err == nil {
		r.endAnon, r.endFile = m["RssAnon"], m["RssFile"]
		r.peakRSS = max(r.peakRSS, m["VmHWM"])
	}
	if st, err := cli.Status(ctx, client); err == nil {
		r.dbSize = st.DbSize
	}
	r.promRSS, err = promGauge(ctx, metricsURL+"/metrics", "process_resident_memory_bytes")
	return r, err
}

func promGauge(ctx context.Context, url, name string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err
		}
	}
	return 0, errors.Join(s.Err(), fmt.Errorf("no %s in %s", name, url))
}
