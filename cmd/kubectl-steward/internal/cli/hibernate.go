package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/cmd/kubectl-steward/internal/report"
)

// defaultClusterWait is --timeout of hibernate and resume, as backup's: the members stop or start one at a time.
const defaultClusterWait = 10 * time.Minute

// clusterWait is --wait and --timeout of the commands that patch a cluster and may wait for Steward to act.
type clusterWait struct {
	wait    bool
	timeout time.Duration
}

func clusterWaitFlags(cmd *cobra.Command, w *clusterWait, until string) {
	cmd.Flags().BoolVar(&w.wait, "wait", false, "Wait until "+until)
	cmd.Flags().DurationVar(&w.timeout, "timeout", defaultClusterWait, "How long --wait waits; when it passes the exit code is 124 and Steward carries on")
}

// newHibernateCommand is `hibernate`: a JSON merge patch setting spec.hibernation.enabled, the same as
// `kubectl patch etcdcluster NAME --type merge -p '{"spec":{"hibernation":{"enabled":true}}}'`, refused first
// for a cluster that cannot or need not hibernate.
func newHibernateCommand(o *Options) *cobra.Command {
	var format string
	var w clusterWait
	cmd := &cobra.Command{
		Use:   "hibernate CLUSTER",
		Short: "Stop every member of the cluster, keeping their volumes, until resume",
		Long: `Set spec.hibernation.enabled on the EtcdCluster (a JSON merge patch). Steward then stops the members' Pods one
at a time, the leader last, and keeps their volumes, member identities, certificates and users; the cluster
serves no clients and its backups pause. kubectl steward resume CLUSTER brings the same members back on their
volumes, with every key, the same cluster ID and the same revisions.

Refused for a cluster with ephemeral storage (spec.storage.ephemeral), whose data goes with its Pods, for a
paused cluster (Steward would stop nothing), and for one already hibernating. --wait waits until
status.hibernation.phase is Hibernated.`,
		Example: `  kubectl steward hibernate example
  kubectl steward hibernate example --wait --timeout 15m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.runHibernate(cmd, args[0], format, w) },
	}
	clusterWaitFlags(cmd, &w, "status.hibernation.phase is Hibernated")
	outputFlag(cmd, &format)
	return cmd
}

func (o *Options) runHibernate(cmd *cobra.Command, name, format string, w clusterWait) error {
	c, cluster, err := o.clusterFor(cmd, format, name)
	if err != nil {
		return err
	}
	if err := mayHibernate(cluster); err != nil {
		return err
	}
	if err := patchSpec(cmd.Context(), c, cluster, map[string]any{"hibernation": map[string]any{"enabled": true}}); err != nil {
		return err
	}
	msg := o.messages(format)
	fmt.Fprintf(msg, "%s hibernating\n", clusterRef(cluster))
	fmt.Fprintf(msg, `Steward now stops the members' Pods one at a time, the leader last, and keeps their volumes, member
identities and certificates; the cluster serves no clients and its backups pause until it resumes.
status.hibernation.phase is Hibernating, then Hibernated. Watch it: kubectl steward status %[1]s -n %[2]s
Bring it back: kubectl steward resume %[1]s -n %[2]s
`, cluster.Name, cluster.Namespace)
	if w.wait {
		last, err := o.waitForCluster(cmd.Context(), c, cluster, msg, w.timeout, "hibernate", report.HibernationProgress, hibernated)
		if err != nil {
			return err
		}
		fmt.Fprintln(msg, report.HibernatedSummary(last))
		cluster = last
	}
	return o.printCluster(format, cluster)
}

// mayHibernate refuses, before anything is sent, a cluster that cannot hibernate or already does. The API server
// refuses an ephemeral one too (a CEL rule); here the refusal says why in the plugin's words.
func mayHibernate(cluster *etcdv1alpha1.EtcdCluster) error {
	switch {
	case cluster.Spec.Storage.Ephemeral:
		return fmt.Errorf("cluster %s has ephemeral storage (spec.storage.ephemeral): its data is in emptyDirs, which go with its Pods, "+
			"so it cannot hibernate; take a backup (kubectl steward backup %s) before stopping it another way", cluster.Name, cluster.Name)
	case etcdv1alpha1.HibernationRequested(cluster) && cluster.Status.Hibernation != nil:
		h := cluster.Status.Hibernation
		state := "already hibernating"
		if h.Phase == etcdv1alpha1.HibernationHibernated {
			state = "already hibernated"
		}
		return fmt.Errorf("cluster %s is %s (status.hibernation.phase %s since %s); kubectl steward resume %s brings it back",
			cluster.Name, state, h.Phase, h.Since.UTC().Format(time.RFC3339), cluster.Name)
	case etcdv1alpha1.HibernationRequested(cluster):
		return fmt.Errorf("cluster %s is already asked to hibernate (spec.hibernation.enabled); Steward has not reported a phase yet "+
			"(kubectl steward status %s)", cluster.Name, cluster.Name)
	case cluster.Spec.Paused:
		return fmt.Errorf("cluster %s is paused (spec.paused): Steward would stop none of its members; "+
			"kubectl steward resume %s lets Steward act again, then hibernate it", cluster.Name, cluster.Name)
	}
	return nil
}

// hibernated is the end of hibernate --wait: every member stopped. The hibernation asked for being taken back
// meanwhile ends the wait with an error rather than at the timeout.
func hibernated(c *etcdv1alpha1.EtcdCluster) (bool, error) {
	if !etcdv1alpha1.HibernationRequested(c) {
		return false, fmt.Errorf("spec.hibernation.enabled of EtcdCluster %s/%s was unset while waiting for it to hibernate", c.Namespace, c.Name)
	}
	return c.Status.Hibernation != nil && c.Status.Hibernation.Phase == etcdv1alpha1.HibernationHibernated, nil
}

// resumed is the end of resume --wait: status.hibernation removed, which Steward does once the cluster is
// Available again, and Available True.
func resumed(c *etcdv1alpha1.EtcdCluster) (bool, error) {
	if etcdv1alpha1.HibernationRequested(c) {
		return false, fmt.Errorf("spec.hibernation.enabled of EtcdCluster %s/%s was set again while waiting for it to resume", c.Namespace, c.Name)
	}
	return c.Status.Hibernation == nil && meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionAvailable), nil
}

// waitForCluster follows the cluster until done says so, printing progress's line whenever it changes. It
// returns the cluster as last read; --timeout passing is ErrTimeout.
func (o *Options) waitForCluster(ctx context.Context, c client.WithWatch, cluster *etcdv1alpha1.EtcdCluster, msg io.Writer,
	timeout time.Duration, goal string, progressOf func(*etcdv1alpha1.EtcdCluster) string, done func(*etcdv1alpha1.EtcdCluster) (bool, error)) (*etcdv1alpha1.EtcdCluster, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key := client.ObjectKeyFromObject(cluster)
	progress := progressPrinter{w: msg, start: o.Now(), now: o.Now}
	last, printed := cluster, ""
	err := waitFor(wctx, c, key, func() client.Object { return &etcdv1alpha1.EtcdCluster{} }, &etcdv1alpha1.EtcdClusterList{}, o.Resync,
		func(obj client.Object) (bool, error) {
			if obj == nil {
				return false, fmt.Errorf("EtcdCluster %s was deleted while waiting for it to %s", key, goal)
			}
			last = obj.(*etcdv1alpha1.EtcdCluster)
			if line := progressOf(last); line != printed {
				progress.print(line)
				printed = line
			}
			return done(last)
		})
	if errors.Is(err, ErrTimeout) {
		return last, fmt.Errorf("%w %s for EtcdCluster %s to %s (%s); Steward carries on: kubectl steward status %s -n %s",
			ErrTimeout, timeout, key, goal, progressOf(last), key.Name, key.Namespace)
	}
	return last, err
}
