package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
)

// userPKI is what a user of provider Secrets brings: a CA, a member certificate for every member of one
// cluster (a wildcard for the peer names) and a client certificate.
type userPKI struct {
	ca *pki.KeyPair
}

func (u *userPKI) member(t *testing.T, c *etcdv1alpha1.EtcdCluster, lifetime time.Duration, now time.Time) *pki.KeyPair {
	t.Helper()
	return u.memberNamed(t, c, lifetime, now, resources.PeerIdentity(c, framework.OperatorOptions))
}

// memberNamed is member with extra DNS names: the peer identity, which members check on the peer port, or none.
func (u *userPKI) memberNamed(t *testing.T, c *etcdv1alpha1.EtcdCluster, lifetime time.Duration, now time.Time, extra ...string) *pki.KeyPair {
	t.Helper()
	svc, ns := resources.ClientServiceName(c), c.Namespace
	kp, err := u.ca.Issue(pki.Request{CommonName: "etcd-member",
		DNSNames: append([]string{"*" + resources.MemberHost(c, "", framework.OperatorOptions), svc, svc + "." + ns, svc + "." + ns + ".svc",
			resources.ClientServiceHost(c, framework.OperatorOptions), "localhost"}, extra...),
		IPs: resources.MemberIPs(c), Server: true, Client: true, Lifetime: lifetime}, now)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func (u *userPKI) client(t *testing.T, lifetime time.Duration) *pki.KeyPair {
	t.Helper()
	kp, err := u.ca.Issue(pki.Request{CommonName: "etcd-client", Client: true, Lifetime: lifetime}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// putUserSecret creates or replaces a user's kubernetes.io/tls Secret (no label, no owner: as users write them).
func putUserSecret(t *testing.T, ns, name string, ca []byte, kp *pki.KeyPair) {
	t.Helper()
	ctx := context.Background()
	data := map[string][]byte{"ca.crt": ca, "tls.crt": kp.CertPEM, "tls.key": kp.KeyPEM}
	var s corev1.Secret
	err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)
	switch {
	case apierrors.IsNotFound(err):
		s = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS, Data: data}
		err = framework.K8s.Create(ctx, &s)
	case err == nil:
		s.Data = data
		err = framework.K8s.Update(ctx, &s)
	}
	if err != nil {
		t.Fatalf("Secret %s: %v", name, err)
	}
}

func requireNoPods(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	pods := framework.MemberPodsOf(t, c)
	if len(pods.Items) != 0 {
		t.Fatalf("%d member Pods created while the TLS Secrets are invalid", len(pods.Items))
	}
}

func warningRecorded(t *testing.T, c *etcdv1alpha1.EtcdCluster, reason string) {
	t.Helper()
	framework.Poll(t, "Warning event "+reason, time.Minute, func() error {
		var events corev1.EventList
		if err := framework.K8s.List(context.Background(), &events, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == c.Name && e.Type == corev1.EventTypeWarning && e.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no Warning %s for %s", reason, c.Name)
	})
}

// backupWithClientSecret takes an S3 backup of c: its Job authenticates with the cluster's client Secret
// (whichever provider wrote it) and checks members against its ca.crt.
func backupWithClientSecret(t *testing.T, c *etcdv1alpha1.EtcdCluster, name string) {
	t.Helper()
	ctx := context.Background()
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: framework.S3SecretName}, Data: map[string][]byte{
		etcdv1alpha1.S3AccessKeyIDKey: []byte(framework.Bed.S3.AccessKeyID), etcdv1alpha1.S3SecretAccessKeyKey: []byte(framework.Bed.S3.SecretAccessKey)}}
	if err := framework.K8s.Create(ctx, creds); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	b := framework.NewBackup(c.Namespace, name, c.Name, framework.S3Destination(c.Namespace+"/"+name+".db"))
	if err := framework.K8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 2*time.Minute)
	framework.RequireComplete(t, b, c)
}

func servedSerials(t *testing.T, cfg *tls.Config, addrs map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for member, addr := range addrs {
		cert, err := framework.ServedCertificate(cfg, addr)
		if err != nil {
			t.Fatalf("TLS to %s: %v", member, err)
		}
		out[member] = cert.SerialNumber.String()
	}
	return out
}

// TestTLSProviderSecrets: provider Secrets with the user's own CA, one wildcard member Secret and a client Secret.
// While the Secrets are missing, cover the wrong names, or are expired, Steward creates no Pod and reports
// Degraded/TLSSecretInvalid saying what is wrong (with a Warning); once they are right, a 3-member cluster forms
// whose members refuse plaintext and certificates of another CA and accept the user's client certificate.
// Renewed certificates (same CA) written into the same Secrets under client load are served by every member
// without a restart, Steward keeps observing, and no acknowledged write is lost. A client Secret deleted from a
// running cluster stops every step (no Pod touched) until it is back. Steward never owns or deletes the
// user's Secrets.
func TestTLSProviderSecrets(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "byo")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "own", 3)
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderSecrets,
		Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "own-members", ClientSecretName: "own-steward"}}
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	ca, err := pki.NewCA("user-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	user := &userPKI{ca: ca}

	// Missing.
	framework.WaitDegraded(t, key, "TLSSecretInvalid", "own-members does not exist", "own-steward does not exist")
	warningRecorded(t, c, "TLSSecretInvalid")
	requireNoPods(t, c)

	// Wrong names: a member certificate of another cluster.
	other := framework.NewCluster(ns, "other", 3)
	putUserSecret(t, ns, "own-members", ca.CertPEM, user.member(t, other, 24*time.Hour, time.Now()))
	putUserSecret(t, ns, "own-steward", ca.CertPEM, user.client(t, 24*time.Hour))
	framework.WaitDegraded(t, key, "TLSSecretInvalid", "does not cover DNS names", "*"+resources.MemberHost(c, "", framework.OperatorOptions),
		resources.ClientServiceHost(c, framework.OperatorOptions))
	requireNoPods(t, c)

	// Expired.
	putUserSecret(t, ns, "own-members", ca.CertPEM, user.member(t, c, time.Hour, time.Now().Add(-2*time.Hour)))
	framework.WaitDegraded(t, key, "TLSSecretInvalid", "own-members", "expired at")
	requireNoPods(t, c)

	// A client certificate of another CA: the members would refuse Steward.
	foreignCA, err := pki.NewCA("intruder", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	putUserSecret(t, ns, "own-members", ca.CertPEM, user.member(t, c, 24*time.Hour, time.Now()))
	putUserSecret(t, ns, "own-steward", foreignCA.CertPEM, (&userPKI{ca: foreignCA}).client(t, 24*time.Hour))
	framework.WaitDegraded(t, key, "TLSSecretInvalid", "members would refuse Steward")
	requireNoPods(t, c)

	// A member certificate without the peer identity: members could not tell a member from a client on the peer
	// port (spec.tls.peerAuth MemberIdentity, the default).
	putUserSecret(t, ns, "own-steward", ca.CertPEM, user.client(t, 24*time.Hour))
	putUserSecret(t, ns, "own-members", ca.CertPEM, user.memberNamed(t, c, 24*time.Hour, time.Now()))
	framework.WaitDegraded(t, key, "TLSSecretInvalid", "does not carry the cluster's peer identity", resources.PeerIdentity(c, framework.OperatorOptions))
	requireNoPods(t, c)

	// Right: the cluster forms.
	putUserSecret(t, ns, "own-members", ca.CertPEM, user.member(t, c, 24*time.Hour, time.Now()))
	got := framework.WaitSettled(t, key, 5*time.Minute)
	st := got.Status.TLS
	if st == nil || st.MemberSecret != "own-members" || st.ClientSecret != "own-steward" || st.CASecret != "" || st.NotAfter == nil ||
		time.Until(st.NotAfter.Time) > 25*time.Hour || st.CANotAfter == nil {
		t.Fatalf("status.tls %+v", st)
	}
	framework.CheckStatusMatchesEtcd(t, got)
	framework.WriteAndReadThroughService(t, got)
	var pods corev1.PodList
	if err := framework.K8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
		t.Fatal(err)
	}
	restarts := framework.ContainerRestarts(t, client.ObjectKeyFromObject(c))
	for _, p := range pods.Items {
		if p.Annotations[resources.AnnotationTLS] != etcdv1alpha1.TLSProviderSecrets {
			t.Errorf("Pod %s records TLS provider %q", p.Name, p.Annotations[resources.AnnotationTLS])
		}
		mounted := false
		for _, v := range p.Spec.Volumes {
			mounted = mounted || v.Secret != nil && v.Secret.SecretName == "own-members"
		}
		if !mounted {
			t.Errorf("Pod %s does not mount own-members", p.Name)
		}
	}

	// Refused: plaintext, no client certificate, a client certificate of another CA. Accepted: the user's.
	cfg := framework.ClusterTLS(t, got)
	addrs := framework.PodAddrs(t, got)
	intruder := (&userPKI{ca: foreignCA}).client(t, time.Hour)
	pair, err := tls.X509KeyPair(intruder.CertPEM, intruder.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	foreign := cfg.Clone()
	foreign.Certificates = []tls.Certificate{pair}
	noCert := cfg.Clone()
	noCert.Certificates = nil
	for _, addr := range addrs {
		framework.RequireRefused(t, "plaintext client", "http://"+addr, nil)
		framework.RequireRefused(t, "TLS client without a certificate", "https://"+addr, noCert)
		framework.RequireRefused(t, "client certificate of another CA", "https://"+addr, foreign)
	}
	before := servedSerials(t, cfg, addrs)

	// The user renews both certificates in place under client load.
	load := framework.StartLoad(t, got)
	began := time.Now()
	renewed := user.member(t, c, 48*time.Hour, time.Now())
	putUserSecret(t, ns, "own-members", ca.CertPEM, renewed)
	putUserSecret(t, ns, "own-steward", ca.CertPEM, user.client(t, 48*time.Hour))
	framework.Poll(t, "members serve the renewed certificate", 4*time.Minute, func() error {
		newCfg, err := framework.ClusterTLSConfig(got)
		if err != nil {
			return err
		}
		for member, addr := range addrs {
			for _, cf := range []*tls.Config{cfg, newCfg} {
				cert, err := framework.ServedCertificate(cf, addr)
				if err != nil {
					return fmt.Errorf("%s: %w", member, err)
				}
				if cert.SerialNumber.String() != renewed.Cert.SerialNumber.String() {
					return fmt.Errorf("%s still serves serial %s (was %s)", member, cert.SerialNumber, before[member])
				}
			}
		}
		return nil
	})
	t.Logf("every member served the renewed certificate %s after the Secrets changed", time.Since(began).Round(time.Second))
	framework.Poll(t, "status.tls shows the renewed certificates", time.Minute, func() error {
		if err := framework.K8s.Get(ctx, key, got); err != nil {
			return err
		}
		if st := got.Status.TLS; st == nil || st.NotAfter == nil || time.Until(st.NotAfter.Time) < 47*time.Hour {
			return fmt.Errorf("status.tls %+v", st)
		}
		return nil
	})
	settled := framework.WaitSettled(t, key, 2*time.Minute)
	framework.WriteAndReadThroughService(t, settled)
	framework.RequireNoLostWrites(t, load, "user certificate renewal")
	framework.RequireNoRestarts(t, client.ObjectKeyFromObject(c), restarts, "renewal")
	framework.CheckStatusMatchesEtcd(t, settled)
	backupWithClientSecret(t, settled, "with-user-client")

	// The client Secret deleted from a running cluster: Degraded, nothing touched; back, and all is well.
	state := framework.MemberPodsState(t, settled)
	var clientSecret corev1.Secret
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "own-steward"}, &clientSecret); err != nil {
		t.Fatal(err)
	}
	if len(clientSecret.OwnerReferences) != 0 || len(clientSecret.Labels) != 0 {
		t.Errorf("Steward changed the user's Secret: owners %v, labels %v", clientSecret.OwnerReferences, clientSecret.Labels)
	}
	if err := framework.K8s.Delete(ctx, &clientSecret); err != nil {
		t.Fatal(err)
	}
	framework.WaitDegraded(t, key, "TLSSecretInvalid", "own-steward does not exist")
	settled = framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Replicas = 5 // a step Steward must not take while the Secrets are invalid
	})
	framework.WaitDegraded(t, key, "TLSSecretInvalid", "own-steward does not exist")
	if after := framework.MemberPodsState(t, settled); fmt.Sprint(after) != fmt.Sprint(state) {
		t.Fatalf("member Pods changed while the client Secret was missing: %v -> %v", state, after)
	}
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 3 })
	putUserSecret(t, ns, "own-steward", ca.CertPEM, user.client(t, 48*time.Hour))
	settled = framework.WaitSettled(t, key, 2*time.Minute)
	framework.CheckStatusMatchesEtcd(t, settled)

	framework.DeleteAndCheckNothingLeft(t, settled)
	for _, n := range []string{"own-members", "own-steward"} {
		var s corev1.Secret
		if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &s); err != nil {
			t.Errorf("the user's Secret %s after the cluster was deleted: %v", n, err)
		}
	}
}

func certificateOf(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(resources.CertificateGVK)
	return u, framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
}

// TestTLSProviderCertManager: with the test bed's cert-manager, a cluster of provider CertManager gets a CA of
// its own (an intermediate Certificate from the named ClusterIssuer, and an Issuer on it) and a Certificate per
// member and one for Steward from that Issuer, all owned by the cluster; it forms with TLS (plaintext and foreign
// certificates refused, members serving certificates of the cluster's CA for their names). A cluster whose issuer does not exist waits (Progressing/WaitingForCertificates with cert-manager's
// reason) and creates no Pod. Deleting a cluster deletes its Certificates.
func TestTLSProviderCertManager(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "cm")
	framework.StartOperator(t, ns)

	stuck := framework.NewCluster(ns, "stuck", 1)
	stuck.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderCertManager,
		CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: "no-such-issuer", Kind: "ClusterIssuer"}}}
	if err := framework.K8s.Create(ctx, stuck); err != nil {
		t.Fatal(err)
	}

	c := framework.NewCluster(ns, "issued", 3)
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderCertManager,
		CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: testbed.CAClusterIssuer, Kind: "ClusterIssuer"}}}
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	got := framework.WaitSettled(t, key, 5*time.Minute)
	if st := got.Status.TLS; st == nil || st.ClientSecret != "issued-client" || st.NotAfter == nil || st.CANotAfter == nil ||
		time.Until(st.NotAfter.Time) < 80*24*time.Hour {
		t.Fatalf("status.tls %+v", got.Status.TLS)
	}
	framework.CheckStatusMatchesEtcd(t, got)
	framework.WriteAndReadThroughService(t, got)
	names := []string{"issued-client"}
	for _, m := range got.Status.Members {
		names = append(names, m.Name+"-tls")
	}
	for _, n := range names {
		cert, err := certificateOf(ctx, ns, n)
		if err != nil || !metav1.IsControlledBy(cert, got) {
			t.Fatalf("Certificate %s: %v", n, err)
		}
		if ref, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef"); ref["name"] != "issued-ca" || ref["kind"] != "Issuer" {
			t.Errorf("Certificate %s: issuer %v, want the cluster's own Issuer issued-ca", n, ref)
		}
	}
	// The cluster's own CA: an intermediate from the named ClusterIssuer.
	if cert, err := certificateOf(ctx, ns, "issued-ca"); err != nil || !metav1.IsControlledBy(cert, got) {
		t.Fatalf("CA Certificate issued-ca: %v", err)
	} else if ref, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name"); ref != testbed.CAClusterIssuer {
		t.Errorf("CA Certificate: issuer %q", ref)
	}

	cfg := framework.ClusterTLS(t, got)
	ca, err := pki.NewCA("intruder", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	intruder := (&userPKI{ca: ca}).client(t, time.Hour)
	pair, err := tls.X509KeyPair(intruder.CertPEM, intruder.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	foreign := cfg.Clone()
	foreign.Certificates = []tls.Certificate{pair}
	for member, addr := range framework.PodAddrs(t, got) {
		cert, err := framework.ServedCertificate(cfg, addr)
		if err != nil {
			t.Fatalf("TLS to %s: %v", member, err)
		}
		if err := cert.VerifyHostname(resources.MemberHost(got, member, framework.OperatorOptions)); err != nil || cert.Issuer.CommonName != "steward-etcd-ca:"+ns+"/issued" {
			t.Errorf("%s serves a certificate of %q: %v", member, cert.Issuer.CommonName, err)
		}
		framework.RequireRefused(t, "plaintext client", "http://"+addr, nil)
		framework.RequireRefused(t, "client certificate of another CA", "https://"+addr, foreign)
	}
	backupWithClientSecret(t, got, "with-issued-client")

	// Scaling under load: new members start only with their issued certificates; the Certificates and Secrets
	// of removed members go.
	load := framework.StartLoad(t, got)
	for _, replicas := range []int32{5, 3} {
		framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = replicas })
		got = framework.WaitSettled(t, key, 5*time.Minute)
	}
	framework.RequireNoLostWrites(t, load, "scaling 3 -> 5 -> 3 with provider CertManager")
	framework.CheckStatusMatchesEtcd(t, got)
	framework.Poll(t, "Certificates and Secrets of removed members deleted", 3*time.Minute, func() error {
		want := map[string]bool{"issued-client": true, "issued-ca": true}
		for _, m := range got.Status.Members {
			want[m.Name+"-tls"] = true
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(resources.CertificateGVK.GroupVersion().WithKind("CertificateList"))
		if err := framework.K8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
			return err
		}
		var secrets corev1.SecretList
		if err := framework.K8s.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
			return err
		}
		var extra []string
		for _, u := range list.Items {
			if !want[u.GetName()] {
				extra = append(extra, "Certificate "+u.GetName())
			}
		}
		for _, s := range secrets.Items {
			if !want[s.Name] && s.Name != "issued-ca-trust" {
				extra = append(extra, "Secret "+s.Name)
			}
		}
		if len(extra) > 0 || len(list.Items) != len(want) {
			return fmt.Errorf("left: %v (%d Certificates, want %d)", extra, len(list.Items), len(want))
		}
		return nil
	})

	// An application's EtcdUser gets its certificate from the cluster's issuer (a Certificate it owns), enforced
	// once auth is on.
	app := framework.NewEtcdUser(ns, "cm-app", c.Name, "/cm-app/", etcdv1alpha1.AccessReadWrite, false)
	if err := framework.K8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	app = framework.WaitUserReady(t, client.ObjectKeyFromObject(app), 2*time.Minute)
	if cert, err := certificateOf(ctx, ns, "cm-app-tls"); err != nil || !metav1.IsControlledBy(cert, app) {
		t.Fatalf("Certificate cm-app-tls: %v", err)
	} else if cn, _, _ := unstructured.NestedString(cert.Object, "spec", "commonName"); cn != "cm-app" {
		t.Fatalf("Certificate cm-app-tls: common name %q", cn)
	}
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true} })
	framework.Poll(t, "auth on", 2*time.Minute, func() error {
		if err := framework.K8s.Get(ctx, key, got); err != nil {
			return err
		}
		if got.Status.AuthEnabled == nil || !*got.Status.AuthEnabled {
			return fmt.Errorf("status.authEnabled %v", got.Status.AuthEnabled)
		}
		return nil
	})
	appClient := framework.UserClient(t, got, app)
	framework.MayWrite(t, "cm-app", appClient, "/cm-app/1", true)
	framework.MayWrite(t, "cm-app", appClient, "/other/1", false)
	// Deleted, the user is refused; its Certificate and Secret go with the EtcdUser (owner references).
	if err := framework.K8s.Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	framework.Poll(t, "EtcdUser cm-app gone", time.Minute, func() error {
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(app), &etcdv1alpha1.EtcdUser{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %w", err)
		}
		return nil
	})
	framework.MayWrite(t, "cm-app (deleted)", appClient, "/cm-app/2", false)

	// The cluster whose issuer does not exist has waited all along, without a Pod.
	framework.Poll(t, "stuck cluster waits for its certificates", time.Minute, func() error {
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(stuck), stuck); err != nil {
			return err
		}
		p := meta.FindStatusCondition(stuck.Status.Conditions, etcdv1alpha1.ConditionProgressing)
		if p == nil || p.Reason != "WaitingForCertificates" || !strings.Contains(p.Message, "stuck-ca") {
			return fmt.Errorf("Progressing %+v", p)
		}
		return nil
	})
	t.Logf("waiting cluster: %s", meta.FindStatusCondition(stuck.Status.Conditions, etcdv1alpha1.ConditionProgressing).Message)
	requireNoPods(t, stuck)
	if err := framework.K8s.Delete(ctx, stuck); err != nil {
		t.Fatal(err)
	}

	framework.DeleteAndCheckNothingLeft(t, got)
	framework.Poll(t, "Certificates of the deleted cluster gone", time.Minute, func() error {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(resources.CertificateGVK.GroupVersion().WithKind("CertificateList"))
		if err := framework.K8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 0 {
			return fmt.Errorf("%d Certificates left", len(list.Items))
		}
		return nil
	})
}
