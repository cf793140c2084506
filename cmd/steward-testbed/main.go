// Command steward-testbed runs Steward's local test bed (a real single-node Kubernetes cluster, see
// internal/testbed) and the playground on it.
//
//	steward-testbed up           start the test bed and print its kubeconfig
//	steward-testbed demo         start the test bed, install Steward and a sample EtcdCluster, show its state
//	steward-testbed down         stop whatever test bed runs on this machine
//	steward-testbed bench        measure the test bed and write docs/development/benchmarks.md
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
	case "bench":
		err = bench(ctx, args)
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
	fmt.Fprintln(os.Stderr, "usage: steward-testbed up|demo|down|bench [flags]")
	os.Exit(2)
}

// optionFlags are the test bed options every subcommand that starts or stops one accepts.
func optionFlags(fs *flag.FlagSet) *testbed.Options {
	var o testbed.Options
	fs.StringVar(&o.StateDir, "state-dir", "", "test bed state directory (default /var/lib/steward-testbed)")
	fs.StringVar(&o.RunDir, "run-dir", "", "test bed runtime directory (default /run/steward-testbed)")
	fs.StringVar(&o.CacheDir, "cache-dir", "", "build cache (default ~/.cache/steward)")
	fs.IntVar(&o.Nodes, "nodes", 1, "how many nodes the cluster has, each with its own kubelet, containerd and pod network (1 to 9)")
	fs.IntVar(&o.Zones, "zones", 0, "how many zones the nodes are spread over (default: one per node)")
	fs.IntVar(&o.DedicatedNodes, "dedicated-nodes", 0, "how many of the nodes (the last ones) carry the taint "+testbed.DedicatedTaint+"=true:NoSchedule")
	return &o
}

func up(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	opts := optionFlags(fs)
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
	opts := optionFlags(fs)
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
