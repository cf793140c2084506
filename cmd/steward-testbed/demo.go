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

// demoPod is a one-member etcd the playground starts directly, to show the node runs the locally built etcd
// image, until the EtcdCluster controller creates members itself.
const demoPod = `apiVersion: v1
kind: Pod
metadata:
  name: demo-etcd
  namespace: default
  labels: {app: demo-etcd}
spec:
  containers:
  - name: etcd
    image: %s
    imagePullPolicy: Never
    command: [/usr/local/bin/etcd, --name=demo-etcd, --data-dir=/tmp/data,
      --listen-client-urls=http://0.0.0.0:2379, --advertise-client-urls=http://demo-etcd:2379]
    ports: [{containerPort: 2379, name: client}]
`

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
		"--metrics-bind-address=127.0.0.1:8080", "--health-probe-bind-address=127.0.0.1:8081"); err != nil {
		return err
	}
	step("Applying the sample EtcdCluster")
	if err := kubectl("", "apply", "-f", "config/samples/etcd_v1alpha1_etcdcluster.yaml"); err != nil {
		return err
	}
	step("Starting a one-member etcd Pod from the locally built etcd image")
	if err := kubectl(fmt.Sprintf(demoPod, testbed.EtcdImage(testbed.EtcdVersions[0])), "apply", "-f", "-"); err != nil {
		return err
	}
	if err := kubectl("", "wait", "--for=condition=Ready", "pod/demo-etcd", "--timeout=120s"); err != nil {
		return err
	}
	step("Cluster state")
	_ = kubectl("", "get", "nodes", "-o", "wide")
	_ = kubectl("", "get", "pods", "-A", "-o", "wide")
	_ = kubectl("", "get", "etcdclusters", "-A")
	step("etcdctl endpoint status of demo-etcd")
	// etcd may still be electing itself leader; retry quietly and show the last answer.
	var out []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
		cmd := exec.CommandContext(ctx, c.KubectlPath(), "exec", "demo-etcd", "--",
			"etcdctl", "--endpoints=http://127.0.0.1:2379", "endpoint", "status", "-w", "table")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
		out, err = cmd.CombinedOutput()
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	fmt.Print(string(out))
	if err != nil {
		return fmt.Errorf("etcdctl endpoint status in demo-etcd: %w", err)
	}
	fmt.Printf("\nThe playground keeps running. Try:\n  export KUBECONFIG=%s\n  %s get pods -A\nStop it with: make demo-down\n", c.Kubeconfig, c.KubectlPath())
	return nil
}
