package etcdcluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/certissue"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

func secretsCluster() *etcdv1alpha1.EtcdCluster {
	c := testCluster()
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderSecrets,
		Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "certs", ClientSecretName: "client"}}
	return c
}

func certManagerCluster() *etcdv1alpha1.EtcdCluster {
	c := testCluster()
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderCertManager,
		CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: "ca-issuer", Kind: "Issuer"}}}
	return c
}

func issue(t *testing.T, ca *pki.KeyPair, req pki.Request, at time.Time) *pki.KeyPair {
	t.Helper()
	kp, err := ca.Issue(req, at)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func userSecret(name string, ca []byte, kp *pki.KeyPair) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{resources.SecretCAKey: ca, resources.SecretCertKey: kp.CertPEM, resources.SecretKeyKey: kp.KeyPEM}}
}

var (
	wildcardNames = []string{"*.db-peer.ns.svc.cluster.local", "db.ns.svc.cluster.local", "db-peer.ns.svc.cluster.local"}
	memberUse     = pki.Request{CommonName: "members", DNSNames: wildcardNames, Server: true, Client: true, Lifetime: 24 * time.Hour}
	clientUse     = pki.Request{CommonName: "client", Client: true, Lifetime: 24 * time.Hour}
)

// TestCheckUserSecrets: every way the Secrets of provider Secrets can be wrong is refused, naming the Secret,
// its role and the problem; good Secrets (also one Secret for both roles) give the client's material.
func TestCheckUserSecrets(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cluster := secretsCluster()
	ca, err := pki.NewCA("user", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	member := issue(t, ca, memberUse, now)
	cl := issue(t, ca, clientUse, now)
	named := func(s *corev1.Secret) *tlsSecret { return &tlsSecret{name: s.Name, secret: s} }
	missingKey := userSecret("certs", ca.CertPEM, member)
	delete(missingKey.Data, resources.SecretCAKey)
	delete(missingKey.Data, resources.SecretKeyKey)
	perMember := issue(t, ca, pki.Request{CommonName: "m", DNSNames: []string{"db-abcde.db-peer.ns.svc.cluster.local", "db.ns.svc.cluster.local"},
		Server: true, Client: true, Lifetime: time.Hour}, now)

	noIdentity := issue(t, ca, pki.Request{CommonName: "members", DNSNames: wildcardNames[:2], Server: true, Client: true, Lifetime: time.Hour}, now)
	anyCert := secretsCluster()
	anyCert.Spec.TLS.PeerAuth = etcdv1alpha1.PeerAuthAnyCertificate

	tests := map[string]struct {
		cluster        *etcdv1alpha1.EtcdCluster
		member, client *tlsSecret
		errs           []string
	}{
		"good": {nil, named(userSecret("certs", ca.CertPEM, member)), named(userSecret("client", ca.CertPEM, cl)), nil},
		"one Secret for both": {nil, named(userSecret("certs", ca.CertPEM, member)), named(userSecret("certs", ca.CertPEM, member)),
			[]string{"the client certificate of Secret certs is valid for db-peer.ns.svc.cluster.local, the cluster's peer identity"}},
		"one Secret for both, peerAuth AnyCertificate": {anyCert, named(userSecret("certs", ca.CertPEM, member)), named(userSecret("certs", ca.CertPEM, member)), nil},
		"member cert without the peer identity": {nil, named(userSecret("certs", ca.CertPEM, noIdentity)), named(userSecret("client", ca.CertPEM, cl)),
			[]string{"the member certificate of Secret certs does not carry the cluster's peer identity, the DNS name db-peer.ns.svc.cluster.local", "spec.tls.peerAuth to AnyCertificate"}},
		"member cert without the peer identity, peerAuth AnyCertificate": {anyCert, named(userSecret("certs", ca.CertPEM, noIdentity)), named(userSecret("client", ca.CertPEM, cl)), nil},
		"member Secret missing":  {nil, &tlsSecret{name: "certs"}, named(userSecret("client", ca.CertPEM, cl)), []string{"member Secret (tls.secrets.memberSecretName) certs does not exist"}},
		"client Secret missing":  {nil, named(userSecret("certs", ca.CertPEM, member)), &tlsSecret{name: "client"}, []string{"client Secret (tls.secrets.clientSecretName) client does not exist"}},
		"both missing":           {nil, &tlsSecret{name: "certs"}, &tlsSecret{name: "client"}, []string{"certs does not exist", "client does not exist"}},
		"keys missing":           {nil, named(missingKey), named(userSecret("client", ca.CertPEM, cl)), []string{"certs has no [ca.crt tls.key]"}},
		"member cert per member": {nil, named(userSecret("certs", ca.CertPEM, perMember)), named(userSecret("client", ca.CertPEM, cl)), []string{"does not cover DNS names *.db-peer.ns.svc.cluster.local"}},
		"client cert as member":  {nil, named(userSecret("certs", ca.CertPEM, cl)), named(userSecret("client", ca.CertPEM, cl)), []string{"not for server authentication"}},
		"member cert expired": {nil, named(userSecret("certs", ca.CertPEM, issue(t, ca, memberUse, now.Add(-48*time.Hour)))),
			named(userSecret("client", ca.CertPEM, cl)), []string{"member Secret (tls.secrets.memberSecretName) certs: tls.crt", "expired at 2025-12-31"}},
		"client cert of another CA": {nil, named(userSecret("certs", ca.CertPEM, member)), named(userSecret("client", other.CertPEM, issue(t, other, clientUse, now))),
			[]string{"members would refuse Steward", "which Steward and backup Jobs check members with"}},
		"client ca.crt without the members' CA": {nil, named(userSecret("certs", ca.CertPEM, member)),
			named(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "client"}, Data: map[string][]byte{
				resources.SecretCAKey: append(append([]byte{}, other.CertPEM...), ca.CertPEM...), resources.SecretCertKey: cl.CertPEM, resources.SecretKeyKey: cl.KeyPEM}}),
			nil},
		"member ca.crt does not trust the client": {nil, named(userSecret("certs", other.CertPEM, issue(t, other, memberUse, now))), named(userSecret("client", ca.CertPEM, cl)),
			[]string{"members would refuse Steward", "not issued by a CA in the ca.crt of client Secret client"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := cluster
			if tt.cluster != nil {
				c = tt.cluster
			}
			got, err := checkUserSecrets(c, tt.member, tt.client, testOpts, now)
			if tt.errs == nil {
				if err != nil || got == nil || string(got.Cert) != string(tt.client.secret.Data[resources.SecretCertKey]) {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.errs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestProviderSecretsPass: bad Secrets make prepareTLS return the TLSSecretInvalid Wait (a human wait: Degraded,
// a Warning once) and touch nothing; good ones give status naming the Secrets and the first expiry, and no Wait.
// The user's Secrets are read from the API reader, not the cache, and never changed.
func TestProviderSecretsPass(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cluster := secretsCluster()
	r, c := tlsReconciler(t, &now, cluster)
	r.APIReader = c

	ts, wait, err := r.prepareTLS(ctx, cluster)
	if err != nil || wait == nil || wait.Kind != plan.Wait || wait.Reason != etcdv1alpha1.ReasonTLSSecretInvalid || !strings.Contains(wait.Message, "certs does not exist") {
		t.Fatalf("wait %+v, error %v", wait, err)
	}
	if !humanWaits[wait.Reason] || ts.status.MemberSecret != "certs" || ts.status.ClientSecret != "client" {
		t.Fatalf("not a human wait, or status %+v", ts.status)
	}
	ca, err := pki.NewCA("user", now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	member, cl := issue(t, ca, memberUse, now), issue(t, ca, pki.Request{CommonName: "c", Client: true, Lifetime: 12 * time.Hour}, now)
	for _, s := range []*corev1.Secret{userSecret("certs", ca.CertPEM, member), userSecret("client", ca.CertPEM, cl)} {
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	ts, wait, err = r.prepareTLS(ctx, cluster)
	if err != nil || wait != nil {
		t.Fatalf("wait %+v, error %v", wait, err)
	}
	if ts.status.NotAfter == nil || !ts.status.NotAfter.Time.Equal(cl.Cert.NotAfter) || ts.status.CANotAfter == nil || ts.status.CASecret != "" {
		t.Fatalf("status %+v", ts.status)
	}
	if ready, err := r.ensureNewMemberCerts(ctx, cluster, ts, plan.Action{Kind: plan.Bootstrap, Members: []string{"db-aaaaa"}}); !ready || err != nil {
		t.Fatalf("new members not ready: %v", err)
	}
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "certs"}, &s); err != nil || len(s.OwnerReferences) != 0 || len(s.Labels) != 0 {
		t.Fatalf("user Secret changed: %+v, %v", s.ObjectMeta, err)
	}
	var list corev1.SecretList
	if err := c.List(ctx, &list); err != nil || len(list.Items) != 2 {
		t.Fatalf("Steward created Secrets: %d, %v", len(list.Items), err)
	}
}

// certManagerReconciler is a reconciler whose API server serves cert-manager's Certificate when installed.
func certManagerReconciler(t *testing.T, now *time.Time, installed bool, objs ...client.Object) (*Reconciler, client.Client) {
	t.Helper()
	s := testScheme(t)
	mapper := meta.NewDefaultRESTMapper(nil)
	for gvk := range s.AllKnownTypes() {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	if installed {
		mapper.Add(resources.CertificateGVK, meta.RESTScopeNamespace)
		mapper.Add(resources.IssuerGVK, meta.RESTScopeNamespace)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithObjects(objs...).Build()
	return &Reconciler{Client: c, Recorder: record.NewFakeRecorder(100), Etcd: etcd.NewPool(), Options: testOpts,
		Now: func() time.Time { return *now }}, c
}

func getCertificate(ctx context.Context, c client.Client, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(resources.CertificateGVK)
	return u, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, u)
}

func TestCertManagerNotInstalled(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cluster := certManagerCluster()
	r, _ := certManagerReconciler(t, &now, false, cluster)
	_, wait, err := r.prepareTLS(context.Background(), cluster)
	if err != nil || wait == nil || wait.Reason != etcdv1alpha1.ReasonCertManagerNotInstalled || !strings.Contains(wait.Message, "certificates.cert-manager.io/v1") ||
		!humanWaits[wait.Reason] {
		t.Fatalf("wait %+v, error %v", wait, err)
	}
}

// sharedIssuerCA is what cert-manager holds for the user's issuer (a CA ClusterIssuer other namespaces may use
// too): a self-signed root, and the cluster's own intermediate CA it issued (the CA Certificate's Secret).
func sharedIssuerCA(t *testing.T, now time.Time) (root, intermediate *pki.KeyPair) {
	t.Helper()
	mk := func(cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*pki.KeyPair, *x509.Certificate, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		kp, err := pki.ParseKeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
		if err != nil {
			t.Fatal(err)
		}
		return kp, kp.Cert, key
	}
	root, rootCert, rootKey := mk("shared-root", nil, nil)
	intermediate, _, _ = mk("steward-etcd-ca:ns/db", rootCert, rootKey)
	return root, intermediate
}

// issuedSecret is a Secret as cert-manager's CA issuer writes it: tls.crt the leaf and the issuer's chain up to
// (not including) the self-signed root, ca.crt that root.
func issuedSecret(name string, root *pki.KeyPair, chain []byte, kp *pki.KeyPair) *corev1.Secret {
	s := userSecret(name, root.CertPEM, kp)
	s.Annotations = map[string]string{certissue.CertificateNameAnnotation: name}
	s.Data[resources.SecretCertKey] = append(append([]byte{}, kp.CertPEM...), chain...)
	return s
}

// TestCertManagerLifecycle: the cluster's own CA first (an intermediate CA Certificate from the user's issuer,
// a CA Issuer on it, and the trust Secret with that CA alone), then Steward's client Certificate from that Issuer,
// waiting (Progressing) until cert-manager has written a usable Secret of that CA (one straight from the user's
// issuer is not); new members' Certificates before their Pods, which wait for their Secrets; a changed lifetime
// updates the Certificates; Certificates and Secrets of departed members are deleted after the grace.
func TestCertManagerLifecycle(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cluster := certManagerCluster()
	r, c := certManagerReconciler(t, &now, true, cluster)

	_, wait, err := r.prepareTLS(ctx, cluster)
	if err != nil || wait == nil || wait.Reason != etcdv1alpha1.ReasonWaitingForCertificates || !progressingWaits[wait.Reason] ||
		!strings.Contains(wait.Message, "the cluster's own CA") || !strings.Contains(wait.Message, "db-ca does not exist") {
		t.Fatalf("wait %+v, error %v", wait, err)
	}
	caCert, err := getCertificate(ctx, c, "db-ca")
	if err != nil || !metav1.IsControlledBy(caCert, cluster) {
		t.Fatalf("CA Certificate %v, error %v", caCert, err)
	}
	if ref, _, _ := unstructured.NestedString(caCert.Object, "spec", "issuerRef", "name"); ref != "ca-issuer" {
		t.Errorf("CA Certificate from %q, want the user's issuer", ref)
	}
	issuer := &unstructured.Unstructured{}
	issuer.SetGroupVersionKind(resources.IssuerGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-ca"}, issuer); err != nil || !metav1.IsControlledBy(issuer, cluster) {
		t.Fatalf("Issuer db-ca: %v", err)
	}
	// cert-manager issues the intermediate from the user's (shared) issuer.
	root, ca := sharedIssuerCA(t, now)
	if err := c.Create(ctx, issuedSecret("db-ca", root, nil, ca)); err != nil {
		t.Fatal(err)
	}
	_, wait, err = r.prepareTLS(ctx, cluster)
	if err != nil || wait == nil || wait.Reason != etcdv1alpha1.ReasonWaitingForCertificates || !strings.Contains(wait.Message, "db-client does not exist") {
		t.Fatalf("wait %+v, error %v", wait, err)
	}
	trust := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-ca-trust"}, trust); err != nil || !metav1.IsControlledBy(trust, cluster) ||
		string(trust.Data[resources.SecretCAKey]) != string(ca.CertPEM) {
		t.Fatalf("trust Secret %v (want the intermediate alone), error %v", trust.Data, err)
	}
	cert, err := getCertificate(ctx, c, "db-client")
	if err != nil || !metav1.IsControlledBy(cert, cluster) {
		t.Fatalf("client Certificate %v, error %v", cert, err)
	}
	if ref, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef"); ref["name"] != "db-ca" || ref["kind"] != "Issuer" {
		t.Errorf("client Certificate from %v, want the cluster's own Issuer", ref)
	}
	// A client certificate straight from the shared issuer (valid by its Secret's ca.crt) is not the cluster's.
	direct := issuedSecret("db-client", root, nil, issue(t, root, clientUse, now))
	if err := c.Create(ctx, direct); err != nil {
		t.Fatal(err)
	}
	if _, wait, err = r.prepareTLS(ctx, cluster); err != nil || wait == nil || wait.Reason != etcdv1alpha1.ReasonWaitingForCertificates ||
		!strings.Contains(wait.Message, "cluster's own CA") {
		t.Fatalf("client certificate of the shared issuer: wait %+v, error %v", wait, err)
	}
	// cert-manager issues it from the cluster's Issuer.
	if err := c.Delete(ctx, direct); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, issuedSecret("db-client", root, ca.CertPEM, issue(t, ca, clientUse, now))); err != nil {
		t.Fatal(err)
	}
	ts, wait, err := r.prepareTLS(ctx, cluster)
	if err != nil || wait != nil || ts.status.ClientSecret != "db-client" || ts.status.CASecret != "db-ca" || !ts.ownCA() || ts.sharedIssuer != "" {
		t.Fatalf("wait %+v, error %v, status %+v", wait, err, ts.status)
	}

	// A bootstrap: Certificates for every member, no Pod until their Secrets are usable.
	action := plan.Action{Kind: plan.Bootstrap, Members: []string{"db-aaaaa", "db-bbbbb"}}
	ready, err := r.ensureNewMemberCerts(ctx, cluster, ts, action)
	if err != nil || ready || !strings.Contains(ts.waiting, "db-aaaaa-tls does not exist") {
		t.Fatalf("ready %v, waiting %q, error %v", ready, ts.waiting, err)
	}
	for _, m := range action.Members {
		if _, err := getCertificate(ctx, c, m+"-tls"); err != nil {
			t.Fatalf("Certificate of %s: %v", m, err)
		}
		// First straight from the shared issuer: not the cluster's, the Pod keeps waiting.
		sec := issuedSecret(m+"-tls", root, nil, issue(t, root, memberRequest(cluster, m, testOpts), now))
		if err := c.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
		if ready, err := r.ensureNewMemberCerts(ctx, cluster, ts, action); err != nil || ready {
			t.Fatalf("member certificate of the shared issuer: ready %v, error %v", ready, err)
		}
		if err := c.Delete(ctx, sec); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, issuedSecret(m+"-tls", root, ca.CertPEM, issue(t, ca, memberRequest(cluster, m, testOpts), now))); err != nil {
			t.Fatal(err)
		}
	}
	ts.waiting = ""
	if ready, err := r.ensureNewMemberCerts(ctx, cluster, ts, action); err != nil || !ready || ts.waiting != "" {
		t.Fatalf("ready %v, waiting %q, error %v", ready, ts.waiting, err)
	}
	// An ephemeral bootstrap cannot hold its names in PVCs: its Pods are created and wait for their Secrets.
	eph := certManagerCluster()
	eph.Spec.Storage.Ephemeral = true
	if ready, err := r.ensureNewMemberCerts(ctx, eph, ts, plan.Action{Kind: plan.Bootstrap, Members: []string{"db-ccccc"}}); err != nil || !ready {
		t.Fatalf("ephemeral bootstrap: ready %v, error %v", ready, err)
	}

	// A changed lifetime updates the Certificates of running members, keeping fields others added.
	mc, _ := getCertificate(ctx, c, "db-aaaaa-tls")
	_ = unstructured.SetNestedField(mc.Object, "kept", "spec", "addedByOthers")
	if err := c.Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
	cluster.Spec.TLS.CertificateLifetime = &metav1.Duration{Duration: 48 * time.Hour}
	ts, _, err = r.prepareTLS(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	obs := &observation{plan: plan.Observation{Members: []plan.Member{
		{Name: "db-aaaaa", HasPod: true, HasPVC: true, InEtcd: true},
		{Name: "db-bbbbb", HasPVC: true},
	}}}
	if err := r.ensureMemberCerts(ctx, cluster, ts, obs); err != nil {
		t.Fatal(err)
	}
	mc, _ = getCertificate(ctx, c, "db-aaaaa-tls")
	if d, _, _ := unstructured.NestedString(mc.Object, "spec", "duration"); d != "48h0m0s" {
		t.Errorf("member Certificate duration %q after the lifetime changed", d)
	}
	if k, _, _ := unstructured.NestedString(mc.Object, "spec", "addedByOthers"); k != "kept" {
		t.Error("a field Steward does not set was dropped")
	}
	if ts.status.NotAfter == nil {
		t.Error("status.tls.notAfter not set from the member Secrets")
	}
	if cc, _ := getCertificate(ctx, c, "db-client"); cc != nil {
		if d, _, _ := unstructured.NestedString(cc.Object, "spec", "duration"); d != "48h0m0s" {
			t.Errorf("client Certificate duration %q", d)
		}
	}

	// db-bbbbb goes (no Pod, no PVC, not in etcd): after the grace its Certificate and Secret are deleted.
	// The fake client sets no creation time: give it one (db-ccccc's, without, went already).
	for _, n := range []string{"db-bbbbb-tls"} {
		u, err := getCertificate(ctx, c, n)
		if err != nil {
			t.Fatal(err)
		}
		u.SetCreationTimestamp(metav1.NewTime(now))
		if err := c.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	obs.plan.Members = obs.plan.Members[:1]
	if err := r.ensureMemberCerts(ctx, cluster, ts, obs); err != nil {
		t.Fatal(err)
	}
	if _, err := getCertificate(ctx, c, "db-bbbbb-tls"); err != nil {
		t.Fatalf("Certificate of a member gone a moment ago deleted: %v", err)
	}
	now = now.Add(2 * secretGrace)
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-bbbbb-tls"}, sec); err != nil {
		t.Fatal(err)
	}
	sec.Labels = resources.MemberLabels(cluster, "db-bbbbb") // as cert-manager writes it from secretTemplate
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if err := r.ensureMemberCerts(ctx, cluster, ts, obs); err != nil {
		t.Fatal(err)
	}
	if _, err := getCertificate(ctx, c, "db-bbbbb-tls"); !apierrors.IsNotFound(err) {
		t.Errorf("Certificate of departed member: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-bbbbb-tls"}, sec); !apierrors.IsNotFound(err) {
		t.Errorf("Secret of departed member: %v", err)
	}
	if _, err := getCertificate(ctx, c, "db-aaaaa-tls"); err != nil {
		t.Errorf("Certificate of a running member: %v", err)
	}
}

// TestWaitingForCertificatesIsProgressing: Pods waiting for cert-manager show in Progressing, not Degraded.
func TestWaitingForCertificatesIsProgressing(t *testing.T) {
	obs := obsOf(false, false)
	obs.tls = &tlsState{waiting: "waiting for cert-manager"}
	conds := conditions(obs, plan.Action{Kind: plan.Bootstrap, Reason: etcdv1alpha1.ReasonBootstrapping}, nil)
	p := meta.FindStatusCondition(conds, etcdv1alpha1.ConditionProgressing)
	d := meta.FindStatusCondition(conds, etcdv1alpha1.ConditionDegraded)
	if p.Status != metav1.ConditionTrue || p.Reason != etcdv1alpha1.ReasonWaitingForCertificates || p.Message != "waiting for cert-manager" || d.Status != metav1.ConditionFalse {
		t.Fatalf("Progressing %+v, Degraded %+v", p, d)
	}
}

// memberPodOfCertManager is a running member Pod of provider CertManager, trusting the cluster's own CA or
// (created before Steward gave clusters one) the user's issuer's.
func memberPodOfCertManager(cluster *etcdv1alpha1.EtcdCluster, name string, clusterCA bool) *corev1.Pod {
	return resources.MemberPod(cluster, resources.Member{Name: name, State: "new", InitialCluster: map[string]string{name: resources.PeerURL(cluster, name, testOpts)},
		ClusterCA: clusterCA}, testOpts)
}

// TestCertManagerSharedIssuer: a cluster whose members trust the user's issuer's CA itself (created before
// Steward gave each cluster its own) keeps getting its certificates from that issuer, which its members expect,
// gets no CA of its own, and says it is Degraded (SharedIssuerTrusted) and why; one whose members trust the
// cluster's own CA gets that.
func TestCertManagerSharedIssuer(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cluster := certManagerCluster()
	old := memberPodOfCertManager(cluster, "db-aaaaa", false)
	own := memberPodOfCertManager(cluster, "db-bbbbb", true)
	if got := plan.DecideTLS(tlsSpecOf(cluster), tlsPodsOf(cluster, []corev1.Pod{*old, *own})).SharedTrust; len(got) != 1 || got[0] != "db-aaaaa" {
		t.Fatalf("sharedTrust %v", got)
	}
	r, c := certManagerReconciler(t, &now, true, cluster, old)
	ts, _, err := r.prepareTLS(ctx, cluster)
	if err != nil || ts == nil || ts.ownCA() || !strings.Contains(ts.sharedIssuer, "[db-aaaaa]") || !strings.Contains(ts.sharedIssuer, "Issuer ca-issuer") {
		t.Fatalf("tls %+v, error %v", ts, err)
	}
	if _, err := getCertificate(ctx, c, "db-ca"); !apierrors.IsNotFound(err) {
		t.Errorf("CA Certificate of a cluster whose members trust the user's issuer: %v", err)
	}
	cert, err := getCertificate(ctx, c, "db-client")
	if err != nil {
		t.Fatal(err)
	}
	if ref, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name"); ref != "ca-issuer" {
		t.Errorf("client Certificate from %q, want the user's issuer", ref)
	}
	obs := obsOf(true, true, "a", "b", "c")
	obs.tls = ts
	d := meta.FindStatusCondition(conditions(obs, plan.Action{Kind: plan.None}, nil), etcdv1alpha1.ConditionDegraded)
	if d.Status != metav1.ConditionTrue || d.Reason != etcdv1alpha1.ReasonSharedIssuerTrusted || !strings.Contains(d.Message, "root on this cluster") {
		t.Errorf("Degraded %+v", d)
	}

	r, c = certManagerReconciler(t, &now, true, cluster, own)
	if ts, wait, err := r.prepareTLS(ctx, cluster); err != nil || wait == nil || !strings.Contains(wait.Message, "the cluster's own CA") || ts.sharedIssuer != "" {
		t.Fatalf("members trusting the cluster's CA: wait %+v, error %v", wait, err)
	}
	if _, err := getCertificate(ctx, c, "db-ca"); err != nil {
		t.Errorf("CA Certificate: %v", err)
	}
}

// TestClusterCAKeyChanged: a CA Secret whose certificate has another key than the CA running members trust
// (deleted, and issued anew) is not taken into the trust Secret: Steward waits for a human (ClusterCAChanged).
// samePublicKey tells a renewal (rotationPolicy Never: the same key) from such a CA.
func TestClusterCAKeyChanged(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cluster := certManagerCluster()
	root, ca := sharedIssuerCA(t, now)
	_, other := sharedIssuerCA(t, now)
	r, c := certManagerReconciler(t, &now, true, cluster, memberPodOfCertManager(cluster, "db-aaaaa", true),
		issuedSecret("db-ca", root, nil, other), resources.TrustSecret(cluster, ca.CertPEM),
		issuedSecret("db-client", root, ca.CertPEM, issue(t, ca, clientUse, now)))
	_, wait, err := r.prepareTLS(ctx, cluster)
	if err != nil || wait == nil || wait.Reason != etcdv1alpha1.ReasonClusterCAChanged || !humanWaits[wait.Reason] {
		t.Fatalf("wait %+v, error %v", wait, err)
	}
	trust := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-ca-trust"}, trust); err != nil || string(trust.Data[resources.SecretCAKey]) != string(ca.CertPEM) {
		t.Fatalf("trust Secret changed: %v", err)
	}
	renewed := *ca
	renewed.CertPEM = append([]byte("# renewed\n"), ca.CertPEM...)
	if samePublicKey(renewed.CertPEM, other.CertPEM) || !samePublicKey(renewed.CertPEM, ca.CertPEM) {
		t.Fatal("samePublicKey")
	}
}
