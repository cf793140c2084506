package testbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ZoneLabel is the well-known label that says which zone a node is in; the test bed sets it on every node.
const ZoneLabel = "topology.kubernetes.io/zone"

// Node is one node of the test bed: a kubelet with its own containerd (root, state and socket), CNI bridge and
// pod range, in a zone. All nodes run on this machine; what sets them apart is what a real node has of its own.
type Node struct {
	// Name is the Node object's name (and its kubernetes.io/hostname label).
	Name string
	// IP is the node's InternalIP, on the stw-host bridge; its kubelet listens there.
	IP string
	// Zone is the node's topology.kubernetes.io/zone label.
	Zone string
	// PodCIDR is the range its pods get their IPs from.
	PodCIDR string
	// Dedicated is whether the node carries DedicatedTaint (Options.DedicatedNodes).
	Dedicated bool

	index int
}

// maxNodes keeps every node's addresses inside the ranges the test bed owns (10.244.0.0/16 for pods, one /24
// each) and its iptables interface names short.
const maxNodes = 9

// nodeAt is node i of a test bed whose nodes are spread over zones zones (node i is in zone i mod zones). Node 0
// has the names and addresses of the single-node test bed (NodeName, NodeIP, PodCIDR).
func nodeAt(i, zones int) Node {
	n := Node{index: i, Name: NodeName, IP: fmt.Sprintf("10.245.0.%d", 1+i), PodCIDR: fmt.Sprintf("10.244.%d.0/24", i),
		Zone: fmt.Sprintf("zone-%c", 'a'+i%zones)}
	if i > 0 {
		n.Name = fmt.Sprintf("%s-%d", NodeName, i+1)
	}
	return n
}

// nodesOf are the nodes opts (with defaults) describe.
func nodesOf(opts Options) []Node {
	var nodes []Node
	for i := 0; i < opts.Nodes; i++ {
		n := nodeAt(i, opts.Zones)
		n.Dedicated = i >= opts.Nodes-opts.DedicatedNodes
		nodes = append(nodes, n)
	}
	return nodes
}

// suffix tells node i's files, sockets and logs from node 0's, which keep the single-node test bed's names.
func (n Node) suffix() string {
	if n.index == 0 {
		return ""
	}
	return fmt.Sprintf("-%d", n.index+1)
}

func (n Node) gateway() string { return fmt.Sprintf("10.244.%d.1", n.index) }
func (n Node) bridge() string  { return fmt.Sprintf("stw%d", n.index) }

// apiAddress is the address node n's kubelet reaches the API server at: an address of its own, translated to
// the API server's (see apiAliasRules), so that IsolateNode can cut exactly this node's kubelet off.
func (n Node) apiAddress() string { return fmt.Sprintf("10.245.1.%d", 1+n.index) }

// cgroupRoot is the cgroup the node's kubelet puts its pods under. Every kubelet removes pod cgroups it does not
// know, so each node needs one of its own; node 0 keeps the root (its pods under /kubepods).
func (n Node) cgroupRoot() string {
	if n.index == 0 {
		return "/"
	}
	return "/steward-testbed" + n.suffix()
}

// cgroupNeedle finds the node's container processes by their cgroup path (/proc/PID/cgroup).
func (n Node) cgroupNeedle() string {
	if n.index == 0 {
		return podCgroupNeedle
	}
	return ":" + n.cgroupRoot() + "/kubepods"
}

// Nodes are the test bed's nodes, node 0 first.
func (c *Cluster) Nodes() []Node { return slices.Clone(c.nodes) }

func (c *Cluster) node(name string) (Node, error) {
	for _, n := range c.nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return Node{}, fmt.Errorf("the test bed has no node %q", name)
}

func (c *Cluster) containerdSocket(n Node) string {
	return filepath.Join(c.opts.RunDir, "containerd"+n.suffix()+".sock")
}

// containerdBinary is the path of containerd's command name (containerd, ctr) for the containerd the nodes run.
func (c *Cluster) containerdBinary(name string) string {
	if c.ctrdBin == "" {
		return name
	}
	return filepath.Join(c.ctrdBin, name)
}

func (c *Cluster) containerdState(n Node) string {
	return filepath.Join(c.opts.RunDir, "containerd"+n.suffix())
}

// runcRoot is where runc keeps node n's container state: under its containerd's state, which a stop clears.
func (c *Cluster) runcRoot(n Node) string    { return filepath.Join(c.containerdState(n), "runc") }
func (c *Cluster) kubeletDir(n Node) string  { return c.state("kubelet" + n.suffix()) }
func (c *Cluster) volumeDir(n Node) string   { return c.state("volumes" + n.suffix()) }
func (c *Cluster) cniConfDir(n Node) string  { return c.state("cni"+n.suffix(), "net.d") }
func (c *Cluster) kubeletName(n Node) string { return "kubelet" + n.suffix() }

// makeCgroupRoot creates a node's cgroup root in every cgroup hierarchy, as the kubelet checks it exists. A v1
// cpuset cgroup starts with no CPUs and no memory nodes, so it gets its parent's.
func makeCgroupRoot(root string) error {
	if root == "/" {
		return nil
	}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		hierarchies = []string{"/sys/fs/cgroup"} // cgroup v2: one hierarchy
	}
	for _, h := range hierarchies {
		if info, err := os.Stat(h); err != nil || !info.IsDir() {
			continue
		}
		dir := filepath.Join(h, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				val, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return fmt.Errorf("read %s of the root cpuset: %w", f, err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), val, 0o644); err != nil {
					return fmt.Errorf("set %s of cgroup %s: %w", f, dir, err)
				}
			}
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		ctrls, _ := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control")
		var enable []string
		for _, c := range strings.Fields(string(ctrls)) {
			enable = append(enable, "+"+c)
		}
		_ = os.WriteFile(filepath.Join("/sys/fs/cgroup", root, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644)
	}
	return nil
}

// startContainerd starts node n's containerd and loads the test bed's images into it (once: they stay in its
// root across StopNode and StartNode, as images stay on a node's disk across a reboot).
func (c *Cluster) startContainerd(ctx context.Context, n Node, importImages bool) error {
	p, err := c.spawn("containerd"+n.suffix(), c.containerdBinary("containerd"), "--config", c.state("containerd"+n.suffix()+".toml"))
	if err != nil {
		return err
	}
	socket := c.containerdSocket(n)
	if err := c.waitFor(ctx, p, "containerd answers on "+socket, 30*time.Second, func(ctx context.Context) error {
		return exec.CommandContext(ctx, c.containerdBinary("ctr"), "--address", socket, "version").Run()
	}); err != nil {
		return err
	}
	if !importImages {
		return nil
	}
	for _, t := range c.imageTars {
		if err := c.importImage(ctx, socket, t); err != nil {
			return err
		}
	}
	return nil
}

// startKubelet starts node n's kubelet; waitNodeReady waits for it.
func (c *Cluster) startKubelet(n Node) (*process, error) {
	labels := ZoneLabel + "=" + n.Zone
	args := []string{"--config=" + c.state(c.kubeletName(n)+".yaml"), "--kubeconfig=" + c.state(c.kubeletName(n)+".kubeconfig"),
		"--hostname-override=" + n.Name, "--node-ip=" + n.IP, "--root-dir=" + c.kubeletDir(n),
		"--cert-dir=" + c.state("kubelet-pki"+n.suffix()), "--v=1"}
	if n.Dedicated {
		labels += "," + DedicatedTaint + "=true"
		args = append(args, "--register-with-taints="+DedicatedTaint+"=true:NoSchedule")
	}
	return c.spawn(c.kubeletName(n), filepath.Join(c.kubeBin, "kubelet"), append(args, "--node-labels="+labels)...)
}

func (c *Cluster) waitNodeReady(ctx context.Context, kubelet *process, n Node) error {
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	return c.waitFor(ctx, kubelet, "node "+n.Name+" is Ready", 2*time.Minute, func(ctx context.Context) error {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node not ready: %s: %s", cond.Reason, cond.Message)
			}
		}
		return fmt.Errorf("node has no Ready condition yet")
	})
}

// StopNode stops a node the way a machine dies or is switched off: its kubelet, its containerd, the shims and
// every container are killed at once, with no Pod shut down gracefully, and what a reboot clears goes (the
// mounts, the containers' runtime state, the pods' network namespaces). Disk stays: volumes, images, the
// kubelet's and containerd's data. The node goes NotReady once the node lifecycle controller notices (its grace
// period, 40 s by default). Its volume provisioner keeps running (it stands for the storage system).
func (c *Cluster) StopNode(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	var pids []int
	for _, r := range recordedProcesses(c.opts.StateDir) {
		if (r.name == c.kubeletName(n) || r.name == "containerd"+n.suffix()) && r.alive() {
			pids = append(pids, r.pid)
		}
	}
	terminate(pids, 0)
	killNodeProcesses(c.containerdSocket(n), n.cgroupNeedle())
	unmountUnder(filepath.Join(c.kubeletDir(n), "pods"), c.containerdState(n))
	removePodNetns(strings.TrimSuffix(n.PodCIDR, "0/24"), false)
	removeBridgePorts(n.bridge())
	removeNodeCgroups(n.cgroupRoot())
	if err := os.RemoveAll(c.containerdState(n)); err != nil {
		return fmt.Errorf("clear the runtime state of node %s: %w", n.Name, err)
	}
	if left := processesMatching([]string{c.containerdSocket(n)}, []string{n.cgroupNeedle()}); len(left) > 0 {
		return fmt.Errorf("node %s: processes still running after its stop: %s", n.Name, describeProcesses(left))
	}
	return nil
}

// killNodeProcesses kills what a node's containerd started: its shims (their command line names its socket) and
// the containers (in the node's pod cgroups). Several rounds, because killing a shim can leave a container
// process that was not yet in a pod cgroup when the list was taken.
func killNodeProcesses(socket, cgroupNeedle string) {
	for round := 0; round < 5; round++ {
		pids := processesMatching([]string{socket}, []string{cgroupNeedle})
		if len(pids) == 0 {
			return
		}
		terminate(pids, 0)
	}
}

// StartNode starts a node StopNode stopped: its containerd, then its kubelet, and returns once the node is
// Ready. The kubelet then starts the Pods still bound to the node, in new sandboxes.
func (c *Cluster) StartNode(ctx context.Context, name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	if err := makeCgroupRoot(n.cgroupRoot()); err != nil {
		return err
	}
	if err := c.startContainerd(ctx, n, false); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	kubelet, err := c.startKubeletAlone(ctx, n)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return c.waitNodeReady(ctx, kubelet, n)
}

// isolationRules cut node n off the network while it keeps running: its kubelet cannot reach the API server
// (so the node goes NotReady) nor the API server it, its pods reach nothing off the node (other nodes' pods,
// Services behind them, this machine) and nothing off the node reaches them. Pods on the node still reach each
// other. Established connections are cut too: the rules match every packet, not only new connections.
func isolationRules(n Node) [][]string {
	return [][]string{
		{"OUTPUT", "-m", "conntrack", "--ctorigdst", n.apiAddress(), "-j", "DROP"},
		{"OUTPUT", "-d", n.IP, "-p", "tcp", "--dport", "10250", "-j", "DROP"},
		{"OUTPUT", "-o", n.bridge(), "-j", "DROP"},
		{"INPUT", "-i", n.bridge(), "-j", "DROP"},
		{"FORWARD", "-i", n.bridge(), "!", "-o", n.bridge(), "-j", "DROP"},
		{"FORWARD", "-o", n.bridge(), "!", "-i", n.bridge(), "-j", "DROP"},
	}
}

// IsolateNode cuts a node off the network, as a network partition does: see isolationRules. ReconnectNode
// undoes it.
func (c *Cluster) IsolateNode(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	rules := isolationRules(n)
	for i := len(rules) - 1; i >= 0; i-- {
		if err := iptables("filter", "-I", rules[i]...); err != nil {
			return err
		}
	}
	return nil
}

// ReconnectNode removes what IsolateNode added.
func (c *Cluster) ReconnectNode(name string) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	for _, r := range isolationRules(n) {
		deleteRule(r)
	}
	return nil
}

// NodeProcessesDown names what of a node's kubelet and containerd does not run, with the end of its log; ""
// when both run. A test that finds a node NotReady tells a dead process from a slow one by it.
func (c *Cluster) NodeProcessesDown(name string) string {
	n, err := c.node(name)
	if err != nil {
		return err.Error()
	}
	var down []string
	for _, want := range []string{c.kubeletName(n), "containerd" + n.suffix()} {
		running := false
		for _, r := range recordedProcesses(c.opts.StateDir) {
			if r.name == want && r.alive() {
				running = true
			}
		}
		if !running {
			log := filepath.Join(c.logDir(), want+".log")
			down = append(down, fmt.Sprintf("%s is not running; end of %s:\n%s", want, log, logTail(log, 10)))
		}
	}
	return strings.Join(down, "\n")
}

// NodeLogs is the path of a node's kubelet log, for a test's failure message.
func (c *Cluster) NodeLogs(name string) string {
	n, err := c.node(name)
	if err != nil {
		return ""
	}
	return filepath.Join(c.logDir(), c.kubeletName(n)+".log")
}
