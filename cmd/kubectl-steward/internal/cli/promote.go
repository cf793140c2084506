package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// newPromoteCommand is `promote`: a JSON merge patch setting spec.standby.promote (and with --force
// spec.standby.forcePromotion), the same as `kubectl patch etcdcluster NAME --type merge -p
// '{"spec":{"standby":{"promote":true}}}'`, refused first for a cluster that is no standby or is promoted.
func newPromoteCommand(o *Options) *cobra.Command {
	var format string
	var force bool
	cmd := &cobra.Command{
		Use:   "promote CLUSTER",
		Short: "Make a standby an ordinary cluster that takes writes",
		Long: `Set spec.standby.promote on a standby EtcdCluster (a JSON merge patch); with --force also
spec.standby.forcePromotion. Promotion cannot be undone.

Steward first checks that the source is quiet: while the primary's segments changed within
spec.standby.fencingWindow, the old primary may still take writes, and Steward keeps following (condition
Standby SourceStillAdvancing) until they have not changed for the window. --force skips that check: use it
only after fencing the old primary yourself (deleted, hibernated, its clients cut off, or its store
credentials revoked). Then the standby applies every complete segment the source holds, stops its applier,
records the revision reached (status.standby.promotedRevision), gives back the write permissions its fence
took, and is an ordinary cluster (status.standby.phase Promoted).`,
		Example: `  kubectl steward promote dr-main
  kubectl steward promote dr-main --force   # the old primary is fenced already`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.runPromote(cmd, args[0], format, force) },
	}
	cmd.Flags().BoolVar(&force, "force", false, "Promote even while the source still advances (spec.standby.forcePromotion): only once the old primary is fenced")
	outputFlag(cmd, &format)
	return cmd
}

func (o *Options) runPromote(cmd *cobra.Command, name, format string, force bool) error {
	c, cluster, err := o.clusterFor(cmd, format, name)
	if err != nil {
		return err
	}
	if err := mayPromote(cluster); err != nil {
		return err
	}
	sb := cluster.Spec.Standby
	patch := map[string]any{}
	if !sb.Promote {
		patch["promote"] = true
	}
	if force && !sb.ForcePromotion {
		patch["forcePromotion"] = true
	}
	msg := o.messages(format)
	if len(patch) == 0 {
		fmt.Fprintf(msg, "%s already asked to promote%s\n", clusterRef(cluster), promotionState(cluster))
		return o.printCluster(format, cluster)
	}
	if err := patchSpec(cmd.Context(), c, cluster, map[string]any{"standby": patch}); err != nil {
		return err
	}
	fmt.Fprintf(msg, "%s promoting\n", clusterRef(cluster))
	if cluster.Spec.Standby.ForcePromotion {
		fmt.Fprintln(msg, `Forced: Steward does not wait for the source to be quiet. It applies every complete segment the
source holds, stops the applier, records the revision reached and opens writes.`)
	} else {
		window := 3 * time.Minute
		if sb.FencingWindow != nil {
			window = sb.FencingWindow.Duration
		}
		fmt.Fprintf(msg, `Steward promotes once the source's segments have not changed for %s (fencingWindow): until then the
old primary may still take writes, and condition Standby says SourceStillAdvancing. Fence the old primary
(delete or hibernate it, or revoke its store credentials); if it is fenced already, kubectl steward promote %s --force.
`, window, cluster.Name)
	}
	fmt.Fprintf(msg, "Watch it: kubectl steward status %s -n %s (status.standby.phase Promoting, then Promoted)\n", cluster.Name, cluster.Namespace)
	return o.printCluster(format, cluster)
}

// mayPromote refuses, before anything is sent, a cluster that is no standby or is promoted already.
func mayPromote(cluster *etcdv1alpha1.EtcdCluster) error {
	switch st := cluster.Status.Standby; {
	case cluster.Spec.Standby == nil:
		return fmt.Errorf("cluster %s is no standby (spec.standby is not set): there is nothing to promote", cluster.Name)
	case st != nil && st.Phase == etcdv1alpha1.StandbyPromoted:
		return fmt.Errorf("cluster %s is promoted already (at revision %d): an ordinary cluster that takes writes", cluster.Name, st.PromotedRevision)
	}
	return nil
}

// promotionState says where an asked-for promotion is, from status.
func promotionState(cluster *etcdv1alpha1.EtcdCluster) string {
	st := cluster.Status.Standby
	if st == nil || st.Phase == "" {
		return ""
	}
	return fmt.Sprintf(" (status.standby.phase %s)", st.Phase)
}
