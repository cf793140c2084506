package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/cmd/kubectl-steward/internal/proxy"
	"steward.dev/steward/cmd/kubectl-steward/internal/report"
	"steward.dev/steward/internal/resources"
)

func newEtcdctlCommand(o *Options) *cobra.Command {
	var etcdctlPath, member string
	cmd := &cobra.Command{
		Use:   "etcdctl CLUSTER [--member NAME] [--etcdctl PATH] -- ARGS...",
		Short: "Run a local etcdctl against the cluster, authenticated with Steward's client certificate",
		Long: `Run etcdctl (from PATH, or --etcdctl) against one member of the cluster. kubectl steward port-forwards
to a ready member Pod's client port through the Kubernetes API and wraps the connection in TLS with the
cluster's client certificate (status.tls.clientSecret), which it reads into memory only: etcdctl talks to a
Unix socket in a private directory (0700, removed on exit) and never sees a certificate or key, and nothing
is written to disk but the socket. Plaintext clusters are reached the same way without TLS; where such a
cluster enforces authentication, etcdctl acts as Steward's password user (status.operatorCredentialsSecret,
passed in etcdctl's environment) unless --user or ETCDCTL_USER says otherwise.

Everything after -- goes to etcdctl; --endpoints and the TLS flags are set by kubectl steward. Commands
that dial every member by its advertised URL (--cluster) cannot work from outside the cluster's network.
etcdctl's exit code is passed through.`,
		Example: `  kubectl steward etcdctl example -- endpoint status -w table
  kubectl steward etcdctl example -- member list -w table
  kubectl steward etcdctl example --member example-x7k2p -- put greeting hello
  kubectl steward etcdctl example -- snapshot save ./example.db`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cluster, etcdArgs := args[0], args[1:]
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				if dash != 1 {
					return fmt.Errorf("usage: kubectl steward etcdctl CLUSTER -- ARGS... (got %d arguments before --)", dash)
				}
				etcdArgs = args[dash:]
			}
			return o.runEtcdctl(cmd, cluster, member, etcdctlPath, etcdArgs)
		},
	}
	cmd.Flags().StringVar(&etcdctlPath, "etcdctl", "etcdctl", "The etcdctl binary: a path, or a name looked up in PATH")
	cmd.Flags().StringVar(&member, "member", "", "The member to connect to (default: a ready, healthy member)")
	return cmd
}

// reservedEtcdctlFlags are set by kubectl steward: the endpoint is the socket, and TLS is the proxy's.
var reservedEtcdctlFlags = []string{"--endpoints", "--cacert", "--cert", "--key", "--insecure-transport",
	"--insecure-skip-tls-verify", "--discovery-srv", "--discovery-srv-name"}

// EtcdctlArgs are etcdctl's arguments: the socket endpoint, then the user's, which may not set what kubectl
// steward sets.
func EtcdctlArgs(socket string, user []string) ([]string, error) {
	for _, a := range user {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(a, "=")
		if slices.Contains(reservedEtcdctlFlags, name) {
			return nil, fmt.Errorf("etcdctl %s is set by kubectl steward (the endpoint is a private socket carried to the member, in TLS when the cluster has it); leave it out", name)
		}
	}
	return append([]string{"--endpoints=unix://" + socket}, user...), nil
}

// reservedEtcdctlEnv are environment variables etcdctl reads that would fight the flags kubectl steward sets
// (etcdctl refuses a flag that is also set in its environment).
var reservedEtcdctlEnv = []string{"ETCDCTL_ENDPOINTS", "ETCDCTL_CACERT", "ETCDCTL_CERT", "ETCDCTL_KEY",
	"ETCDCTL_INSECURE_TRANSPORT", "ETCDCTL_INSECURE_SKIP_TLS_VERIFY", "ETCDCTL_DISCOVERY_SRV", "ETCDCTL_DISCOVERY_SRV_NAME"}

// EtcdctlEnv is env without the variables of reservedEtcdctlEnv.
func EtcdctlEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(reservedEtcdctlEnv, name) {
			out = append(out, kv)
		}
	}
	return out
}

// choseUser reports whether the user told etcdctl who to be: --user in the arguments, or ETCDCTL_USER in env.
func choseUser(args, env []string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		if name, _, _ := strings.Cut(a, "="); name == "--user" {
			return true
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "ETCDCTL_USER=") {
			return true
		}
	}
	return false
}

// ChooseMember picks the member Pod etcdctl reaches: the one named want, or else a Ready Pod, preferring
// members Steward reports healthy, then by name (so that repeated runs land on the same member). It returns
// the Pod and whether its client port serves TLS (how the Pod was created: TLS, or plaintext also for a member
// in the Bridge step of a switch between the two).
func ChooseMember(cluster *etcdv1alpha1.EtcdCluster, pods []corev1.Pod, want string) (*corev1.Pod, bool, error) {
	healthy := map[string]bool{}
	for _, m := range cluster.Status.Members {
		healthy[m.Name] = m.Healthy
	}
	var ready []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.Labels[resources.LabelCluster] != cluster.Name || p.Labels[resources.LabelMember] == "" {
			continue
		}
		if want != "" && p.Labels[resources.LabelMember] != want {
			continue
		}
		if report.PodState(p) == "Ready" && p.Status.PodIP != "" {
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		if want != "" {
			return nil, false, fmt.Errorf("member %s of cluster %s has no ready Pod (kubectl steward status %s)", want, cluster.Name, cluster.Name)
		}
		return nil, false, fmt.Errorf("cluster %s has no ready member Pod to connect to (kubectl steward status %s)", cluster.Name, cluster.Name)
	}
	sort.SliceStable(ready, func(i, j int) bool {
		hi, hj := healthy[ready[i].Labels[resources.LabelMember]], healthy[ready[j].Labels[resources.LabelMember]]
		if hi != hj {
			return hi
		}
		return ready[i].Name < ready[j].Name
	})
	mode, _ := resources.PodTLS(ready[0])
	return ready[0], mode == resources.MemberTLSOn, nil
}

func (o *Options) runEtcdctl(cmd *cobra.Command, clusterName, member, etcdctlPath string, userArgs []string) error {
	bin, err := exec.LookPath(etcdctlPath)
	if err != nil {
		return fmt.Errorf("etcdctl not found (%w): install etcdctl of the cluster's minor version, or give its path with --etcdctl", err)
	}
	c, ns, err := o.clientAndNamespace()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	cluster, pod, tlsConfig, err := memberToReach(cmd, c, ns, clusterName, member)
	if err != nil {
		return err
	}
	cfg, err := o.Flags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("connect to Kubernetes: %w", err)
	}
	dialer := o.DialMember(cfg, ns, pod.Name, resources.ClientPort)
	if cl, ok := dialer.(interface{ Close() error }); ok {
		defer func() { _ = cl.Close() }()
	}

	dir, cleanup, err := proxy.PrivateDir()
	if err != nil {
		return err
	}
	defer cleanup()
	l, socket, err := proxy.Listen(dir)
	if err != nil {
		return err
	}
	p := &proxy.Proxy{Dialer: dialer, TLS: tlsConfig, Errorf: func(format string, args ...any) {
		fmt.Fprintf(o.Streams.ErrOut, "kubectl-steward: "+format+"\n", args...)
	}}
	// Reach the member once before etcdctl starts: RBAC, a Pod gone, or a certificate refused is reported
	// now, in words, instead of as etcdctl's "context deadline exceeded".
	conn, err := p.Connect(ctx)
	if err != nil {
		_ = l.Close()
		return fmt.Errorf("reach member %s of cluster %s: %w", pod.Name, cluster.Name, err)
	}
	_ = conn.Close()

	args, err := EtcdctlArgs(socket, userArgs)
	if err != nil {
		_ = l.Close()
		return err
	}
	env, err := etcdctlEnvFor(ctx, c, ns, cluster, userArgs)
	if err != nil {
		_ = l.Close()
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- p.Serve(sctx, l) }()
	code, runErr := o.runChild(bin, args, env)
	stop()
	if err := <-served; err != nil && runErr == nil {
		runErr = err
	}
	if runErr != nil {
		return runErr
	}
	if code != 0 {
		return exitCodeError{code: code}
	}
	return nil
}

// memberToReach is the cluster, the member Pod etcdctl talks to (ChooseMember), and the client TLS to speak to it
// with (nil in plaintext).
func memberToReach(cmd *cobra.Command, c client.Client, ns, clusterName, member string) (*etcdv1alpha1.EtcdCluster, *corev1.Pod, *tls.Config, error) {
	ctx := cmd.Context()
	cluster, err := getCluster(cmd, c, ns, clusterName)
	if err != nil {
		return nil, nil, nil, err
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: cluster.Name}); err != nil {
		return nil, nil, nil, fmt.Errorf("list the Pods of cluster %s: %w", cluster.Name, err)
	}
	pod, tlsOn, err := ChooseMember(cluster, pods.Items, member)
	if err != nil {
		return nil, nil, nil, err
	}
	var tlsConfig *tls.Config
	if tlsOn {
		if tlsConfig, err = clientTLS(ctx, c, cluster); err != nil {
			return nil, nil, nil, err
		}
	}
	return cluster, pod, tlsConfig, nil
}

// etcdctlEnvFor is etcdctl's environment (EtcdctlEnv), with Steward's password user for a cluster without TLS
// where Steward acts as one: etcdctl acts as it too, unless told who to be. The password goes through etcdctl's
// environment, not its command line, which others may read.
func etcdctlEnvFor(ctx context.Context, c client.Client, ns string, cluster *etcdv1alpha1.EtcdCluster, userArgs []string) ([]string, error) {
	env := EtcdctlEnv(os.Environ())
	if cluster.Status.OperatorCredentialsSecret == "" || choseUser(userArgs, env) {
		return env, nil
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Status.OperatorCredentialsSecret}, secret); err != nil {
		return nil, fmt.Errorf("read Steward's password (Secret %s; or give etcdctl --user): %w", cluster.Status.OperatorCredentialsSecret, err)
	}
	if user, password, ok := resources.OperatorCredentials(secret); ok {
		env = append(env, "ETCDCTL_USER="+user+":"+password)
	}
	return env, nil
}

// runChild runs etcdctl with the user's terminal and returns its exit code. While it runs, the signals that
// would end kubectl steward are passed on to etcdctl instead (a terminal's Ctrl-C reaches both; a second
// interrupt is harmless), so that kubectl steward stays to remove the socket's directory once etcdctl is gone.
func (o *Options) runChild(bin string, args, env []string) (int, error) {
	child := exec.Command(bin, args...) //nolint:gosec // the user chose the binary and its arguments; that is the command's purpose
	child.Stdin, child.Stdout, child.Stderr = o.Streams.In, o.Streams.Out, o.Streams.ErrOut
	child.Env = env
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)
	if err := child.Start(); err != nil {
		return 0, fmt.Errorf("start %s: %w", bin, err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-signals:
				_ = child.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := child.Wait()
	close(done)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		if code := exit.ExitCode(); code >= 0 {
			return code, nil
		}
		return ExitError, fmt.Errorf("etcdctl: %w", err)
	default:
		return 0, fmt.Errorf("etcdctl: %w", err)
	}
}

// clientTLS reads the cluster's client Secret (status.tls.clientSecret) into a TLS configuration. The key stays
// in memory.
func clientTLS(ctx context.Context, c client.Client, cluster *etcdv1alpha1.EtcdCluster) (*tls.Config, error) {
	name := resources.ClientSecretName(cluster)
	if cluster.Status.TLS != nil && cluster.Status.TLS.ClientSecret != "" {
		name = cluster.Status.TLS.ClientSecret
	}
	var secret corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: name}, &secret); err != nil {
		return nil, fmt.Errorf("read the cluster's client certificate Secret %s/%s (needs get on secrets): %w", cluster.Namespace, name, err)
	}
	cfg, err := proxy.TLSConfig(secret.Data[resources.SecretCAKey], secret.Data[resources.SecretCertKey], secret.Data[resources.SecretKeyKey],
		report.ServerName(cluster))
	if err != nil {
		return nil, fmt.Errorf("the client Secret %s/%s: %w", cluster.Namespace, name, err)
	}
	return cfg, nil
}
