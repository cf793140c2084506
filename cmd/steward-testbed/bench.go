package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"steward.dev/steward/internal/testbed"
)

// A benchmark result is one section of docs/benchmarks.md, between markers, so a run replaces the sections it
// measured and keeps the others (the cold start is only measured on request: it takes half an hour).
type section struct {
	name string
	body string
}

func bench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	opts := optionFlags(fs)
	out := fs.String("out", "docs/benchmarks.md", "file to write the results into")
	runs := fs.Int("runs", 5, "repetitions of each measurement")
	cold := fs.Bool("cold", false, "also measure a cold start: empty Go module and build caches and binary cache (about 30 minutes)")
	_ = fs.Parse(args)

	var sections []section
	if *cold {
		s, err := benchColdStart(ctx, *opts)
		if err != nil {
			return err
		}
		sections = append(sections, s)
	}
	var starts []time.Duration
	var c *testbed.Cluster
	for i := 0; i < 3; i++ {
		begin := time.Now()
		var err error
		if c, err = testbed.Start(ctx, *opts); err != nil {
			return err
		}
		starts = append(starts, time.Since(begin))
		if i < 2 {
			if err := c.Stop(); err != nil {
				return err
			}
		}
	}
	defer func() { _ = c.Stop() }()
	sections = append(sections, section{"warm-start", fmt.Sprintf(
		"### Test bed start, warm (binaries cached)\n\n`testbed.Start` until node Ready, CoreDNS available, StorageClass present; %d runs.\n\n%s",
		len(starts), table([]row{{"warm start", starts}}))})

	podTimes, err := benchPodStart(ctx, c, *runs)
	if err != nil {
		return err
	}
	procTimes, err := benchEtcdProcess(ctx, c, *runs)
	if err != nil {
		return err
	}
	sections = append(sections, section{"etcd-start", fmt.Sprintf(
		"### One etcd member: Pod on the test bed vs. the bare process\n\n"+
			"Pod: create a Pod from the local etcd %s image until etcd answers `/health` on the pod IP. "+
			"Process: start the same etcd binary by hand until `/health` answers (the physical bound). %d runs each.\n\n%s",
		testbed.EtcdVersions[0], *runs, table([]row{{"etcd Pod to healthy", podTimes}, {"etcd process to healthy", procTimes}}))})
	if err := writeSections(*out, sections); err != nil {
		return err
	}
	fmt.Printf("results written to %s\n", *out)
	return nil
}

func benchColdStart(ctx context.Context, opts testbed.Options) (section, error) {
	tmp, err := os.MkdirTemp("", "steward-cold-")
	if err != nil {
		return section{}, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	for k, v := range map[string]string{"GOMODCACHE": filepath.Join(tmp, "mod"), "GOCACHE": filepath.Join(tmp, "build")} {
		old, had := os.LookupEnv(k)
		_ = os.Setenv(k, v)
		if had {
			defer func() { _ = os.Setenv(k, old) }()
		} else {
			defer func() { _ = os.Unsetenv(k) }()
		}
	}
	opts.CacheDir = filepath.Join(tmp, "steward")
	begin := time.Now()
	c, err := testbed.Start(ctx, opts)
	if err != nil {
		return section{}, err
	}
	took := time.Since(begin)
	// The module cache is read-only on disk; make it removable.
	_ = exec.Command("chmod", "-R", "u+w", tmp).Run()
	if err := c.Stop(); err != nil {
		return section{}, err
	}
	return section{"cold-start", fmt.Sprintf("### Test bed start, cold\n\nEmpty Go module cache, Go build cache and binary cache: downloads "+
		"modules, builds Kubernetes %s, etcd %s, CoreDNS %s and the images, then starts. 1 run.\n\n%s",
		testbed.KubernetesVersion, strings.Join(testbed.EtcdVersions, " and "), testbed.CoreDNSVersion, table([]row{{"cold start", []time.Duration{took}}}))}, nil
}

func benchPodStart(ctx context.Context, c *testbed.Cluster, runs int) ([]time.Duration, error) {
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return nil, err
	}
	var times []time.Duration
	for i := 0; i < runs; i++ {
		name := fmt.Sprintf("bench-etcd-%d", i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "etcd", Image: testbed.EtcdImage(testbed.EtcdVersions[0]), ImagePullPolicy: corev1.PullNever,
				Command: []string{"/usr/local/bin/etcd", "--data-dir=/tmp/data", "--listen-client-urls=http://0.0.0.0:2379",
					"--advertise-client-urls=http://127.0.0.1:2379"},
			}}},
		}
		begin := time.Now()
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		err := pollUntil(ctx, 2*time.Minute, func() error {
			p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.PodIP == "" {
				return fmt.Errorf("no pod IP yet")
			}
			return healthy(ctx, "http://"+p.Status.PodIP+":2379/health")
		})
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", name, err)
		}
		times = append(times, time.Since(begin))
		_ = cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}
	return times, nil
}

func benchEtcdProcess(ctx context.Context, c *testbed.Cluster, runs int) ([]time.Duration, error) {
	var times []time.Duration
	for i := 0; i < runs; i++ {
		dir, err := os.MkdirTemp("", "steward-bench-etcd-")
		if err != nil {
			return nil, err
		}
		begin := time.Now()
		cmd := exec.CommandContext(ctx, filepath.Join(c.EtcdBinDir(testbed.EtcdVersions[0]), "etcd"), "--data-dir="+dir,
			"--listen-client-urls=http://127.0.0.1:32379", "--advertise-client-urls=http://127.0.0.1:32379",
			"--listen-peer-urls=http://127.0.0.1:32380", "--initial-advertise-peer-urls=http://127.0.0.1:32380",
			"--initial-cluster=default=http://127.0.0.1:32380")
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		err = pollUntil(ctx, time.Minute, func() error { return healthy(ctx, "http://127.0.0.1:32379/health") })
		took := time.Since(begin)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
		if err != nil {
			return nil, fmt.Errorf("etcd process: %w", err)
		}
		times = append(times, took)
	}
	return times, nil
}

func healthy(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// pollUntil retries check every 50 ms (fine enough for second-scale measurements) until it passes or timeout.
func pollUntil(ctx context.Context, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type row struct {
	name  string
	times []time.Duration
}

func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| measurement | runs | median | min | max |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		t := append([]time.Duration(nil), r.times...)
		sort.Slice(t, func(i, j int) bool { return t[i] < t[j] })
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", r.name, len(t), round(t[len(t)/2]), round(t[0]), round(t[len(t)-1]))
	}
	return b.String()
}

func round(d time.Duration) string {
	if d > time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// writeSections replaces each section's previous result in path (or appends it) and stamps the machine.
func writeSections(path string, sections []section) error {
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc := string(data)
	if doc == "" {
		doc = "# Benchmarks\n\nWritten by `make bench` (`go run ./cmd/steward-testbed bench`); each section is replaced by the run " +
			"that measured it. Times are wall-clock on the machine named in the section.\n"
	}
	host, _ := os.Hostname()
	stamp := fmt.Sprintf("\n\n_Measured %s on %s: %d CPUs, %s._\n", time.Now().UTC().Format("2006-01-02"), host, runtime.NumCPU(), kernel())
	for _, s := range sections {
		start, end := "<!-- bench:"+s.name+" -->", "<!-- /bench:"+s.name+" -->"
		block := start + "\n" + s.body + stamp + end
		re := regexp.MustCompile(`(?s)` + regexp.QuoteMeta(start) + `.*?` + regexp.QuoteMeta(end))
		if re.MatchString(doc) {
			doc = re.ReplaceAllLiteralString(doc, block)
		} else {
			doc = strings.TrimRight(doc, "\n") + "\n\n" + block + "\n"
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

func kernel() string {
	out, err := exec.Command("uname", "-r").Output()
	if err != nil {
		return "unknown kernel"
	}
	return "Linux " + strings.TrimSpace(string(out))
}
