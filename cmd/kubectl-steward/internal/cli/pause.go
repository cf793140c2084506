package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// newPauseCommand is `pause` (paused true) or `resume` (false): a JSON merge patch of spec.paused, the same as
// `kubectl patch etcdcluster NAME --type merge -p '{"spec":{"paused":true}}'`.
func newPauseCommand(o *Options, paused bool) *cobra.Command {
	var format string
	use, short, verb := "pause", "Stop Steward from changing the cluster (it keeps observing and reporting status)", "paused"
	if !paused {
		use, short, verb = "resume", "Let Steward act on the cluster again after pause", "resumed"
	}
	cmd := &cobra.Command{
		Use:     use + " CLUSTER",
		Short:   short,
		Example: fmt.Sprintf("  kubectl steward %s example", use),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, cluster, err := o.clusterFor(cmd, format, args[0])
			if err != nil {
				return err
			}
			msg := o.messages(format)
			if cluster.Spec.Paused == paused {
				fmt.Fprintf(msg, "etcdcluster.etcd.steward.dev/%s already %s\n", cluster.Name, verb)
			} else {
				patch := fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused)
				if err := c.Patch(cmd.Context(), cluster, client.RawPatch(client.Merge.Type(), patch)); err != nil {
					return fmt.Errorf("patch EtcdCluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
				}
				fmt.Fprintf(msg, "etcdcluster.etcd.steward.dev/%s %s\n", cluster.Name, verb)
			}
			if format != outputTable {
				return printDocument(o.Streams.Out, format, cluster)
			}
			return nil
		},
	}
	outputFlag(cmd, &format)
	return cmd
}
