package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func member() Request {
	return Request{CommonName: "m1", DNSNames: []string{"m1.c-peer.ns.svc.cluster.local", "localhost"},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true, Client: true, Lifetime: 90 * 24 * time.Hour}
}

func TestIssuedCertificateVerifiesForItsNames(t *testing.T) {
	ca, err := NewCA("test-ca", t0)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := ca.Issue(member(), t0)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := kp.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "m1.c-peer.ns.svc.cluster.local",
			CurrentTime: t0, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("verify for %v: %v", usage, err)
		}
	}
	if _, err := kp.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other.example", CurrentTime: t0}); err == nil {
		t.Error("verified for a name it does not carry")
	}
	if _, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM); err != nil {
		t.Errorf("Go's TLS (and etcd's) cannot load the pair: %v", err)
	}
	again, err := ParseKeyPair(ca.CertPEM, ca.KeyPEM)
	if err != nil || !again.Cert.IsCA {
		t.Fatalf("parse CA back: %v", err)
	}
	if _, err := again.Issue(member(), t0); err != nil {
		t.Errorf("a parsed CA cannot issue: %v", err)
	}
}

func TestRenewalReason(t *testing.T) {
	ca, err := NewCA("test-ca", t0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other-ca", t0)
	if err != nil {
		t.Fatal(err)
	}
	good, err := ca.Issue(member(), t0)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Issue(member(), t0)
	if err != nil {
		t.Fatal(err)
	}
	renamed := member()
	renamed.DNSNames = append(renamed.DNSNames, "m1.c-peer")
	clientOnly := member()
	clientOnly.Server = false
	shorter := member()
	shorter.Lifetime = time.Hour
	tests := map[string]struct {
		cert, key []byte
		req       Request
		now       time.Time
		want      string // substring; "" means no renewal
	}{
		"fresh":                   {good.CertPEM, good.KeyPEM, member(), t0, ""},
		"just before two thirds":  {good.CertPEM, good.KeyPEM, member(), t0.Add(60*24*time.Hour - time.Minute), ""},
		"at two thirds":           {good.CertPEM, good.KeyPEM, member(), t0.Add(60 * 24 * time.Hour), "due for renewal"},
		"expired":                 {good.CertPEM, good.KeyPEM, member(), t0.Add(100 * 24 * time.Hour), "due for renewal"},
		"missing":                 {nil, nil, member(), t0, "missing or unreadable"},
		"garbage":                 {[]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), good.KeyPEM, member(), t0, "missing or unreadable"},
		"key of another cert":     {good.CertPEM, foreign.KeyPEM, member(), t0, "does not match"},
		"other CA":                {foreign.CertPEM, foreign.KeyPEM, member(), t0, "not issued by the cluster's CA"},
		"names changed":           {good.CertPEM, good.KeyPEM, renamed, t0, "names changed"},
		"usage changed":           {good.CertPEM, good.KeyPEM, clientOnly, t0, "key usages changed"},
		"lifetime changed":        {good.CertPEM, good.KeyPEM, shorter, t0, "lifetime changed"},
		"CA certificate as entry": {ca.CertPEM, ca.KeyPEM, member(), t0, "names changed"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := RenewalReason(tt.cert, tt.key, ca.Cert, tt.req, tt.now)
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Fatalf("RenewalReason = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCertificateNeverOutlivesItsCA(t *testing.T) {
	ca, err := NewCA("test-ca", t0)
	if err != nil {
		t.Fatal(err)
	}
	req := member()
	req.Lifetime = 87600 * time.Hour
	now := t0.Add(CALifetime - 24*time.Hour)
	kp, err := ca.Issue(req, now)
	if err != nil {
		t.Fatal(err)
	}
	if kp.Cert.NotAfter.After(ca.Cert.NotAfter) {
		t.Fatalf("certificate ends %s after its CA %s", kp.Cert.NotAfter, ca.Cert.NotAfter)
	}
	if r := RenewalReason(kp.CertPEM, kp.KeyPEM, ca.Cert, req, now); strings.Contains(r, "lifetime") {
		t.Fatalf("a certificate capped at the CA's end is re-issued forever: %q", r)
	}
}

// FuzzRenewalReason: arbitrary certificate and key bytes never panic and are never taken as good.
func FuzzRenewalReason(f *testing.F) {
	ca, err := NewCA("fuzz-ca", t0)
	if err != nil {
		f.Fatal(err)
	}
	good, err := ca.Issue(member(), t0)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good.CertPEM, good.KeyPEM)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), []byte("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n"))
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, cert, key []byte) {
		r := RenewalReason(cert, key, ca.Cert, member(), t0)
		if r == "" && (string(cert) != string(good.CertPEM) || string(key) != string(good.KeyPEM)) {
			// Only the CA's own issue can pass; anything else verifying would be a forged signature.
			if _, err := ParseKeyPair(cert, key); err != nil {
				t.Fatalf("unparseable pair accepted: %v", err)
			}
		}
		if _, err := ParseCertificate(cert); err == nil && r == "" {
			if c, _ := ParseCertificate(cert); c.CheckSignatureFrom(ca.Cert) != nil {
				t.Fatal("certificate not signed by the CA accepted")
			}
		}
	})
}
