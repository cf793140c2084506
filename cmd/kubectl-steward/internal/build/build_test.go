package build

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/etcdcluster"
	"steward.dev/steward/internal/resources"
)

var now = time.Date(2026, 11, 23, 22, 15, 30, 0, time.UTC)

func TestParsePVC(t *testing.T) {
	tests := map[string]struct {
		in          string
		claim, path string
		dir, err    bool
	}{
		"claim only":        {in: "backups", claim: "backups", dir: true},
		"claim and dir":     {in: "backups/etcd/", claim: "backups", path: "etcd/", dir: true},
		"claim and file":    {in: "backups/etcd/db.db", claim: "backups", path: "etcd/db.db"},
		"location form":     {in: "pvc://backups/db.db", claim: "backups", path: "db.db"},
		"empty":             {in: "", err: true},
		"no claim":          {in: "/etcd/db.db", err: true},
		"absolute path":     {in: "backups//etc/passwd", err: true},
		"location, no name": {in: "pvc://", err: true},
	}
	for name, tc := range tests {
		claim, p, dir, err := ParsePVC(tc.in)
		if (err != nil) != tc.err || claim != tc.claim || p != tc.path || dir != tc.dir {
			t.Errorf("%s: ParsePVC(%q) = %q, %q, %v, %v", name, tc.in, claim, p, dir, err)
		}
	}
}

func TestParseS3(t *testing.T) {
	tests := map[string]struct {
		in          string
		bucket, key string
		dir, err    bool
	}{
		"bucket only": {in: "s3://etcd", bucket: "etcd", dir: true},
		"prefix":      {in: "s3://etcd/prod/", bucket: "etcd", key: "prod/", dir: true},
		"key":         {in: "s3://etcd/prod/db.db", bucket: "etcd", key: "prod/db.db"},
		"no scheme":   {in: "etcd/prod", err: true},
		"http":        {in: "https://etcd/prod", err: true},
		"no bucket":   {in: "s3:///prod", err: true},
		"empty":       {in: "", err: true},
		"only scheme": {in: "s3://", err: true},
	}
	for name, tc := range tests {
		bucket, key, dir, err := ParseS3(tc.in)
		if (err != nil) != tc.err || bucket != tc.bucket || key != tc.key || dir != tc.dir {
			t.Errorf("%s: ParseS3(%q) = %q, %q, %v, %v", name, tc.in, bucket, key, dir, err)
		}
	}
}

func FuzzParseDestinations(f *testing.F) {
	for _, s := range []string{"backups", "backups/etcd/", "pvc://b/x.db", "s3://etcd/prod/", "s3://", "/x", "b//x", "s3:///k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if claim, p, dir, err := ParsePVC(s); err == nil {
			if claim == "" || strings.Contains(claim, "/") || strings.HasPrefix(p, "/") {
				t.Errorf("ParsePVC(%q) = %q, %q: claim empty or with '/', or an absolute path", s, claim, p)
			}
			if dir != (p == "" || strings.HasSuffix(p, "/")) {
				t.Errorf("ParsePVC(%q): dir %v for path %q", s, dir, p)
			}
		}
		if bucket, key, dir, err := ParseS3(s); err == nil {
			if bucket == "" || strings.Contains(bucket, "/") || !strings.HasPrefix(s, "s3://") {
				t.Errorf("ParseS3(%q) = %q, %q", s, bucket, key)
			}
			if "s3://"+bucket+"/"+key != s && "s3://"+bucket != s {
				t.Errorf("ParseS3(%q) = %q, %q: does not put back together", s, bucket, key)
			}
			if dir != (key == "" || strings.HasSuffix(key, "/")) {
				t.Errorf("ParseS3(%q): dir %v for key %q", s, dir, key)
			}
		}
	})
}

func pvcDest(claim, p string) *etcdv1alpha1.BackupDestination {
	return &etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: claim, Path: p}}
}

func s3Dest(key string) *etcdv1alpha1.BackupDestination {
	return &etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Endpoint: "s3.example.com", Bucket: "etcd", Key: key,
		CredentialsSecret: &etcdv1alpha1.SecretReference{Name: "creds"}, ForcePathStyle: true}}
}

func TestBackup(t *testing.T) {
	const artifact = "db-20261123T221530Z.db"
	s3 := S3Options{Endpoint: "s3.example.com", CredentialsSecret: "creds"}
	tests := map[string]struct {
		req     BackupRequest
		want    *etcdv1alpha1.BackupDestination
		wantErr string
	}{
		"pvc file":      {req: BackupRequest{PVC: "backups/etcd/one.db"}, want: pvcDest("backups", "etcd/one.db")},
		"pvc directory": {req: BackupRequest{PVC: "backups/etcd/"}, want: pvcDest("backups", "etcd/"+artifact)},
		"pvc root":      {req: BackupRequest{PVC: "backups"}, want: pvcDest("backups", artifact)},
		"s3 prefix": {req: BackupRequest{S3: "s3://etcd/prod/", S3Opts: s3}, want: func() *etcdv1alpha1.BackupDestination {
			d := s3Dest("prod/" + artifact)
			d.S3.ForcePathStyle = false
			return d
		}()},
		"s3 needs endpoint": {req: BackupRequest{S3: "s3://etcd/k"}, wantErr: "--s3-endpoint"},
		"s3 flags alone":    {req: BackupRequest{PVC: "b", S3Opts: s3}, wantErr: "go with --s3"},
		"two destinations":  {req: BackupRequest{PVC: "b", S3: "s3://etcd/k", S3Opts: s3}, wantErr: "exactly one destination"},
		"no destination":    {req: BackupRequest{}, wantErr: "exactly one destination"},
		"next to a backup's file": {req: BackupRequest{From: pvcDest("backups", "etcd/db-old.db"), FromIs: "EtcdBackup"},
			want: pvcDest("backups", "etcd/"+artifact)},
		"next to a backup's file at the root": {req: BackupRequest{From: s3Dest("db-old.db"), FromIs: "EtcdBackup"}, want: s3Dest(artifact)},
		"in a schedule's directory": {req: BackupRequest{From: pvcDest("backups", "etcd"), FromIs: "EtcdBackupSchedule"},
			want: pvcDest("backups", "etcd/"+artifact)},
		"under a schedule's prefix": {req: BackupRequest{From: s3Dest("prod/"), FromIs: "EtcdBackupSchedule"}, want: s3Dest("prod/" + artifact)},
		"an empty source":           {req: BackupRequest{From: &etcdv1alpha1.BackupDestination{}, FromIs: "EtcdBackup"}, wantErr: "no destination"},
		"gcs prefix, Workload Identity": {req: BackupRequest{GCS: "gs://etcd/prod/", GCSOpts: CloudOptions{ServiceAccount: "etcd-backup"}},
			want: &etcdv1alpha1.BackupDestination{GCS: &etcdv1alpha1.GCSDestination{Bucket: "etcd", Key: "prod/" + artifact, ServiceAccountName: "etcd-backup"}}},
		"gcs object, key file": {req: BackupRequest{GCS: "gs://etcd/one.db", GCSOpts: CloudOptions{CredentialsSecret: "gcs-key", Endpoint: "https://storage.example.com"}},
			want: &etcdv1alpha1.BackupDestination{GCS: &etcdv1alpha1.GCSDestination{Bucket: "etcd", Key: "one.db", Endpoint: "https://storage.example.com",
				CredentialsSecret: &etcdv1alpha1.SecretReference{Name: "gcs-key"}}}},
		"gcs flags alone":   {req: BackupRequest{PVC: "b", GCSOpts: CloudOptions{Endpoint: "http://x"}}, wantErr: "go with --gcs"},
		"gcs and s3":        {req: BackupRequest{GCS: "gs://etcd/k", S3: "s3://etcd/k", S3Opts: s3}, wantErr: "exactly one destination"},
		"gcs without gs://": {req: BackupRequest{GCS: "etcd/k"}, wantErr: "want gs://"},
		"azure prefix, workload identity": {req: BackupRequest{Azure: "azure://prodbackups/etcd/prod/", AzureOpts: CloudOptions{ServiceAccount: "etcd-backup"}},
			want: &etcdv1alpha1.BackupDestination{Azure: &etcdv1alpha1.AzureDestination{StorageAccount: "prodbackups", Container: "etcd",
				Key: "prod/" + artifact, ServiceAccountName: "etcd-backup"}}},
		"azure blob, shared key": {req: BackupRequest{Azure: "azure://devstoreaccount1/etcd/one.db",
			AzureOpts: CloudOptions{CredentialsSecret: "azure-key", Endpoint: "http://10.0.0.1:10000/devstoreaccount1"}},
			want: &etcdv1alpha1.BackupDestination{Azure: &etcdv1alpha1.AzureDestination{StorageAccount: "devstoreaccount1", Container: "etcd", Key: "one.db",
				Endpoint: "http://10.0.0.1:10000/devstoreaccount1", CredentialsSecret: &etcdv1alpha1.SecretReference{Name: "azure-key"}}}},
		"azure container root": {req: BackupRequest{Azure: "azure://prodbackups/etcd"},
			want: &etcdv1alpha1.BackupDestination{Azure: &etcdv1alpha1.AzureDestination{StorageAccount: "prodbackups", Container: "etcd", Key: artifact}}},
		"azure without container": {req: BackupRequest{Azure: "azure://prodbackups/"}, wantErr: "has no container"},
		"azure without azure://":  {req: BackupRequest{Azure: "prodbackups/etcd/k"}, wantErr: "want azure://"},
		"azure flags alone":       {req: BackupRequest{PVC: "b", AzureOpts: CloudOptions{ServiceAccount: "x"}}, wantErr: "go with --azure"},
		"azure and gcs":           {req: BackupRequest{Azure: "azure://a/b/k", GCS: "gs://etcd/k"}, wantErr: "exactly one destination"},
		"under an Azure schedule's prefix": {req: BackupRequest{From: &etcdv1alpha1.BackupDestination{Azure: &etcdv1alpha1.AzureDestination{
			StorageAccount: "prodbackups", Container: "etcd", Key: "prod"}}, FromIs: "EtcdBackupSchedule"},
			want: &etcdv1alpha1.BackupDestination{Azure: &etcdv1alpha1.AzureDestination{StorageAccount: "prodbackups", Container: "etcd", Key: "prod/" + artifact}}},
		"under a GCS schedule's prefix": {req: BackupRequest{From: &etcdv1alpha1.BackupDestination{GCS: &etcdv1alpha1.GCSDestination{Bucket: "etcd", Key: "prod"}},
			FromIs: "EtcdBackupSchedule"}, want: &etcdv1alpha1.BackupDestination{GCS: &etcdv1alpha1.GCSDestination{Bucket: "etcd", Key: "prod/" + artifact}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := tc.req
			req.Namespace, req.Cluster, req.Now = "ns", "db", now
			var before string
			if req.From != nil && req.From.PVC != nil {
				before = req.From.PVC.Path
			}
			b, err := Backup(req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.From != nil && req.From.PVC != nil && req.From.PVC.Path != before {
				t.Error("Backup changed the source's destination")
			}
			if b.Name != "db-20261123t221530z" || b.Namespace != "ns" || b.Spec.ClusterName != "db" ||
				b.Labels[resources.LabelCluster] != "db" || b.Annotations[AnnotationCreatedBy] != CreatedBy || b.Kind != "EtcdBackup" {
				t.Errorf("metadata %+v %+v", b.ObjectMeta, b.TypeMeta)
			}
			if got, want := b.Spec.Destination, *tc.want; !equalDest(got, want) {
				t.Errorf("destination %+v %+v, want %+v %+v", got.PVC, got.S3, want.PVC, want.S3)
			}
		})
	}
	b, err := Backup(BackupRequest{Namespace: "ns", Cluster: "db", Name: "mine", PVC: "b", DeletionPolicy: "Delete", Now: now})
	if err != nil || b.Name != "mine" || b.Spec.DeletionPolicy != etcdv1alpha1.DeletionPolicyDelete {
		t.Errorf("named backup %+v, %v", b, err)
	}
}

func equalDest(a, b etcdv1alpha1.BackupDestination) bool {
	if (a.PVC == nil) != (b.PVC == nil) || (a.S3 == nil) != (b.S3 == nil) {
		return false
	}
	if a.PVC != nil && *a.PVC != *b.PVC {
		return false
	}
	return a.S3 == nil || equality.Semantic.DeepEqual(a.S3, b.S3)
}

func TestValidateRestore(t *testing.T) {
	tests := map[string]struct {
		req     RestoreRequest
		wantErr string
	}{
		"new cluster":                {req: RestoreRequest{NewCluster: "db-copy"}},
		"reseed confirmed":           {req: RestoreRequest{Reseed: true, Confirm: "db"}},
		"reseed unconfirmed":         {req: RestoreRequest{Reseed: true}, wantErr: "refusing to re-seed cluster db with no --confirm"},
		"reseed confirmed wrongly":   {req: RestoreRequest{Reseed: true, Confirm: "prod"}, wantErr: "with --confirm prod: a re-seed replaces every member of db"},
		"reseed says how to confirm": {req: RestoreRequest{Reseed: true}, wantErr: "To confirm, pass --confirm db"},
		"neither":                    {req: RestoreRequest{}, wantErr: "say where to restore"},
		"both":                       {req: RestoreRequest{NewCluster: "x", Reseed: true, Confirm: "db"}, wantErr: "exclude each other"},
		"new cluster is the cluster": {req: RestoreRequest{NewCluster: "db"}, wantErr: "names the cluster itself"},
		"confirm without reseed":     {req: RestoreRequest{NewCluster: "x", Confirm: "db"}, wantErr: "--confirm is for --reseed"},
		"no backup":                  {req: RestoreRequest{NewCluster: "x", Backup: "-"}, wantErr: "--backup"},
		"no cluster":                 {req: RestoreRequest{NewCluster: "x", Cluster: "-"}, wantErr: "cluster name is required"},
		"schedule, latest point":     {req: RestoreRequest{NewCluster: "x", Schedule: "nightly"}},
		"schedule, a time":           {req: RestoreRequest{Reseed: true, Confirm: "db", Schedule: "nightly", Time: "2026-11-25T15:03:00.25+01:00"}},
		"schedule and backup":        {req: RestoreRequest{NewCluster: "x", Schedule: "nightly", Backup: "both"}, wantErr: "--backup and --from-schedule exclude each other"},
		"a time without a schedule":  {req: RestoreRequest{NewCluster: "x", Time: "2026-11-25T14:03:00Z"}, wantErr: "need --from-schedule"},
		"a revision and a time":      {req: RestoreRequest{NewCluster: "x", Schedule: "nightly", Revision: 5, Time: "2026-11-25T14:03:00Z"}, wantErr: "--to-revision and --to-time exclude each other"},
		"not a time":                 {req: RestoreRequest{NewCluster: "x", Schedule: "nightly", Time: "yesterday"}, wantErr: "--to-time: want an RFC 3339 time"},
		"negative revision":          {req: RestoreRequest{NewCluster: "x", Schedule: "nightly", Revision: -1}, wantErr: "a revision is positive"},
		"reseed names the point":     {req: RestoreRequest{Reseed: true, Schedule: "nightly", Revision: 42}, wantErr: "restored from revision 42 of schedule nightly"},
	}
	for name, tc := range tests {
		req := tc.req
		req.Cluster, req.Backup = "db", "db-1"
		if tc.req.Cluster == "-" {
			req.Cluster = ""
		}
		if tc.req.Backup == "-" || tc.req.Schedule != "" && tc.req.Backup != "both" {
			req.Backup = ""
		}
		err := ValidateRestore(req)
		if tc.wantErr == "" && err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: err %v, want one saying %q", name, err, tc.wantErr)
		}
	}
}

func TestRestore(t *testing.T) {
	r := Restore(RestoreRequest{Namespace: "ns", Cluster: "db", Backup: "db-1", Reseed: true, Confirm: "db", Now: now})
	if r.Name != "db-restore-20261123t221530z" || r.Spec != (etcdv1alpha1.EtcdRestoreSpec{ClusterName: "db", BackupName: "db-1", Confirm: "db"}) ||
		r.Kind != "EtcdRestore" || r.Annotations[AnnotationCreatedBy] != CreatedBy {
		t.Errorf("restore %+v", r)
	}
}

func TestRestoreToAPoint(t *testing.T) {
	r := Restore(RestoreRequest{Namespace: "ns", Cluster: "db", Schedule: "nightly", Revision: 42, Reseed: true, Confirm: "db", Now: now})
	if r.Spec.BackupName != "" || r.Spec.PointInTime == nil || *r.Spec.PointInTime != (etcdv1alpha1.PointInTimeSource{ScheduleName: "nightly", Revision: 42}) {
		t.Errorf("restore to a point: %+v", r.Spec)
	}
	req := RestoreRequest{Namespace: "ns", Cluster: "gone", Schedule: "nightly", Time: "2026-11-25T14:03:00Z", NewCluster: "back"}
	c, err := NewCluster(req, nil, nil, NewClusterOptions{Version: "3.6.16"})
	if err != nil || c.Spec.Bootstrap.FromBackup.BackupName != "" || c.Spec.Bootstrap.FromBackup.PointInTime == nil ||
		c.Spec.Bootstrap.FromBackup.PointInTime.Time != "2026-11-25T14:03:00Z" || c.Spec.Version != "3.6.16" {
		t.Errorf("new cluster from a point: %+v, %v", c, err)
	}
	if _, err := NewCluster(req, nil, nil, NewClusterOptions{}); err == nil || !strings.Contains(err.Error(), "2026-11-25T14:03:00Z of schedule nightly records no etcd version") {
		t.Errorf("no version anywhere: %v", err)
	}
}

func TestNewCluster(t *testing.T) {
	backup := &etcdv1alpha1.EtcdBackup{Status: etcdv1alpha1.EtcdBackupStatus{EtcdVersion: "3.6.15"}}
	req := RestoreRequest{Namespace: "ns", Cluster: "db", Backup: "db-1", NewCluster: "db-copy"}
	source := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}, Spec: etcdv1alpha1.EtcdClusterSpec{
		Replicas: 5, Version: "3.6.16", Paused: true, TLS: &etcdv1alpha1.TLSSpec{Provider: "CertManager",
			CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: "ca"}}}}}

	c, err := NewCluster(req, source, backup, NewClusterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "db-copy" || c.Spec.Replicas != 5 || c.Spec.Version != "3.6.16" || c.Spec.Paused ||
		c.Spec.TLS.CertManager.IssuerRef.Name != "ca" || c.Spec.Bootstrap.FromBackup.BackupName != "db-1" {
		t.Errorf("copy of the source: %+v", c.Spec)
	}
	if !source.Spec.Paused || source.Spec.Bootstrap != nil {
		t.Error("NewCluster changed the source cluster")
	}

	c, err = NewCluster(req, nil, backup, NewClusterOptions{})
	if err != nil || c.Spec.Version != "3.6.15" || c.Spec.Replicas != 0 {
		t.Errorf("without a source: %+v, %v", c, err)
	}
	c, err = NewCluster(req, source, backup, NewClusterOptions{Replicas: 1, Version: "3.6.14"})
	if err != nil || c.Spec.Version != "3.6.14" || c.Spec.Replicas != 1 {
		t.Errorf("overrides: %+v, %v", c, err)
	}
	if _, err := NewCluster(req, nil, &etcdv1alpha1.EtcdBackup{}, NewClusterOptions{}); err == nil || !strings.Contains(err.Error(), "--version") {
		t.Errorf("no version anywhere: %v", err)
	}
	secrets := source.DeepCopy()
	secrets.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Secrets", Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "m", ClientSecretName: "c"}}
	if _, err := NewCluster(req, secrets, backup, NewClusterOptions{}); err == nil || !strings.Contains(err.Error(), "tls.provider Secrets") {
		t.Errorf("provider Secrets: %v", err)
	}
}

// The name of the restore a bootstrap from a backup gets is the controller's: the plugin waits for it.
func TestFromBackupRestoreNameIsTheControllers(t *testing.T) {
	c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db-copy"}}
	if got, want := FromBackupRestoreName(c.Name), etcdcluster.FromBackupRestoreName(c); got != want {
		t.Errorf("FromBackupRestoreName = %q, the controller's %q", got, want)
	}
}
