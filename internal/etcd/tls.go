package etcd

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
)

// TLS is how Steward authenticates to a cluster's members and checks them: the cluster's CA, a client
// certificate and key (PEM; both empty: none), and the name every member's certificate carries. nil means
// plaintext.
//
// ServerName matters because Steward dials members by Pod IP (it may run where cluster DNS does not resolve),
// and IPs are not in member certificates (unknown before a Pod exists, and they change). Every member's
// certificate carries the client Service's name, and only certificates of this cluster's CA are trusted, so
// checking that name proves the peer is a member of this cluster, like a DNS name would.
//
// SourceHosts are the hosts of an adopted source's endpoints (spec.bootstrap.fromExisting): the source's members
// were issued certificates for their own addresses, not the client Service's name, so a certificate of the
// cluster's CA for one of these hosts is taken too. (The handshake does not tell which address was dialed: no
// SNI is sent for an IP.) It proves the same: the peer holds a member certificate of the cluster's CA.
type TLS struct {
	CA, Cert, Key []byte
	ServerName    string
	SourceHosts   []string
}

// Config builds the client TLS configuration.
func (t *TLS) Config() (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(t.CA) {
		return nil, errors.New("TLS: no CA certificate")
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	// No certificate and key: a client that checks the members and presents nothing (members that ask for no
	// client certificate, tls.clientAuth Password).
	if len(t.Cert) > 0 || len(t.Key) > 0 {
		cert, err := tls.X509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("TLS: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if t.ServerName == "" {
		return cfg, nil
	}
	// gRPC sets tls.Config.ServerName to the address dialed (a Pod IP) on every handshake, whatever the config
	// says, so Go's own check would look for the IP. It is replaced by the same check, chain to the cluster's
	// CA and the name, done in VerifyConnection against the fixed name: no certificate goes unverified.
	name, sources := t.ServerName, slices.Clone(t.SourceHosts)
	cfg.InsecureSkipVerify = true //nolint:gosec // verified in VerifyConnection: chain to RootCAs and the fixed server name
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("TLS: the server presented no certificate")
		}
		opts := x509.VerifyOptions{Roots: pool, DNSName: name, Intermediates: x509.NewCertPool(),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(opts)
		for _, host := range sources {
			if err == nil {
				break
			}
			opts.DNSName = host
			if _, e := cs.PeerCertificates[0].Verify(opts); e == nil {
				err = nil
			}
		}
		if err != nil {
			return fmt.Errorf("TLS: verify member certificate for %s: %w", name, err)
		}
		return nil
	}
	return cfg, nil
}

// Equal reports whether t and o dial the same way.
func (t *TLS) Equal(o *TLS) bool {
	if t == nil || o == nil {
		return t == o
	}
	return bytes.Equal(t.CA, o.CA) && bytes.Equal(t.Cert, o.Cert) && bytes.Equal(t.Key, o.Key) && t.ServerName == o.ServerName &&
		slices.Equal(t.SourceHosts, o.SourceHosts)
}

// LoadTLS reads a CA, certificate and key from files (the backup agent's mounted client Secret). serverName
// may be empty: then the name dialed is checked.
func LoadTLS(caFile, certFile, keyFile, serverName string) (*TLS, error) {
	t := &TLS{ServerName: serverName}
	for _, f := range []struct {
		path string
		dst  *[]byte
	}{{caFile, &t.CA}, {certFile, &t.Cert}, {keyFile, &t.Key}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			return nil, fmt.Errorf("read TLS file: %w", err)
		}
		*f.dst = b
	}
	if _, err := t.Config(); err != nil {
		return nil, err
	}
	return t, nil
}

// httpClient asks members' /version with cfg, the same short timeout as every observation call.
func httpClient(cfg *tls.Config) *http.Client {
	if cfg == nil {
		return plainHTTP
	}
	return &http.Client{Timeout: RequestTimeout, Transport: &http.Transport{TLSClientConfig: cfg}}
}

var plainHTTP = &http.Client{Timeout: RequestTimeout}

// ServedCertificate is the certificate the member at endpoint (a client URL) presents in a new TLS handshake,
// checked as every connection to the cluster under key is. A new handshake, not a pooled connection's: etcd reads
// its certificate files on each handshake, so this is what the member's files hold now.
func (p *Pool) ServedCertificate(ctx context.Context, key, endpoint string) (*x509.Certificate, error) {
	cfg := p.tlsConfig(key)
	if cfg == nil {
		return nil, errors.New("the cluster is dialed in plaintext")
	}
	host := endpoint
	if _, rest, ok := strings.Cut(endpoint, "://"); ok {
		host = rest
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: DialTimeout}, Config: cfg.Clone()}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, fmt.Errorf("TLS handshake with %s: %w", endpoint, err)
	}
	defer func() { _ = conn.Close() }()
	certs := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s presented no certificate", endpoint)
	}
	return certs[0], nil
}
