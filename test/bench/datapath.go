package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
)

// The data path load: what etcd's benchmark tool runs with `--clients 50 --conns 10`, 256-byte values, over a key
// space small enough that every read finds a key the put phase wrote.
const (
	dataPathClients = 50
	dataPathConns   = 10
	dataPathValue   = 256
	dataPathKeys    = 10000
	dataPathWarmup  = 2 * time.Second
	dataPathWindow  = 10 * time.Second
)

// dataPathTarget is a 3-member cluster the load runs against: its members' client endpoints and the client TLS
// configuration (nil for plaintext).
type dataPathTarget struct {
	endpoints []string
	tls       *tls.Config
	// dial: how the client dials (none: the default, for IP endpoints).
	dial []grpc.DialOption
}

// config is the etcd client configuration for the target.
func (t dataPathTarget) config() clientv3.Config {
	return clientv3.Config{Endpoints: t.endpoints, TLS: t.tls, DialOptions: t.dial, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
}

// dataPathRate is one measurement: operations per second over the window, and how many failed.
type dataPathRate struct {
	perSecond float64
	failed    int64
}

// benchDataPath measures puts and linearizable reads per second against Steward clusters and against three bare
// etcd processes of the same release on the same host, plaintext against plaintext and TLS against TLS, from a
// load generator on the host. The bare processes are measured twice: as plain host processes, and moved into a
// CPU cgroup with the weight the kubelet gives all the node's Pods together (kubepods), so that under a
// saturated CPU they get the share the Pods get against the host's other processes, the load generator among
// them. Each Steward variant (default member resources, a CPU request) is a cluster of its own. The targets
// alternate, runs times each (at most 3).
func benchDataPath(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	runs = min(runs, 3)
	variants := []struct{ name, label, spec string }{
		{"bench-datapath", "default resources (requests cpu 50m, memory from the quota)", ""},
		{"bench-datapath-cpu", "requests cpu 500m, memory 256Mi", `, resources: {requests: {cpu: 500m, memory: 256Mi}}`},
	}
	group, err := newPodWeightGroup()
	if err != nil {
		return section{}, err
	}
	defer group.remove()
	var lines []string
	for _, secure := range []bool{false, true} {
		mode := "plaintext"
		if secure {
			mode = "TLS"
		}
		bare, bareProcs, stopBare, err := bareEtcdCluster(ctx, c, secure)
		if err != nil {
			return section{}, fmt.Errorf("bare etcd, %s: %w", mode, err)
		}
		targets := []dataPathTarget{bare, bare}
		for _, v := range variants {
			t, err := stewardDataPathCluster(ctx, c, v.name, testbed.EtcdVersions[0], secure, v.spec)
			if err != nil {
				stopBare()
				return section{}, fmt.Errorf("steward cluster, %s, %s: %w", mode, v.label, err)
			}
			targets = append(targets, t)
		}
		// rates[target][0] puts, [1] reads.
		rates := make([][2][]dataPathRate, len(targets))
		for i := 0; i < runs; i++ {
			for ti, t := range targets {
				// Target 0 is the bare processes as host processes, target 1 the same processes weighted as the Pods.
				if ti <= 1 {
					if err := group.place(bareProcs, ti == 1); err != nil {
						stopBare()
						return section{}, err
					}
				}
				for op, put := range []bool{true, false} {
					r, err := dataPathLoad(ctx, t, put)
					if err != nil {
						stopBare()
						return section{}, err
					}
					rates[ti][op] = append(rates[ti][op], r)
				}
			}
		}
		stopBare()
		for _, v := range variants {
			if _, err := kubectlOn(ctx, c)("", "delete", "etcdcluster", v.name, "--wait=true"); err != nil {
				return section{}, err
			}
		}
		for op, kind := range []string{"puts/s", "linearizable reads/s"} {
			for vi, v := range variants {
				lines = append(lines, dataPathRow(fmt.Sprintf("%s, %s, Steward with %s", mode, kind, v.label),
					rates[2+vi][op], rates[1][op], rates[0][op]))
			}
		}
	}
	return render("data-path", map[string]any{"Version": testbed.EtcdVersions[0], "Clients": dataPathClients, "Connections": dataPathConns, "ValueBytes": dataPathValue, "Keys": dataPathKeys, "Warmup": dataPathWarmup, "Window": dataPathWindow, "Runs": runs, "PodsCPUWeight": group.describe(), "Rows": strings.Join(lines, "\n")})
}

// dataPathRow is one table row: the medians of Steward and both bounds, and Steward's ratio to each.
func dataPathRow(label string, steward, weighted, host []dataPathRate) string {
	med := func(rs []dataPathRate) (float64, string) {
		var xs []float64
		var failed int64
		for _, r := range rs {
			xs = append(xs, r.perSecond)
			failed += r.failed
		}
		sort.Float64s(xs)
		cell := fmt.Sprintf("%.0f", xs[len(xs)/2])
		if failed > 0 {
			cell += fmt.Sprintf(" (%d failed)", failed)
		}
		return xs[len(xs)/2], cell
	}
	s, sc := med(steward)
	w, wc := med(weighted)
	h, hc := med(host)
	return fmt.Sprintf("| %s | %s | %s | %.0f %% | %s | %.0f %% |", label, sc, wc, 100*s/w, hc, 100*s/h)
}

// dataPathLoad runs the load against t, puts or linearizable reads, and returns the rate over the window.
func dataPathLoad(ctx context.Context, t dataPathTarget, put bool) (dataPathRate, error) {
	clients := make([]*clientv3.Client, dataPathConns)
	defer func() {
		for _, cli := range clients {
			if cli != nil {
				_ = cli.Close()
			}
		}
	}()
	for i := range clients {
		cli, err := clientv3.New(t.config())
		if err != nil {
			return dataPathRate{}, fmt.Errorf("connect to %v: %w", t.endpoints, err)
		}
		clients[i] = cli
	}
	value := strings.Repeat("v", dataPathValue)
	from := time.Now().Add(dataPathWarmup)
	to := from.Add(dataPathWindow)
	var done, failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < dataPathClients; w++ {
		wg.Add(1)
		go func(cli *clientv3.Client) {
			defer wg.Done()
			for {
				key := fmt.Sprintf("datapath-%05d", rand.IntN(dataPathKeys)) //nolint:gosec // a load pattern, not a secret
				err := putOrGet(ctx, cli, 10*time.Second, put, key, value)
				now := time.Now()
				if now.After(to) || ctx.Err() != nil {
					return
				}
				if now.Before(from) {
					continue
				}
				if err != nil {
					failed.Add(1)
				} else {
					done.Add(1)
				}
			}
		}(clients[w%dataPathConns])
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return dataPathRate{}, err
	}
	if done.Load() == 0 {
		return dataPathRate{}, fmt.Errorf("no operation succeeded against %v (%d failed)", t.endpoints, failed.Load())
	}
	return dataPathRate{perSecond: float64(done.Load()) / dataPathWindow.Seconds(), failed: failed.Load()}, nil
}

// putOrGet puts value at key, or reads key (linearizable), within timeout.
func putOrGet(ctx context.Context, cli *clientv3.Client, timeout time.Duration, put bool, key, value string) error {
	octx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	if put {
		_, err = cli.Put(octx, key, value)
	} else {
		_, err = cli.Get(octx, key)
	}
	return err
}

// bareEtcdCluster starts three etcd processes of the first test bed release on loopback, with client and peer
// TLS as Steward's members run it when secure, and returns them as a target, the processes, and a function that
// stops them.
func bareEtcdCluster(ctx context.Context, c *testbed.Cluster, secure bool) (dataPathTarget, []*os.Process, func(), error) {
	dir, err := os.MkdirTemp("", "steward-bench-datapath-")
	if err != nil {
		return dataPathTarget{}, nil, nil, err
	}
	var cmds []*exec.Cmd
	var procs []*os.Process
	stop := func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		_ = os.RemoveAll(dir)
	}
	scheme := "http"
	var tlsFlags []string
	var target dataPathTarget
	if secure {
		scheme = "https"
		if tlsFlags, target.tls, err = bareEtcdTLS(dir); err != nil {
			stop()
			return dataPathTarget{}, nil, nil, err
		}
	}
	peer := func(i int) string { return fmt.Sprintf("%s://127.0.0.1:%d", scheme, 36380+i) }
	clientURL := func(i int) string { return fmt.Sprintf("%s://127.0.0.1:%d", scheme, 36370+i) }
	initial := fmt.Sprintf("m0=%s,m1=%s,m2=%s", peer(0), peer(1), peer(2))
	for i := 0; i < 3; i++ {
		args := append(loopbackMemberArgs(i, dir, clientURL(i), peer(i), initial, "new", "bench-datapath"), tlsFlags...)
		cmd := exec.CommandContext(ctx, filepath.Join(c.EtcdBinDir(testbed.EtcdVersions[0]), "etcd"), args...)
		if err := cmd.Start(); err != nil {
			stop()
			return dataPathTarget{}, nil, nil, err
		}
		cmds = append(cmds, cmd)
		procs = append(procs, cmd.Process)
		target.endpoints = append(target.endpoints, clientURL(i))
	}
	if err := waitServing(ctx, target); err != nil {
		stop()
		return dataPathTarget{}, nil, nil, fmt.Errorf("bare etcd: %w", err)
	}
	return target, procs, stop, nil
}

// bareEtcdTLS writes a CA, a member certificate for 127.0.0.1 (server and client: members are clients of each
// other) and a client certificate into dir, and returns etcd's TLS flags (Steward's: client certificates
// required on both ports) and the load generator's TLS configuration.
func bareEtcdTLS(dir string) ([]string, *tls.Config, error) {
	now := time.Now()
	ca, err := pki.NewCA("bench-datapath-ca", now)
	if err != nil {
		return nil, nil, err
	}
	member, err := ca.Issue(pki.Request{CommonName: "bench-member", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")},
		Server: true, Client: true, Lifetime: 24 * time.Hour}, now)
	if err != nil {
		return nil, nil, err
	}
	client, err := ca.Issue(pki.Request{CommonName: "bench-client", Client: true, Lifetime: 24 * time.Hour}, now)
	if err != nil {
		return nil, nil, err
	}
	files := map[string][]byte{"ca.crt": ca.CertPEM, "tls.crt": member.CertPEM, "tls.key": member.KeyPEM}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, nil, err
		}
	}
	caFile, cert, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	flags := []string{"--cert-file=" + cert, "--key-file=" + key, "--trusted-ca-file=" + caFile, "--client-cert-auth",
		"--peer-cert-file=" + cert, "--peer-key-file=" + key, "--peer-trusted-ca-file=" + caFile, "--peer-client-cert-auth"}
	cfg, err := (&etcd.TLS{CA: ca.CertPEM, Cert: client.CertPEM, Key: client.KeyPEM}).Config()
	return flags, cfg, err
}

// stewardDataPathCluster applies a 3-member EtcdCluster of version (plaintext or Steward's TLS, extraSpec appended
// to its spec), waits until it is settled and returns its members as a target, with the client Secret's certificate
// when secure.
func stewardDataPathCluster(ctx context.Context, c *testbed.Cluster, name, version string, secure bool, extraSpec string) (dataPathTarget, error) {
	kubectl := kubectlOn(ctx, c)
	tlsSpec := "{provider: None}"
	if secure {
		tlsSpec = "{provider: Steward}"
	}
	manifest := fmt.Sprintf("apiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: %s, namespace: default}\n"+
		"spec: {replicas: 3, version: %q, tls: %s, storage: {size: 2Gi}%s}\n", name, version, tlsSpec, extraSpec)
	if _, err := kubectl(manifest, "apply", "-f", "-"); err != nil {
		return dataPathTarget{}, err
	}
	target, err := stewardTarget(ctx, c, name, secure)
	if err != nil {
		return dataPathTarget{}, err
	}
	return target, waitServing(ctx, target)
}

// stewardTarget waits until the 3-member EtcdCluster name has three ready members and nothing in progress, and
// returns its members as a target: their Pod IPs, with the client Secret's certificate when secure. It writes
// nothing.
func stewardTarget(ctx context.Context, c *testbed.Cluster, name string, secure bool) (dataPathTarget, error) {
	kubectl := kubectlOn(ctx, c)
	scheme := "http"
	if secure {
		scheme = "https"
	}
	ips, err := settledMemberIPs(ctx, kubectl, name)
	if err != nil {
		return dataPathTarget{}, err
	}
	var target dataPathTarget
	for _, ip := range ips {
		target.endpoints = append(target.endpoints, fmt.Sprintf("%s://%s:%d", scheme, ip, resources.ClientPort))
	}
	if secure {
		cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		data := map[string][]byte{}
		for _, key := range []string{resources.SecretCAKey, resources.SecretCertKey, resources.SecretKeyKey} {
			out, err := kubectl("", "get", "secret", resources.ClientSecretName(cluster), "-o",
				"jsonpath={.data."+strings.ReplaceAll(key, ".", `\.`)+"}")
			if err != nil {
				return dataPathTarget{}, err
			}
			if data[key], err = base64.StdEncoding.DecodeString(out); err != nil {
				return dataPathTarget{}, fmt.Errorf("client Secret %s: %w", key, err)
			}
		}
		target.tls, err = (&etcd.TLS{CA: data[resources.SecretCAKey], Cert: data[resources.SecretCertKey], Key: data[resources.SecretKeyKey],
			ServerName: resources.ClientServiceHost(cluster, resources.Options{ClusterDomain: testbed.ClusterDomain})}).Config()
		if err != nil {
			return dataPathTarget{}, err
		}
	}
	return target, nil
}

// waitServing waits until a put through the target succeeds.
func waitServing(ctx context.Context, t dataPathTarget) error {
	cli, err := clientv3.New(t.config())
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	return testbed.Eventually(ctx, time.Minute, 100*time.Millisecond, func() error {
		octx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := cli.Put(octx, "datapath-ready", "1"); err != nil {
			return fmt.Errorf("not serving: %w", err)
		}
		return nil
	})
}

// podWeightGroup is a CPU cgroup beside the kubelet's Pods (kubepods) with their CPU weight, for bare etcd
// processes to compete for the CPU as the node's Pods do. Both cgroup versions: v1's cpu controller
// (cpu.shares) and v2's unified hierarchy (cpu.weight), with the kubelet's cgroupfs driver as the test bed runs it.
type podWeightGroup struct {
	root, dir, file, weight string
}

// newPodWeightGroup creates the group with kubepods' weight.
func newPodWeightGroup() (*podWeightGroup, error) {
	for _, g := range []podWeightGroup{{root: "/sys/fs/cgroup/cpu", file: "cpu.shares"}, {root: "/sys/fs/cgroup", file: "cpu.weight"}} {
		weight, err := os.ReadFile(filepath.Join(g.root, "kubepods", g.file))
		if err != nil {
			continue
		}
		g.weight, g.dir = strings.TrimSpace(string(weight)), filepath.Join(g.root, "steward-bench-bare")
		if err := os.Mkdir(g.dir, 0o755); err != nil && !os.IsExist(err) {
			return nil, fmt.Errorf("create cgroup %s: %w", g.dir, err)
		}
		if err := os.WriteFile(filepath.Join(g.dir, g.file), []byte(g.weight), 0o644); err != nil {
			return nil, fmt.Errorf("set %s of %s: %w", g.file, g.dir, err)
		}
		return &g, nil
	}
	return nil, errors.New("no kubepods cgroup with cpu.shares or cpu.weight: is the test bed's kubelet running?")
}

// place moves the processes into the group, or back into the root group.
func (g *podWeightGroup) place(procs []*os.Process, weighted bool) error {
	dir := g.root
	if weighted {
		dir = g.dir
	}
	for _, p := range procs {
		// cgroup.procs moves every thread of the process.
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(fmt.Sprint(p.Pid)), 0o644); err != nil {
			return fmt.Errorf("move process %d into %s: %w", p.Pid, dir, err)
		}
	}
	return nil
}

// remove deletes the group (it must have no process left).
func (g *podWeightGroup) remove() { _ = os.Remove(g.dir) }

// describe says what weight the group has, for the section's text.
func (g *podWeightGroup) describe() string {
	return fmt.Sprintf("`%s` %s, read from `%s`", g.file, g.weight, filepath.Join(g.root, "kubepods", g.file))
}
