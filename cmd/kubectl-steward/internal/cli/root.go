// Package cli is kubectl-steward's commands: each reads or writes Steward's API objects through the Kubernetes
// API (a controller-runtime client with Steward's scheme) and prints what the report package renders. It is a
// thin client: every action is a create or a patch a user could make with kubectl and YAML, and nothing here
// does what the operator does (it never talks to etcd itself; `etcdctl` hands a local etcdctl a connection).
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/cmd/kubectl-steward/internal/proxy"
	"steward.dev/steward/internal/version"
)

// Exit codes, as kubectl's: 0 success, 1 any error. ExitTimeout is distinct so that scripts and tests can tell
// "still running when --timeout passed" (the object exists and may still finish) from a failure; 124 is what
// timeout(1) uses, and it clashes with none of etcdctl's own codes, which `etcdctl` passes through.
const (
	ExitOK      = 0
	ExitError   = 1
	ExitTimeout = 124
)

// ErrTimeout is returned (wrapped) when --timeout passed while waiting.
var ErrTimeout = errors.New("timed out waiting")

// exitCodeError carries a child process's exit code (etcdctl's) through to the plugin's own exit.
type exitCodeError struct{ code int }

func (e exitCodeError) Error() string { return fmt.Sprintf("etcdctl exited with code %d", e.code) }

// Options are what every command shares; tests replace the client, the clock and the member dialer.
type Options struct {
	Flags   *genericclioptions.ConfigFlags
	Streams genericiooptions.IOStreams

	// NewClient returns the client for Steward's and core objects. Default: from Flags.
	NewClient func() (client.WithWatch, error)
	// Now is the clock for ages and generated names.
	Now func() time.Time
	// DialMember opens connections to a member Pod's client port. Default: a port-forward through the API server.
	DialMember func(cfg *rest.Config, namespace, pod string, port int) proxy.Dialer
	// Resync is how often a wait reads the object again besides watching it (a watch can end or miss an event
	// across a reconnect).
	Resync time.Duration
}

// Scheme holds the kinds the plugin reads and writes: Steward's, and the core group's (Pods, Secrets).
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := etcdv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// NewOptions are the defaults of the real binary.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	o := &Options{Flags: genericclioptions.NewConfigFlags(true), Streams: streams, Now: time.Now, Resync: 5 * time.Second}
	o.NewClient = func() (client.WithWatch, error) {
		cfg, err := o.Flags.ToRESTConfig()
		if err != nil {
			return nil, err
		}
		s, err := Scheme()
		if err != nil {
			return nil, err
		}
		return client.NewWithWatch(cfg, client.Options{Scheme: s})
	}
	o.DialMember = func(cfg *rest.Config, namespace, pod string, port int) proxy.Dialer {
		return &proxy.PortForward{Config: cfg, Namespace: namespace, Pod: pod, Port: port}
	}
	return o
}

// namespace is -n, else the kubeconfig context's namespace, else "default", as kubectl resolves it.
func (o *Options) namespace() (string, error) {
	ns, _, err := o.Flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("namespace: %w", err)
	}
	return ns, nil
}

// NewRootCommand is `kubectl steward`.
func NewRootCommand(o *Options) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-steward",
		Short: "Look at and operate etcd clusters managed by Steward",
		Long: `kubectl steward shows the state of an EtcdCluster and runs day-2 actions on it. Every action creates or
patches a Steward resource (EtcdBackup, EtcdRestore, EtcdCluster) that could also be written as YAML;
Steward, the operator, does the work.`,
		Version:       version.Describe(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// kubectl invokes plugins as kubectl-<name>; help shows the command the user typed.
	root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl steward"}
	root.SetIn(o.Streams.In)
	root.SetOut(o.Streams.Out)
	root.SetErr(o.Streams.ErrOut)
	o.Flags.AddFlags(root.PersistentFlags())
	root.AddCommand(newStatusCommand(o), newBackupCommand(o), newRestoreCommand(o),
		newPauseCommand(o), newResumeCommand(o), newHibernateCommand(o), newHandoverCommand(o), newAdoptCommand(o), newPromoteCommand(o), newEtcdctlCommand(o))
	for _, cmd := range root.Commands() {
		if cmd.Args != nil && cmd.Name() != "completion" && cmd.Name() != "help" {
			cmd.ValidArgsFunction = o.completeClusters
		}
	}
	return root
}

// completeClusters completes the CLUSTER argument with the EtcdClusters of the namespace, for shell completion
// (kubectl runs kubectl_complete-steward, or `kubectl-steward __complete`, for `kubectl steward <TAB>`).
func (o *Options) completeClusters(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) != 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, ns, err := o.clientAndNamespace()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var list etcdv1alpha1.EtcdClusterList
	if err := c.List(cmd.Context(), &list, client.InNamespace(ns)); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, cl := range list.Items {
		if strings.HasPrefix(cl.Name, toComplete) {
			names = append(names, cl.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// Run executes the command line args and returns the process's exit code.
func Run(ctx context.Context, o *Options, args []string) int {
	root := NewRootCommand(o)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var code exitCodeError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &code):
		return code.code
	case errors.Is(err, ErrTimeout):
		fmt.Fprintln(o.Streams.ErrOut, "error:", err)
		return ExitTimeout
	default:
		fmt.Fprintln(o.Streams.ErrOut, "error:", err)
		return ExitError
	}
}

// Main is the binary's entry point.
func Main() int {
	// The controller-runtime client logs through its package logger, which warns on stderr when unset; the
	// plugin reports what matters itself.
	ctrllog.SetLogger(logr.Discard())
	return Run(context.Background(), NewOptions(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}), os.Args[1:])
}
