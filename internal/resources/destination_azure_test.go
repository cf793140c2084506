package resources

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// TestAzureDestinationJobs: an Azure destination reaches the agent as flags, its key or SAS token only by
// reference; without a Secret (workload identity) every Pod that reaches the container runs as its
// ServiceAccount and carries the webhook's label, and still mounts no API token; with a Secret, no label.
func TestAzureDestinationJobs(t *testing.T) {
	secret := &etcdv1alpha1.SecretReference{Name: "azure-key"}
	tests := map[string]struct {
		azure    *etcdv1alpha1.AzureDestination
		wantArgs []string
		wantSA   string
	}{
		"workload identity": {&etcdv1alpha1.AzureDestination{StorageAccount: "acct", Container: "ctr", Key: "etcd/b.db", ServiceAccountName: "etcd-backup"},
			[]string{"--azure-account=acct", "--azure-container=ctr", "--path=etcd/b.db"}, "etcd-backup"},
		"shared key, Azurite": {&etcdv1alpha1.AzureDestination{StorageAccount: "devstoreaccount1", Container: "ctr", Key: "k",
			Endpoint: "http://10.0.0.1:10000/devstoreaccount1", CredentialsSecret: secret},
			[]string{"--azure-account=devstoreaccount1", "--azure-container=ctr", "--path=k", "--azure-endpoint=http://10.0.0.1:10000/devstoreaccount1"}, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			for _, job := range destinationJobs(t, etcdv1alpha1.BackupDestination{Azure: tt.azure}, tt.wantArgs, tt.wantSA) {
				c := job.Spec.Template.Spec.Containers[0]
				if got, want := job.Spec.Template.Labels[AzureWorkloadIdentityLabel], map[bool]string{true: "", false: "true"}[tt.azure.CredentialsSecret != nil]; got != want {
					t.Errorf("Job %s: workload identity label %q, want %q", job.Name, got, want)
				}
				refs := map[string]string{}
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.Value == "" {
						refs[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
					}
				}
				want := map[string]string{}
				if tt.azure.CredentialsSecret != nil {
					want = map[string]string{"STEWARD_AZURE_ACCOUNT_KEY": "azure-key/accountKey", "STEWARD_AZURE_SAS_TOKEN": "azure-key/sasToken"} //nolint:gosec // Secret references, not credentials
				}
				if len(refs) != len(want) || refs["STEWARD_AZURE_ACCOUNT_KEY"] != want["STEWARD_AZURE_ACCOUNT_KEY"] || refs["STEWARD_AZURE_SAS_TOKEN"] != want["STEWARD_AZURE_SAS_TOKEN"] {
					t.Errorf("Job %s: credentials by reference %v, want %v", job.Name, refs, want)
				}
			}
		})
	}

	// A schedule's follower writes segments under the prefix, as the same ServiceAccount with the label; the
	// Deployment's selector stays the follower's own labels.
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "db", Destination: etcdv1alpha1.BackupDestination{
			Azure: &etcdv1alpha1.AzureDestination{StorageAccount: "acct", Container: "ctr", Key: "prod", ServiceAccountName: "etcd-backup"}}}}
	cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}
	d := FollowerDeployment(s, cluster, AgentAccess{}, Options{})
	if d.Spec.Template.Spec.ServiceAccountName != "etcd-backup" || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--path=prod/db-segments") ||
		d.Spec.Template.Labels[AzureWorkloadIdentityLabel] != "true" || d.Spec.Selector.MatchLabels[AzureWorkloadIdentityLabel] != "" {
		t.Errorf("follower: ServiceAccount %q, args %v, labels %v, selector %v", d.Spec.Template.Spec.ServiceAccountName,
			d.Spec.Template.Spec.Containers[0].Args, d.Spec.Template.Labels, d.Spec.Selector.MatchLabels)
	}
	if DestinationPath(s.Spec.Destination) != "prod" || WithPath(s.Spec.Destination, "x/y.db").Azure.Key != "x/y.db" || s.Spec.Destination.Azure.Key != "prod" {
		t.Error("DestinationPath/WithPath do not address the Azure key, or WithPath changed its argument")
	}
}
