package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/cmd/kubectl-steward/internal/build"
)

type backupOptions struct {
	name, from, pvc, s3, gcs, azure, deletionPolicy string
	compression, encryptionKeySecret                string
	s3Opts                                          build.S3Options
	gcsOpts, azureOpts                              build.CloudOptions
	follow                                          followOptions
}

func newBackupCommand(o *Options) *cobra.Command {
	var b backupOptions
	cmd := &cobra.Command{
		Use:   "backup CLUSTER",
		Short: "Take a backup now: create an EtcdBackup and wait for it to complete",
		Long: `Create an EtcdBackup of the cluster and, unless --wait=false, follow it until it is Complete or Failed,
printing its progress. The destination is the one of an existing EtcdBackup or EtcdBackupSchedule
(--destination-from: the new snapshot goes to the same directory or key prefix), a PVC (--pvc), an S3
bucket (--s3), a Google Cloud Storage bucket (--gcs) or an Azure Blob Storage container (--azure). Without
any of them, the destination of the cluster's only EtcdBackupSchedule is used.
A directory (a path ending in "/", or none) or key prefix gets a file named <cluster>-<UTC time>.db.`,
		Example: `  kubectl steward backup example                                  # to where the cluster's schedule writes
  kubectl steward backup example --destination-from nightly       # next to an EtcdBackup or schedule's files
  kubectl steward backup example --pvc backups/etcd/              # PVC "backups", directory etcd/
  kubectl steward backup example --s3 s3://etcd-backups/prod/ --s3-endpoint s3.example.com --s3-credentials-secret s3-creds
  kubectl steward backup example --gcs gs://etcd-backups/prod/ --gcs-service-account etcd-backup   # Workload Identity
  kubectl steward backup example --azure azure://prodbackups/etcd/prod/ --azure-credentials-secret azure-key
  kubectl steward backup example --azure azure://prodbackups/etcd/prod/ --azure-service-account etcd-backup   # workload identity
  kubectl steward backup example --dry-run -o yaml                # print the EtcdBackup, create nothing`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.runBackup(cmd, args[0], b) },
	}
	f := cmd.Flags()
	f.StringVar(&b.name, "name", "", "Name of the EtcdBackup (default <cluster>-<UTC time>)")
	f.StringVar(&b.from, "destination-from", "", "Use the destination of this EtcdBackup or EtcdBackupSchedule (prefix with etcdbackup/ or etcdbackupschedule/ when both exist)")
	f.StringVar(&b.pvc, "pvc", "", "Store on a PVC: <claim>/<path>, or <claim>/<dir>/ for a generated file name")
	f.StringVar(&b.s3, "s3", "", "Store in S3: s3://<bucket>/<key>, or s3://<bucket>/<prefix>/ for a generated name")
	f.StringVar(&b.s3Opts.Endpoint, "s3-endpoint", "", "S3 API host[:port], without scheme (with --s3)")
	f.StringVar(&b.s3Opts.CredentialsSecret, "s3-credentials-secret", "", "Secret with accessKeyID and secretAccessKey (with --s3; default: the Jobs' own AWS credentials)")
	f.StringVar(&b.s3Opts.ServiceAccount, "s3-service-account", "", "ServiceAccount the Jobs run as, for IAM Roles for Service Accounts (with --s3)")
	f.StringVar(&b.s3Opts.Region, "s3-region", "", "Bucket region (with --s3)")
	f.BoolVar(&b.s3Opts.ForcePathStyle, "s3-force-path-style", false, "Address the bucket as endpoint/bucket (with --s3)")
	f.BoolVar(&b.s3Opts.Insecure, "s3-insecure", false, "Plain HTTP to the S3 endpoint (with --s3; tests and trusted networks only)")
	f.StringVar(&b.gcs, "gcs", "", "Store in Google Cloud Storage: gs://<bucket>/<object>, or gs://<bucket>/<prefix>/ for a generated name")
	f.StringVar(&b.gcsOpts.Endpoint, "gcs-endpoint", "", "JSON API URL of a GCS emulator or private endpoint (with --gcs; default Google's)")
	f.StringVar(&b.gcsOpts.CredentialsSecret, "gcs-credentials-secret", "", "Secret with serviceAccount.json, a service account key (with --gcs; default: Workload Identity)")
	f.StringVar(&b.gcsOpts.ServiceAccount, "gcs-service-account", "", "ServiceAccount the Jobs run as, for Workload Identity (with --gcs)")
	f.StringVar(&b.azure, "azure", "", "Store in Azure Blob Storage: azure://<account>/<container>/<blob>, or azure://<account>/<container>/<prefix>/ for a generated name")
	f.StringVar(&b.azureOpts.Endpoint, "azure-endpoint", "", "Blob service URL of the account, for Azurite or a private endpoint (with --azure; default https://<account>.blob.core.windows.net)")
	f.StringVar(&b.azureOpts.CredentialsSecret, "azure-credentials-secret", "", "Secret with accountKey or sasToken (with --azure; default: workload identity)")
	f.StringVar(&b.azureOpts.ServiceAccount, "azure-service-account", "", "ServiceAccount the Jobs run as, for Azure workload identity (with --azure)")
	f.StringVar(&b.deletionPolicy, "deletion-policy", "", "Retain (the default) or Delete: what happens to the stored snapshot when the EtcdBackup is deleted")
	f.StringVar(&b.compression, "compression", "", "Zstd (the default) or None (default with --destination-from or a schedule: theirs)")
	f.StringVar(&b.encryptionKeySecret, "encryption-key-secret", "", "Encrypt the snapshot to the age key in this Secret's key age.key (default with --destination-from or a schedule: theirs)")
	followFlags(cmd, &b.follow, "backup", 10*time.Minute)
	return cmd
}

func (o *Options) runBackup(cmd *cobra.Command, clusterName string, b backupOptions) error {
	if err := checkOutput(b.follow.format); err != nil {
		return err
	}
	if b.compression != "" && b.compression != string(etcdv1alpha1.CompressionZstd) && b.compression != string(etcdv1alpha1.CompressionNone) {
		return fmt.Errorf("--compression %q: Zstd or None", b.compression)
	}
	if b.deletionPolicy != "" && b.deletionPolicy != string(etcdv1alpha1.DeletionPolicyRetain) && b.deletionPolicy != string(etcdv1alpha1.DeletionPolicyDelete) {
		return fmt.Errorf("--deletion-policy %q: Retain or Delete", b.deletionPolicy)
	}
	c, ns, err := o.clientAndNamespace()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if _, err := getCluster(cmd, c, ns, clusterName); err != nil {
		return err
	}
	msg := o.messages(b.follow.format)
	req := build.BackupRequest{Namespace: ns, Cluster: clusterName, Name: b.name, PVC: b.pvc, S3: b.s3, S3Opts: b.s3Opts,
		GCS: b.gcs, GCSOpts: b.gcsOpts, Azure: b.azure, AzureOpts: b.azureOpts,
		DeletionPolicy: b.deletionPolicy, Now: o.Now()}
	if b.from != "" || (b.pvc == "" && b.s3 == "" && b.gcs == "" && b.azure == "") {
		d, kind, name, err := destinationFrom(ctx, c, ns, clusterName, b.from)
		if err != nil {
			return err
		}
		req.From, req.FromIs = d, kind
		// A backup next to a schedule's or another backup's files is stored the way they are, unless told.
		if req.Compression, req.Encryption, err = storageOf(ctx, c, ns, kind, name); err != nil {
			return err
		}
		if b.from == "" {
			fmt.Fprintf(msg, "Using the destination of %s %s, the cluster's backup schedule.\n", kind, name)
		}
	}
	if b.compression != "" {
		req.Compression = etcdv1alpha1.BackupCompression(b.compression)
	}
	if b.encryptionKeySecret != "" {
		req.Encryption = &etcdv1alpha1.BackupEncryption{KeySecret: etcdv1alpha1.SecretReference{Name: b.encryptionKeySecret}}
	}
	backup, err := build.Backup(req)
	if err != nil {
		return err
	}
	return o.createAndFollow(ctx, c, backup, client.ObjectKeyFromObject(backup), backupKind, b.follow)
}

// destinationFrom is the destination of the EtcdBackup or EtcdBackupSchedule named ref ("name",
// "etcdbackup/name" or "etcdbackupschedule/name"), or with ref empty, of the cluster's only schedule.
func destinationFrom(ctx context.Context, c client.Client, ns, cluster, ref string) (*etcdv1alpha1.BackupDestination, string, string, error) {
	if ref == "" {
		var schedules etcdv1alpha1.EtcdBackupScheduleList
		if err := c.List(ctx, &schedules, client.InNamespace(ns)); err != nil {
			return nil, "", "", fmt.Errorf("list EtcdBackupSchedules: %w", err)
		}
		var mine []etcdv1alpha1.EtcdBackupSchedule
		for _, s := range schedules.Items {
			if s.Spec.ClusterName == cluster {
				mine = append(mine, s)
			}
		}
		switch len(mine) {
		case 1:
			return &mine[0].Spec.Destination, "EtcdBackupSchedule", mine[0].Name, nil
		case 0:
			return nil, "", "", fmt.Errorf("cluster %s has no EtcdBackupSchedule to take the destination from: give --pvc, --s3, --gcs, --azure or --destination-from", cluster)
		default:
			names := make([]string, 0, len(mine))
			for _, s := range mine {
				names = append(names, s.Name)
			}
			return nil, "", "", fmt.Errorf("cluster %s has several EtcdBackupSchedules (%s): choose one with --destination-from", cluster, strings.Join(names, ", "))
		}
	}
	kind, name, hasKind := strings.Cut(ref, "/")
	if !hasKind {
		kind, name = "", ref
	}
	key := client.ObjectKey{Namespace: ns, Name: name}
	var found []string
	var dest *etcdv1alpha1.BackupDestination
	var foundKind string
	if kind == "" || strings.EqualFold(kind, "etcdbackup") {
		var b etcdv1alpha1.EtcdBackup
		switch err := c.Get(ctx, key, &b); {
		case err == nil:
			dest, foundKind = &b.Spec.Destination, "EtcdBackup"
			found = append(found, "etcdbackup/"+name)
		case !apierrors.IsNotFound(err):
			return nil, "", "", fmt.Errorf("get EtcdBackup %s/%s: %w", ns, name, err)
		}
	}
	if kind == "" || strings.EqualFold(kind, "etcdbackupschedule") {
		var s etcdv1alpha1.EtcdBackupSchedule
		switch err := c.Get(ctx, key, &s); {
		case err == nil:
			dest, foundKind = &s.Spec.Destination, "EtcdBackupSchedule"
			found = append(found, "etcdbackupschedule/"+name)
		case !apierrors.IsNotFound(err):
			return nil, "", "", fmt.Errorf("get EtcdBackupSchedule %s/%s: %w", ns, name, err)
		}
	}
	if kind != "" && !strings.EqualFold(kind, "etcdbackup") && !strings.EqualFold(kind, "etcdbackupschedule") {
		return nil, "", "", fmt.Errorf("--destination-from %q: the kind is etcdbackup or etcdbackupschedule", ref)
	}
	switch len(found) {
	case 0:
		return nil, "", "", fmt.Errorf("--destination-from %s: no EtcdBackup or EtcdBackupSchedule %q in namespace %s", ref, name, ns)
	case 2:
		return nil, "", "", fmt.Errorf("--destination-from %s: both %s exist; say which", ref, strings.Join(found, " and "))
	}
	return dest, foundKind, name, nil
}

// storageOf is how the EtcdBackup or EtcdBackupSchedule kind/name stores its snapshots: compression and
// encryption.
func storageOf(ctx context.Context, c client.Client, ns, kind, name string) (etcdv1alpha1.BackupCompression, *etcdv1alpha1.BackupEncryption, error) {
	key := client.ObjectKey{Namespace: ns, Name: name}
	if kind == "EtcdBackup" {
		var b etcdv1alpha1.EtcdBackup
		if err := c.Get(ctx, key, &b); err != nil {
			return "", nil, fmt.Errorf("get EtcdBackup %s/%s: %w", ns, name, err)
		}
		return b.Spec.Compression, b.Spec.Encryption, nil
	}
	var s etcdv1alpha1.EtcdBackupSchedule
	if err := c.Get(ctx, key, &s); err != nil {
		return "", nil, fmt.Errorf("get EtcdBackupSchedule %s/%s: %w", ns, name, err)
	}
	return s.Spec.Compression, s.Spec.Encryption, nil
}
