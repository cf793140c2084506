package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// newHandoverCommand is `handover`: a JSON merge patch of spec.bootstrap.fromExisting.handover, the same as
// `kubectl patch etcdcluster NAME --type merge -p '{"spec":{"bootstrap":{"fromExisting":{"handover":"Retire"}}}}'`,
// refused first for a cluster that adopts nothing, and an abort after a source member has left.
func newHandoverCommand(o *Options) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "handover CLUSTER keep|retire|abort",
		Short: "Drive the adoption of a running etcd: keep the source's members, retire them, or back out",
		Long: `Set spec.bootstrap.fromExisting.handover of an EtcdCluster adopting a running etcd (a JSON merge patch):

  keep    Steward's members join and the source's stay (the default);
  retire  once Steward's members are in place, the source's members leave etcd one at a time, followers first,
          the leader last after handing leadership over; stop each retired process yourself (status.adoption.retired);
  abort   before the first source member has left: Steward's members leave again and the source is as it was.

See docs/user/adoption.md.`,
		Example: `  kubectl steward handover main retire
  kubectl steward handover main abort`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			handover, err := parseHandover(args[1])
			if err != nil {
				return err
			}
			c, cluster, err := o.clusterFor(cmd, format, args[0])
			if err != nil {
				return err
			}
			if err := mayHandOver(cluster, handover); err != nil {
				return err
			}
			msg := o.messages(format)
			if cluster.Spec.Bootstrap.FromExisting.Handover == handover {
				fmt.Fprintf(msg, "%s handover already %s\n", clusterRef(cluster), handover)
				return o.printCluster(format, cluster)
			}
			if err := patchSpec(cmd.Context(), c, cluster, map[string]any{"bootstrap": map[string]any{"fromExisting": map[string]any{"handover": string(handover)}}}); err != nil {
				return err
			}
			fmt.Fprintf(msg, "%s handover %s\nWatch it: kubectl get etcdcluster %s -n %s -o wide (status.adoption.phase)\n",
				clusterRef(cluster), handover, cluster.Name, cluster.Namespace)
			return o.printCluster(format, cluster)
		},
	}
	outputFlag(cmd, &format)
	return cmd
}

// parseHandover reads keep, retire or abort (any case).
func parseHandover(s string) (etcdv1alpha1.Handover, error) {
	for _, h := range []etcdv1alpha1.Handover{etcdv1alpha1.HandoverKeep, etcdv1alpha1.HandoverRetire, etcdv1alpha1.HandoverAbort} {
		if strings.EqualFold(s, string(h)) {
			return h, nil
		}
	}
	return "", fmt.Errorf("handover %q: want keep, retire or abort", s)
}

// mayHandOver refuses what Steward would refuse or ignore: a cluster adopting nothing, one whose adoption is
// over, and an abort once a source member has left.
func mayHandOver(cluster *etcdv1alpha1.EtcdCluster, handover etcdv1alpha1.Handover) error {
	b := cluster.Spec.Bootstrap
	if b == nil || b.FromExisting == nil {
		return fmt.Errorf("cluster %s adopts no running etcd (spec.bootstrap.fromExisting is not set)", cluster.Name)
	}
	a := cluster.Status.Adoption
	switch {
	case a != nil && a.Phase == etcdv1alpha1.AdoptionComplete:
		return fmt.Errorf("cluster %s has completed its adoption: every source member has left", cluster.Name)
	case handover == etcdv1alpha1.HandoverAbort && a != nil && len(a.Retired) > 0:
		return fmt.Errorf("cluster %s cannot abort its adoption: source member %s has already left etcd, so the source cannot be given back as it was; "+
			"kubectl steward handover %s retire finishes the move", cluster.Name, a.Retired[0].Name, cluster.Name)
	}
	return nil
}
