package testbed

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"
)

// devicePluginSocket is where a kubelet serves device plugins' registration. The path is compiled into the
// kubelet, not under its --root-dir, so every kubelet of the test bed uses it: each clears the directory and then
// listens on the path, and two doing so at once fail one ("bind: address already in use", and that kubelet
// exits). So kubelets start one at a time, each once the one before has its socket; a later kubelet replaces the
// file, and the earlier keeps serving on the socket it holds. (No device plugin runs on the test bed.)
const devicePluginSocket = "/var/lib/kubelet/device-plugins/kubelet.sock"

// startKubeletAlone starts node n's kubelet and returns once it has created its device plugin socket; no other
// kubelet of the test bed starts meanwhile (nodes restarted by tests running side by side included).
func (c *Cluster) startKubeletAlone(ctx context.Context, n Node) (*process, error) {
	c.kubeletStart.Lock()
	defer c.kubeletStart.Unlock()
	before := fileVersion(devicePluginSocket)
	kubelet, err := c.startKubelet(n)
	if err != nil {
		return nil, err
	}
	return kubelet, c.waitFor(ctx, kubelet, "the kubelet of "+n.Name+" listens on "+devicePluginSocket, time.Minute, func(context.Context) error {
		if v := fileVersion(devicePluginSocket); v == ([2]int64{}) || v == before {
			return fmt.Errorf("%s not created by this kubelet yet", devicePluginSocket)
		}
		return nil
	})
}

// fileVersion tells one creation of a file from another: its inode (which a new file may reuse) and its change
// time; zero when there is no file.
func fileVersion(path string) [2]int64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return [2]int64{}
	}
	return [2]int64{int64(st.Ino), st.Ctim.Nano()} //nolint:gosec // an inode number, compared only
}

func (c *Cluster) startNodeAndControllers(ctx context.Context) error {
	pki := c.state("pki")
	var kubelets []*process
	for _, n := range c.nodes {
		kubelet, err := c.startKubeletAlone(ctx, n)
		if err != nil {
			return err
		}
		kubelets = append(kubelets, kubelet)
	}
	proxy, err := c.spawn("kube-proxy", filepath.Join(c.kubeBin, "kube-proxy"), "--config="+c.state("kube-proxy.yaml"), "--v=1")
	if err != nil {
		return err
	}
	cm, err := c.spawn("kube-controller-manager", filepath.Join(c.kubeBin, "kube-controller-manager"),
		"--kubeconfig="+c.state("controller-manager.kubeconfig"),
		"--authentication-kubeconfig="+c.state("controller-manager.kubeconfig"),
		"--authorization-kubeconfig="+c.state("controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1", "--leader-elect=false", "--use-service-account-credentials=true",
		"--service-account-private-key-file="+pki+"/sa.key", "--root-ca-file="+pki+"/ca.crt",
		"--cluster-signing-cert-file="+pki+"/ca.crt", "--cluster-signing-key-file="+pki+"/ca.key",
		"--allocate-node-cidrs=false", "--v=1")
	if err != nil {
		return err
	}
	sched, err := c.spawn("kube-scheduler", filepath.Join(c.kubeBin, "kube-scheduler"),
		"--kubeconfig="+c.state("scheduler.kubeconfig"),
		"--authentication-kubeconfig="+c.state("scheduler.kubeconfig"),
		"--authorization-kubeconfig="+c.state("scheduler.kubeconfig"),
		"--bind-address=127.0.0.1", "--leader-elect=false", "--v=1")
	if err != nil {
		return err
	}
	for i, n := range c.nodes {
		if err := c.waitNodeReady(ctx, kubelets[i], n); err != nil {
			return err
		}
	}
	for _, p := range []*process{proxy, cm, sched} {
		if processExited(p) {
			return fmt.Errorf("%s exited; end of %s:\n%s", p.name, p.log, logTail(p.log, 30))
		}
	}
	return c.waitFor(ctx, proxy, "kube-proxy is healthy", time.Minute, HTTPHealthy("http://127.0.0.1:10256/healthz"))
}

// processExited tells a component that crashed from one that is still running.
func processExited(p *process) bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// startProvisioners starts one volume provisioner per node: each creates the volumes of claims the scheduler
// put on its node, in a directory of that node's (Cluster.volumeDir).
func (c *Cluster) startProvisioners(ctx context.Context) error {
	var started []*process
	for _, n := range c.nodes {
		p, err := c.spawn("provisioner"+n.suffix(), c.state("bin", "steward-testbed"), "provisioner",
			"--kubeconfig="+c.Kubeconfig, "--volume-dir="+c.volumeDir(n), "--node="+n.Name)
		if err != nil {
			return err
		}
		started = append(started, p)
	}
	// The provisioner has no health endpoint; a start-up failure (bad kubeconfig) shows within a second.
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, p := range started {
		if processExited(p) {
			return fmt.Errorf("%s exited; end of %s:\n%s", p.name, p.log, logTail(p.log, 20))
		}
	}
	return nil
}
