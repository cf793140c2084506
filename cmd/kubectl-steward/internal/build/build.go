// Package build turns kubectl-steward's arguments into the API objects it creates (EtcdBackup, EtcdRestore, a
// new EtcdCluster bootstrapped from a backup) and refuses arguments that cannot make sense before anything is
// sent. The builders are pure (the time is passed in) and return the object a user could have written
// themselves: the plugin only ever creates or patches resources, and the API server and Steward stay the
// authority on what is allowed (admission rules and the restore's own checks still apply).
package build

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/resources"
)

// AnnotationCreatedBy marks the objects kubectl-steward created, so that `kubectl get -o yaml` tells a
// hand-made backup from a scheduled one and from one written as YAML.
const AnnotationCreatedBy = "etcd.steward.dev/created-by"

// CreatedBy is the value of AnnotationCreatedBy.
const CreatedBy = "kubectl-steward"

// ParsePVC reads a PVC destination: "<claim>", "<claim>/<dir>/" (a directory: the backup's file is created in
// it) or "<claim>/<path>" (the file itself), with an optional "pvc://" in front (the form EtcdBackup's
// status.location uses). dir reports that the path names a directory, to which the caller appends a file name.
func ParsePVC(s string) (claim, p string, dir bool, err error) {
	rest := strings.TrimPrefix(s, "pvc://")
	claim, p, _ = strings.Cut(rest, "/")
	if claim == "" {
		return "", "", false, fmt.Errorf("PVC destination %q: want <claim>[/<path>], for example backups/etcd/ or backups/etcd/db.db", s)
	}
	if strings.HasPrefix(p, "/") {
		return "", "", false, fmt.Errorf("PVC destination %q: the path after the claim is relative to the volume's root; write <claim>/<path> with one slash", s)
	}
	return claim, p, p == "" || strings.HasSuffix(p, "/"), nil
}

// ParseS3 reads an S3 destination "s3://<bucket>[/<key>]" (the form of status.location). A key that is empty
// or ends in "/" is a prefix: dir reports it, and the caller appends the object's name.
func ParseS3(s string) (bucket, key string, dir bool, err error) {
	return parseBucketURL(s, "S3", "s3://", "key")
}

// ParseGCS reads a GCS destination "gs://<bucket>[/<key>]" (the form of status.location), like ParseS3.
func ParseGCS(s string) (bucket, key string, dir bool, err error) {
	return parseBucketURL(s, "GCS", "gs://", "object")
}

// ParseAzure reads an Azure destination "azure://<account>/<container>[/<key>]" (the form of status.location),
// like ParseS3.
func ParseAzure(s string) (account, container, key string, dir bool, err error) {
	account, rest, _, err := parseBucketURL(s, "Azure", "azure://", "container>/<blob")
	if err != nil {
		return "", "", "", false, err
	}
	container, key, _ = strings.Cut(rest, "/")
	if container == "" {
		return "", "", "", false, fmt.Errorf("destination %q has no container: want azure://<account>/<container>/<blob or prefix/>", s)
	}
	return account, container, key, key == "" || strings.HasSuffix(key, "/"), nil
}

// parseBucketURL reads "<scheme><bucket>[/<key>]" of a store called kind, whose keys are called item.
func parseBucketURL(s, kind, scheme, item string) (bucket, key string, dir bool, err error) {
	rest, ok := strings.CutPrefix(s, scheme)
	if !ok {
		return "", "", false, fmt.Errorf("%s destination %q: want %s<bucket>[/<%s or prefix/>]", kind, s, scheme, item)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", false, fmt.Errorf("%s destination %q: no bucket", kind, s)
	}
	return bucket, key, key == "" || strings.HasSuffix(key, "/"), nil
}

// CloudOptions are the flags that complete a gs:// or azure:// destination; all optional (the provider's public
// endpoint, workload identity through the namespace's default ServiceAccount).
type CloudOptions struct {
	Endpoint          string
	CredentialsSecret string
	ServiceAccount    string
}

// secret is the reference the credentials flag names, nil without one.
func (o CloudOptions) secret() *etcdv1alpha1.SecretReference {
	if o.CredentialsSecret == "" {
		return nil
	}
	return &etcdv1alpha1.SecretReference{Name: o.CredentialsSecret}
}

// S3Options are the flags that complete an s3:// destination: where the S3 API is and how to reach it.
type S3Options struct {
	Endpoint          string
	CredentialsSecret string
	// ServiceAccount is the ServiceAccount the Jobs run as (IAM Roles for Service Accounts), without a Secret.
	ServiceAccount string
	Region         string
	ForcePathStyle bool
	Insecure       bool
}

// BackupRequest is what `kubectl steward backup` was asked for.
type BackupRequest struct {
	Namespace, Cluster string
	// Name of the EtcdBackup; empty gives <cluster>-<UTC time>.
	Name string
	// Exactly one destination: From (the destination of an existing EtcdBackup or EtcdBackupSchedule, whose
	// directory or prefix the new snapshot goes to), PVC ("<claim>/<path>"), S3 ("s3://<bucket>/<key>"), GCS
	// ("gs://<bucket>/<key>") or Azure ("azure://<account>/<container>/<key>").
	From      *etcdv1alpha1.BackupDestination
	FromIs    string // "EtcdBackup" or "EtcdBackupSchedule": an EtcdBackup's destination names a file, a schedule's a directory
	PVC       string
	S3        string
	S3Opts    S3Options
	GCS       string
	GCSOpts   CloudOptions
	Azure     string
	AzureOpts CloudOptions
	// DeletionPolicy is Retain (the API's default when empty) or Delete.
	DeletionPolicy string
	// Compression and Encryption are the backup's spec.compression and spec.encryption.
	Compression etcdv1alpha1.BackupCompression
	Encryption  *etcdv1alpha1.BackupEncryption
	Now         time.Time
}

// Backup is the EtcdBackup for r. The snapshot's file or object is named like a scheduled one
// (<cluster>-<time>.db) whenever r names a directory or prefix rather than a file.
func Backup(r BackupRequest) (*etcdv1alpha1.EtcdBackup, error) {
	if r.Cluster == "" {
		return nil, errors.New("a cluster name is required")
	}
	set := 0
	for _, given := range []bool{r.From != nil, r.PVC != "", r.S3 != "", r.GCS != "", r.Azure != ""} {
		if given {
			set++
		}
	}
	if set != 1 {
		return nil, errors.New("give exactly one destination: --destination-from <EtcdBackup or EtcdBackupSchedule>, --pvc <claim>/<path>, --s3 s3://<bucket>/<key>, --gcs gs://<bucket>/<key> or --azure azure://<account>/<container>/<key>")
	}
	if r.GCS == "" && (r.GCSOpts != CloudOptions{}) {
		return nil, errors.New("--gcs-endpoint, --gcs-credentials-secret and --gcs-service-account go with --gcs")
	}
	if r.Azure == "" && (r.AzureOpts != CloudOptions{}) {
		return nil, errors.New("--azure-endpoint, --azure-credentials-secret and --azure-service-account go with --azure")
	}
	if r.S3 == "" && (r.S3Opts != S3Options{}) {
		return nil, errors.New("--s3-endpoint, --s3-credentials-secret, --s3-service-account, --s3-region, --s3-force-path-style and --s3-insecure go with --s3")
	}
	artifact := backup.ArtifactName(r.Cluster, r.Now)
	var d etcdv1alpha1.BackupDestination
	switch {
	case r.From != nil:
		d = *r.From.DeepCopy()
		// A backup's destination is its file, which exists: the new snapshot goes next to it. A schedule's is
		// the directory or prefix its backups go to.
		dirOf := func(p string) string {
			if r.FromIs == "EtcdBackupSchedule" {
				return p
			}
			if dir := path.Dir(p); dir != "." {
				return dir
			}
			return ""
		}
		if d.PVC == nil && d.S3 == nil && d.GCS == nil && d.Azure == nil {
			return nil, fmt.Errorf("the %s has no destination to copy", r.FromIs)
		}
		d = resources.WithPath(d, backup.JoinPrefix(dirOf(resources.DestinationPath(d)), artifact))
	case r.PVC != "":
		claim, p, dir, err := ParsePVC(r.PVC)
		if err != nil {
			return nil, err
		}
		if dir {
			p = backup.JoinPrefix(p, artifact)
		}
		d.PVC = &etcdv1alpha1.PVCDestination{ClaimName: claim, Path: p}
	case r.GCS != "":
		bucket, key, dir, err := ParseGCS(r.GCS)
		if err != nil {
			return nil, err
		}
		if dir {
			key = backup.JoinPrefix(key, artifact)
		}
		d.GCS = &etcdv1alpha1.GCSDestination{Bucket: bucket, Key: key, Endpoint: r.GCSOpts.Endpoint,
			ServiceAccountName: r.GCSOpts.ServiceAccount, CredentialsSecret: r.GCSOpts.secret()}
	case r.Azure != "":
		account, container, key, dir, err := ParseAzure(r.Azure)
		if err != nil {
			return nil, err
		}
		if dir {
			key = backup.JoinPrefix(key, artifact)
		}
		d.Azure = &etcdv1alpha1.AzureDestination{StorageAccount: account, Container: container, Key: key, Endpoint: r.AzureOpts.Endpoint,
			ServiceAccountName: r.AzureOpts.ServiceAccount, CredentialsSecret: r.AzureOpts.secret()}
	default:
		bucket, key, dir, err := ParseS3(r.S3)
		if err != nil {
			return nil, err
		}
		if r.S3Opts.Endpoint == "" {
			return nil, errors.New("--s3 needs --s3-endpoint <host[:port]>, and --s3-credentials-secret <Secret with accessKeyID and secretAccessKey> unless the Jobs have AWS credentials of their own (--s3-service-account)")
		}
		if dir {
			key = backup.JoinPrefix(key, artifact)
		}
		d.S3 = &etcdv1alpha1.S3Destination{Endpoint: r.S3Opts.Endpoint, Bucket: bucket, Key: key, Region: r.S3Opts.Region,
			ForcePathStyle: r.S3Opts.ForcePathStyle, Insecure: r.S3Opts.Insecure, ServiceAccountName: r.S3Opts.ServiceAccount}
		if r.S3Opts.CredentialsSecret != "" {
			d.S3.CredentialsSecret = &etcdv1alpha1.SecretReference{Name: r.S3Opts.CredentialsSecret}
		}
	}
	name := r.Name
	if name == "" {
		// The schedule's naming, with the cluster's name: sortable by time and within 63 characters.
		name = backup.ScheduledBackupName(r.Cluster, r.Now)
	}
	return &etcdv1alpha1.EtcdBackup{
		TypeMeta: metav1.TypeMeta{APIVersion: etcdv1alpha1.GroupVersion.String(), Kind: "EtcdBackup"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.Namespace,
			Labels:      map[string]string{resources.LabelCluster: r.Cluster},
			Annotations: map[string]string{AnnotationCreatedBy: CreatedBy}},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: r.Cluster, Destination: d,
			DeletionPolicy: etcdv1alpha1.DeletionPolicy(r.DeletionPolicy), Compression: r.Compression, Encryption: r.Encryption},
	}, nil
}

// RestoreRequest is what `kubectl steward restore` was asked for.
type RestoreRequest struct {
	Namespace, Cluster, Backup string
	// NewCluster names a cluster to create from the backup (spec.bootstrap.fromBackup); Cluster is then the one
	// whose spec it copies, when it exists.
	NewCluster string
	// Reseed re-seeds Cluster in place (an EtcdRestore); Confirm must then equal Cluster.
	Reseed  bool
	Confirm string
	// Name of the EtcdRestore of a re-seed; empty gives <cluster>-restore-<UTC time>.
	Name string
	Now  time.Time
	// Schedule, instead of Backup, restores a point of that EtcdBackupSchedule's continuous backup: Revision,
	// Time (RFC 3339), or neither for the latest point.
	Schedule string
	Revision int64
	Time     string
}

// pointInTime is the request's point-in-time source, nil for a backup.
func (r RestoreRequest) pointInTime() *etcdv1alpha1.PointInTimeSource {
	if r.Schedule == "" {
		return nil
	}
	return &etcdv1alpha1.PointInTimeSource{ScheduleName: r.Schedule, Revision: r.Revision, Time: r.Time}
}

// source names what is restored, for messages.
func (r RestoreRequest) source() string {
	switch {
	case r.Schedule == "":
		return "backup " + r.Backup
	case r.Revision > 0:
		return fmt.Sprintf("revision %d of schedule %s", r.Revision, r.Schedule)
	case r.Time != "":
		return fmt.Sprintf("%s of schedule %s", r.Time, r.Schedule)
	}
	return "the latest point of schedule " + r.Schedule
}

// ValidateRestore refuses what cannot be meant, before anything is created. A re-seed without the cluster's name
// in --confirm is refused here with the consequence spelled out; Steward refuses it too (the EtcdRestore would
// wait with ConfirmationRequired), and stays the authority on whether a re-seed is allowed at all (quorum lost,
// the backup one of the cluster's own).
func ValidateRestore(r RestoreRequest) error {
	switch {
	case r.Cluster == "":
		return errors.New("a cluster name is required")
	case r.Backup == "" && r.Schedule == "":
		return errors.New("--backup <EtcdBackup> is required: the Complete backup to restore from (kubectl get etcdbackups); " +
			"or --from-schedule <EtcdBackupSchedule> for a point of its continuous backup")
	case r.Backup != "" && r.Schedule != "":
		return errors.New("--backup and --from-schedule exclude each other: restore one backup, or a point of a schedule's continuous backup")
	case r.Schedule == "" && (r.Revision != 0 || r.Time != ""):
		return errors.New("--to-revision and --to-time need --from-schedule: they pick a point of its continuous backup")
	case r.Revision < 0:
		return fmt.Errorf("--to-revision %d: a revision is positive", r.Revision)
	case r.Revision > 0 && r.Time != "":
		return errors.New("--to-revision and --to-time exclude each other")
	case r.NewCluster != "" && r.Reseed:
		return errors.New("--new-cluster and --reseed exclude each other: restore into a new cluster, or re-seed the existing one in place")
	case r.NewCluster == "" && !r.Reseed:
		return fmt.Errorf("say where to restore: --new-cluster <name> creates a new cluster from the backup (nothing is lost), "+
			"--reseed --confirm %s replaces the members of %s (only for a cluster that lost quorum)", r.Cluster, r.Cluster)
	case r.NewCluster != "" && r.NewCluster == r.Cluster:
		return fmt.Errorf("--new-cluster %s names the cluster itself; to re-seed it in place use --reseed --confirm %s", r.NewCluster, r.Cluster)
	case r.NewCluster != "" && r.Confirm != "":
		return errors.New("--confirm is for --reseed; a new cluster has nothing to lose")
	case r.Time != "":
		if _, err := r.pointInTime().TargetTime(); err != nil {
			return fmt.Errorf("--to-time: want an RFC 3339 time such as 2026-11-25T14:03:00Z: %w", err)
		}
	case r.Reseed && r.Confirm != r.Cluster:
		got := "no --confirm"
		if r.Confirm != "" {
			got = fmt.Sprintf("--confirm %s", r.Confirm)
		}
		return fmt.Errorf("refusing to re-seed cluster %s with %s: a re-seed replaces every member of %s by new ones restored from %s, "+
			"and writes acknowledged after that point are lost. Steward only re-seeds a cluster that has lost quorum. "+
			"To confirm, pass --confirm %s", r.Cluster, got, r.Cluster, r.source(), r.Cluster)
	}
	return nil
}

// Restore is the EtcdRestore of a validated re-seed request.
func Restore(r RestoreRequest) *etcdv1alpha1.EtcdRestore {
	name := r.Name
	if name == "" {
		name = backup.ScheduledBackupName(r.Cluster+"-restore", r.Now)
	}
	return &etcdv1alpha1.EtcdRestore{
		TypeMeta: metav1.TypeMeta{APIVersion: etcdv1alpha1.GroupVersion.String(), Kind: "EtcdRestore"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.Namespace,
			Labels:      map[string]string{resources.LabelCluster: r.Cluster},
			Annotations: map[string]string{AnnotationCreatedBy: CreatedBy}},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: r.Cluster, BackupName: r.Backup, Confirm: r.Confirm, PointInTime: r.pointInTime()},
	}
}

// NewClusterOptions override what the new cluster copies.
type NewClusterOptions struct {
	// Replicas and Version, when set, replace the source cluster's (or the defaults: the API's replicas, the
	// backup's etcd version).
	Replicas int32
	Version  string
}

// NewCluster is the EtcdCluster r.NewCluster, bootstrapped from r.Backup. It copies the spec of source (the
// cluster r names, nil when it no longer exists) so the copy runs like the original; without a source it
// runs the backup's etcd version with the API's defaults. Steward then creates the EtcdRestore
// <new cluster>-from-backup itself.
func NewCluster(r RestoreRequest, source *etcdv1alpha1.EtcdCluster, b *etcdv1alpha1.EtcdBackup, o NewClusterOptions) (*etcdv1alpha1.EtcdCluster, error) {
	var spec etcdv1alpha1.EtcdClusterSpec
	if source != nil {
		spec = *source.Spec.DeepCopy()
		if t := spec.TLS; t != nil && t.Provider == etcdv1alpha1.TLSProviderSecrets {
			return nil, fmt.Errorf("cluster %s uses tls.provider Secrets, whose member certificate names %s's Services, not %s's: "+
				"write the EtcdCluster %s yourself, with Secrets for its names and spec.bootstrap.fromBackup for %s (docs/user/restore.md)",
				source.Name, source.Name, r.NewCluster, r.NewCluster, r.source())
		}
		if t := spec.TLS; t != nil {
			// The status of a TLS switch does not carry over: the new cluster starts as its spec says.
			t.Secrets = nil
		}
		spec.Paused = false
	}
	if spec.Version == "" && b != nil {
		spec.Version = b.Status.EtcdVersion
	}
	if o.Version != "" {
		spec.Version = o.Version
	}
	if o.Replicas != 0 {
		spec.Replicas = o.Replicas
	}
	if spec.Version == "" {
		return nil, fmt.Errorf("%s records no etcd version and there is no cluster %s to copy: give --version", r.source(), r.Cluster)
	}
	spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{FromBackup: &etcdv1alpha1.BackupSource{BackupName: r.Backup, PointInTime: r.pointInTime()}}
	return &etcdv1alpha1.EtcdCluster{
		TypeMeta: metav1.TypeMeta{APIVersion: etcdv1alpha1.GroupVersion.String(), Kind: "EtcdCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: r.NewCluster, Namespace: r.Namespace,
			Annotations: map[string]string{AnnotationCreatedBy: CreatedBy}},
		Spec: spec,
	}, nil
}

// FromBackupRestoreName is the EtcdRestore Steward creates for a cluster bootstrapped from a backup.
func FromBackupRestoreName(cluster string) string { return etcdv1alpha1.BootstrapRestoreName(cluster) }
