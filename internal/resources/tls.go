package resources

import (
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Keys of the TLS Secrets Steward writes: those of Kubernetes' kubernetes.io/tls type plus ca.crt, as
// cert-manager writes them, so that tools (and a later cert-manager provider) read them the same way.
const (
	SecretCAKey   = "ca.crt"
	SecretCertKey = corev1.TLSCertKey       // tls.crt
	SecretKeyKey  = corev1.TLSPrivateKeyKey // tls.key

	// DefaultCertificateLifetime of member and client certificates when the spec does not say.
	DefaultCertificateLifetime = 90 * 24 * time.Hour

	memberTLSVolume = "tls"
	// memberTLSMount is where a member's Secret is mounted. A whole-volume mount, never subPath: the kubelet
	// updates Secret volumes in place (atomically, by swapping a symlink), and etcd reads its certificate and
	// key again on every new TLS handshake, so a renewed certificate takes effect without a restart.
	memberTLSMount = "/etc/etcd/tls"
	// AgentTLSMount is where backup Jobs mount the cluster's client Secret.
	AgentTLSMount  = "/etc/steward/etcd-tls"
	agentTLSVolume = "etcd-tls"
)

// TLSEnabled reports whether members serve and talk TLS. A spec without tls gets provider Steward from the
// API's default, so nil means enabled here too.
func TLSEnabled(cluster *etcdv1alpha1.EtcdCluster) bool {
	return cluster.Spec.TLS == nil || cluster.Spec.TLS.Provider != etcdv1alpha1.TLSProviderNone
}

// TLSMode is how members of cluster run: their certificates' provider (Steward, Secrets or CertManager), or
// None (plaintext).
func TLSMode(cluster *etcdv1alpha1.EtcdCluster) string {
	if cluster.Spec.TLS == nil || cluster.Spec.TLS.Provider == "" {
		return etcdv1alpha1.TLSProviderSteward
	}
	return cluster.Spec.TLS.Provider
}

// PodTLSMode is the TLSMode a member Pod was created with; a Pod without the annotation predates TLS and runs
// plaintext.
func PodTLSMode(p *corev1.Pod) string {
	if m, ok := p.Annotations[AnnotationTLS]; ok {
		return m
	}
	return etcdv1alpha1.TLSProviderNone
}

// Scheme of members' client and peer URLs.
func Scheme(cluster *etcdv1alpha1.EtcdCluster) string {
	if TLSEnabled(cluster) {
		return "https"
	}
	return "http"
}

// CertificateLifetime of the member and client certificates Steward issues for cluster.
func CertificateLifetime(cluster *etcdv1alpha1.EtcdCluster) time.Duration {
	if t := cluster.Spec.TLS; t != nil && t.CertificateLifetime != nil && t.CertificateLifetime.Duration > 0 {
		return t.CertificateLifetime.Duration
	}
	return DefaultCertificateLifetime
}

// CASecretName is the Secret with the cluster's CA certificate and key.
func CASecretName(cluster *etcdv1alpha1.EtcdCluster) string { return cluster.Name + "-ca" }

// ClientSecretName is the Secret with the client certificate of Steward and its backup Jobs: the user's with
// provider Secrets, else <cluster>-client (Steward's, or cert-manager's from Steward's Certificate).
func ClientSecretName(cluster *etcdv1alpha1.EtcdCluster) string {
	if s := userSecrets(cluster); s != nil {
		return s.ClientSecretName
	}
	return cluster.Name + "-client"
}

// MemberTLSSecretName is the Secret member mounts: the user's one Secret for every member with provider
// Secrets (member names are generated, so users cannot create a Secret per member), else the member's own
// (MemberSecretName).
func MemberTLSSecretName(cluster *etcdv1alpha1.EtcdCluster, member string) string {
	if s := userSecrets(cluster); s != nil {
		return s.MemberSecretName
	}
	return MemberSecretName(member)
}

func userSecrets(cluster *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.TLSSecrets {
	if t := cluster.Spec.TLS; t != nil && t.Provider == etcdv1alpha1.TLSProviderSecrets {
		return t.Secrets
	}
	return nil
}

// MemberSecretName is the Secret with one member's serving and peer certificate.
//
// One Secret per member, not one shared Secret: each Pod mounts only its own key (a member's key is not
// readable from another member's Pod), the Secret's life follows the member's (created before its Pod,
// deleted once the member is gone), and renewing one member's certificate writes one small object that no
// other member's change races with.
func MemberSecretName(member string) string { return member + "-tls" }

// MemberDNSNames are the names a member's certificate carries: its own DNS names through the peer Service
// (how peers, the backup agent and in-cluster clients reach it), the client Service's names (how clients reach
// any member, and how Steward checks a member it dials by Pod IP: it verifies the member's certificate for the
// client Service's name, which every member of the cluster and nothing else carries), and localhost for
// etcdctl inside the Pod. No Pod IP: it is not known before the Pod exists and changes when the Pod is
// re-created.
func MemberDNSNames(cluster *etcdv1alpha1.EtcdCluster, member string, o Options) []string {
	peer, ns, svc := PeerServiceName(cluster), cluster.Namespace, ClientServiceName(cluster)
	return []string{
		MemberHost(cluster, member, o),
		member,
		member + "." + peer,
		member + "." + peer + "." + ns,
		member + "." + peer + "." + ns + ".svc",
		svc,
		svc + "." + ns,
		svc + "." + ns + ".svc",
		ClientServiceHost(cluster, o),
		"localhost",
	}
}

// MemberIPs are the IP addresses a member's certificate carries: loopback, for etcdctl inside the Pod.
func MemberIPs() []net.IP { return []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback} }

// ClientCommonName is the subject of the client certificate Steward issues itself.
func ClientCommonName(cluster *etcdv1alpha1.EtcdCluster) string { return "steward:" + cluster.Name }

// TLSSecret is a Secret of type kubernetes.io/tls holding a certificate, its key and the CA that issued it.
func TLSSecret(cluster *etcdv1alpha1.EtcdCluster, name string, labels map[string]string, ca, cert, key []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: cluster.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{ownerRef(cluster)},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{SecretCAKey: ca, SecretCertKey: cert, SecretKeyKey: key},
	}
}

// tlsArgs are etcd's TLS flags: TLS with client certificates required on the client and the peer port, both
// checked against the cluster's CA. etcd reloads the certificate and key files on each handshake.
func tlsArgs(cluster *etcdv1alpha1.EtcdCluster) []string {
	if !TLSEnabled(cluster) {
		return nil
	}
	ca, cert, key := memberTLSMount+"/"+SecretCAKey, memberTLSMount+"/"+SecretCertKey, memberTLSMount+"/"+SecretKeyKey
	return []string{
		"--cert-file=" + cert, "--key-file=" + key, "--trusted-ca-file=" + ca, "--client-cert-auth",
		"--peer-cert-file=" + cert, "--peer-key-file=" + key, "--peer-trusted-ca-file=" + ca, "--peer-client-cert-auth",
	}
}

// tlsEnv turns off etcd's check that a peer's client certificate names the address the peer connects from (its
// DNS names are looked up and must resolve to that IP). A new member's DNS record appears only after its Pod has an
// IP and cluster DNS has caught up, and until then the members it asks for the cluster's membership reject it:
// it exits ("cannot fetch cluster info from peer urls") and restarts with back-off, often past
// spec.replaceUnhealthyAfter. Every peer still has to present a certificate of the cluster's own CA
// (--peer-client-cert-auth). Given as an environment variable, not a flag, because the Pod's command outlives a
// version change (only the image changes) and the name differs: etcd 3.5 knows only the experimental name, 3.7
// only the new one, and 3.6 refuses both set at once; an environment variable a release does not know is only a
// warning.
func tlsEnv(cluster *etcdv1alpha1.EtcdCluster, version string) []corev1.EnvVar {
	if !TLSEnabled(cluster) {
		return nil
	}
	name := "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION"
	if strings.HasPrefix(version, "3.5.") {
		name = "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION"
	}
	return []corev1.EnvVar{{Name: name, Value: "true"}}
}

func memberTLSVolumes(cluster *etcdv1alpha1.EtcdCluster, member string) []corev1.Volume {
	if !TLSEnabled(cluster) {
		return nil
	}
	return []corev1.Volume{secretVolume(memberTLSVolume, MemberTLSSecretName(cluster, member))}
}

func memberTLSMounts(cluster *etcdv1alpha1.EtcdCluster) []corev1.VolumeMount {
	if !TLSEnabled(cluster) {
		return nil
	}
	return []corev1.VolumeMount{{Name: memberTLSVolume, MountPath: memberTLSMount, ReadOnly: true}}
}

// secretVolume mounts a Secret readable by the group the Pod runs as (fsGroup) and nobody else.
func secretVolume(volume, secret string) corev1.Volume {
	return corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secret, DefaultMode: ptr.To[int32](0o440)}}}
}

// AgentTLSArgs are the agent's flags for the files of the client Secret mounted at AgentTLSMount.
func AgentTLSArgs() []string {
	return []string{
		fmt.Sprintf("--ca-file=%s/%s", AgentTLSMount, SecretCAKey),
		fmt.Sprintf("--cert-file=%s/%s", AgentTLSMount, SecretCertKey),
		fmt.Sprintf("--key-file=%s/%s", AgentTLSMount, SecretKeyKey),
	}
}
