package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"steward.dev/steward/internal/ociimage"
)

// Cluster is a running test bed.
type Cluster struct {
	// Kubeconfig is the path of a cluster-admin kubeconfig.
	Kubeconfig string
	// RESTConfig is the same credentials for Go clients.
	RESTConfig *rest.Config

	// S3 is the S3-compatible server backups are tested against.
	S3 *S3Server
	// GCS is the Google Cloud Storage emulator backups are tested against.
	GCS *GCSServer
	// Azure is the Azure Blob Storage emulator backups are tested against.
	Azure *AzureServer
	// Prometheus scrapes the member and operator Pods and evaluates Steward's alerting rules.
	Prometheus *PrometheusServer

	opts     Options
	promBin  string
	s3Bin    string
	gcsBin   string
	azureDir string
	cmBin    string
	kubeBin  string
	ctrdBin  string // containerd 2's binaries when the nodes run it; "" for the machine's containerd
	etcdBins map[string]string
	procsMu  sync.Mutex // nodes start at once
	// kubeletStart is held while a kubelet starts, until it has its device plugin socket (startKubeletAlone).
	kubeletStart sync.Mutex
	procs        []*process
	imageTars    []string
	nodes        []Node
}

// Start builds what is missing, stops any test bed left on this machine, and starts a fresh cluster. It returns
// once the node is Ready, cluster DNS answers and the default StorageClass exists. On error everything started
// so far is stopped again.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkPrerequisites(); err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, etcdBins: map[string]string{}}
	c.nodes = nodesOf(opts)
	begin := time.Now()
	b := &builder{opts: opts}
	if c.kubeBin, err = b.ensure(ctx, kubernetesSet(c.opts.KubernetesVersion)); err != nil {
		return nil, err
	}
	if opts.Containerd != SystemContainerd {
		if c.ctrdBin, err = b.ensure(ctx, containerdSet()); err != nil {
			return nil, err
		}
	}
	for _, v := range EtcdVersions {
		if c.etcdBins[v], err = b.ensure(ctx, etcdSet(v)); err != nil {
			return nil, err
		}
	}
	dnsBin, err := b.ensure(ctx, coreDNSSet())
	if err != nil {
		return nil, err
	}
	if c.s3Bin, err = b.ensure(ctx, versityGWSet()); err != nil {
		return nil, err
	}
	if c.gcsBin, err = b.ensure(ctx, fakeGCSSet()); err != nil {
		return nil, err
	}
	if c.azureDir, err = b.ensureAzurite(ctx); err != nil {
		return nil, err
	}
	if c.cmBin, err = b.ensure(ctx, certManagerSet()); err != nil {
		return nil, err
	}
	if c.promBin, err = b.ensure(ctx, prometheusSet()); err != nil {
		return nil, err
	}

	b.progress("stopping any earlier test bed")
	if err := down(opts, filepath.Join(c.kubeBin, "kube-proxy")); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(opts.StateDir); err != nil {
		return nil, fmt.Errorf("wipe state dir: %w", err)
	}
	dirs := []string{c.pidDir(), c.logDir(), c.state("bin"), opts.RunDir}
	for _, n := range c.nodes {
		dirs = append(dirs, c.volumeDir(n))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := c.start(ctx, b, dnsBin); err != nil {
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, fmt.Errorf("start test bed (logs in %s): %w", c.logDir(), err)
	}
	b.progress("cluster ready in %s; kubeconfig %s", time.Since(begin).Round(100*time.Millisecond), c.Kubeconfig)
	return c, nil
}

func (c *Cluster) start(ctx context.Context, b *builder, dnsBin string) error {
	b.progress("building images and helpers")
	if err := c.buildImages(ctx, b, dnsBin); err != nil {
		return err
	}
	b.progress("writing certificates and configuration")
	if err := c.writeConfigs(); err != nil {
		return err
	}
	for _, n := range c.nodes {
		b.progress("setting up the network of node %s (%s on %s, pods on %s in %s, zone %s)", n.Name, n.IP, hostBridge, n.PodCIDR, n.bridge(), n.Zone)
		if err := makeCgroupRoot(n.cgroupRoot()); err != nil {
			return err
		}
	}
	if err := setupNetwork(c.nodes); err != nil {
		return err
	}
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"etcd for kube-apiserver", c.startAPIServerEtcd},
		{"kube-apiserver", c.startAPIServer},
		{"containerd", c.startContainerds},
		{"kubelet, kube-proxy, kube-controller-manager, kube-scheduler", c.startNodeAndControllers},
		{"local-path provisioner", c.startProvisioners},
		{"CoreDNS and the default StorageClass", c.installAddons},
		{"S3-compatible server (versitygw)", c.startS3},
		{"Google Cloud Storage emulator (fake-gcs-server)", c.startGCS},
		{"Azure Blob Storage emulator (Azurite)", c.startAzure},
		{"cert-manager and its issuers", func(ctx context.Context) error { return c.startCertManager(ctx, c.cmBin) }},
		{"Prometheus", func(ctx context.Context) error { return c.startPrometheus(ctx, c.promBin) }},
	}
	for _, s := range steps {
		b.progress("starting %s", s.name)
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

// EtcdBinDir is the directory with etcd, etcdctl and etcdutl at version, for tests and benchmarks that run
// etcd outside the cluster.
func (c *Cluster) EtcdBinDir(version string) string { return c.etcdBins[version] }

// KubectlPath is the kubectl built with the cluster.
func (c *Cluster) KubectlPath() string { return filepath.Join(c.kubeBin, "kubectl") }

// KubeAPIServerPath is the kube-apiserver binary of the cluster's Kubernetes release, for tests that run a
// kube-apiserver of their own against an etcd under test.
func (c *Cluster) KubeAPIServerPath() string { return filepath.Join(c.kubeBin, "kube-apiserver") }

// KubernetesVersion is the Kubernetes release the cluster runs.
func (c *Cluster) KubernetesVersion() string { return c.opts.KubernetesVersion }

// Containerd is the containerd the nodes run: SystemContainerd or ContainerdVersion (Options.Containerd).
func (c *Cluster) Containerd() string { return c.opts.Containerd }

// StateDir is where the cluster's logs (logs/), PIDs and data live.
func (c *Cluster) StateDir() string { return c.opts.StateDir }

// Stop stops every process of the test bed and removes what it changed on the host. The state dir is kept for
// its logs; the next Start wipes it. Stop is safe to call more than once.
func (c *Cluster) Stop() error {
	return down(c.opts, filepath.Join(c.kubeBin, "kube-proxy"))
}

// Down stops a test bed started by another process (the playground), found through its state dir.
func Down(opts Options) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	kubeProxy := ""
	for _, r := range recordedProcesses(opts.StateDir) {
		if r.name == "kube-proxy" {
			kubeProxy = r.bin
		}
	}
	return down(opts, kubeProxy)
}

func checkPrerequisites() error {
	if os.Geteuid() != 0 {
		return errors.New("the test bed needs root: it runs kubelet, containerd and changes the host's network")
	}
	var missing []string
	for bin, pkg := range map[string]string{
		"containerd": "containerd", "containerd-shim-runc-v2": "containerd", "ctr": "containerd", "runc": "runc",
		"iptables": "iptables", "iptables-save": "iptables", "ip": "iproute2", "conntrack": "conntrack",
		"mount": "mount", "go": "the Go toolchain", "node": "nodejs", "npm": "npm",
	} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, fmt.Sprintf("%s (install %s)", bin, pkg))
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", plugin)); err != nil {
			missing = append(missing, fmt.Sprintf("/usr/lib/cni/%s (install containernetworking-plugins)", plugin))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("test bed prerequisites missing: %v; `bash .ci/run` shows how to install them", missing)
	}
	return nil
}

func (c *Cluster) buildImages(ctx context.Context, b *builder, dnsBin string) error {
	imgDir := filepath.Join(c.opts.CacheDir, "images")
	if err := os.MkdirAll(imgDir, 0o755); err != nil {
		return err
	}
	var tars []string
	for _, v := range EtcdVersions {
		bin := c.etcdBins[v]
		// The name says what the image holds and what it is called (a rename must not reuse a cached tarball).
		out := filepath.Join(imgDir, filepath.Base(bin)+"-"+strings.NewReplacer("/", "_", ":", "_").Replace(EtcdImage(v))+".tar")
		files := []ociimage.File{
			{Path: "/usr/local/bin/etcd", Source: filepath.Join(bin, "etcd"), Mode: 0o755},
			{Path: "/usr/local/bin/etcdctl", Source: filepath.Join(bin, "etcdctl"), Mode: 0o755},
			{Path: "/usr/local/bin/etcdutl", Source: filepath.Join(bin, "etcdutl"), Mode: 0o755},
		}
		if err := writeImage(out, EtcdImage(v), files, []string{"/usr/local/bin/etcd"}, nonRootUser); err != nil {
			return err
		}
		tars = append(tars, out)
	}
	dnsTar := filepath.Join(imgDir, filepath.Base(dnsBin)+".tar")
	if err := writeImage(dnsTar, coreDNSImage, []ociimage.File{{Path: "/coredns", Source: filepath.Join(dnsBin, "coredns"), Mode: 0o755}},
		[]string{"/coredns"}, nonRootUser); err != nil {
		return err
	}
	pauseBin := c.state("bin", "pause")
	if err := b.buildLocal(ctx, "./internal/testbed/pause", pauseBin); err != nil {
		return err
	}
	pauseTar := c.state("pause.tar")
	if err := writeImage(pauseTar, pauseImage, []ociimage.File{{Path: "/pause", Source: pauseBin, Mode: 0o755}}, []string{"/pause"}, "65535"); err != nil {
		return err
	}
	stewardBin, agentBin := c.state("bin", "steward"), c.state("bin", "steward-agent")
	for pkg, out := range map[string]string{"./cmd/steward": stewardBin, "./cmd/steward-agent": agentBin} {
		if err := b.buildLocal(ctx, pkg, out); err != nil {
			return err
		}
	}
	// Built from the working tree at every start (a link step when unchanged), so the image is never cached.
	stewardTar := c.state("steward.tar")
	if err := ociimage.Steward(stewardTar, stewardBin, agentBin, StewardImage); err != nil {
		return err
	}
	c.imageTars = append(tars, dnsTar, pauseTar, stewardTar)
	return b.buildLocal(ctx, "./cmd/steward-testbed", c.state("bin", "steward-testbed"))
}

func (c *Cluster) writeConfigs() error {
	p, err := newPKI(c.state("pki"))
	if err != nil {
		return err
	}
	apiIPs := []string{NodeIP, apiServiceIP, "127.0.0.1"}
	for _, n := range c.nodes {
		apiIPs = append(apiIPs, n.apiAddress())
	}
	certs := []certSpec{
		{file: "apiserver", cn: "kube-apiserver", server: true, ips: apiIPs,
			dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + ClusterDomain, "localhost"}},
		{file: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		{file: "admin", cn: "steward-testbed-admin", orgs: []string{"system:masters"}, client: true},
		{file: "controller-manager", cn: "system:kube-controller-manager", client: true},
		{file: "scheduler", cn: "system:kube-scheduler", client: true},
		{file: "kube-proxy", cn: "system:kube-proxy", client: true},
		// The S3 server's HTTPS endpoint: a certificate from a private CA, as S3 servers inside companies have.
		{file: "s3", cn: "steward-testbed-s3", server: true, ips: []string{NodeIP, "127.0.0.1"}},
	}
	for _, n := range c.nodes {
		certs = append(certs,
			certSpec{file: c.kubeletName(n), cn: "system:node:" + n.Name, orgs: []string{"system:nodes"}, client: true},
			certSpec{file: c.kubeletName(n) + "-serving", cn: n.Name, server: true, ips: []string{n.IP}, dns: []string{n.Name}})
	}
	for _, s := range certs {
		if err := p.issue(s); err != nil {
			return err
		}
	}
	if err := p.serviceAccountKeys(); err != nil {
		return err
	}
	server := fmt.Sprintf("https://%s:%d", NodeIP, apiserverPort)
	for _, user := range []string{"admin", "controller-manager", "scheduler", "kube-proxy"} {
		kc := kubeconfig(server, p.path("ca.crt"), p.path(user+".crt"), p.path(user+".key"))
		if err := writeFile(c.state(user+".kubeconfig"), kc, nil); err != nil {
			return err
		}
	}
	for _, n := range c.nodes {
		// Each kubelet reaches the API server at its own address, so that IsolateNode can cut it off alone.
		user := c.kubeletName(n)
		kc := kubeconfig(fmt.Sprintf("https://%s:%d", n.apiAddress(), apiserverPort), p.path("ca.crt"), p.path(user+".crt"), p.path(user+".key"))
		if err := writeFile(c.state(user+".kubeconfig"), kc, nil); err != nil {
			return err
		}
	}
	c.Kubeconfig = c.state("admin.kubeconfig")
	if c.RESTConfig, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return err
	}
	for _, n := range c.nodes {
		files := map[string]string{
			c.state("containerd" + n.suffix() + ".toml"):          c.containerdConfig(),
			filepath.Join(c.cniConfDir(n), "10-steward.conflist"): cniConfig,
			c.state(c.kubeletName(n) + ".yaml"):                   kubeletConfig,
		}
		if n.index == 0 {
			files[c.state("kube-proxy.yaml")] = kubeProxyConfig
			files[c.state("resolv.conf")] = ""
		}
		for path, content := range files {
			if err := writeFile(path, content, c.vars(n)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Cluster) startAPIServerEtcd(ctx context.Context) error {
	client := fmt.Sprintf("http://127.0.0.1:%d", apiserverEtcdPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", apiserverEtcdPeers)
	// fsync off: this etcd only backs the test bed's API objects, never the etcd clusters under test, and
	// fsync on a shared disk would make every API write wait on the tests' I/O.
	p, err := c.spawn("apiserver-etcd", filepath.Join(c.etcdBins[EtcdVersions[0]], "etcd"),
		"--name=apiserver-etcd", "--data-dir="+c.state("apiserver-etcd"),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=apiserver-etcd="+peer, "--listen-metrics-urls=http://127.0.0.1:0",
		"--unsafe-no-fsync", "--quota-backend-bytes=4294967296", "--log-level=warn")
	if err != nil {
		return err
	}
	return c.waitFor(ctx, p, "etcd serves /health", 30*time.Second, HTTPHealthy(client+"/health"))
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	pki := c.state("pki")
	p, err := c.spawn("kube-apiserver", filepath.Join(c.kubeBin, "kube-apiserver"),
		"--advertise-address="+NodeIP, "--bind-address="+NodeIP, "--secure-port="+strconv.Itoa(apiserverPort),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", apiserverEtcdPort),
		"--service-cluster-ip-range="+serviceCIDR,
		"--client-ca-file="+pki+"/ca.crt",
		"--tls-cert-file="+pki+"/apiserver.crt", "--tls-private-key-file="+pki+"/apiserver.key",
		"--kubelet-client-certificate="+pki+"/apiserver-kubelet-client.crt",
		"--kubelet-client-key="+pki+"/apiserver-kubelet-client.key",
		"--kubelet-certificate-authority="+pki+"/ca.crt",
		"--service-account-issuer=https://kubernetes.default.svc."+ClusterDomain,
		"--service-account-key-file="+pki+"/sa.pub", "--service-account-signing-key-file="+pki+"/sa.key",
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--kubelet-preferred-address-types=InternalIP",
		"--allow-privileged=true", "--profiling=false", "--v=1")
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	return c.waitFor(ctx, p, "kube-apiserver is ready (/readyz)", 2*time.Minute, func(ctx context.Context) error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

// startContainerds starts every node's containerd, each loading the images, all at once: the imports are most
// of the time a node's start takes.
func (c *Cluster) startContainerds(ctx context.Context) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.startContainerd(ctx, n, true); err != nil {
				errs[i] = fmt.Errorf("node %s: %w", n.Name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
