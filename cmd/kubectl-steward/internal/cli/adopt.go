package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/cmd/kubectl-steward/internal/report"
)

// adoptOptions are adopt's flags.
type adoptOptions struct {
	endpoints                   []string
	version, storageSize        string
	replicas                    int32
	username, credentialsSecret string
	passwordStdin               bool
	memberSecret, clientSecret  string
	handover                    string
	format                      string
	dryRun                      bool
	wait                        clusterWait
}

// adoptionCredentialsKeys are the keys of a credentials Secret (spec.bootstrap.fromExisting.credentialsSecret).
const (
	adoptionUsernameKey = "username"
	adoptionPasswordKey = "password"
)

// newAdoptCommand is `adopt`: the EtcdCluster (and, from --username and a password on stdin, its credentials
// Secret) a user would write to adopt a running etcd, created the way `kubectl apply` would, after the checks the
// plugin can make without reaching the source; the preflight's own checks are Steward's (docs/user/adoption.md).
func newAdoptCommand(o *Options) *cobra.Command {
	var a adoptOptions
	cmd := &cobra.Command{
		Use:   "adopt CLUSTER --endpoints URL[,URL...]",
		Short: "Adopt a running etcd: create an EtcdCluster whose members join it, without downtime",
		Long: `Create an EtcdCluster with spec.bootstrap.fromExisting: Steward checks the running etcd at --endpoints (it
only reads), then its members join that cluster one at a time as learners and are promoted once caught up; the
cluster keeps its ID, data and revisions. The source's members stay until the handover is retire (now, with
--handover retire, or later with kubectl steward handover CLUSTER retire).

Plaintext sources (http:// endpoints) are adopted with spec.tls.provider None. TLS sources (https://) need
certificates of the source's own CA in two Secrets (--member-secret, --client-secret: provider Secrets, peerAuth
AnyCertificate). A source with etcd's authentication on needs a user with the root role: --username and the
password on stdin (--password-stdin) create the Secret <cluster>-source-credentials, owned by the cluster, or
--credentials-secret names an existing one; either turns spec.auth on, which keeps authentication on for the
source's clients. A TLS source with authentication on is refused by Steward (SourceAuthUnsupported).

--version must be of the source's minor (etcdctl version shows it); the default is Steward's.
--wait waits until Steward admits the source (status.adoption.phase Migrating) and fails with the reason if the
preflight refuses it; Steward keeps checking after a refusal, so fixing the cause is enough.
See docs/user/adoption.md.`,
		Example: `  kubectl steward adopt main --endpoints http://10.0.0.11:2379,http://10.0.0.12:2379,http://10.0.0.13:2379 --version 3.6.16 --wait
  echo "$ROOT_PASSWORD" | kubectl steward adopt main --endpoints http://10.0.0.11:2379 --username root --password-stdin
  kubectl steward adopt main --endpoints https://10.0.0.11:2379,https://10.0.0.12:2379,https://10.0.0.13:2379 \
      --member-secret main-members --client-secret main-steward --storage-size 20Gi
  kubectl steward adopt main --endpoints http://10.0.0.11:2379 --handover retire --dry-run -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.runAdopt(cmd, args[0], a) },
	}
	f := cmd.Flags()
	f.StringSliceVar(&a.endpoints, "endpoints", nil, "Client URLs of the source's members (http:// or https://host:port; one per member when their advertised URLs are not reachable from Steward)")
	f.StringVar(&a.version, "version", "", "etcd version of Steward's members, of the source's minor (default: Steward's default version)")
	f.Int32Var(&a.replicas, "replicas", 3, "Number of Steward's members (1, 3, 5, 7 or 9)")
	f.StringVar(&a.storageSize, "storage-size", "", "Size of each member's volume; the source's database must fit the quota derived from it (default: the API's)")
	f.StringVar(&a.username, "username", "", "A user of the source with the root role, for a source with authentication on (with --password-stdin)")
	f.BoolVar(&a.passwordStdin, "password-stdin", false, "Read the password of --username from the first line of stdin")
	f.StringVar(&a.credentialsSecret, "credentials-secret", "", "An existing Secret with username and password of a root user, instead of --username")
	f.StringVar(&a.memberSecret, "member-secret", "", "TLS source: Secret with tls.crt, tls.key and ca.crt of a member certificate of the source's CA")
	f.StringVar(&a.clientSecret, "client-secret", "", "TLS source: Secret with Steward's client certificate of the source's CA")
	f.StringVar(&a.handover, "handover", string(etcdv1alpha1.HandoverKeep), "keep (the source's members stay) or retire (they leave once Steward's members are in place)")
	f.BoolVar(&a.dryRun, "dry-run", false, "Print the objects that would be created (as YAML, or -o json; the password is not printed) and create nothing")
	clusterWaitFlags(cmd, &a.wait, "Steward has admitted the source (status.adoption.phase Migrating), or fail with the preflight's reason")
	outputFlag(cmd, &a.format)
	return cmd
}

func (o *Options) runAdopt(cmd *cobra.Command, name string, a adoptOptions) error {
	if err := checkOutput(a.format); err != nil {
		return err
	}
	var password string
	if a.passwordStdin {
		var err error
		if password, err = readPassword(o.Streams.In); err != nil {
			return err
		}
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	cluster, secret, err := adoption(ns, name, a, password)
	if err != nil {
		return err
	}
	if a.dryRun {
		format := a.format
		if format == outputTable {
			format = outputYAML
		}
		if secret != nil {
			shown := secret.DeepCopy()
			shown.StringData[adoptionPasswordKey] = "<from stdin>"
			if err := printDocument(o.Streams.Out, format, shown); err != nil {
				return err
			}
			if format == outputYAML {
				fmt.Fprintln(o.Streams.Out, "---")
			}
		}
		return printDocument(o.Streams.Out, format, cluster)
	}
	c, err := o.NewClient()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	msg := o.messages(a.format)
	if err := createAdoption(ctx, c, cluster, secret); err != nil {
		return err
	}
	if secret != nil {
		fmt.Fprintf(msg, "secret/%s created (owned by the EtcdCluster)\n", secret.Name)
	}
	fmt.Fprintf(msg, "%s created\n", clusterRef(cluster))
	fmt.Fprintf(msg, `Steward checks the source first and changes nothing on it until the preflight admits it.
Watch it: kubectl steward status %[1]s -n %[2]s (status.adoption.phase; Progressing says why a source is refused)
When Steward's members are in place: kubectl steward handover %[1]s retire -n %[2]s, or abort to back out
`, cluster.Name, cluster.Namespace)
	if a.wait.wait {
		last, err := o.waitForAdmission(ctx, c, cluster, msg, a.wait.timeout)
		if err != nil {
			return err
		}
		cluster = last
	}
	return o.printCluster(a.format, cluster)
}

// adoption builds the EtcdCluster adopting the source the flags describe, and the credentials Secret when a
// password is given. What the API server would refuse later (or Steward's preflight after it) is refused here
// first where the flags alone show it, in the plugin's words.
func adoption(ns, name string, a adoptOptions, password string) (*etcdv1alpha1.EtcdCluster, *corev1.Secret, error) {
	if len(a.endpoints) == 0 {
		return nil, nil, fmt.Errorf("--endpoints is required: the client URLs of the running etcd to adopt")
	}
	scheme := ""
	for _, e := range a.endpoints {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, nil, fmt.Errorf("--endpoints %q: want http://host:port or https://host:port", e)
		}
		if scheme != "" && u.Scheme != scheme {
			return nil, nil, fmt.Errorf("--endpoints mixes http:// and https://: a source serves its clients one way (a source half switched to TLS is refused)")
		}
		scheme = u.Scheme
	}
	handover, err := parseHandover(a.handover)
	if err != nil {
		return nil, nil, fmt.Errorf("--handover: %w", err)
	}
	if handover == etcdv1alpha1.HandoverAbort {
		return nil, nil, fmt.Errorf("--handover abort: an adoption starts with keep or retire; abort is for one under way (kubectl steward handover CLUSTER abort)")
	}
	tlsSpec := &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	switch {
	case scheme == "https" && (a.memberSecret == "" || a.clientSecret == ""):
		return nil, nil, fmt.Errorf("a TLS source (https:// endpoints) needs certificates of its own CA: --member-secret and --client-secret (docs/user/adoption.md#tls-sources)")
	case scheme == "http" && (a.memberSecret != "" || a.clientSecret != ""):
		return nil, nil, fmt.Errorf("--member-secret and --client-secret are for a TLS source: a plaintext source (http:// endpoints) is adopted in plaintext; switch to TLS after the adoption")
	case scheme == "https":
		tlsSpec = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderSecrets, PeerAuth: etcdv1alpha1.PeerAuthAnyCertificate,
			Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: a.memberSecret, ClientSecretName: a.clientSecret}}
	}
	switch {
	case a.username != "" && a.credentialsSecret != "":
		return nil, nil, fmt.Errorf("--username and --credentials-secret both name the source's user: give one")
	case a.username != "" && !a.passwordStdin:
		return nil, nil, fmt.Errorf("--username needs its password on stdin (--password-stdin): a password in a flag would stay in the shell's history")
	case a.passwordStdin && a.username == "":
		return nil, nil, fmt.Errorf("--password-stdin needs --username")
	}
	source := &etcdv1alpha1.ExistingSource{Endpoints: a.endpoints, Handover: handover, CredentialsSecret: a.credentialsSecret}
	var secret *corev1.Secret
	if a.username != "" {
		source.CredentialsSecret = name + "-source-credentials"
		secret = &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: source.CredentialsSecret, Namespace: ns},
			Type:       corev1.SecretTypeOpaque,
			StringData: map[string]string{adoptionUsernameKey: a.username, adoptionPasswordKey: password},
		}
	}
	cluster := &etcdv1alpha1.EtcdCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: etcdv1alpha1.GroupVersion.String(), Kind: "EtcdCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: a.replicas, Version: a.version, TLS: tlsSpec,
			Bootstrap: &etcdv1alpha1.BootstrapSpec{FromExisting: source}},
	}
	if source.CredentialsSecret != "" {
		cluster.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true}
	}
	if a.storageSize != "" {
		size, err := resource.ParseQuantity(a.storageSize)
		if err != nil {
			return nil, nil, fmt.Errorf("--storage-size %q: %w", a.storageSize, err)
		}
		cluster.Spec.Storage.Size = size
	}
	return cluster, secret, nil
}

// readPassword reads the first line of r, without its line ending; an empty password is refused (etcd refuses it
// too, and an empty stdin is more likely a mistake).
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read the password from stdin: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	if password == "" {
		return "", fmt.Errorf("--password-stdin: stdin held no password")
	}
	return password, nil
}

// createAdoption creates the credentials Secret (when there is one) first, so that Steward's first look at the
// cluster finds it, then the cluster, then makes the Secret the cluster's: deleting the cluster deletes it, once
// the cluster's finalizer (which may still need it to abort) is done. A cluster that cannot be created takes the
// new Secret back with it.
func createAdoption(ctx context.Context, c client.Client, cluster *etcdv1alpha1.EtcdCluster, secret *corev1.Secret) error {
	if secret != nil {
		if err := c.Create(ctx, secret); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("secret %s/%s already exists: delete it, or name it with --credentials-secret instead of --username", secret.Namespace, secret.Name)
			}
			return fmt.Errorf("create secret %s/%s: %w", secret.Namespace, secret.Name, err)
		}
	}
	if err := c.Create(ctx, cluster); err != nil {
		if secret != nil {
			_ = c.Delete(ctx, secret)
		}
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("EtcdCluster %s/%s already exists: choose another name", cluster.Namespace, cluster.Name)
		}
		return fmt.Errorf("create EtcdCluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	if secret == nil {
		return nil
	}
	patch := client.MergeFrom(secret.DeepCopy())
	secret.OwnerReferences = []metav1.OwnerReference{{APIVersion: etcdv1alpha1.GroupVersion.String(), Kind: "EtcdCluster",
		Name: cluster.Name, UID: cluster.UID, Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false)}}
	if err := c.Patch(ctx, secret, patch); err != nil {
		return fmt.Errorf("make secret %s/%s the EtcdCluster's (it stays when the cluster is deleted): %w", secret.Namespace, secret.Name, err)
	}
	return nil
}

// admitted is the end of adopt --wait: Steward's preflight admitted the source (any phase after Checking), or
// refused it (Progressing False with a Source... reason: an error carrying Steward's message).
func admitted(c *etcdv1alpha1.EtcdCluster) (bool, error) {
	if a := c.Status.Adoption; a != nil && a.Phase != "" && a.Phase != etcdv1alpha1.AdoptionChecking {
		return true, nil
	}
	p := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionProgressing)
	if p != nil && p.ObservedGeneration == c.Generation && strings.HasPrefix(p.Reason, "Source") && p.Reason != etcdv1alpha1.ReasonSourceAdmitted {
		return false, fmt.Errorf("the source was refused by Steward (%s): %s; nothing was changed on it, and Steward checks again every few seconds: fix the cause, "+
			"or delete the EtcdCluster (kubectl delete etcdcluster %s -n %s)", p.Reason, p.Message, c.Name, c.Namespace)
	}
	return false, nil
}

// waitForAdmission follows the cluster until the preflight admitted or refused the source.
func (o *Options) waitForAdmission(ctx context.Context, c client.WithWatch, cluster *etcdv1alpha1.EtcdCluster, msg io.Writer, timeout time.Duration) (*etcdv1alpha1.EtcdCluster, error) {
	last, err := o.waitForCluster(ctx, c, cluster, msg, timeout, "admit its source", report.AdoptionProgress, admitted)
	if err != nil {
		return last, err
	}
	fmt.Fprintf(msg, "source admitted: status.adoption.phase %s\n", last.Status.Adoption.Phase)
	return last, nil
}
