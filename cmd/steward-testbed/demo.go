package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"steward.dev/steward/internal/testbed"
)

func demo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	opts := optionFlags(fs)
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

	step("Installing Steward's CRDs")
	if err := kubectl("", "apply", "--server-side", "-f", "config/crd/bases"); err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	step("Starting the Steward operator (log: %s)", filepath.Join(c.StateDir(), "logs", "steward.log"))
	operator := filepath.Join(c.StateDir(), "bin", "steward")
	build := exec.CommandContext(ctx, "go", "build", "-o", operator, "./cmd/steward")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build operator: %w", err)
	}
	if err := c.Spawn("steward", []string{"KUBECONFIG=" + c.Kubeconfig}, operator,
		"--metrics-bind-address=127.0.0.1:8080", "--health-probe-bind-address=127.0.0.1:8081",
		"--etcd-image-repository=steward.local/etcd"); err != nil {
		return err
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
	step("etcdctl endpoint status of the members")
	// Leadership may still settle; retry quietly and show the last answer.
	output := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, c.KubectlPath(), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
		return cmd.CombinedOutput()
	}
	var out []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		var member []byte
		if member, err = output("get", "pods", "-l", "etcd.steward.dev/cluster=example", "-o", "jsonpath={.items[0].metadata.name}"); err == nil {
			// The sample cluster runs TLS (the default); a member's own certificate is a client certificate too.
			out, err = output("exec", string(member), "--", "etcdctl", "--endpoints=https://localhost:2379",
				"--cacert=/etc/etcd/tls/ca.crt", "--cert=/etc/etcd/tls/tls.crt", "--key=/etc/etcd/tls/tls.key",
				"endpoint", "status", "--cluster", "-w", "table")
		}
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	fmt.Print(string(out))
	if err != nil {
		return fmt.Errorf("etcdctl endpoint status: %w", err)
	}
	fmt.Printf("\nThe playground keeps running. Try:\n  export KUBECONFIG=%s\n  %s get pods -A\nStop it with: make demo-down\n", c.Kubeconfig, c.KubectlPath())
	return nil
}
