// Package pki issues and checks the certificates of a cluster's TLS when Steward is its certificate provider:
// one CA per cluster, a serving and peer certificate per member, and a client certificate for Steward (and its
// backup Jobs). It decides, from plain values and a time it is given, whether a certificate must be (re)issued.
// It imports nothing from Kubernetes, keeps no state, and never logs: key material leaves it only as the PEM
// the caller asked for.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

const (
	// CALifetime is how long a cluster's CA is valid. Members load the CA once, when etcd starts (etcd reloads
	// its own certificate and key on every handshake, but not the trusted CA), so the CA is long-lived and not
	// rotated by Steward.
	CALifetime = 10 * 365 * 24 * time.Hour
	// Backdate moves NotBefore into the past, so that a member or client whose clock is a little behind
	// Steward's accepts a certificate issued just now.
	Backdate = 5 * time.Minute
	// lifetimeSlack: a certificate whose lifetime differs from the wanted one by less than this was issued for
	// it (lifetimes are rounded to seconds in certificates).
	lifetimeSlack = time.Minute
)

// KeyPair is a certificate and its private key.
type KeyPair struct {
	CertPEM, KeyPEM []byte
	Cert            *x509.Certificate
	key             crypto.Signer
}

// Request is what a certificate must say.
type Request struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	// Server: usable by a TLS server (ExtKeyUsageServerAuth); Client: by a TLS client (ExtKeyUsageClientAuth).
	// A member's certificate is both: members are clients of each other on the peer port.
	Server, Client bool
	Lifetime       time.Duration
}

// NewCA creates a self-signed ECDSA P-256 CA valid for CALifetime from now (backdated).
func NewCA(commonName string, now time.Time) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Steward"}},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	return keyPair(der, key)
}

// Issue signs a new certificate for req with a fresh ECDSA P-256 key, valid from now (backdated) for
// req.Lifetime.
func (ca *KeyPair) Issue(req Request, now time.Time) (*KeyPair, error) {
	if ca == nil || ca.key == nil {
		return nil, errors.New("issue certificate: no CA key")
	}
	if req.Lifetime <= 0 {
		return nil, fmt.Errorf("issue certificate for %s: lifetime %s", req.CommonName, req.Lifetime)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %s: %w", req.CommonName, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(req.Lifetime)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter // a certificate cannot outlive its issuer
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: req.CommonName, Organization: []string{"Steward"}},
		NotBefore:    now.Add(-Backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  extKeyUsage(req),
		DNSNames:     req.DNSNames,
		IPAddresses:  req.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %s: %w", req.CommonName, err)
	}
	return keyPair(der, key)
}

func extKeyUsage(req Request) []x509.ExtKeyUsage {
	var u []x509.ExtKeyUsage
	if req.Server {
		u = append(u, x509.ExtKeyUsageServerAuth)
	}
	if req.Client {
		u = append(u, x509.ExtKeyUsageClientAuth)
	}
	return u
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return n, nil
}

func keyPair(der []byte, key *ecdsa.PrivateKey) (*KeyPair, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse issued certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return &KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		Cert:    cert,
		key:     key,
	}, nil
}

// ParseCertificate reads the first PEM certificate of data.
func ParseCertificate(data []byte) (*x509.Certificate, error) {
	for len(data) > 0 {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parse certificate: %w", err)
			}
			return cert, nil
		}
	}
	return nil, errors.New("no PEM certificate")
}

// ParseKeyPair reads a certificate and its private key (as Steward writes them) and checks that they belong
// together.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	cert, err := ParseCertificate(certPEM)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM private key")
	}
	var key crypto.Signer
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		var k any
		k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		if err == nil {
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("private key of type %T cannot sign", k)
			}
			key = s
		}
	default:
		return nil, fmt.Errorf("unsupported private key PEM type %q", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("private key does not match the certificate")
	}
	return &KeyPair{CertPEM: certPEM, KeyPEM: keyPEM, Cert: cert, key: key}, nil
}

// RenewAt is when a certificate is renewed: once two thirds of its lifetime have passed, which leaves a third
// (30 days of a 90-day certificate) for the new one to reach every member's volume and for retries.
func RenewAt(cert *x509.Certificate) time.Time {
	start := cert.NotBefore.Add(Backdate)
	return start.Add(cert.NotAfter.Sub(start) * 2 / 3)
}

// RenewalReason says why the certificate in certPEM must be issued again for req, or "" when it is good:
// missing or unreadable, not signed by ca, for other names or uses, of another lifetime than asked, or due
// for renewal at now. keyPEM must be the certificate's key.
func RenewalReason(certPEM, keyPEM []byte, ca *x509.Certificate, req Request, now time.Time) string {
	kp, err := ParseKeyPair(certPEM, keyPEM)
	if err != nil {
		return "missing or unreadable: " + err.Error()
	}
	cert := kp.Cert
	if err := cert.CheckSignatureFrom(ca); err != nil || !bytes.Equal(cert.RawIssuer, ca.RawSubject) {
		return "not issued by the cluster's CA"
	}
	if cert.Subject.CommonName != req.CommonName || !sameStrings(cert.DNSNames, req.DNSNames) || !sameIPs(cert.IPAddresses, req.IPs) {
		return "names changed"
	}
	if !slices.Equal(cert.ExtKeyUsage, extKeyUsage(req)) {
		return "key usages changed"
	}
	lifetime := cert.NotAfter.Sub(cert.NotBefore.Add(Backdate))
	capped := !cert.NotAfter.Before(ca.NotAfter) // issued to end with the CA: shorter than asked, on purpose
	if d := lifetime - req.Lifetime; !capped && (d > lifetimeSlack || d < -lifetimeSlack) {
		return fmt.Sprintf("lifetime changed from %s to %s", lifetime.Round(time.Minute), req.Lifetime)
	}
	if !now.Before(RenewAt(cert)) {
		return fmt.Sprintf("due for renewal (expires %s)", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return ""
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func sameIPs(a, b []net.IP) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}
