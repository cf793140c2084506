package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/internal/version"
)

func demo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	opts := testbed.RegisterFlags(fs)
	_ = fs.Parse(args)
	c, err := testbed.Start(ctx, *opts)
	if err != nil {
		return err
	}
	kubectl := func(stdin string, args ...string) error {
		cmd := exec.CommandContext(ctx, c.KubectlPath(), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		return cmd.Run()
	}
	step := func(format string, a ...any) { fmt.Printf("\n== "+format+"\n", a...) }

	// The user's way (docs/operations/install.md): the test bed holds the release's image, built from this tree.
	step("Installing Steward %s: kubectl apply --server-side -k config/default", version.Image)
	if err := kubectl("", "apply", "--server-side", "--force-conflicts", "-k", "config/default"); err != nil {
		return fmt.Errorf("install Steward: %w", err)
	}
	if err := kubectl("", "-n", "steward-system", "rollout", "status", "deployment/steward", "--timeout=3m"); err != nil {
		_ = kubectl("", "-n", "steward-system", "get", "pods,events")
		return fmt.Errorf("the Deployment steward-system/steward did not become ready: %w", err)
	}
	step("Applying the sample EtcdCluster (config/samples/etcd_v1alpha1_etcdcluster.yaml)")
	if err := kubectl("", "apply", "-f", "config/samples/etcd_v1alpha1_etcdcluster.yaml"); err != nil {
		return err
	}
	step("Waiting for it to become Available")
	if err := kubectl("", "wait", "--for=condition=Available", "etcdcluster/example", "--timeout=5m"); err != nil {
		_ = kubectl("", "get", "etcdcluster/example", "-o", "yaml")
		return fmt.Errorf("sample cluster did not become Available: %w", err)
	}
	step("Cluster state")
	_ = kubectl("", "get", "etcdclusters", "-o", "wide")
	_ = kubectl("", "get", "pods,pvc,svc,pdb", "-l", "etcd.steward.dev/cluster=example", "-o", "wide")
	step("Members (status.members)")
	_ = kubectl("", "get", "etcdcluster/example", "-o",
		`jsonpath={range .status.members[*]}{.name}{"\t"}{.id}{"\t"}{.role}{"\t"}{.version}{"\thealthy="}{.healthy}{"\t"}{.dbSizeBytes}{" bytes\n"}{end}`)
	step("Conditions")
	_ = kubectl("", "get", "etcdcluster/example", "-o",
		`jsonpath={range .status.conditions[*]}{.type}={.status} ({.reason}): {.message}{"\n"}{end}`)
	step("etcdctl from this machine, through kubectl port-forward and Steward's client certificate")
	etcdctl, err := reachFromHost(ctx, c, kubectl)
	if err != nil {
		return err
	}
	fmt.Printf("\nThe playground keeps running. A shell for it (docs/getting-started.md starts from these lines):\n"+
		"  export KUBECONFIG=%s\n"+
		"  make build    # bin/kubectl-steward, the kubectl plugin\n"+
		"  export PATH=\"$PWD/bin:%s:%s:$PATH\"    # the plugin, this kubectl, etcdctl %s\n"+
		"  kubectl steward status example\n  kubectl get etcdclusters,pods -A\n  kubectl -n steward-system logs deployment/steward\n%s\n"+
		"Next: docs/getting-started.md walks this playground: write and read keys, scale, back up, lose a member,\n"+
		"upgrade, restore. Stop it with: make demo-down\n", c.Kubeconfig, filepath.Dir(c.KubectlPath()),
		c.EtcdBinDir(testbed.EtcdVersions[0]), testbed.EtcdVersions[0], etcdctl)
	return nil
}

// reachFromHost shows the sample cluster answering etcdctl on this machine the way a user reaches a cluster from
// outside Kubernetes: the client certificate Steward issued for the cluster, extracted from its Secret, and a
// port-forward to the client Service (the members' certificates name localhost). It returns the commands.
func reachFromHost(ctx context.Context, c *testbed.Cluster, kubectl func(string, ...string) error) (string, error) {
	dir := filepath.Join(c.StateDir(), "demo")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for key, file := range map[string]string{"ca.crt": "ca.crt", "tls.crt": "client.crt", "tls.key": "client.key"} {
		cmd := exec.CommandContext(ctx, c.KubectlPath(), "get", "secret", "example-client", "-o", "jsonpath={.data."+strings.ReplaceAll(key, ".", `\.`)+"}")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("read %s of Secret example-client: %w", key, err)
		}
		pem, err := base64.StdEncoding.DecodeString(string(out))
		if err != nil {
			return "", fmt.Errorf("decode %s of Secret example-client: %w", key, err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), pem, 0o600); err != nil {
			return "", err
		}
	}
	const localPort = "32379"
	forward := exec.CommandContext(ctx, c.KubectlPath(), "port-forward", "svc/example", localPort+":2379")
	forward.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	if err := forward.Start(); err != nil {
		return "", fmt.Errorf("kubectl port-forward: %w", err)
	}
	defer func() { _ = forward.Process.Kill(); _ = forward.Wait() }()
	etcdctl := filepath.Join(c.EtcdBinDir(testbed.EtcdVersions[0]), "etcdctl")
	flags := []string{"--endpoints=https://localhost:" + localPort, "--cacert=" + filepath.Join(dir, "ca.crt"),
		"--cert=" + filepath.Join(dir, "client.crt"), "--key=" + filepath.Join(dir, "client.key")}
	var out []byte
	var err error
	// The port-forward needs a moment to listen.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		cmd := exec.CommandContext(ctx, etcdctl, append(flags, "endpoint", "status", "-w", "table")...)
		if out, err = cmd.CombinedOutput(); err == nil || time.Now().After(deadline) {
			break
		}
	}
	fmt.Print(string(out))
	if err != nil {
		return "", fmt.Errorf("etcdctl endpoint status through the port-forward: %w", err)
	}
	for _, args := range [][]string{{"put", "greeting", "hello from the playground"}, {"get", "greeting"}} {
		cmd := exec.CommandContext(ctx, etcdctl, append(flags, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("etcdctl %s: %w", args[0], err)
		}
	}
	return fmt.Sprintf("  # etcdctl from this machine (the client certificate is in %s):\n"+
		"  kubectl port-forward svc/example %s:2379 &\n  %s %s get greeting\n", dir, localPort, etcdctl, strings.Join(flags, " ")), nil
}
