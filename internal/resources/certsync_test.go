package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func tlsSecret(name, ca, cert, key string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
		Data: map[string][]byte{SecretCAKey: []byte(ca), SecretCertKey: []byte(cert), SecretKeyKey: []byte(key)}}
}

// TestCertificatesDigest: the digest follows the certificates a Secret holds, not its key or other metadata.
func TestCertificatesDigest(t *testing.T) {
	base := CertificatesDigest(tlsSecret("a", "ca", "cert", "key"))
	tests := map[string]struct {
		secret *corev1.Secret
		same   bool
	}{
		"same content":                        {tlsSecret("a", "ca", "cert", "key"), true},
		"another name":                        {tlsSecret("b", "ca", "cert", "key"), true},
		"another key only":                    {tlsSecret("a", "ca", "cert", "key2"), true},
		"a renewed certificate":               {tlsSecret("a", "ca", "cert2", "key2"), false},
		"another CA bundle":                   {tlsSecret("a", "ca+ca2", "cert", "key"), false},
		"the CA and certificate run together": {tlsSecret("a", "cac", "ert", "key"), false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := CertificatesDigest(tt.secret) == base; got != tt.same {
				t.Errorf("digest equal to the base's: %t, want %t", got, tt.same)
			}
		})
	}
}

// TestCertificatesRefresh: a member Pod is annotated when the pass saw every Secret its TLS volume mounts and
// the annotation records other content (or none); never a plaintext Pod, one whose Secret the pass did not see,
// one that is going or has ended, or one that records what was seen (a repeated pass writes nothing). A Pod built
// by MemberPod from what the pass saw carries the value already.
func TestCertificatesRefresh(t *testing.T) {
	member := Member{Name: "db-abcde", State: "existing", InitialCluster: boot.InitialCluster}
	steward := testCluster()
	certManagerOwnCA := testCluster(certManager("ClusterIssuer", ""))
	seen := map[string]string{
		MemberSecretName("db-abcde"):      CertificatesDigest(tlsSecret("db-abcde-tls", "ca", "cert", "key")),
		TrustSecretName(certManagerOwnCA): CertificatesDigest(tlsSecret("db-ca-trust", "own-ca", "", "")),
	}
	renewed := map[string]string{
		MemberSecretName("db-abcde"):      CertificatesDigest(tlsSecret("db-abcde-tls", "ca", "cert2", "key2")),
		TrustSecretName(certManagerOwnCA): seen[TrustSecretName(certManagerOwnCA)],
	}
	trustRenewed := map[string]string{
		MemberSecretName("db-abcde"):      seen[MemberSecretName("db-abcde")],
		TrustSecretName(certManagerOwnCA): CertificatesDigest(tlsSecret("db-ca-trust", "own-ca-renewed", "", "")),
	}
	plainMember := member
	plainMember.TLS = MemberTLSPlaintext
	ownCAMember := member
	ownCAMember.ClusterCA = true

	pod := func(c *etcdv1alpha1.EtcdCluster, m Member, created map[string]string, mutate ...func(*corev1.Pod)) *corev1.Pod {
		m.Certificates = created
		p := MemberPod(c, m, opts)
		for _, f := range mutate {
			f(p)
		}
		return p
	}
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
	failed := func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }
	running := func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }

	tests := map[string]struct {
		pod     *corev1.Pod
		seen    map[string]string
		refresh bool
	}{
		"created from what the pass sees":           {pod(steward, member, seen), seen, false},
		"created before the annotation existed":     {pod(steward, member, nil, running), seen, true},
		"certificate renewed":                       {pod(steward, member, seen, running), renewed, true},
		"renewed, annotated since":                  {pod(steward, member, renewed, running), renewed, false},
		"renewed, Secret not seen this pass":        {pod(steward, member, seen, running), map[string]string{"other-tls": "x"}, false},
		"nothing seen":                              {pod(steward, member, seen, running), nil, false},
		"plaintext member":                          {pod(steward, plainMember, nil, running), renewed, false},
		"renewed, Pod being deleted":                {pod(steward, member, seen, running, deleting), renewed, false},
		"renewed, Pod ended":                        {pod(steward, member, seen, failed), renewed, false},
		"own CA: member certificate renewed":        {pod(certManagerOwnCA, ownCAMember, seen, running), renewed, true},
		"own CA: trust renewed":                     {pod(certManagerOwnCA, ownCAMember, seen, running), trustRenewed, true},
		"own CA: trust not seen":                    {pod(certManagerOwnCA, ownCAMember, seen, running), map[string]string{MemberSecretName("db-abcde"): "x"}, false},
		"own CA: unchanged":                         {pod(certManagerOwnCA, ownCAMember, seen, running), seen, false},
		"own CA: created before the trust was seen": {pod(certManagerOwnCA, ownCAMember, map[string]string{MemberSecretName("db-abcde"): "x"}), seen, true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			value, refresh := CertificatesRefresh(tt.pod, tt.seen)
			if refresh != tt.refresh {
				t.Fatalf("refresh %t, want %t (annotation %q, value %q)", refresh, tt.refresh, tt.pod.Annotations[AnnotationCertificates], value)
			}
			if !refresh {
				return
			}
			// Once written, the same observation asks for nothing more.
			tt.pod.Annotations[AnnotationCertificates] = value
			if again, more := CertificatesRefresh(tt.pod, tt.seen); more {
				t.Errorf("annotated with %q, the same pass asks again for %q", value, again)
			}
		})
	}
}

// TestMemberPodCertificatesAnnotation: spec.pod.annotations cannot set Steward's key, and a Pod built without the
// Secrets seen carries none.
func TestMemberPodCertificatesAnnotation(t *testing.T) {
	c := testCluster(func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Pod.Annotations = map[string]string{AnnotationCertificates: "mine"}
	})
	if v, ok := MemberPod(c, boot, opts).Annotations[AnnotationCertificates]; ok {
		t.Errorf("annotation %q on a Pod built without seen Secrets", v)
	}
}
