package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/cmd/kubectl-steward/internal/build"
)

type restoreOptions struct {
	backup, newCluster, confirm, name, version string
	reseed                                     bool
	replicas                                   int32
	schedule, toTime                           string
	toRevision                                 int64
	follow                                     followOptions
}

func newRestoreCommand(o *Options) *cobra.Command {
	var r restoreOptions
	cmd := &cobra.Command{
		Use:   "restore CLUSTER (--backup BACKUP | --from-schedule SCHEDULE [--to-revision N | --to-time T]) (--new-cluster NAME | --reseed --confirm CLUSTER)",
		Short: "Restore a backup into a new cluster, or re-seed a cluster that lost quorum",
		Long: `Restore an EtcdBackup. Two ways, as in docs/user/restore.md:

  --new-cluster NAME   creates the EtcdCluster NAME with spec.bootstrap.fromBackup, copying the spec of
                       CLUSTER when it exists (else the backup's etcd version and the API's defaults);
                       Steward creates the EtcdRestore NAME-from-backup, which this command follows.
  --reseed             creates an EtcdRestore that replaces the members of CLUSTER, which must have lost
                       quorum, by members restored from the backup (one of CLUSTER's own). Writes made after
                       the backup are lost, so --confirm must repeat the cluster's name.

Instead of --backup, --from-schedule restores a point of that EtcdBackupSchedule's continuous backup
(spec.continuous): --to-revision N, --to-time T (RFC 3339), or neither for the latest point stored. Steward
makes the point-in-time backup first (docs/user/restore.md, "Continuous backup and point-in-time restore"); CLUSTER
may be one that was deleted.

Steward checks the backup (complete, of this cluster, a compatible version) and verifies the stored snapshot
before it touches anything; a refused restore ends Failed with the reason.`,
		Example: `  kubectl steward restore example --backup example-20261123t020000z --new-cluster example-copy
  kubectl steward restore example --backup example-20261123t020000z --reseed --confirm example
  kubectl steward restore example --from-schedule nightly --to-time 2026-11-25T14:03:00Z --reseed --confirm example
  kubectl steward restore example --from-schedule nightly --new-cluster example-back   # the latest point`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.runRestore(cmd, args[0], r) },
	}
	f := cmd.Flags()
	f.StringVar(&r.backup, "backup", "", "The EtcdBackup to restore (required)")
	f.StringVar(&r.newCluster, "new-cluster", "", "Create this new EtcdCluster from the backup")
	f.BoolVar(&r.reseed, "reseed", false, "Re-seed CLUSTER in place (only a cluster that lost quorum; needs --confirm)")
	f.StringVar(&r.confirm, "confirm", "", "The cluster's name, to confirm a re-seed (writes after the backup are lost)")
	f.StringVar(&r.name, "name", "", "Name of the EtcdRestore of a re-seed (default <cluster>-restore-<UTC time>)")
	f.Int32Var(&r.replicas, "replicas", 0, "Members of the new cluster (default: as CLUSTER, else 3)")
	f.StringVar(&r.version, "version", "", "etcd version of the new cluster (default: as CLUSTER, else the backup's)")
	f.StringVar(&r.schedule, "from-schedule", "", "Restore a point of this EtcdBackupSchedule's continuous backup instead of --backup")
	f.Int64Var(&r.toRevision, "to-revision", 0, "With --from-schedule: the revision to restore to")
	f.StringVar(&r.toTime, "to-time", "", "With --from-schedule: the time (RFC 3339) to restore to; neither: the latest point")
	followFlags(cmd, &r.follow, "restore", 30*time.Minute)
	return cmd
}

func (o *Options) runRestore(cmd *cobra.Command, clusterName string, r restoreOptions) error {
	if err := checkOutput(r.follow.format); err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	req := build.RestoreRequest{Namespace: ns, Cluster: clusterName, Backup: r.backup, NewCluster: r.newCluster,
		Reseed: r.reseed, Confirm: r.confirm, Name: r.name, Now: o.Now(), Schedule: r.schedule, Revision: r.toRevision, Time: r.toTime}
	// Refused before any request: nothing is read or created for arguments that cannot be meant.
	if err := build.ValidateRestore(req); err != nil {
		return err
	}
	if r.reseed && (r.replicas != 0 || r.version != "") {
		return errors.New("--replicas and --version are for --new-cluster; a re-seed keeps the cluster's spec")
	}
	c, err := o.NewClient()
	if err != nil {
		return fmt.Errorf("connect to Kubernetes: %w", err)
	}
	ctx := cmd.Context()
	backup, err := restoredBackup(cmd, c, ns, r)
	if err != nil {
		return err
	}

	var obj client.Object
	var restoreName string
	if r.reseed {
		if _, err := getCluster(cmd, c, ns, clusterName); err != nil {
			return err
		}
		restore := build.Restore(req)
		obj, restoreName = restore, restore.Name
	} else {
		var source *etcdv1alpha1.EtcdCluster
		var existing etcdv1alpha1.EtcdCluster
		switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, &existing); {
		case err == nil:
			source = &existing
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("get EtcdCluster %s/%s: %w", ns, clusterName, err)
		}
		cluster, err := build.NewCluster(req, source, backup, build.NewClusterOptions{Replicas: r.replicas, Version: r.version})
		if err != nil {
			return err
		}
		obj, restoreName = cluster, build.FromBackupRestoreName(cluster.Name)
	}
	key := client.ObjectKey{Namespace: ns, Name: restoreName}
	kind := restoreKind
	// For --new-cluster, Steward creates the restore on its first pass over the new cluster.
	kind.mayNotExistYet = !r.reseed
	return o.createAndFollow(ctx, c, obj, key, kind, r.follow)
}

// restoredBackup is the EtcdBackup restored: --backup's, or for --from-schedule the schedule's newest successful
// backup (nil before its first), whose etcd version a new cluster of a deleted source runs. The schedule must
// exist.
func restoredBackup(cmd *cobra.Command, c client.Client, ns string, r restoreOptions) (*etcdv1alpha1.EtcdBackup, error) {
	ctx := cmd.Context()
	name := r.backup
	if r.schedule != "" {
		var s etcdv1alpha1.EtcdBackupSchedule
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.schedule}, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("no EtcdBackupSchedule %q in namespace %q (kubectl get etcdbackupschedules -n %s)", r.schedule, ns, ns)
			}
			return nil, fmt.Errorf("get EtcdBackupSchedule %s/%s: %w", ns, r.schedule, err)
		}
		if s.Spec.Continuous == nil || !s.Spec.Continuous.Enabled {
			return nil, fmt.Errorf("EtcdBackupSchedule %s has no continuous backup (spec.continuous.enabled): restore one of its backups with --backup", r.schedule)
		}
		if s.Status.LastSuccessfulBackup == nil {
			return nil, nil
		}
		name = s.Status.LastSuccessfulBackup.Name
	}
	var b etcdv1alpha1.EtcdBackup
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &b); err != nil {
		if apierrors.IsNotFound(err) && r.schedule != "" {
			return nil, nil
		}
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no EtcdBackup %q in namespace %q (kubectl get etcdbackups -n %s)", name, ns, ns)
		}
		return nil, fmt.Errorf("get EtcdBackup %s/%s: %w", ns, name, err)
	}
	return &b, nil
}
