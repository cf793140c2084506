package pki

import (
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
)

var checkNow = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

const (
	memberWildcard = "*.db-peer.ns.svc.cluster.local"
	clientHost     = "db.ns.svc.cluster.local"
)

func mustCA(t testing.TB, name string) *KeyPair {
	t.Helper()
	ca, err := NewCA(name, checkNow.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustIssue(t testing.TB, ca *KeyPair, req Request, at time.Time) *KeyPair {
	t.Helper()
	kp, err := ca.Issue(req, at)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func memberReq(names ...string) Request {
	if names == nil {
		names = []string{memberWildcard, clientHost}
	}
	return Request{CommonName: "member", DNSNames: names, Server: true, Client: true, Lifetime: 24 * time.Hour}
}

// chainCA makes a CA signed by parent (self-signed when parent is nil) that may sign further CAs, as a
// user's root and intermediate are (Steward's own CA may not).
func chainCA(t testing.TB, name string, parent *KeyPair) *KeyPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: name},
		NotBefore: checkNow.Add(-time.Hour), NotAfter: checkNow.Add(365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	signer, signerKey := tmpl, any(key)
	if parent != nil {
		signer, signerKey = parent.Cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, key.Public(), signerKey)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := keyPair(der, key)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// TestCheckProvided: every way a provided Secret can be wrong is refused with a message naming the key and the
// problem; good material (a wildcard, a chain through an intermediate, a CA bundle, openssl's EC PARAMETERS
// block, a certificate without extended key usages) is accepted.
func TestCheckProvided(t *testing.T) {
	ca, other := mustCA(t, "ca"), mustCA(t, "other")
	good := mustIssue(t, ca, memberReq(), checkNow)
	root := chainCA(t, "root", nil)
	inter := chainCA(t, "intermediate", root)
	viaInter := mustIssue(t, inter, memberReq(), checkNow)
	serverOnly := mustIssue(t, ca, Request{CommonName: "s", DNSNames: []string{memberWildcard, clientHost}, Server: true, Lifetime: time.Hour}, checkNow)
	clientOnly := mustIssue(t, ca, Request{CommonName: "c", Client: true, Lifetime: time.Hour}, checkNow)
	noEKU := mustIssue(t, ca, Request{CommonName: "any", DNSNames: []string{memberWildcard, clientHost}, Lifetime: time.Hour}, checkNow)
	listed := mustIssue(t, ca, memberReq("db-abcde.db-peer.ns.svc.cluster.local", clientHost), checkNow)
	expired := mustIssue(t, ca, memberReq(), checkNow.Add(-48*time.Hour))
	future := mustIssue(t, ca, memberReq(), checkNow.Add(48*time.Hour))
	foreign := mustIssue(t, other, memberReq(), checkNow)
	noSvc := mustIssue(t, ca, memberReq(memberWildcard), checkNow)
	ecParams := append(pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}}), good.KeyPEM...)
	bundle := append(append([]byte("# old and new CA\n"), other.CertPEM...), ca.CertPEM...)
	member := Want{Hosts: []string{memberWildcard, clientHost}, Server: true, Client: true}

	tests := map[string]struct {
		ca, cert, key []byte
		want          Want
		errs          []string // "" : accepted
	}{
		"good member":                 {ca.CertPEM, good.CertPEM, good.KeyPEM, member, nil},
		"good through intermediate":   {root.CertPEM, append(append([]byte{}, viaInter.CertPEM...), inter.CertPEM...), viaInter.KeyPEM, member, nil},
		"CA bundle":                   {bundle, good.CertPEM, good.KeyPEM, member, nil},
		"EC PARAMETERS before key":    {ca.CertPEM, good.CertPEM, ecParams, member, nil},
		"no extended key usage: any":  {ca.CertPEM, noEKU.CertPEM, noEKU.KeyPEM, member, nil},
		"client only for client":      {ca.CertPEM, clientOnly.CertPEM, clientOnly.KeyPEM, Want{Client: true}, nil},
		"empty ca.crt":                {nil, good.CertPEM, good.KeyPEM, member, []string{"ca.crt: empty"}},
		"garbage ca.crt":              {[]byte("not a certificate"), good.CertPEM, good.KeyPEM, member, []string{"ca.crt: no PEM certificate"}},
		"empty tls.crt":               {ca.CertPEM, nil, good.KeyPEM, member, []string{"tls.crt is empty"}},
		"empty tls.key":               {ca.CertPEM, good.CertPEM, nil, member, []string{"tls.key is empty"}},
		"key of another certificate":  {ca.CertPEM, good.CertPEM, foreign.KeyPEM, member, []string{"tls.crt and tls.key", "private key does not match public key"}},
		"key is a certificate":        {ca.CertPEM, good.CertPEM, good.CertPEM, member, []string{"tls.crt and tls.key"}},
		"expired":                     {ca.CertPEM, expired.CertPEM, expired.KeyPEM, member, []string{"tls.crt (subject \"member\"", "expired at"}},
		"not yet valid":               {ca.CertPEM, future.CertPEM, future.KeyPEM, member, []string{"is not valid before"}},
		"server only, client wanted":  {ca.CertPEM, serverOnly.CertPEM, serverOnly.KeyPEM, member, []string{"not for client authentication"}},
		"client only, server wanted":  {ca.CertPEM, clientOnly.CertPEM, clientOnly.KeyPEM, member, []string{"not for server authentication", "does not cover DNS names"}},
		"another CA":                  {ca.CertPEM, foreign.CertPEM, foreign.KeyPEM, member, []string{"does not chain to a CA in ca.crt"}},
		"intermediate missing":        {root.CertPEM, viaInter.CertPEM, viaInter.KeyPEM, member, []string{"does not chain to a CA in ca.crt"}},
		"member names, no wildcard":   {ca.CertPEM, listed.CertPEM, listed.KeyPEM, member, []string{"does not cover DNS names " + memberWildcard + " ("}},
		"client Service name missing": {ca.CertPEM, noSvc.CertPEM, noSvc.KeyPEM, member, []string{"does not cover DNS names " + clientHost}},
	}

	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := CheckProvided(tt.ca, tt.cert, tt.key, tt.want, checkNow)
			if tt.errs == nil {
				if err != nil || p == nil || p.Leaf == nil || p.RootsNotAfter.IsZero() {
					t.Fatalf("refused good material: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range tt.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "BEGIN") {
				t.Errorf("error carries PEM: %q", err)
			}
		})
	}
}

func TestVerifyWith(t *testing.T) {
	ca, other := mustCA(t, "ca"), mustCA(t, "other")
	kp := mustIssue(t, ca, Request{CommonName: "c", Client: true, Lifetime: time.Hour}, checkNow)
	p, err := CheckProvided(ca.CertPEM, kp.CertPEM, kp.KeyPEM, Want{Client: true}, checkNow)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.VerifyWith(p.Roots, x509.ExtKeyUsageClientAuth, checkNow); err != nil {
		t.Errorf("own CA: %v", err)
	}
	if err := p.VerifyWith(p.Roots, x509.ExtKeyUsageServerAuth, checkNow); err == nil {
		t.Error("a client certificate verified for server auth")
	}
	pool := x509.NewCertPool()
	pool.AddCert(other.Cert)
	if err := p.VerifyWith(pool, x509.ExtKeyUsageClientAuth, checkNow); err == nil {
		t.Error("verified against another CA")
	}
}

// FuzzCheckProvided: whatever a Secret holds, the check does not panic, never echoes key material, and accepts
// only material Go's TLS loads and that verifies against its ca.crt for the hosts asked at that time.
func FuzzCheckProvided(f *testing.F) {
	ca := mustCA(f, "ca")
	good := mustIssue(f, ca, memberReq(), checkNow)
	f.Add(ca.CertPEM, good.CertPEM, good.KeyPEM)
	f.Add(ca.CertPEM, good.CertPEM, ca.KeyPEM)
	f.Add([]byte{}, good.CertPEM, good.KeyPEM)
	f.Add(ca.CertPEM, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), good.KeyPEM)
	f.Add(good.CertPEM, ca.CertPEM, ca.KeyPEM)
	want := Want{Hosts: []string{memberWildcard, clientHost}, Server: true, Client: true}
	f.Fuzz(func(t *testing.T, caPEM, certPEM, keyPEM []byte) {
		p, err := CheckProvided(caPEM, certPEM, keyPEM, want, checkNow)
		if err != nil {
			if p != nil {
				t.Fatal("refused, but returned material")
			}
			if len(keyPEM) > 40 && strings.Contains(err.Error(), string(keyPEM[:40])) {
				t.Fatalf("error echoes the key: %q", err)
			}
			return
		}
		for _, h := range []string{"steward-probe-x.db-peer.ns.svc.cluster.local", clientHost} {
			if err := p.VerifyWith(p.Roots, x509.ExtKeyUsageServerAuth, checkNow); err != nil || p.Leaf.VerifyHostname(h) != nil {
				t.Fatalf("accepted material that does not verify for %s: %v", h, err)
			}
		}
	})
}
