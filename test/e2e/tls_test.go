package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// clusterTLSConfig is what a test dials a cluster's members with: the client Secret Steward issued (CA,
// certificate, key), checking members for the client Service's name as Steward does, since tests dial Pod and
// Service IPs. nil for a plaintext cluster.
func clusterTLSConfig(c *etcdv1alpha1.EtcdCluster) (*tls.Config, error) {
	if !resources.TLSEnabled(c) {
		return nil, nil
	}
	var s corev1.Secret
	if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.ClientSecretName(c)}, &s); err != nil {
		return nil, err
	}
	t := &etcd.TLS{CA: s.Data[resources.SecretCAKey], Cert: s.Data[resources.SecretCertKey], Key: s.Data[resources.SecretKeyKey],
		ServerName: resources.ClientServiceHost(c, framework.OperatorOptions)}
	return t.Config()
}

// clusterTLS is clusterTLSConfig for a test, waiting for the Secret to appear.
func clusterTLS(t *testing.T, c *etcdv1alpha1.EtcdCluster) *tls.Config {
	t.Helper()
	var cfg *tls.Config
	framework.Poll(t, "client Secret of "+c.Name, time.Minute, func() error {
		var err error
		cfg, err = clusterTLSConfig(c)
		return err
	})
	return cfg
}

// servedCertificate is the certificate a member presents on its client port.
func servedCertificate(cfg *tls.Config, addr string) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 3 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func podAddrs(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	pods := memberPodsOf(t, c)
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = net.JoinHostPort(p.Status.PodIP, fmt.Sprint(resources.ClientPort))
	}
	return out
}

// requireRefused fails unless a put with cfg (nil: plaintext) to endpoint fails.
func requireRefused(t *testing.T, what, endpoint string, cfg *tls.Config) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), TLS: cfg})
	if err != nil {
		return // refused at dial
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "e2e/intruder", "x"); err == nil {
		t.Fatalf("%s: a put to %s succeeded", what, endpoint)
	}
}

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
	c := newCluster(ns, "secure", 3)
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	got := waitAvailable(t, client.ObjectKeyFromObject(c), 4*time.Minute)
	if got.Spec.TLS == nil || got.Spec.TLS.Provider != etcdv1alpha1.TLSProviderSteward || got.Spec.TLS.CertificateLifetime == nil ||
		got.Spec.TLS.CertificateLifetime.Duration != 2160*time.Hour {
		t.Fatalf("spec.tls defaulted to %+v, want provider Steward, 2160h", got.Spec.TLS)
	}
	checkStatusMatchesEtcd(t, got)
	writeAndReadThroughService(t, got)

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

	cfg := clusterTLS(t, got)
	roots := cfg.RootCAs
	addrs := podAddrs(t, got)
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
		cert, err := servedCertificate(cfg, addr)
		if err != nil {
			t.Fatalf("TLS to %s with the client certificate: %v", member, err)
		}
		fqdn := resources.MemberHost(got, member, framework.OperatorOptions)
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: fqdn}); err != nil || cert.Subject.CommonName != member {
			t.Errorf("%s serves %s: %v", member, cert.Subject.CommonName, err)
		}
		// Refused: plaintext gRPC, plaintext HTTP, TLS without a client certificate, a certificate of another CA.
		requireRefused(t, "plaintext client", "http://"+addr, nil)
		hc := &http.Client{Timeout: 3 * time.Second}
		if resp, err := hc.Get("http://" + addr + "/version"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("%s answers plaintext HTTP /version", member)
			}
		}
		noCert := cfg.Clone()
		noCert.Certificates = nil
		requireRefused(t, "TLS client without a certificate", "https://"+addr, noCert)
		requireRefused(t, "client certificate of another CA", "https://"+addr, foreign)
	}
	other := newCluster(ns, "plain", 1)
	other.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	if err := framework.K8s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	plain := waitAvailable(t, client.ObjectKeyFromObject(other), 3*time.Minute)
	if plain.Status.TLS != nil || !strings.HasPrefix(plain.Status.ClientEndpoint, "http://") {
		t.Errorf("plaintext cluster: status.tls %+v, endpoint %s", plain.Status.TLS, plain.Status.ClientEndpoint)
	}
	checkStatusMatchesEtcd(t, plain)
	writeAndReadThroughService(t, plain)
	var secrets corev1.SecretList
	if err := framework.K8s.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: "plain"}); err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("plaintext cluster has %d Secrets", len(secrets.Items))
	}
	deleteAndCheckNothingLeft(t, plain)

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
	got = waitSettled(t, client.ObjectKeyFromObject(got), 2*time.Minute)

	deleteAndCheckNothingLeft(t, got)
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
	key, got := createSettled(t, ns, "spinning", 0)
	cfg := clusterTLS(t, got)
	addrs := podAddrs(t, got)
	before := map[string]string{}
	for member, addr := range addrs {
		cert, err := servedCertificate(cfg, addr)
		if err != nil {
			t.Fatal(err)
		}
		before[member] = cert.SerialNumber.String()
	}
	restarts := containerRestarts(t, key)

	load := startLoad(t, got)
	began := time.Now()
	patchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS.CertificateLifetime = &metav1.Duration{Duration: 24 * time.Hour}
	})
	// Every member serves a new certificate of the new lifetime, to a client with the old client certificate
	// (same CA) as well as the new one.
	framework.Poll(t, "members serve renewed certificates", 4*time.Minute, func() error {
		newCfg, err := clusterTLSConfig(got)
		if err != nil {
			return err
		}
		for member, addr := range addrs {
			for _, c := range []*tls.Config{cfg, newCfg} {
				cert, err := servedCertificate(c, addr)
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
	settled := waitSettled(t, key, 2*time.Minute)
	if st := settled.Status.TLS; st == nil || st.NotAfter == nil || time.Until(st.NotAfter.Time) > 25*time.Hour {
		t.Errorf("status.tls after rotation: %+v", st)
	}
	// Steward observes with its new client certificate: status is fresh after the change.
	writeAndReadThroughService(t, settled)
	requireNoLostWrites(t, load, "certificate rotation")
	requireNoRestarts(t, key, restarts, "rotation")
	checkStatusMatchesEtcd(t, settled)
	deleteAndCheckNothingLeft(t, settled)
}

// containerRestarts counts the container restarts of each member Pod of the cluster key.
func containerRestarts(t *testing.T, key client.ObjectKey) map[string]int32 {
	t.Helper()
	var pods corev1.PodList
	if err := framework.K8s.List(context.Background(), &pods, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, p := range pods.Items {
		out[p.Name] = 0
		for _, cs := range p.Status.ContainerStatuses {
			out[p.Name] += cs.RestartCount
		}
	}
	return out
}

// requireNoRestarts fails if a member Pod of key restarted or was replaced since before was counted.
func requireNoRestarts(t *testing.T, key client.ObjectKey, before map[string]int32, during string) {
	t.Helper()
	for name, n := range containerRestarts(t, key) {
		if was, ok := before[name]; !ok || n != was {
			t.Errorf("member %s restarted (or was replaced) during %s: restarts %d, before %d", name, during, n, was)
		}
	}
}
