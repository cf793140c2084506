package testbed

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Fixed addresses of the test bed's first node (node i of several: Node). The node IPs live on a port-less bridge
// of their own so that nothing the cluster serves listens on the machine's real network interfaces.
const (
	// NodeName is the name the first node's kubelet registers its Node under.
	NodeName = "steward-node"
	// NodeIP is the first node's InternalIP; kube-apiserver and that node's kubelet listen on it.
	NodeIP = "10.245.0.1"
	// PodCIDR is the range the first node's pods get their IPs from (CNI host-local).
	PodCIDR      = "10.244.0.0/24"
	serviceCIDR  = "10.96.0.0/16"
	apiServiceIP = "10.96.0.1"
	// DNSServiceIP is the ClusterIP of the cluster DNS Service (kube-system/kube-dns).
	DNSServiceIP = "10.96.0.10"
	// ClusterDomain is the DNS domain of cluster Services.
	ClusterDomain = "cluster.local"

	hostBridge = "stw-host"

	apiserverPort      = 6443
	apiserverEtcdPort  = 23790
	apiserverEtcdPeers = 23800

	// StorageClassName is the default StorageClass, served by the test bed's local-path provisioner. It allows
	// volume expansion (the provisioner grows its volumes, see localpath).
	StorageClassName = "steward-local"
	// FixedStorageClassName is a second class of the same provisioner that does not allow volume expansion: a
	// class to move members to, and one whose volumes cannot grow.
	FixedStorageClassName = "steward-local-fixed"
	// SizedStorageClassName is a third class of the same provisioner whose volumes have the size their claim
	// requests (a tmpfs, in memory): one that fills up, for small claims only.
	SizedStorageClassName = "steward-local-sized"
	// ProvisionerName is the provisioner name of StorageClassName.
	ProvisionerName = "steward.dev/local-path"

	// KubernetesVersion is the release the test bed builds and runs unless told otherwise: the newest the module
	// proxy serves. Every `make test` runs on it.
	KubernetesVersion = "v1.37.2"
	// CoreDNSVersion is the version cluster DNS is built at (third_party/coredns/go.mod).
	CoreDNSVersion = "v1.14.7"
)

// KubernetesVersions are the Kubernetes releases the test bed can build and run, newest first, each from a pinned
// module under third_party/kubernetes-v<major>.<minor>. The last is the oldest release the Helm chart (kubeVersion)
// and the OLM bundle (minKubeVersion) claim, on which `make test-compat` runs an e2e subset.
var KubernetesVersions = []string{KubernetesVersion, "v1.34.4"}

// KubernetesEnv names the environment variable that picks the test bed's Kubernetes release when
// Options.KubernetesVersion is empty: a release of KubernetesVersions, its minor ("1.34"), "newest" or "oldest".
const KubernetesEnv = "STEWARD_TESTBED_KUBERNETES"

// ContainerdVersion is the containerd 2 release the test bed builds from a pinned module
// (third_party/containerd-v2) and runs by default: it mounts image volumes (which Steward's default agent
// delivery uses) and answers the kubelet's RuntimeConfig call (which Kubernetes 1.38 requires).
const ContainerdVersion = "v2.4.2"

// SystemContainerd names the containerd the machine has installed (Debian 12's 1.6, hack/prereqs.sh installs it
// for its runc): a runtime without image volumes, on which Steward's members get the agent from an init
// container. Options.Containerd or ContainerdEnv picks it.
const SystemContainerd = "1.6"

// ContainerdEnv names the environment variable that picks the test bed's containerd when Options.Containerd is
// empty: "2" (or "2.4", ContainerdVersion, the default) for containerd 2 built from the module, "1.6" for the
// machine's.
const ContainerdEnv = "STEWARD_TESTBED_CONTAINERD"

// EtcdVersions are the etcd versions the test bed builds images for; each has a pinned module under
// third_party/etcd-v<version>. The first is the default: the API server's own etcd, samples and tests run it.
// Three minor versions and two patches of one, so that patch and minor upgrades, downgrades and a refused
// two-minor jump can all be tested.
var EtcdVersions = []string{"3.6.16", "3.7.3", "3.6.15", "3.5.35"}

// Options configure Start. The zero value is usable.
type Options struct {
	// StateDir holds everything the cluster writes: PKI, configs, logs, PIDs, containerd's and the kubelet's
	// data, and the provisioner's volumes. Wiped at Start. Default /var/lib/steward-testbed.
	StateDir string
	// RunDir holds sockets and runtime state; kept short because unix socket paths are limited to 108 bytes.
	// Default /run/steward-testbed.
	RunDir string
	// CacheDir holds built binaries and images, keyed by version and module checksum, across runs.
	// Default $XDG_CACHE_HOME/steward (~/.cache/steward).
	CacheDir string
	// ModuleRoot is the Steward source tree, used to build the test bed's own helpers (pause, provisioner) and
	// to find the pinned modules under third_party. Default: found from the working directory.
	ModuleRoot string
	// Progress receives one line per step. Default os.Stderr.
	Progress io.Writer
	// Nodes is how many nodes the cluster has, each with its own kubelet, containerd, pod bridge and volume
	// provisioner (Node). Default 1 (the playground); at most 9.
	Nodes int
	// Zones is how many zones the nodes are spread over: node i is in zone i mod Zones (zone-a, zone-b, ...).
	// Default: one zone per node.
	Zones int
	// DedicatedNodes is how many of the nodes (the last ones) register with the taint DedicatedTaint, so that
	// only Pods that tolerate it run there: nodes a test can stop, cut off and drain without touching what other
	// tests run at the same time on the untainted nodes. Default 0; less than Nodes.
	DedicatedNodes int
	// KubernetesVersion is the Kubernetes release to build and run, one of KubernetesVersions or its minor.
	// Default: the environment variable KubernetesEnv, else KubernetesVersion.
	KubernetesVersion string
	// Containerd is the container runtime every node runs: SystemContainerd (the machine's, Debian's 1.6) or
	// ContainerdVersion (built from the module; "2" or "2.4" say the same). Only containerd 2.1 and newer
	// mount image volumes and answer the kubelet's RuntimeConfig call (which Kubernetes 1.38 requires).
	// Default: the environment variable ContainerdEnv, else ContainerdVersion.
	Containerd string
	// ScrapeLabelledNamespacesOnly has the test bed's Prometheus scrape member and operator Pods only in
	// namespaces labelled ScrapeLabel=true, and the kubelets every 30 s: a test suite whose clusters are mostly not
	// watched spares the machine the scrapes (a tenth of its CPU on the e2e suite). Default false: everything
	// every 5 s, as the playground wants.
	ScrapeLabelledNamespacesOnly bool
}

// DedicatedTaint is the taint (value "true", effect NoSchedule) of Options.DedicatedNodes, and their label (value
// "true") to select them by.
const DedicatedTaint = "testbed.steward.dev/dedicated"

func (o Options) withDefaults() (Options, error) {
	if o.StateDir == "" {
		o.StateDir = "/var/lib/steward-testbed"
	}
	if o.RunDir == "" {
		o.RunDir = "/run/steward-testbed"
	}
	if o.CacheDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return o, fmt.Errorf("find cache dir (set Options.CacheDir): %w", err)
		}
		o.CacheDir = filepath.Join(dir, "steward")
	}
	if o.Progress == nil {
		o.Progress = os.Stderr
	}
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Nodes < 1 || o.Nodes > maxNodes {
		return o, fmt.Errorf("the test bed runs 1 to %d nodes, not %d", maxNodes, o.Nodes)
	}
	if o.Zones == 0 {
		o.Zones = o.Nodes
	}
	if o.DedicatedNodes < 0 || o.DedicatedNodes >= o.Nodes {
		return o, fmt.Errorf("the test bed dedicates 0 to %d of its %d nodes, not %d: one node stays for everything else", o.Nodes-1, o.Nodes, o.DedicatedNodes)
	}
	if o.Zones < 1 || o.Zones > o.Nodes {
		return o, fmt.Errorf("the test bed spreads %d nodes over 1 to %d zones, not %d", o.Nodes, o.Nodes, o.Zones)
	}
	if o.KubernetesVersion == "" {
		o.KubernetesVersion = os.Getenv(KubernetesEnv)
	}
	release, err := kubernetesRelease(o.KubernetesVersion)
	if err != nil {
		return o, err
	}
	o.KubernetesVersion = release
	if o.Containerd == "" {
		o.Containerd = os.Getenv(ContainerdEnv)
	}
	if o.Containerd, err = containerdRelease(o.Containerd); err != nil {
		return o, err
	}
	if o.ModuleRoot == "" {
		root, err := findModuleRoot()
		if err != nil {
			return o, err
		}
		o.ModuleRoot = root
	}
	for _, p := range []*string{&o.StateDir, &o.RunDir, &o.CacheDir, &o.ModuleRoot} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return o, fmt.Errorf("absolute path of %s: %w", *p, err)
		}
		*p = abs
	}
	return o, nil
}

// findModuleRoot asks the go command for the main module of the working directory and checks it is Steward's.
func findModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("locate Steward's source tree with `go env GOMOD` (the test bed needs the Go toolchain): %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("the working directory is not inside Steward's source tree; run from the repository or set Options.ModuleRoot")
	}
	root := filepath.Dir(gomod)
	if _, err := os.Stat(filepath.Join(root, "internal", "testbed", "third_party")); err != nil {
		return "", fmt.Errorf("%s is not Steward's source tree (no internal/testbed/third_party); set Options.ModuleRoot", root)
	}
	return root, nil
}

// CachedBinaries lists the binaries the test bed built into the default cache that match pattern, a glob under
// its bin directory such as "etcd-v3.6.*/etcd", sorted (the highest version last); none before the test bed's
// first build. For integration tests that run the test bed's builds on their own.
func CachedBinaries(pattern string) []string {
	o, err := Options{}.withDefaults()
	if err != nil {
		return nil
	}
	bins, _ := filepath.Glob(filepath.Join(o.CacheDir, "bin", pattern))
	sort.Strings(bins)
	return bins
}

// FreeLoopbackPort is a TCP port on 127.0.0.1 that was free a moment ago, for tests that start processes (etcd)
// on loopback; t (a *testing.T) fails when there is none.
func FreeLoopbackPort(t interface {
	Helper()
	Fatal(args ...any)
}) string {
	t.Helper()
	p, err := LoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(p)
}

// LoopbackPort is a TCP port on 127.0.0.1 that was free a moment ago, for programs that start processes on
// loopback (the benchmarks, hack/membermemory).
func LoopbackPort() (int, error) {
	return freePort("127.0.0.1")
}

// freePort is a TCP port on ip that was free a moment ago, for a process started next to listen on. It is chosen
// from 10000 up to the kernel's ephemeral range or Kubernetes' NodePort range (30000), whichever begins first: a
// port the kernel hands out for listen(":0") is from the range it also gives outgoing connections, and on a busy
// test bed one of those can take it between the check and the process's own bind, which then fails with "address
// already in use"; and a NodePort Service's rules would capture traffic to a port of the NodePort range.
func freePort(ip string) (int, error) {
	if high := min(ephemeralLow(), 30000); high > 11000 {
		for range 50 {
			port := 10000 + rand.IntN(high-10000) //nolint:gosec // a port to try, not a secret
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				continue
			}
			_ = l.Close()
			return port, nil
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", ip, err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (net.ipv4.ip_local_port_range), 32768 when it
// cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return low
}

// NewestCachedEtcd is the newest etcd 3.6 binary the test bed built, for integration tests that run etcd
// processes: t is skipped when short (go test -short) and when the test bed has not built one yet.
func NewestCachedEtcd(t interface {
	Helper()
	Skip(args ...any)
}, short bool) string {
	t.Helper()
	if short {
		t.Skip("integration test: runs etcd processes")
	}
	bins := CachedBinaries("etcd-v3.6.*/etcd")
	if len(bins) == 0 {
		t.Skip("etcd not cached yet (start the test bed once)")
	}
	return bins[len(bins)-1]
}

// StartLoopbackEtcd runs a one-member plaintext etcd of binary bin on loopback, from dataDir (new, or restored
// from a snapshot), until the test t ends, and returns its client URL. For integration tests that need a real
// member without the test bed; they wait for it to serve as their clients dial it.
func StartLoopbackEtcd(t interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}, bin, dataDir string) string {
	t.Helper()
	peer, client := "http://127.0.0.1:"+FreeLoopbackPort(t), "http://127.0.0.1:"+FreeLoopbackPort(t)
	cmd := exec.Command(bin, "--name=m", "--data-dir="+dataDir, "--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=m="+peer, "--listen-client-urls="+client, "--advertise-client-urls="+client, "--log-level=error")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return client
}

// kubernetesRelease resolves a requested Kubernetes release ("", "v1.34.4", "1.34.4", "1.34", "v1.34", "newest",
// "oldest") to one of KubernetesVersions; "" is the default.
func kubernetesRelease(requested string) (string, error) {
	switch strings.TrimSpace(requested) {
	case "":
		return KubernetesVersion, nil
	case "newest":
		return KubernetesVersions[0], nil
	case "oldest":
		return KubernetesVersions[len(KubernetesVersions)-1], nil
	}
	want := "v" + strings.TrimPrefix(strings.TrimSpace(requested), "v")
	for _, v := range KubernetesVersions {
		if v == want || strings.HasPrefix(v, want+".") {
			return v, nil
		}
	}
	return "", fmt.Errorf("the test bed builds Kubernetes %s (or say newest, oldest), not %q (%s)", strings.Join(KubernetesVersions, " or "), requested, KubernetesEnv)
}

// containerdRelease resolves a requested containerd ("", "1.6", "2", "2.4", "v2.4.2") to SystemContainerd or
// ContainerdVersion; "" is the default, the built one.
func containerdRelease(requested string) (string, error) {
	want, built := strings.TrimPrefix(strings.TrimSpace(requested), "v"), strings.TrimPrefix(ContainerdVersion, "v")
	switch {
	case want == SystemContainerd:
		return SystemContainerd, nil
	case want == "" || want == built || strings.HasPrefix(built, want+"."):
		return ContainerdVersion, nil
	}
	return "", fmt.Errorf("the test bed runs containerd %s (the machine's) or %s (built; say 2), not %q (%s)", SystemContainerd, ContainerdVersion, requested, ContainerdEnv)
}

// kubernetesModule is the directory under third_party that pins release.
func kubernetesModule(release string) string {
	major, minor := kubernetesMinor(release)
	return "kubernetes-v" + major + "." + minor
}

// kubernetesMinor splits a release ("v1.37.2") into its major and minor numbers ("1", "37").
func kubernetesMinor(release string) (major, minor string) {
	parts := strings.SplitN(strings.TrimPrefix(release, "v"), ".", 3)
	return parts[0], parts[1]
}

// RegisterFlags defines on fs the flags of the options every command that starts or stops a test bed accepts
// (steward-testbed, the benchmarks), and returns the Options they fill in when fs is parsed.
func RegisterFlags(fs *flag.FlagSet) *Options {
	var o Options
	fs.StringVar(&o.StateDir, "state-dir", "", "test bed state directory (default /var/lib/steward-testbed)")
	fs.StringVar(&o.RunDir, "run-dir", "", "test bed runtime directory (default /run/steward-testbed)")
	fs.StringVar(&o.CacheDir, "cache-dir", "", "build cache (default ~/.cache/steward)")
	fs.IntVar(&o.Nodes, "nodes", 1, "how many nodes the cluster has, each with its own kubelet, containerd and pod network (1 to 9)")
	fs.IntVar(&o.Zones, "zones", 0, "how many zones the nodes are spread over (default: one per node)")
	fs.IntVar(&o.DedicatedNodes, "dedicated-nodes", 0, "how many of the nodes (the last ones) carry the taint "+DedicatedTaint+"=true:NoSchedule")
	return &o
}
