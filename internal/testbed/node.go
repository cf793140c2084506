package testbed

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

func (c *Cluster) startNodeAndControllers(ctx context.Context) error {
	pki := c.state("pki")
	var kubelets []*process
	for _, n := range c.nodes {
		kubelet, err := c.startKubelet(n)
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
