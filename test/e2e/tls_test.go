package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// TestTLSByDefault: a cluster created without a tls field gets provider Steward: a CA, a certificate per member
// and a client certificate, in Secrets it owns; its members refuse plaintext clients and clients without a
// certificate of the cluster's CA, serve their own certificate (valid for their DNS name) and accept the client
// certificate Steward issued. Status names the Secrets and expiry and holds no key. A provider None cluster
// stays plaintext, with no Secret. Deleting the cluster deletes its Secrets.
func TestTLSByDefault(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "tls")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "secure", 3)
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	got := framework.WaitAvailable(t, client.ObjectKeyFromObject(c), 4*time.Minute)
	if got.Spec.TLS == nil || got.Spec.TLS.Provider != etcdv1alpha1.TLSProviderSteward || got.Spec.TLS.CertificateLifetime == nil ||
		got.Spec.TLS.CertificateLifetime.Duration != 2160*time.Hour {
		t.Fatalf("spec.tls defaulted to %+v, want provider Steward, 2160h", got.Spec.TLS)
	}
	framework.CheckStatusMatchesEtcd(t, got)
	framework.WriteAndReadThroughService(t, got)

	// The Secrets: owned by the cluster, of type kubernetes.io/tls, named in status; no key in status.
	st := got.Status.TLS
	if st == nil || st.CASecret != "secure-ca" || st.ClientSecret != "secure-client" || st.NotAfter == nil || st.CANotAfter == nil {
		t.Fatalf("status.tls %+v", st)
	}
	if left := time.Until(st.NotAfter.Time); left < 80*24*time.Hour || left > 91*24*time.Hour {
		t.Errorf("status.tls.notAfter %s: want about 90 days from now", st.NotAfter)
	}
	raw, _ := json.Marshal(got.Status)
	if strings.Contains(string(raw), "PRIVATE KEY") || strings.Contains(string(raw), "BEGIN") {
		t.Fatalf("status holds PEM: %s", raw)
	}
	names := []string{"secure-ca", "secure-client"}
	for _, m := range got.Status.Members {
		names = append(names, m.Name+"-tls")
	}
	for _, n := range names {
		var s corev1.Secret
		if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &s); err != nil {
			t.Fatalf("Secret %s: %v", n, err)
		}
		if s.Type != corev1.SecretTypeTLS || len(s.Data["tls.key"]) == 0 || len(s.Data["tls.crt"]) == 0 || len(s.Data["ca.crt"]) == 0 ||
			!metav1.IsControlledBy(&s, got) {
			t.Errorf("Secret %s: type %s, keys %d, owners %v", n, s.Type, len(s.Data), s.OwnerReferences)
		}
	}

	cfg := framework.ClusterTLS(t, got)
	roots := cfg.RootCAs
	addrs := framework.PodAddrs(t, got)
	otherCA, err := pki.NewCA("intruder", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	intruder, err := otherCA.Issue(pki.Request{CommonName: "steward:secure", Client: true, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	foreignPair, err := tls.X509KeyPair(intruder.CertPEM, intruder.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	foreign := cfg.Clone()
	foreign.Certificates = []tls.Certificate{foreignPair}
	for member, addr := range addrs {
		// A member serves its own certificate, valid for its DNS name through the peer Service.
		cert, err := framework.ServedCertificate(cfg, addr)
		if err != nil {
			t.Fatalf("TLS to %s with the client certificate: %v", member, err)
		}
		fqdn := resources.MemberHost(got, member, framework.OperatorOptions)
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: fqdn}); err != nil || cert.Subject.CommonName != member {
			t.Errorf("%s serves %s: %v", member, cert.Subject.CommonName, err)
		}
		// Refused: plaintext gRPC, plaintext HTTP, TLS without a client certificate, a certificate of another CA.
		framework.RequireRefused(t, "plaintext client", "http://"+addr, nil)
		hc := &http.Client{Timeout: 3 * time.Second}
		if resp, err := hc.Get("http://" + addr + "/version"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("%s answers plaintext HTTP /version", member)
			}
		}
		noCert := cfg.Clone()
		noCert.Certificates = nil
		framework.RequireRefused(t, "TLS client without a certificate", "https://"+addr, noCert)
		framework.RequireRefused(t, "client certificate of another CA", "https://"+addr, foreign)
	}
	other := framework.NewCluster(ns, "plain", 1)
	other.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	if err := framework.K8s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	plain := framework.WaitAvailable(t, client.ObjectKeyFromObject(other), 3*time.Minute)
	if plain.Status.TLS != nil || !strings.HasPrefix(plain.Status.ClientEndpoint, "http://") {
		t.Errorf("plaintext cluster: status.tls %+v, endpoint %s", plain.Status.TLS, plain.Status.ClientEndpoint)
	}
	framework.CheckStatusMatchesEtcd(t, plain)
	framework.WriteAndReadThroughService(t, plain)
	var secrets corev1.SecretList
	if err := framework.K8s.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: "plain"}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("plaintext cluster has %d Secrets", len(secrets.Items))
	}
	framework.DeleteAndCheckNothingLeft(t, plain)

	// A member Pod that says it runs plaintext (as Pods of a Steward without TLS do: no annotation) under a TLS
	// spec: Steward changes nothing and reports the mismatch; once the Pod matches again, the cluster settles.
	victim := got.Status.Members[0].Name
	setTLSAnnotation := func(value *string) {
		var p corev1.Pod
		if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, &p); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(p.DeepCopy())
		if value == nil {
			delete(p.Annotations, resources.AnnotationTLS)
		} else {
			p.Annotations[resources.AnnotationTLS] = *value
		}
		if err := framework.K8s.Patch(ctx, &p, patch); err != nil {
			t.Fatal(err)
		}
	}
	setTLSAnnotation(nil)
	framework.Poll(t, "TLSProviderMismatch reported", time.Minute, func() error {
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
			return err
		}
		d := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if d == nil || d.Status != metav1.ConditionTrue || d.Reason != "TLSProviderMismatch" || !strings.Contains(d.Message, victim) {
			return fmt.Errorf("Degraded %+v", d)
		}
		return nil
	})
	steward := etcdv1alpha1.TLSProviderSteward
	setTLSAnnotation(&steward)
	framework.Poll(t, "mismatch cleared", time.Minute, func() error {
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
			return err
		}
		if d := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionDegraded); d == nil || d.Status != metav1.ConditionFalse {
			return fmt.Errorf("Degraded %+v", d)
		}
		return nil
	})
	got = framework.WaitSettled(t, client.ObjectKeyFromObject(got), 2*time.Minute)

	framework.DeleteAndCheckNothingLeft(t, got)
	framework.Poll(t, "Secrets of the deleted cluster gone", time.Minute, func() error {
		if err := framework.K8s.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: "secure"}); err != nil {
			return err
		}
		if len(secrets.Items) != 0 {
			return fmt.Errorf("%d Secrets left", len(secrets.Items))
		}
		return nil
	})
}

// TestCertificateRotationUnderLoad shortens spec.tls.certificateLifetime on a running cluster under client load:
// Steward re-issues every member's and its own certificate in place, the members serve the new certificates
// without a restart (the kubelet updates the Secret volumes, etcd reads the files on each handshake), Steward
// keeps observing the cluster with its new client certificate, and no acknowledged write is lost.
func TestCertificateRotationUnderLoad(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "rotate")
	framework.StartOperator(t, ns)
	key, got := framework.CreateSettled(t, ns, "spinning", 0)
	cfg := framework.ClusterTLS(t, got)
	addrs := framework.PodAddrs(t, got)
	before := map[string]string{}
	for member, addr := range addrs {
		cert, err := framework.ServedCertificate(cfg, addr)
		if err != nil {
			t.Fatal(err)
		}
		before[member] = cert.SerialNumber.String()
	}
	restarts := framework.ContainerRestarts(t, key)

	load := framework.StartLoad(t, got)
	began := time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS.CertificateLifetime = &metav1.Duration{Duration: 24 * time.Hour}
	})
	// Every member serves a new certificate of the new lifetime, to a client with the old client certificate
	// (same CA) as well as the new one.
	framework.Poll(t, "members serve renewed certificates", 4*time.Minute, func() error {
		newCfg, err := framework.ClusterTLSConfig(got)
		if err != nil {
			return err
		}
		for member, addr := range addrs {
			for _, c := range []*tls.Config{cfg, newCfg} {
				cert, err := framework.ServedCertificate(c, addr)
				if err != nil {
					return fmt.Errorf("%s: %w", member, err)
				}
				if cert.SerialNumber.String() == before[member] || cert.NotAfter.Sub(cert.NotBefore) > 25*time.Hour {
					return fmt.Errorf("%s still serves its old certificate (until %s)", member, cert.NotAfter)
				}
			}
		}
		return nil
	})
	t.Logf("every member served its new certificate %s after the change", time.Since(began).Round(time.Second))
	settled := framework.WaitSettled(t, key, 2*time.Minute)
	if st := settled.Status.TLS; st == nil || st.NotAfter == nil || time.Until(st.NotAfter.Time) > 25*time.Hour {
		t.Errorf("status.tls after rotation: %+v", st)
	}
	// Steward observes with its new client certificate: status is fresh after the change.
	framework.WriteAndReadThroughService(t, settled)
	framework.RequireNoLostWrites(t, load, "certificate rotation")
	framework.RequireNoRestarts(t, key, restarts, "rotation")
	framework.CheckStatusMatchesEtcd(t, settled)
	framework.DeleteAndCheckNothingLeft(t, settled)
}
