package resources

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// AzureWorkloadIdentityLabel asks Azure's workload identity webhook to give a Pod its ServiceAccount's federated
// identity: a projected token of its own audience (api://AzureADTokenExchange, not the API server's) and the
// variables AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE and AZURE_AUTHORITY_HOST. The webhook
// changes no Pod without it.
const AzureWorkloadIdentityLabel = "azure.workload.identity/use"

// azureArgs are the agent flags that address a blob (or, for a schedule, a prefix) of an Azure container.
func azureArgs(a *etcdv1alpha1.AzureDestination) []string {
	args := []string{"--azure-account=" + a.StorageAccount, "--azure-container=" + a.Container, "--path=" + a.Key}
	if a.Endpoint != "" {
		args = append(args, "--azure-endpoint="+a.Endpoint)
	}
	return args
}

// azureEnv passes the shared key or SAS token from the credentials Secret to the agent, which never writes them
// anywhere; the Secret holds one of the two, so both references are optional. Without a Secret the agent uses the
// Azure SDK's default chain: the Pod's ServiceAccount through workload identity (DestinationServiceAccount,
// destinationPodLabels).
func azureEnv(a *etcdv1alpha1.AzureDestination) []corev1.EnvVar {
	if a.CredentialsSecret == nil {
		return nil
	}
	ref := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: a.CredentialsSecret.Name}, Key: key, Optional: ptr.To(true)}}
	}
	return []corev1.EnvVar{
		{Name: "STEWARD_AZURE_ACCOUNT_KEY", ValueFrom: ref(etcdv1alpha1.AzureAccountKeyKey)},
		{Name: "STEWARD_AZURE_SAS_TOKEN", ValueFrom: ref(etcdv1alpha1.AzureSASTokenKey)},
	}
}

// destinationPodLabels are labels plus what a Pod that reaches d needs for its identity: the workload identity
// webhook's label for an Azure destination without a credentials Secret. labels is not changed.
func destinationPodLabels(d etcdv1alpha1.BackupDestination, labels map[string]string) map[string]string {
	if a := d.Azure; a == nil || a.CredentialsSecret != nil {
		return labels
	}
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[AzureWorkloadIdentityLabel] = "true"
	return out
}
