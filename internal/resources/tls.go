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
	"steward.dev/steward/internal/pki"
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

// TLSEnabled reports whether the spec asks for TLS. A spec without tls gets provider Steward from the API's
// default, so nil means enabled here too.
func TLSEnabled(cluster *etcdv1alpha1.EtcdCluster) bool {
	return cluster.Spec.TLS == nil || cluster.Spec.TLS.Provider != etcdv1alpha1.TLSProviderNone
}

// TLSMode is the TLS provider the spec asks for: its certificates' provider (Steward, Secrets or CertManager), or
// None (plaintext).
func TLSMode(cluster *etcdv1alpha1.EtcdCluster) string {
	if cluster.Spec.TLS == nil || cluster.Spec.TLS.Provider == "" {
		return etcdv1alpha1.TLSProviderSteward
	}
	return cluster.Spec.TLS.Provider
}

// How one member runs TLS. A cluster switches between plaintext and TLS without losing quorum by passing every
// member through Bridge: a Bridge member listens in plaintext, like a Plaintext one, but holds the cluster's
// certificates, with which it dials the peers that already serve TLS. So a Bridge member talks to members of
// either kind, and a Plaintext member never has to talk to a TLS one: Steward never lets those two meet.
const (
	// MemberTLSPlaintext: plaintext client and peer listeners, no certificates.
	MemberTLSPlaintext = "Plaintext"
	// MemberTLSBridge: plaintext listeners (its peer URL is http), certificates to dial TLS peers with.
	MemberTLSBridge = "Bridge"
	// MemberTLSOn: TLS with client certificates on the client and the peer port (its peer URL is https).
	MemberTLSOn = "TLS"
)

// MemberTLSOf is how member m of cluster runs: as m says, else as the spec says.
func MemberTLSOf(cluster *etcdv1alpha1.EtcdCluster, m Member) string {
	switch {
	case m.TLS != "":
		return m.TLS
	case TLSEnabled(cluster):
		return MemberTLSOn
	default:
		return MemberTLSPlaintext
	}
}

// memberTLSProvider is the provider whose certificates member m holds, "None" for a plaintext member.
func memberTLSProvider(cluster *etcdv1alpha1.EtcdCluster, m Member) string {
	switch {
	case MemberTLSOf(cluster, m) == MemberTLSPlaintext:
		return etcdv1alpha1.TLSProviderNone
	case m.TLSProvider != "":
		return m.TLSProvider
	default:
		return TLSMode(cluster)
	}
}

// PodTLS is how a member Pod was created to run TLS (MemberTLSPlaintext, MemberTLSBridge or MemberTLSOn), and
// the provider of its certificates ("None" for plaintext). A Pod without the annotation predates TLS in Steward
// and runs plaintext.
func PodTLS(p *corev1.Pod) (mode, provider string) {
	provider, ok := p.Annotations[AnnotationTLS]
	switch {
	case !ok || provider == etcdv1alpha1.TLSProviderNone:
		return MemberTLSPlaintext, etcdv1alpha1.TLSProviderNone
	case p.Annotations[AnnotationTLSListeners] == "plaintext":
		return MemberTLSBridge, provider
	default:
		return MemberTLSOn, provider
	}
}

// PodPredatesTLS reports whether a member Pod was created by a Steward without TLS (it has no TLS annotation).
func PodPredatesTLS(p *corev1.Pod) bool {
	_, ok := p.Annotations[AnnotationTLS]
	return !ok
}

// Scheme of the client and peer URLs of the cluster's members once they run as the spec says.
func Scheme(cluster *etcdv1alpha1.EtcdCluster) string {
	if TLSEnabled(cluster) {
		return "https"
	}
	return "http"
}

// SchemeOf is the scheme of the client and peer URLs of a member in TLS mode mode.
func SchemeOf(mode string) string {
	if mode == MemberTLSOn {
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
	return memberSecretOf(cluster, TLSMode(cluster), member)
}

// memberSecretOf is MemberTLSSecretName for a member holding certificates of provider: while a cluster of
// provider Secrets switches to plaintext (spec provider None) its members still mount the user's Secret.
func memberSecretOf(cluster *etcdv1alpha1.EtcdCluster, provider, member string) string {
	if s := userSecrets(cluster); s != nil && provider == etcdv1alpha1.TLSProviderSecrets {
		return s.MemberSecretName
	}
	return MemberSecretName(member)
}

// userSecrets is spec.tls.secrets: with provider Secrets, and with provider None while the members switch from
// the user's Secrets to plaintext (the only other provider admission lets it stand with).
func userSecrets(cluster *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.TLSSecrets {
	if t := cluster.Spec.TLS; t != nil && (t.Provider == etcdv1alpha1.TLSProviderSecrets || t.Provider == etcdv1alpha1.TLSProviderNone) {
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
// client Service's name, which every member of the cluster and nothing else carries), localhost for etcdctl
// inside the Pod, and spec.tls.extraSANs.dnsNames for clients outside the cluster. No Pod IP: it is not known
// before the Pod exists and changes when the Pod is re-created.
func MemberDNSNames(cluster *etcdv1alpha1.EtcdCluster, member string, o Options) []string {
	peer, ns, svc := PeerServiceName(cluster), cluster.Namespace, ClientServiceName(cluster)
	return append([]string{
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
		PeerIdentity(cluster, o),
	}, ExtraDNSNames(cluster)...)
}

// ExtraDNSNames are spec.tls.extraSANs.dnsNames: the names clients outside the cluster dial members by.
func ExtraDNSNames(cluster *etcdv1alpha1.EtcdCluster) []string {
	if cluster.Spec.TLS == nil || cluster.Spec.TLS.ExtraSANs == nil {
		return nil
	}
	return cluster.Spec.TLS.ExtraSANs.DNSNames
}

// ExtraIPs are spec.tls.extraSANs.ipAddresses, parsed; admission refuses what is not an address, and what still
// does not parse is left out here (a certificate cannot carry it).
func ExtraIPs(cluster *etcdv1alpha1.EtcdCluster) []net.IP {
	if cluster.Spec.TLS == nil || cluster.Spec.TLS.ExtraSANs == nil {
		return nil
	}
	var ips []net.IP
	for _, a := range cluster.Spec.TLS.ExtraSANs.IPAddresses {
		if ip := net.ParseIP(a); ip != nil {
			ips = append(ips, ip)
		}
	}
	return ips
}

// PeerIdentity is the DNS name that marks a member's certificate, and only a member's: members started with
// PeerCheck accept on the peer port only certificates valid for it (etcd's --peer-cert-allowed-hostname), so the
// client certificates of the same CA (Steward's, an EtcdUser's), which carry no DNS name at all, cannot speak
// etcd's replication protocol. The peer Service's own name: a name of the cluster's, in the domain every member
// certificate is issued for already, that no client dials (the Service is headless, its members are dialed by
// their own names) and that a wildcard for the members' names (*.<cluster>-peer...) does not cover.
func PeerIdentity(cluster *etcdv1alpha1.EtcdCluster, o Options) string {
	return fmt.Sprintf("%s.%s.svc.%s", PeerServiceName(cluster), cluster.Namespace, o.ClusterDomain)
}

// PeerAuthWanted reports whether the spec asks members to accept only member certificates on the peer port: a TLS
// cluster whose tls.peerAuth is not AnyCertificate.
func PeerAuthWanted(cluster *etcdv1alpha1.EtcdCluster) bool {
	return TLSEnabled(cluster) && (cluster.Spec.TLS == nil || cluster.Spec.TLS.PeerAuth != etcdv1alpha1.PeerAuthAnyCertificate)
}

// memberCertsCarryIdentity reports whether the member certificates of provider are known to carry the peer
// identity when a Pod is created: Steward's and cert-manager's always (MemberDNSNames; Steward checks
// cert-manager's before the Pod), the user's (provider Secrets) when the spec asks for the check, since Steward
// then refuses a member Secret without it.
func memberCertsCarryIdentity(cluster *etcdv1alpha1.EtcdCluster, provider string) bool {
	switch provider {
	case etcdv1alpha1.TLSProviderSteward, etcdv1alpha1.TLSProviderCertManager:
		return true
	case etcdv1alpha1.TLSProviderSecrets:
		return PeerAuthWanted(cluster)
	}
	return false
}

// PodChecksPeers reports whether a member Pod was started accepting only the peer identity on its peer port.
func PodChecksPeers(pod *corev1.Pod) bool {
	for _, a := range etcdCommand(pod) {
		if strings.HasPrefix(a, "--peer-cert-allowed-hostname=") {
			return true
		}
	}
	return false
}

// PodHeldPeerIdentity reports whether a member Pod was created holding a certificate that carries the cluster's
// peer identity (AnnotationPeerIdentity); its Secret is renewed with the same names, so it still does.
func PodHeldPeerIdentity(cluster *etcdv1alpha1.EtcdCluster, pod *corev1.Pod, o Options) bool {
	return pod.Annotations[AnnotationPeerIdentity] == PeerIdentity(cluster, o)
}

// MemberIPs are the IP addresses a member's certificate carries: loopback, for etcdctl inside the Pod, and
// spec.tls.extraSANs.ipAddresses.
func MemberIPs(cluster *etcdv1alpha1.EtcdCluster) []net.IP {
	return append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ExtraIPs(cluster)...)
}

// ClientCommonName is the subject of Steward's own client certificate: root. With authentication on, etcd takes
// a client certificate's common name as the user; root always exists in an auth-enabled store (etcd refuses to
// enable auth without it), also in one restored from another cluster's backup, so Steward and its backup Jobs
// keep their access after any restore. The cluster is unused: every cluster has its own CA.
func ClientCommonName(*etcdv1alpha1.EtcdCluster) string { return "root" }

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
// checked against the cluster's CA. etcd reloads the certificate and key files on each handshake. A Bridge member
// gets only the peer certificate: etcd's peer transport dials https peer URLs with it (and http ones in
// plaintext) whatever the member's own listeners are. peerHost, when set, is the name a certificate must be valid
// for on the peer port (PeerIdentity). etcd 3.5 to 3.7 check it both ways (client/pkg/transport baseConfig): a
// peer dialing in must present it, and a peer dialed must serve it, so a member checks peers only once every peer's
// certificate carries it.
func tlsArgs(mode string, clientCerts bool, peerHost string) []string {
	ca, cert, key := memberTLSMount+"/"+SecretCAKey, memberTLSMount+"/"+SecretCertKey, memberTLSMount+"/"+SecretKeyKey
	switch mode {
	case MemberTLSBridge:
		return []string{"--peer-cert-file=" + cert, "--peer-key-file=" + key, "--peer-trusted-ca-file=" + ca}
	case MemberTLSOn:
	default:
		return nil
	}
	args := []string{"--cert-file=" + cert, "--key-file=" + key}
	if clientCerts {
		// etcd asks clients for a certificate whenever it has a trusted CA for the client port: both or neither.
		args = append(args, "--trusted-ca-file="+ca, "--client-cert-auth")
	}
	args = append(args,
		"--peer-cert-file="+cert, "--peer-key-file="+key, "--peer-trusted-ca-file="+ca, "--peer-client-cert-auth")
	if peerHost != "" {
		args = append(args, "--peer-cert-allowed-hostname="+peerHost)
	}
	return args
}

// ClientCertAuth reports whether the cluster's members are to require client certificates on the client port:
// a TLS cluster whose tls.clientAuth is not Password.
func ClientCertAuth(cluster *etcdv1alpha1.EtcdCluster) bool {
	return TLSEnabled(cluster) && (cluster.Spec.TLS == nil || cluster.Spec.TLS.ClientAuth != etcdv1alpha1.ClientAuthPassword)
}

// PodVerifiesClientCerts reports whether a member Pod was started requiring client certificates on its client port.
func PodVerifiesClientCerts(pod *corev1.Pod) bool {
	for _, a := range etcdCommand(pod) {
		if a == "--client-cert-auth" || a == "--client-cert-auth=true" {
			return true
		}
	}
	return false
}

// tlsEnv turns off etcd's check that a peer's client certificate names the address the peer connects from (its
// DNS names are looked up and must resolve to that IP). A new member's DNS record appears only after its Pod has an
// IP and cluster DNS has caught up, and until then the members it asks for the cluster's membership reject it:
// it exits ("cannot fetch cluster info from peer urls") and restarts with back-off, often past
// spec.replaceUnhealthyAfter. Every peer still has to present a certificate of the cluster's own CA
// (--peer-client-cert-auth). The name differs by release: etcd 3.5 knows only the experimental name, 3.7 only
// the new one, and 3.6 both but refuses both set at once. A Pod's environment outlives a roll that changes only its
// image, so a roll to a release that does not know the Pod's name re-creates the Pod (RollNeedsNewPod): to etcd an
// unknown variable is only a warning, and the member would silently check peers' SANs again.
func tlsEnv(mode, version string) []corev1.EnvVar {
	if mode != MemberTLSOn {
		return nil
	}
	name := "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION"
	if strings.HasPrefix(version, "3.5.") {
		name = "ETCD_EXPERIMENTAL_PEER_SKIP_CLIENT_SAN_VERIFICATION"
	}
	return []corev1.EnvVar{{Name: name, Value: "true"}}
}

// TrustClusterCA is AnnotationTrust's value on a member Pod that trusts only the cluster's own CA.
const TrustClusterCA = "ClusterCA"

// trustsClusterCA reports whether member m, holding certificates, trusts only the cluster's own CA.
func trustsClusterCA(cluster *etcdv1alpha1.EtcdCluster, m Member) bool {
	return m.ClusterCA && MemberTLSOf(cluster, m) != MemberTLSPlaintext && memberTLSProvider(cluster, m) == etcdv1alpha1.TLSProviderCertManager
}

// PodTrustsClusterCA reports whether a member Pod was created trusting only the cluster's own CA.
func PodTrustsClusterCA(p *corev1.Pod) bool { return p.Annotations[AnnotationTrust] == TrustClusterCA }

// memberTLSVolumes is the member's TLS volume: its Secret; for a member trusting only the cluster's own CA, its
// Secret's certificate and key with ca.crt from TrustSecretName (the same paths, so etcd's flags are the same).
func memberTLSVolumes(cluster *etcdv1alpha1.EtcdCluster, m Member) []corev1.Volume {
	if MemberTLSOf(cluster, m) == MemberTLSPlaintext {
		return nil
	}
	secret := memberSecretOf(cluster, memberTLSProvider(cluster, m), m.Name)
	if !trustsClusterCA(cluster, m) {
		return []corev1.Volume{secretVolume(memberTLSVolume, secret)}
	}
	item := func(key string) []corev1.KeyToPath { return []corev1.KeyToPath{{Key: key, Path: key}} }
	return []corev1.Volume{{Name: memberTLSVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o440),
		Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Items: append(item(SecretCertKey), item(SecretKeyKey)...)}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: TrustSecretName(cluster)}, Items: item(SecretCAKey)}},
		},
	}}}}
}

func memberTLSMounts(mode string) []corev1.VolumeMount {
	if mode == MemberTLSPlaintext {
		return nil
	}
	return []corev1.VolumeMount{{Name: memberTLSVolume, MountPath: memberTLSMount, ReadOnly: true}}
}

// secretVolume mounts a Secret readable by the group the Pod runs as (fsGroup) and nobody else.
func secretVolume(volume, secret string) corev1.Volume {
	return corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secret, DefaultMode: ptr.To[int32](0o440)}}}
}

// agentTLS is what an agent container needs to dial members with the cluster's client Secret: its flags, the
// Secret's volume and the mount at AgentTLSMount.
func agentTLS(clientSecret string) ([]string, corev1.Volume, corev1.VolumeMount) {
	return AgentTLSArgs(), secretVolume(agentTLSVolume, clientSecret),
		corev1.VolumeMount{Name: agentTLSVolume, MountPath: AgentTLSMount, ReadOnly: true}
}

// AgentTLSArgs are the agent's flags for the files of the client Secret mounted at AgentTLSMount.
func AgentTLSArgs() []string {
	return []string{
		fmt.Sprintf("--ca-file=%s/%s", AgentTLSMount, SecretCAKey),
		fmt.Sprintf("--cert-file=%s/%s", AgentTLSMount, SecretCertKey),
		fmt.Sprintf("--key-file=%s/%s", AgentTLSMount, SecretKeyKey),
	}
}

// MemberClientEndpoints maps the client URL (by Pod IP) of every running member Pod the cluster controls to its
// member name. Pod IPs, not DNS names: the operator may run where cluster DNS does not resolve (with TLS, Steward
// checks a member's certificate for the client Service's name, which every member's certificate carries).
func MemberClientEndpoints(cluster *etcdv1alpha1.EtcdCluster, pods []corev1.Pod) map[string]string {
	out := map[string]string{}
	for i := range pods {
		p := &pods[i]
		name := p.Labels[LabelMember]
		if name == "" || !metav1.IsControlledBy(p, cluster) || p.DeletionTimestamp != nil || p.Status.PodIP == "" ||
			p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		mode, _ := PodTLS(p)
		out[fmt.Sprintf("%s://%s:%d", SchemeOf(mode), p.Status.PodIP, ClientPort)] = name
	}
	return out
}

// SecretRenewalReason says why the certificate in a TLS Secret (TLSSecret's keys) must be issued again from ca for
// req: "missing" for no Secret, pki.RenewalReason's answer, or a CA certificate in the Secret that is not ca's;
// "" when the Secret is good.
func SecretRenewalReason(secret *corev1.Secret, ca *pki.KeyPair, req pki.Request, now time.Time) string {
	if secret == nil {
		return "missing"
	}
	reason := pki.RenewalReason(secret.Data[SecretCertKey], secret.Data[SecretKeyKey], ca.Cert, req, now)
	if reason == "" && string(secret.Data[SecretCAKey]) != string(ca.CertPEM) {
		reason = "its CA certificate is not the cluster's"
	}
	return reason
}
