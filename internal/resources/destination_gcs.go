package resources

import (
	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// gcsArgs are the agent flags that address an object (or, for a schedule, a prefix) of a GCS bucket.
func gcsArgs(g *etcdv1alpha1.GCSDestination) []string {
	args := []string{"--gcs-bucket=" + g.Bucket, "--path=" + g.Key}
	if g.Endpoint != "" {
		args = append(args, "--gcs-endpoint="+g.Endpoint)
	}
	return args
}

// gcsEnv passes the service account key file from the credentials Secret to the agent, which never writes it
// anywhere. Without a Secret the agent uses the Google client's default chain: the Pod's ServiceAccount through
// Workload Identity (DestinationServiceAccount).
func gcsEnv(g *etcdv1alpha1.GCSDestination) []corev1.EnvVar {
	if g.CredentialsSecret == nil {
		return nil
	}
	return []corev1.EnvVar{{Name: "STEWARD_GCS_CREDENTIALS", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: g.CredentialsSecret.Name}, Key: etcdv1alpha1.GCSServiceAccountKey}}}}
}

// DestinationServiceAccount is the ServiceAccount the Pods that reach d run as: the one a GCS destination names
// for Workload Identity, an Azure destination for workload identity or an S3 destination for IAM Roles for
// Service Accounts, else "" (the namespace's default). The Pods still mount no API token: GKE's metadata server
// gives a Pod its ServiceAccount's Google identity without one, and EKS's and Azure's webhooks mount a token of
// their own audience (sts.amazonaws.com, api://AzureADTokenExchange) only.
func DestinationServiceAccount(d etcdv1alpha1.BackupDestination) string {
	switch {
	case d.GCS != nil:
		return d.GCS.ServiceAccountName
	case d.Azure != nil:
		return d.Azure.ServiceAccountName
	case d.S3 != nil:
		return d.S3.ServiceAccountName
	}
	return ""
}

// restoreServiceAccount is the ServiceAccount of member m's Pod: the backup destination's while the Pod restores
// from it, so that the restore container reaches a bucket through Workload Identity (GCS, Azure) or IRSA (S3).
func restoreServiceAccount(m Member) string {
	if m.Restore == nil || m.Restore.Backup == nil {
		return ""
	}
	return DestinationServiceAccount(m.Restore.Backup.Spec.Destination)
}
