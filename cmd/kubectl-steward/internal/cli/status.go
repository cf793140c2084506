package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/cmd/kubectl-steward/internal/report"
	"steward.dev/steward/internal/resources"
)

func newStatusCommand(o *Options) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "status CLUSTER",
		Short: "Show a cluster's members, leader, certificates, last backup, conditions and the step in progress",
		Long: `Show an EtcdCluster as Steward reports it: the members table (name, etcd member ID, role, version,
health, database size, Pod state, node), the leader, certificate expiry, the last backup, the conditions and
the step in progress. Everything is read from the Kubernetes API (the EtcdCluster's status and its Pods),
never from etcd, so it works while etcd does not answer.`,
		Example: `  kubectl steward status example
  kubectl steward status example -n prod -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, cluster, err := o.clusterFor(cmd, format, args[0])
			if err != nil {
				return err
			}
			var pods corev1.PodList
			if err := c.List(cmd.Context(), &pods, client.InNamespace(cluster.Namespace), client.MatchingLabels{resources.LabelCluster: cluster.Name}); err != nil {
				return fmt.Errorf("list the Pods of cluster %s: %w", cluster.Name, err)
			}
			s := report.NewStatus(cluster, pods.Items)
			if format != outputTable {
				return printDocument(o.Streams.Out, format, s)
			}
			return report.WriteStatus(o.Streams.Out, s, o.Now())
		},
	}
	outputFlag(cmd, &format)
	return cmd
}

// clientAndNamespace is the client and the namespace every command works in.
func (o *Options) clientAndNamespace() (client.WithWatch, string, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, "", err
	}
	c, err := o.NewClient()
	if err != nil {
		return nil, "", fmt.Errorf("connect to Kubernetes: %w", err)
	}
	return c, ns, nil
}

// clusterFor is the start of the commands that print about one cluster: check -o, connect, read the cluster.
func (o *Options) clusterFor(cmd *cobra.Command, format, name string) (client.WithWatch, *etcdv1alpha1.EtcdCluster, error) {
	if err := checkOutput(format); err != nil {
		return nil, nil, err
	}
	c, ns, err := o.clientAndNamespace()
	if err != nil {
		return nil, nil, err
	}
	cluster, err := getCluster(cmd, c, ns, name)
	if err != nil {
		return nil, nil, err
	}
	return c, cluster, nil
}

// getCluster reads an EtcdCluster, saying plainly when there is none.
func getCluster(cmd *cobra.Command, c client.Client, ns, name string) (*etcdv1alpha1.EtcdCluster, error) {
	var cluster etcdv1alpha1.EtcdCluster
	if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: name}, &cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no EtcdCluster %q in namespace %q (kubectl get etcdclusters -n %s)", name, ns, ns)
		}
		return nil, fmt.Errorf("get EtcdCluster %s/%s: %w", ns, name, err)
	}
	return &cluster, nil
}
