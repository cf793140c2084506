package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Want is what a certificate Steward did not issue (a user's Secret, or one cert-manager wrote) must be good for.
type Want struct {
	// Hosts the certificate must be valid for. "*.<domain>" stands for every name of one more label under
	// domain (every member's, whatever its generated name): it is checked with a probe name, so a wildcard
	// SAN covers it and a list of today's member names does not.
	Hosts []string
	// Server: usable by a TLS server (serverAuth); Client: by a TLS client (clientAuth).
	Server, Client bool
}

// Provided is a certificate that passed CheckProvided, with the CAs of its Secret.
type Provided struct {
	// Leaf is the certificate (the first of tls.crt); Intermediates the rest of tls.crt.
	Leaf          *x509.Certificate
	Intermediates *x509.CertPool
	// Roots are the certificates of ca.crt; RootsNotAfter is when the first of them expires.
	Roots         *x509.CertPool
	RootsNotAfter time.Time
}

// probeLabel stands for "any member" in a wildcard host of Want: no generated member name looks like it.
const probeLabel = "steward-probe-x"

// CheckProvided checks the ca.crt, tls.crt and tls.key of a Secret against want at now, as etcd and Go's TLS
// will use them: tls.crt and tls.key load as a key pair (the same call etcd makes), the certificate is valid at
// now, carries the extended key usages asked for, chains to a CA of ca.crt (through intermediates that follow
// it in tls.crt), and is valid for every host of want. The error names every problem found, each with the key
// it concerns, and never contains key material.
func CheckProvided(caPEM, certPEM, keyPEM []byte, want Want, now time.Time) (*Provided, error) {
	var problems []string
	roots, err := parseCertificates(caPEM)
	if err != nil {
		problems = append(problems, "ca.crt: "+err.Error())
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, errors.New(strings.Join(append(problems, "tls.crt and tls.key: "+describeKeyPairError(err, certPEM, keyPEM)), "; "))
	}
	chain := make([]*x509.Certificate, 0, len(pair.Certificate))
	for i, der := range pair.Certificate {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, errors.New(strings.Join(append(problems, fmt.Sprintf("tls.crt: certificate %d: %v", i+1, err)), "; "))
		}
		chain = append(chain, c)
	}
	p := &Provided{Leaf: chain[0], Intermediates: x509.NewCertPool(), Roots: x509.NewCertPool()}
	for _, c := range chain[1:] {
		p.Intermediates.AddCert(c)
	}
	for _, c := range roots {
		p.Roots.AddCert(c)
		if p.RootsNotAfter.IsZero() || c.NotAfter.Before(p.RootsNotAfter) {
			p.RootsNotAfter = c.NotAfter
		}
	}
	leaf := p.Leaf
	switch {
	case now.After(leaf.NotAfter):
		problems = append(problems, fmt.Sprintf("tls.crt (%s) expired at %s", describe(leaf), leaf.NotAfter.UTC().Format(time.RFC3339)))
	case now.Before(leaf.NotBefore):
		problems = append(problems, fmt.Sprintf("tls.crt (%s) is not valid before %s", describe(leaf), leaf.NotBefore.UTC().Format(time.RFC3339)))
	}
	if want.Server && !hasUsage(leaf, x509.ExtKeyUsageServerAuth) {
		problems = append(problems, fmt.Sprintf("tls.crt (%s) is not for server authentication (extended key usage serverAuth missing)", describe(leaf)))
	}
	if want.Client && !hasUsage(leaf, x509.ExtKeyUsageClientAuth) {
		problems = append(problems, fmt.Sprintf("tls.crt (%s) is not for client authentication (extended key usage clientAuth missing)", describe(leaf)))
	}
	if len(roots) > 0 {
		var invalid x509.CertificateInvalidError
		err := p.VerifyWith(p.Roots, x509.ExtKeyUsageAny, now)
		if errors.As(err, &invalid) && invalid.Reason == x509.Expired && invalid.Cert.Equal(leaf) {
			err = nil // the leaf's own validity, reported above (Go checks it before the chain)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("tls.crt (%s) does not chain to a CA in ca.crt: %v", describe(leaf), err))
		}
	}
	var uncovered []string
	for _, h := range want.Hosts {
		probe := h
		if rest, ok := strings.CutPrefix(h, "*."); ok {
			probe = probeLabel + "." + rest
		}
		if leaf.VerifyHostname(probe) != nil {
			uncovered = append(uncovered, h)
		}
	}
	if len(uncovered) > 0 {
		problems = append(problems, fmt.Sprintf("tls.crt (%s) does not cover DNS names %s (it has %v)",
			describe(leaf), strings.Join(uncovered, ", "), leaf.DNSNames))
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return p, nil
}

// VerifyWith checks that p's certificate chains to one of roots for usage at now: that a peer trusting roots
// accepts it.
func (p *Provided) VerifyWith(roots *x509.CertPool, usage x509.ExtKeyUsage, now time.Time) error {
	_, err := p.Leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: p.Intermediates, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// hasUsage: a certificate without extended key usages may be used for anything (as Go's TLS and etcd see it).
func hasUsage(c *x509.Certificate, u x509.ExtKeyUsage) bool {
	return len(c.ExtKeyUsage) == 0 && len(c.UnknownExtKeyUsage) == 0 ||
		slices.Contains(c.ExtKeyUsage, u) || slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageAny)
}

func describe(c *x509.Certificate) string {
	return fmt.Sprintf("subject %q, serial %s", c.Subject.CommonName, c.SerialNumber.Text(16))
}

// describeKeyPairError turns tls.X509KeyPair's error into what a user can act on. Its messages are generic
// ("failed to find any PEM data in certificate input"), so say which key is empty first.
func describeKeyPairError(err error, certPEM, keyPEM []byte) string {
	switch {
	case len(certPEM) == 0:
		return "tls.crt is empty"
	case len(keyPEM) == 0:
		return "tls.key is empty"
	}
	return strings.TrimPrefix(err.Error(), "tls: ")
}

// parseCertificates reads every PEM certificate of a bundle; text around the blocks is ignored, as Go's
// x509.CertPool.AppendCertsFromPEM (what etcd uses for its trusted CA file) ignores it.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	if len(data) == 0 {
		return nil, errors.New("empty")
	}
	var out []*x509.Certificate
	for len(data) > 0 {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}
