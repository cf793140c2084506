package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/cmd/kubectl-steward/internal/build"
	"steward.dev/steward/cmd/kubectl-steward/internal/report"
)

type restoreOptions struct {
	backup, newCluster, confirm, name, version, format string
	reseed, wait, dryRun                               bool
	replicas                                           int32
	timeout                                            time.Duration
}

func newRestoreCommand(o *Options) *cobra.Command {
	var r restoreOptions
	cmd := &cobra.Command{
		Use:   "restore CLUSTER --backup BACKUP (--new-cluster NAME | --reseed --confirm CLUSTER)",
		Short: "Restore a backup into a new cluster, or re-seed a cluster that lost quorum",
		Long: `Restore an EtcdBackup. Two ways, as in docs/backup.md:

  --new-cluster NAME   creates the EtcdCluster NAME with spec.bootstrap.fromBackup, copying the spec of
                       CLUSTER when it exists (else the backup's etcd version and the API's defaults);
                       Steward creates the EtcdRestore NAME-from-backup, which this command follows.
  --reseed             creates an EtcdRestore that replaces the members of CLUSTER, which must have lost
                       quorum, by members restored from the backup (one of CLUSTER's own). Writes made after
                       the backup are lost, so --confirm must repeat the cluster's name.

Steward checks the backup (complete, of this cluster, a compatible version) and verifies the stored snapshot
before it touches anything; a refused restore ends Failed with the reason.`,
		Example: `  kubectl steward restore example --backup example-20261123t020000z --new-cluster example-copy
  kubectl steward restore example --backup example-20261123t020000z --reseed --confirm example`,
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
	f.BoolVar(&r.wait, "wait", true, "Wait until the restore is Complete or Failed")
	f.DurationVar(&r.timeout, "timeout", 30*time.Minute, "How long to wait; when it passes the exit code is 124 and the restore carries on")
	f.BoolVar(&r.dryRun, "dry-run", false, "Print the object that would be created (as YAML, or -o json) and create nothing")
	outputFlag(cmd, &r.format)
	return cmd
}

func (o *Options) runRestore(cmd *cobra.Command, clusterName string, r restoreOptions) error {
	if err := checkOutput(r.format); err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	req := build.RestoreRequest{Namespace: ns, Cluster: clusterName, Backup: r.backup, NewCluster: r.newCluster,
		Reseed: r.reseed, Confirm: r.confirm, Name: r.name, Now: o.Now()}
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
	var backup etcdv1alpha1.EtcdBackup
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: r.backup}, &backup); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no EtcdBackup %q in namespace %q (kubectl get etcdbackups -n %s)", r.backup, ns, ns)
		}
		return fmt.Errorf("get EtcdBackup %s/%s: %w", ns, r.backup, err)
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
		cluster, err := build.NewCluster(req, source, &backup, build.NewClusterOptions{Replicas: r.replicas, Version: r.version})
		if err != nil {
			return err
		}
		obj, restoreName = cluster, build.FromBackupRestoreName(cluster.Name)
	}
	if r.dryRun {
		format := r.format
		if format == outputTable {
			format = outputYAML
		}
		return printDocument(o.Streams.Out, format, obj)
	}
	msg := o.messages(r.format)
	if err := c.Create(ctx, obj); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s %s/%s already exists: choose another name", kindOf(obj), ns, obj.GetName())
		}
		return fmt.Errorf("create %s %s/%s: %w", kindOf(obj), ns, obj.GetName(), err)
	}
	fmt.Fprintf(msg, "%s.etcd.steward.dev/%s created\n", lowerKind(obj), obj.GetName())
	if !r.wait {
		if r.format != outputTable {
			return printDocument(o.Streams.Out, r.format, obj)
		}
		return nil
	}

	wctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	progress := progressPrinter{w: msg, start: o.Now(), now: o.Now}
	var p report.Progress
	var last *etcdv1alpha1.EtcdRestore
	announced := false
	key := client.ObjectKey{Namespace: ns, Name: restoreName}
	err = waitFor(wctx, c, key, func() client.Object { return &etcdv1alpha1.EtcdRestore{} },
		&etcdv1alpha1.EtcdRestoreList{}, o.Resync, func(obj client.Object) (bool, error) {
			if obj == nil {
				if last != nil {
					return false, fmt.Errorf("EtcdRestore %s/%s was deleted while waiting for it", ns, restoreName)
				}
				if !announced {
					// Only for --new-cluster: Steward creates the restore on its first pass over the cluster.
					progress.print(fmt.Sprintf("waiting for Steward to create etcdrestore/%s", restoreName))
					announced = true
				}
				return false, nil
			}
			last = obj.(*etcdv1alpha1.EtcdRestore)
			progress.print(p.Observe(last.Status.Conditions)...)
			return etcdv1alpha1.Finished(last.Status.Conditions), nil
		})
	if errors.Is(err, ErrTimeout) {
		phase := "not created yet"
		if last != nil {
			phase = "phase " + report.Phase(last.Status.Conditions)
		}
		return fmt.Errorf("%w %s for EtcdRestore %s/%s (%s); it carries on: kubectl get etcdrestore %s -n %s",
			ErrTimeout, r.timeout, ns, restoreName, phase, restoreName, ns)
	}
	if err != nil {
		return err
	}
	if r.format != outputTable {
		if perr := printDocument(o.Streams.Out, r.format, last); perr != nil {
			return perr
		}
	}
	if f := report.Failure(last.Status.Conditions); f != "" {
		return fmt.Errorf("EtcdRestore %s/%s failed: %s", ns, restoreName, f)
	}
	fmt.Fprintln(msg, report.RestoreSummary(last))
	return nil
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *etcdv1alpha1.EtcdCluster:
		return "EtcdCluster"
	case *etcdv1alpha1.EtcdRestore:
		return "EtcdRestore"
	}
	return fmt.Sprintf("%T", obj)
}

func lowerKind(obj client.Object) string {
	switch obj.(type) {
	case *etcdv1alpha1.EtcdCluster:
		return "etcdcluster"
	case *etcdv1alpha1.EtcdRestore:
		return "etcdrestore"
	}
	return "object"
}
