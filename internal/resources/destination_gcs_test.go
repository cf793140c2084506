package resources

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// destinationJobs builds the backup and delete Jobs of a backup to d and checks what every bucket destination
// gives them: each of wantArgs among the agent's arguments, and the ServiceAccount wantSA without a mounted API
// token. It returns the Jobs for the provider's own checks.
func destinationJobs(t *testing.T, d etcdv1alpha1.BackupDestination, wantArgs []string, wantSA string) []*batchv1.Job {
	t.Helper()
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "db", Destination: d}}
	jobs := []*batchv1.Job{BackupJob(b, []string{"m=https://m:2379"}, "agent", AgentAccess{}), DeleteJob(b, "agent")}
	for _, job := range jobs {
		spec := job.Spec.Template.Spec
		for _, a := range wantArgs {
			if !slices.Contains(spec.Containers[0].Args, a) {
				t.Errorf("Job %s: args %v lack %s", job.Name, spec.Containers[0].Args, a)
			}
		}
		if spec.ServiceAccountName != wantSA || spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("Job %s: ServiceAccount %q (want %q), token mounted %v", job.Name, spec.ServiceAccountName, wantSA, spec.AutomountServiceAccountToken)
		}
	}
	return jobs
}

// TestGCSDestinationJobs: a GCS destination reaches the agent as flags, its key file only by reference, and its
// ServiceAccount (Workload Identity) becomes the ServiceAccount of every Pod that reaches the bucket, which still
// mounts no token.
func TestGCSDestinationJobs(t *testing.T) {
	tests := map[string]struct {
		gcs      *etcdv1alpha1.GCSDestination
		wantArgs []string
		wantEnv  bool
		wantSA   string
	}{
		"Workload Identity": {&etcdv1alpha1.GCSDestination{Bucket: "bkt", Key: "etcd/b.db", ServiceAccountName: "etcd-backup"},
			[]string{"--gcs-bucket=bkt", "--path=etcd/b.db"}, false, "etcd-backup"},
		"key file": {&etcdv1alpha1.GCSDestination{Bucket: "bkt", Key: "etcd/b.db", CredentialsSecret: &etcdv1alpha1.SecretReference{Name: "gcs-key"}},
			[]string{"--gcs-bucket=bkt", "--path=etcd/b.db"}, true, ""},
		"emulator": {&etcdv1alpha1.GCSDestination{Bucket: "bkt", Key: "k", Endpoint: "http://10.0.0.1:4443"},
			[]string{"--gcs-bucket=bkt", "--path=k", "--gcs-endpoint=http://10.0.0.1:4443"}, false, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			for _, job := range destinationJobs(t, etcdv1alpha1.BackupDestination{GCS: tt.gcs}, tt.wantArgs, tt.wantSA) {
				var env []corev1.EnvVar
				for _, e := range job.Spec.Template.Spec.Containers[0].Env {
					if e.Name == "STEWARD_GCS_CREDENTIALS" {
						env = append(env, e)
					}
				}
				switch {
				case !tt.wantEnv && len(env) > 0:
					t.Errorf("Job %s: key file variable without a Secret: %+v", job.Name, env)
				case tt.wantEnv && (len(env) != 1 || env[0].Value != "" || env[0].ValueFrom == nil || env[0].ValueFrom.SecretKeyRef == nil ||
					env[0].ValueFrom.SecretKeyRef.Name != "gcs-key" || env[0].ValueFrom.SecretKeyRef.Key != etcdv1alpha1.GCSServiceAccountKey):
					t.Errorf("Job %s: key file not taken from the Secret by reference: %+v", job.Name, env)
				}
			}
		})
	}

	// A schedule's follower writes segments under the prefix, as the same ServiceAccount.
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "db", Destination: etcdv1alpha1.BackupDestination{
			GCS: &etcdv1alpha1.GCSDestination{Bucket: "bkt", Key: "prod", ServiceAccountName: "etcd-backup"}}}}
	cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}
	d := FollowerDeployment(s, cluster, AgentAccess{}, Options{})
	if d.Spec.Template.Spec.ServiceAccountName != "etcd-backup" || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--path=prod/db-segments") {
		t.Errorf("follower: ServiceAccount %q, args %v", d.Spec.Template.Spec.ServiceAccountName, d.Spec.Template.Spec.Containers[0].Args)
	}
	if DestinationPath(s.Spec.Destination) != "prod" || WithPath(s.Spec.Destination, "x/y.db").GCS.Key != "x/y.db" || s.Spec.Destination.GCS.Key != "prod" {
		t.Error("DestinationPath/WithPath do not address the GCS key, or WithPath changed its argument")
	}
}

// TestS3AmbientDestinationJobs: an S3 destination without a credentials Secret passes no key variables, and its
// ServiceAccount (IAM Roles for Service Accounts) becomes the Jobs' ServiceAccount, still without an API token.
func TestS3AmbientDestinationJobs(t *testing.T) {
	d := etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{
		Endpoint: "s3.eu-central-1.amazonaws.com", Bucket: "bkt", Key: "k", ServiceAccountName: "etcd-backup"}}
	for _, job := range destinationJobs(t, d, nil, "etcd-backup") {
		for _, e := range job.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "STEWARD_S3_ACCESS_KEY_ID" || e.Name == "STEWARD_S3_SECRET_ACCESS_KEY" {
				t.Errorf("Job %s: %s without a credentials Secret", job.Name, e.Name)
			}
		}
	}
}
