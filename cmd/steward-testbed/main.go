// Command steward-testbed runs Steward's local test bed (a real single-node Kubernetes cluster, see
// internal/testbed) and the playground on it. The benchmarks of Steward on it are test/bench (make bench).
//
//	steward-testbed up           start the test bed and print its kubeconfig
//	steward-testbed demo         start the test bed, install Steward and a sample EtcdCluster, show its state
//	steward-testbed down         stop whatever test bed runs on this machine
//	steward-testbed provisioner  (internal) the test bed's local-path volume provisioner
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/internal/testbed/localpath"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "up":
		err = up(ctx, args)
	case "demo":
		err = demo(ctx, args)
	case "down":
		err = downCmd(args)
	case "provisioner":
		err = provisioner(ctx, args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "steward-testbed %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: steward-testbed up|demo|down [flags]")
	os.Exit(2)
}

func up(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	opts := testbed.RegisterFlags(fs)
	_ = fs.Parse(args)
	c, err := testbed.Start(ctx, *opts)
	if err != nil {
		return err
	}
	fmt.Printf("export KUBECONFIG=%s\n# stop with: steward-testbed down\n", c.Kubeconfig)
	return nil
}

func downCmd(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	opts := testbed.RegisterFlags(fs)
	_ = fs.Parse(args)
	if err := testbed.Down(*opts); err != nil {
		return err
	}
	fmt.Println("test bed stopped")
	return nil
}

func provisioner(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("provisioner", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the test bed")
	cfg := localpath.Config{Provisioner: testbed.ProvisionerName}
	fs.StringVar(&cfg.VolumeDir, "volume-dir", "", "directory volumes are created in")
	fs.StringVar(&cfg.Node, "node", testbed.NodeName, "node whose volumes to provision")
	_ = fs.Parse(args)
	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	return localpath.Run(ctx, cs, cfg)
}
