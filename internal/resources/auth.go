package resources

import (
	"crypto/rand"
	"fmt"
	"math/big"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcdauth"
)

const (
	// SecretUsernameKey holds an etcd user's name in a password Secret (an EtcdUser's, and the operator
	// credentials).
	SecretUsernameKey = "username"
	// SecretPasswordKey holds the user's password in a password Secret.
	SecretPasswordKey = "password" //nolint:gosec // a Secret's key name, not a credential

	// AgentCredentialsMount is where agents find the operator credentials Secret's files.
	AgentCredentialsMount  = "/etc/steward/etcd-credentials" //nolint:gosec // a path, not a credential
	agentCredentialsVolume = "etcd-credentials"

	// PasswordLength is the length of the passwords Steward generates: 62 symbols, about 190 bits.
	PasswordLength = 32
)

// AuthWanted is spec.auth.enabled.
func AuthWanted(cluster *etcdv1alpha1.EtcdCluster) bool {
	return cluster.Spec.Auth != nil && cluster.Spec.Auth.Enabled
}

// PasswordAuth reports whether Steward acts as a password user (etcdauth.OperatorUser) on the cluster:
// authentication is asked for, and the members do not verify client certificates (tls.provider None, or
// tls.clientAuth Password), so a certificate cannot say who Steward is.
func PasswordAuth(cluster *etcdv1alpha1.EtcdCluster) bool {
	return AuthWanted(cluster) && !ClientCertAuth(cluster)
}

// OperatorCredentialsSecretName is the Secret with the password of etcdauth.OperatorUser.
func OperatorCredentialsSecretName(cluster *etcdv1alpha1.EtcdCluster) string {
	return cluster.Name + "-operator-credentials"
}

// OperatorCredentialsSecret holds the password Steward acts with on the cluster, owned by the cluster (deleted
// with it).
func OperatorCredentialsSecret(cluster *etcdv1alpha1.EtcdCluster, password string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: OperatorCredentialsSecretName(cluster), Namespace: cluster.Namespace,
			Labels: ClusterLabels(cluster), OwnerReferences: []metav1.OwnerReference{ownerRef(cluster)}},
		Type: corev1.SecretTypeBasicAuth,
		Data: map[string][]byte{SecretUsernameKey: []byte(etcdauth.OperatorUser), SecretPasswordKey: []byte(password)},
	}
}

// GeneratePassword returns PasswordLength random letters and digits.
func GeneratePassword() (string, error) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, PasswordLength)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", fmt.Errorf("generate password: %w", err)
		}
		b[i] = alphabet[k.Int64()]
	}
	return string(b), nil
}

// AgentAccess is how an agent (backup Job, follower) authenticates to a cluster's members: with the cluster's
// client Secret (TLS) and with the operator credentials Secret (a password user). Empty names: not used.
type AgentAccess struct {
	ClientSecret, CredentialsSecret string
}

// AgentAccessFor is the access an agent of the cluster needs: the client Secret while any member may serve TLS
// (the spec asks for it, or status shows certificates, as during a switch to plaintext), and the operator
// credentials while Steward acts as a password user or has done so (status names the Secret). The credentials
// are mounted optional, and the agent falls back to its certificate where etcd refuses the password, as Steward
// does.
func AgentAccessFor(cluster *etcdv1alpha1.EtcdCluster) AgentAccess {
	var a AgentAccess
	if TLSEnabled(cluster) || cluster.Status.TLS != nil {
		a.ClientSecret = ClientSecretName(cluster)
	}
	if PasswordAuth(cluster) || cluster.Status.OperatorCredentialsSecret != "" {
		a.CredentialsSecret = OperatorCredentialsSecretName(cluster)
	}
	return a
}

// addTo gives the agent container (the first) of spec the flags, volumes and mounts of a, and returns args with
// the flags added.
func (a AgentAccess) addTo(args []string, spec *corev1.PodSpec) []string {
	if a.ClientSecret != "" {
		tlsArgs, volume, mount := agentTLS(a.ClientSecret)
		args = append(args, tlsArgs...)
		spec.Volumes = append(spec.Volumes, volume)
		spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, mount)
	}
	if a.CredentialsSecret != "" {
		args = append(args, "--credentials-dir="+AgentCredentialsMount)
		volume := secretVolume(agentCredentialsVolume, a.CredentialsSecret)
		// Optional: the agent runs without a password until Steward made the Secret.
		volume.Secret.Optional = ptr.To(true)
		spec.Volumes = append(spec.Volumes, volume)
		spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: agentCredentialsVolume, MountPath: AgentCredentialsMount, ReadOnly: true})
	}
	return args
}

// OperatorCredentials reads the user and password of an operator credentials Secret; ok is false when it holds
// none (nil, or a key missing or empty).
func OperatorCredentials(secret *corev1.Secret) (user, password string, ok bool) {
	if secret == nil {
		return "", "", false
	}
	user, password = string(secret.Data[SecretUsernameKey]), string(secret.Data[SecretPasswordKey])
	return user, password, user != "" && password != ""
}
