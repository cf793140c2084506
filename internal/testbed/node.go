package testbed

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func (c *Cluster) startNodeAndControllers(ctx context.Context) error {
	pki := c.state("pki")
	kubelet, err := c.spawn("kubelet", filepath.Join(c.kubeBin, "kubelet"),
		"--config="+c.state("kubelet.yaml"), "--kubeconfig="+c.state("kubelet.kubeconfig"),
		"--hostname-override="+NodeName, "--node-ip="+NodeIP, "--root-dir="+c.state("kubelet"),
		"--cert-dir="+c.state("kubelet-pki"), "--v=1")
	if err != nil {
		return err
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
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, kubelet, "node "+NodeName+" is Ready", 2*time.Minute, func(ctx context.Context) error {
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
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
	}); err != nil {
		return err
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

func (c *Cluster) startProvisioner(ctx context.Context) error {
	p, err := c.spawn("provisioner", c.state("bin", "steward-testbed"), "provisioner",
		"--kubeconfig="+c.Kubeconfig, "--volume-dir="+c.state("volumes"), "--node="+NodeName)
	if err != nil {
		return err
	}
	// The provisioner has no health endpoint; a start-up failure (bad kubeconfig) shows within a second.
	select {
	case <-p.exited:
		return fmt.Errorf("provisioner exited; end of %s:\n%s", p.log, logTail(p.log, 20))
	case <-time.After(time.Second):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
