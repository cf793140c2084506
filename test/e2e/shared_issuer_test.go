package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
)

// TestSharedIssuerIsNotRoot: two namespaces, one ClusterIssuer (the test bed's CA issuer). A 1-member cluster of
// provider CertManager in namespace A trusts only a CA of its own, an intermediate that ClusterIssuer issued. In
// namespace B, anyone may ask the same ClusterIssuer for a certificate: one with CN root (Steward's identity, root
// on an auth-enabled cluster), and one valid for A's peer identity and member names. A's member refuses both on
// its client port and on its peer port, while A's own Steward client certificate and its member's certificate
// keep working (the controls: same ports, same TLS, only the certificate differs).
func TestSharedIssuerIsNotRoot(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	nsA, nsB := framework.NewNamespace(t, "issuer-a"), framework.NewNamespace(t, "issuer-b")
	framework.StartOperator(t, nsA)
	c := framework.NewCluster(nsA, "own", 1)
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderCertManager,
		CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: testbed.CAClusterIssuer, Kind: "ClusterIssuer"}}}
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	// Namespace B's certificates from the shared ClusterIssuer, asked for while A forms.
	member := c.Name + "-xxxxx"
	borrowed := map[string]map[string]any{
		"as-root": {"commonName": "root", "usages": []any{"digital signature", "client auth"}},
		"as-member": {"commonName": member, "usages": []any{"digital signature", "server auth", "client auth"},
			"dnsNames": []any{resources.PeerIdentity(c, framework.OperatorOptions), resources.MemberHost(c, member, framework.OperatorOptions)}},
	}
	for name, spec := range borrowed {
		spec["secretName"] = name
		spec["issuerRef"] = map[string]any{"name": testbed.CAClusterIssuer, "kind": "ClusterIssuer", "group": "cert-manager.io"}
		spec["privateKey"] = map[string]any{"algorithm": "ECDSA", "size": int64(256)}
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetGroupVersionKind(resources.CertificateGVK)
		u.SetNamespace(nsB)
		u.SetName(name)
		if err := framework.K8s.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	got := framework.WaitSettled(t, client.ObjectKeyFromObject(c), 4*time.Minute)

	// The controls: A's Steward client certificate reads and writes; the member's own certificate is answered on
	// its peer port (RequirePeerPort). The roots are what cert-manager writes as ca.crt (the shared CA): a client
	// of the shared CA still verifies A's members, whose certificates carry the intermediate.
	framework.WriteAndReadThroughService(t, got)
	cfg := framework.ClusterTLS(t, got)
	refused := map[string]tls.Certificate{}
	for name := range borrowed {
		var pair tls.Certificate
		framework.Poll(t, "namespace B's Certificate "+name+" issued", 2*time.Minute, func() error {
			var s corev1.Secret
			if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: nsB, Name: name}, &s); err != nil {
				return err
			}
			var err error
			pair, err = tls.X509KeyPair(s.Data[resources.SecretCertKey], s.Data[resources.SecretKeyKey])
			return err
		})
		refused["namespace B's "+name] = pair
	}
	_, roots := framework.SecretPair(t, nsA, resources.ClientSecretName(got))
	for who, pair := range refused {
		foreign := cfg.Clone()
		foreign.Certificates = []tls.Certificate{pair}
		for m, addr := range framework.PodAddrs(t, got) {
			framework.RequireRefused(t, fmt.Sprintf("%s on the client port of %s", who, m), "https://"+addr, foreign)
		}
	}
	framework.RequirePeerPort(t, got, roots, refused)
	framework.WriteAndReadThroughService(t, got)
	requireOwnTrust(t, got)
}

// requireOwnTrust checks what a CertManager cluster's members trust: one certificate, the cluster's own
// intermediate (issued by the test bed's shared CA), not the shared CA itself; and that its member Pods say so.
func requireOwnTrust(t *testing.T, got *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	ctx := context.Background()
	nsA := got.Namespace
	var trust corev1.Secret
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: nsA, Name: resources.TrustSecretName(got)}, &trust); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(trust.Data[resources.SecretCAKey], []byte("BEGIN CERTIFICATE")); n != 1 {
		t.Fatalf("trust Secret holds %d certificates, want the cluster's CA alone", n)
	}
	anchor, err := pki.ParseCertificate(trust.Data[resources.SecretCAKey])
	if err != nil || anchor.Subject.CommonName != "steward-etcd-ca:"+nsA+"/"+got.Name || anchor.Issuer.CommonName != "steward-testbed-cert-manager-ca" {
		t.Fatalf("trust Secret holds %v (%v), want the cluster's intermediate issued by the shared CA", anchor, err)
	}
	pods := framework.MemberPodsOf(t, got)
	for i := range pods.Items {
		if !resources.PodTrustsClusterCA(&pods.Items[i]) {
			t.Errorf("member Pod %s does not trust the cluster's own CA: annotations %v", pods.Items[i].Name, pods.Items[i].Annotations)
		}
	}
}
