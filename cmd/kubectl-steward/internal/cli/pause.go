package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/cmd/kubectl-steward/internal/report"
)

// newPauseCommand is `pause`: a JSON merge patch of spec.paused, the same as
// `kubectl patch etcdcluster NAME --type merge -p '{"spec":{"paused":true}}'`.
func newPauseCommand(o *Options) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "pause CLUSTER",
		Short:   "Stop Steward from changing the cluster (it keeps observing and reporting status)",
		Example: "  kubectl steward pause example",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, cluster, err := o.clusterFor(cmd, format, args[0])
			if err != nil {
				return err
			}
			msg := o.messages(format)
			if cluster.Spec.Paused {
				fmt.Fprintf(msg, "%s already paused\n", clusterRef(cluster))
			} else {
				if err := patchSpec(cmd.Context(), c, cluster, map[string]any{"paused": true}); err != nil {
					return err
				}
				fmt.Fprintf(msg, "%s paused\n", clusterRef(cluster))
			}
			return o.printCluster(format, cluster)
		},
	}
	outputFlag(cmd, &format)
	return cmd
}

// newResumeCommand is `resume`, which undoes both pause and hibernate: one JSON merge patch setting spec.paused
// false when the cluster is paused and spec.hibernation.enabled false when it hibernates (both when both, since a
// paused cluster would not come back from hibernation). A cluster that is neither is left alone.
func newResumeCommand(o *Options) *cobra.Command {
	var format string
	var w clusterWait
	cmd := &cobra.Command{
		Use:   "resume CLUSTER",
		Short: "Let Steward act on the cluster again after pause, and bring a hibernated cluster back",
		Long: `Undo pause and hibernate with one JSON merge patch of the EtcdCluster: spec.paused is set false when the
cluster is paused, spec.hibernation.enabled false when it hibernates (both when both). A cluster that is
neither is left alone.

Back from hibernation, the same members start again on their volumes, with every key, the same cluster ID and
the same revisions. status.hibernation.phase is Resuming until the cluster is Available again; then
status.hibernation is removed and its backups carry on. --wait waits for that.`,
		Example: `  kubectl steward resume example
  kubectl steward resume example --wait --timeout 15m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.runResume(cmd, args[0], format, w) },
	}
	clusterWaitFlags(cmd, &w, "the cluster is back from hibernation (status.hibernation removed, Available True)")
	outputFlag(cmd, &format)
	return cmd
}

func (o *Options) runResume(cmd *cobra.Command, name, format string, w clusterWait) error {
	c, cluster, err := o.clusterFor(cmd, format, name)
	if err != nil {
		return err
	}
	msg := o.messages(format)
	paused, hibernated := cluster.Spec.Paused, etcdv1alpha1.HibernationRequested(cluster)
	spec := map[string]any{}
	if paused {
		spec["paused"] = false
	}
	if hibernated {
		spec["hibernation"] = map[string]any{"enabled": false}
	}
	switch {
	case len(spec) > 0:
		if err := patchSpec(cmd.Context(), c, cluster, spec); err != nil {
			return err
		}
		if paused {
			fmt.Fprintf(msg, "%s resumed\n", clusterRef(cluster))
		}
		if hibernated {
			fmt.Fprintf(msg, "%s resuming from hibernation\n", clusterRef(cluster))
			resumeNextSteps(msg, cluster)
		}
	case cluster.Status.Hibernation != nil:
		fmt.Fprintf(msg, "%s already resuming from hibernation (status.hibernation.phase %s)\n", clusterRef(cluster), cluster.Status.Hibernation.Phase)
	default:
		fmt.Fprintf(msg, "%s already resumed\n", clusterRef(cluster))
	}
	// Only a hibernation has something to wait for; a pause ends with the patch.
	if w.wait && (hibernated || cluster.Status.Hibernation != nil) {
		last, err := o.waitForCluster(cmd.Context(), c, cluster, msg, w.timeout, "resume", report.HibernationProgress, resumed)
		if err != nil {
			return err
		}
		fmt.Fprintln(msg, report.ResumedSummary(last))
		cluster = last
	}
	return o.printCluster(format, cluster)
}

// patchSpec applies a JSON merge patch of the cluster's spec, as `kubectl patch etcdcluster NAME --type merge -p
// '{"spec":...}'` does, and leaves the patched object in cluster.
func patchSpec(ctx context.Context, c client.Client, cluster *etcdv1alpha1.EtcdCluster, spec map[string]any) error {
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	if err := c.Patch(ctx, cluster, client.RawPatch(client.Merge.Type(), patch)); err != nil {
		return fmt.Errorf("patch EtcdCluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	return nil
}

// printCluster ends the commands that patch a cluster: with -o json|yaml, the cluster as it now is.
func (o *Options) printCluster(format string, cluster *etcdv1alpha1.EtcdCluster) error {
	if format == outputTable {
		return nil
	}
	return printDocument(o.Streams.Out, format, cluster)
}

// clusterRef names a cluster the way kubectl's messages do.
func clusterRef(cluster *etcdv1alpha1.EtcdCluster) string {
	return "etcdcluster.etcd.steward.dev/" + cluster.Name
}

// resumeNextSteps says what happens after the patch of resume, and what to watch.
func resumeNextSteps(w io.Writer, cluster *etcdv1alpha1.EtcdCluster) {
	fmt.Fprintf(w, `Steward now starts the members again on their volumes, with every key, the same cluster ID and the same
revisions. status.hibernation.phase is Resuming until condition Available is True; then status.hibernation is
removed and the cluster's backups carry on. Watch it: kubectl steward status %s -n %s
`, cluster.Name, cluster.Namespace)
}
