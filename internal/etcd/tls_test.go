package etcd

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"steward.dev/steward/internal/pki"
)

// TestTLSChecksTheFixedName: members are dialed by IP, and gRPC overwrites tls.Config.ServerName with the
// address; the config must still accept only a certificate of the cluster's CA that carries the fixed name, or,
// at the host of an adopted source's endpoint, that host.
func TestTLSChecksTheFixedName(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("ca", now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other", now)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *pki.KeyPair, req pki.Request) *pki.KeyPair {
		req.Lifetime = time.Hour
		kp, err := ca.Issue(req, now)
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	clientCert := issue(ca, pki.Request{CommonName: "steward", Client: true})
	local := []net.IP{net.ParseIP("127.0.0.1")}
	tests := map[string]struct {
		server  *pki.KeyPair
		sources []string
		wantErr string
	}{
		"member certificate with the name":                {issue(ca, pki.Request{CommonName: "m", DNSNames: []string{"db.ns.svc.cluster.local"}, Server: true}), nil, ""},
		"certificate for another name":                    {issue(ca, pki.Request{CommonName: "m", DNSNames: []string{"other.ns.svc"}, Server: true}), nil, "verify member certificate"},
		"certificate of another CA":                       {issue(other, pki.Request{CommonName: "m", DNSNames: []string{"db.ns.svc.cluster.local"}, Server: true}), nil, "verify member certificate"},
		"client-only certificate as a server":             {issue(ca, pki.Request{CommonName: "m", DNSNames: []string{"db.ns.svc.cluster.local"}, Client: true}), nil, "verify member certificate"},
		"an adopted source's certificate for its address": {issue(ca, pki.Request{CommonName: "src", IPs: local, Server: true}), []string{"10.0.0.9", "127.0.0.1"}, ""},
		"a certificate for the address of no source":      {issue(ca, pki.Request{CommonName: "src", IPs: local, Server: true}), []string{"10.0.0.9"}, "verify member certificate"},
		"a source's address, another CA":                  {issue(other, pki.Request{CommonName: "src", IPs: local, Server: true}), []string{"127.0.0.1"}, "verify member certificate"},
		"a source's address, a certificate for another":   {issue(ca, pki.Request{CommonName: "src", DNSNames: []string{"other.ns.svc"}, Server: true}), []string{"127.0.0.1"}, "verify member certificate"},
	}
	for name, tt := range tests {
		for _, withCert := range []bool{true, false} {
			if !withCert {
				name += ", no client certificate"
			}
			t.Run(name, func(t *testing.T) {
				pair, err := tls.X509KeyPair(tt.server.CertPEM, tt.server.KeyPEM)
				if err != nil {
					t.Fatal(err)
				}
				ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = ln.Close() }()
				go func() {
					c, err := ln.Accept()
					if err == nil {
						_ = c.(*tls.Conn).Handshake()
						_ = c.Close()
					}
				}()
				access := &TLS{CA: ca.CertPEM, Cert: clientCert.CertPEM, Key: clientCert.KeyPEM, ServerName: "db.ns.svc.cluster.local", SourceHosts: tt.sources}
				if !withCert {
					// Members that ask for no client certificate (tls.clientAuth Password): checked all the same.
					access.Cert, access.Key = nil, nil
				}
				cfg, err := access.Config()
				if err != nil {
					t.Fatal(err)
				}
				if len(cfg.Certificates) > 0 != withCert {
					t.Fatalf("%d client certificates, want one: %v", len(cfg.Certificates), withCert)
				}
				// What gRPC does: dial the IP with ServerName set to it.
				host, _, _ := net.SplitHostPort(ln.Addr().String())
				cfg.ServerName = host
				conn, err := tls.Dial("tcp", ln.Addr().String(), cfg)
				if err == nil {
					_ = conn.Close()
				}
				if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
					t.Fatalf("dial: %v, want %q", err, tt.wantErr)
				}
			})
		}
	}
}

// TestServedCertificate: the certificate a member presents in a new handshake, checked like every connection to
// the cluster (a server of another CA is refused, not read); a cluster dialed in plaintext has none to look at.
func TestServedCertificate(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("ca", now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other", now)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(ca *pki.KeyPair, names ...string) string {
		kp, err := ca.Issue(pki.Request{CommonName: "m", DNSNames: names, Server: true, Client: true, Lifetime: time.Hour}, now)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_ = c.(*tls.Conn).Handshake()
				_ = c.Close()
			}
		}()
		return "https://" + ln.Addr().String()
	}
	clientCert, err := ca.Issue(pki.Request{CommonName: "root", Client: true, Lifetime: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPool()
	if err := p.SetTLS("ns/db", &TLS{CA: ca.CertPEM, Cert: clientCert.CertPEM, Key: clientCert.KeyPEM, ServerName: "db.ns.svc.cluster.local"}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cert, err := p.ServedCertificate(ctx, "ns/db", serve(ca, "db.ns.svc.cluster.local", "db-peer.ns.svc.cluster.local"))
	if err != nil || cert.VerifyHostname("db-peer.ns.svc.cluster.local") != nil {
		t.Fatalf("member with the peer identity: %v", err)
	}
	cert, err = p.ServedCertificate(ctx, "ns/db", serve(ca, "db.ns.svc.cluster.local"))
	if err != nil || cert.VerifyHostname("db-peer.ns.svc.cluster.local") == nil {
		t.Fatalf("member without the peer identity: %v", err)
	}
	if _, err := p.ServedCertificate(ctx, "ns/db", serve(other, "db.ns.svc.cluster.local", "db-peer.ns.svc.cluster.local")); err == nil {
		t.Fatal("a server of another CA was read")
	}
	if _, err := p.ServedCertificate(ctx, "ns/plain", serve(ca, "db.ns.svc.cluster.local")); err == nil {
		t.Fatal("a plaintext cluster's member was dialed with TLS")
	}
}
