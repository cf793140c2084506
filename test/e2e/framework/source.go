package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/testbed"
)

// HostEtcd is an etcd cluster of processes the test started on the test bed's host, outside Kubernetes and not
// by Steward: a source for an adoption (spec.bootstrap.fromExisting).
type HostEtcd struct {
	// Names, PeerURLs and ClientURLs (where they listen) of its members, in order; AdvertisedClientURLs are the
	// client URLs its member list names (ClientURLs, unless UnreachableClientURLs).
	Names, PeerURLs, ClientURLs, AdvertisedClientURLs []string
	// Username and Password of the user Client authenticates as (empty while authentication is off).
	Username, Password string
	// TLS is what a client of a source serving TLS dials with (nil: plaintext): a client certificate of its CA.
	TLS   *tls.Config
	procs []*exec.Cmd
	dir   string
}

// HostEtcdOption changes how StartHostEtcd starts a source.
type HostEtcdOption func(*hostEtcdOptions)

type hostEtcdOptions struct {
	unreachableClientURLs bool
	ca                    *pki.KeyPair
}

// SourceTLS makes the source serve TLS on its client and peer URLs with certificates of ca (for the node's
// address), requiring client certificates of ca on both, as a kubeadm etcd does; Client presents one.
func SourceTLS(ca *pki.KeyPair) HostEtcdOption {
	return func(o *hostEtcdOptions) { o.ca = ca }
}

// UnreachableClientURLs makes each member advertise a client URL nothing listens on (as a source behind NAT, or
// advertising addresses of a network Steward is not on, would): Steward reaches it through the endpoints the
// spec names alone.
func UnreachableClientURLs() HostEtcdOption {
	return func(o *hostEtcdOptions) { o.unreachableClientURLs = true }
}

// Source users EnableAuth makes: root, and an application's user with a role of its own.
const (
	SourceRootPassword = "source-root"
	SourceAppUser      = "app"
	SourceAppPassword  = "source-app"
)

// EnableAuth turns etcd's authentication on in the source the way an administrator would: user root (password
// SourceRootPassword, role root), user SourceAppUser (password SourceAppPassword) with role SourceAppUser, which
// may read and write every key, then auth enable. Client authenticates as root from then on.
func (h *HostEtcd) EnableAuth(t *testing.T) {
	t.Helper()
	cli := h.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	steps := []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", SourceRootPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, SourceAppUser); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, SourceAppUser, "\x00", clientv3.GetPrefixRangeEnd(""), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, SourceAppUser, SourceAppPassword); return err },
		func() error { _, err := cli.UserGrantRole(ctx, SourceAppUser, SourceAppUser); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("enable auth on the source, step %d: %v", i, err)
		}
	}
	h.Username, h.Password = "root", SourceRootPassword
}

// StartHostEtcd starts an n-member plaintext etcd cluster of release version on the host, each member listening
// on the first node's address (testbed.NodeIP, which Pods reach), and waits until every member is healthy; the
// processes stop when t ends. Each process resolves names through cluster DNS, in a mount namespace of its own
// with a resolv.conf naming the cluster's DNS Service: a source's members must reach Steward's members by their
// peer URLs, DNS names of the peer Service, which the host's own resolver does not know
// (docs/user/adoption.md#network-both-sides-must-reach-each-others-peer-urls).
func StartHostEtcd(t *testing.T, name string, n int, version string, opts ...HostEtcdOption) *HostEtcd {
	t.Helper()
	var o hostEtcdOptions
	for _, opt := range opts {
		opt(&o)
	}
	dir := t.TempDir()
	h := &HostEtcd{dir: dir}
	scheme, tlsArgs := "http://", []string(nil)
	if o.ca != nil {
		scheme, tlsArgs = "https://", h.writeTLS(t, o.ca)
	}
	var initial []string
	for i := range n {
		h.Names = append(h.Names, fmt.Sprintf("%s%d", name, i))
		h.PeerURLs = append(h.PeerURLs, scheme+FreeAddress(t))
		h.ClientURLs = append(h.ClientURLs, scheme+FreeAddress(t))
		initial = append(initial, h.Names[i]+"="+h.PeerURLs[i])
		advertised := h.ClientURLs[i]
		if o.unreachableClientURLs {
			advertised = scheme + FreeAddress(t)
		}
		h.AdvertisedClientURLs = append(h.AdvertisedClientURLs, advertised)
	}
	bin := filepath.Join(Bed.EtcdBinDir(version), "etcd")
	t.Cleanup(h.stop)
	for i := range n {
		args := []string{"--name", h.Names[i], "--data-dir", filepath.Join(dir, h.Names[i]),
			"--listen-peer-urls", h.PeerURLs[i], "--initial-advertise-peer-urls", h.PeerURLs[i],
			"--listen-client-urls", h.ClientURLs[i], "--advertise-client-urls", h.AdvertisedClientURLs[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new", "--initial-cluster-token", name,
			"--snapshot-count", "10000"}
		args = append(args, tlsArgs...)
		cmd, err := testbed.ClusterDNSCommand(dir, bin, args...)
		if err != nil {
			t.Fatal(err)
		}
		logFile, err := os.Create(filepath.Join(dir, h.Names[i]+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			t.Fatalf("start source member %s: %v", h.Names[i], err)
		}
		_ = logFile.Close()
		h.procs = append(h.procs, cmd)
	}
	cli := h.Client(t)
	err := testbed.Eventually(context.Background(), time.Minute, 100*time.Millisecond, func() error {
		for _, ep := range h.ClientURLs {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := cli.Status(ctx, ep)
			cancel()
			if err != nil {
				return fmt.Errorf("%s: %w", ep, err)
			}
		}
		return nil
	})
	if err != nil {
		// A member that does not come up says why in its log (a port taken before it could bind, say).
		for i := range h.Names {
			t.Logf("source member %s log:\n%s", h.Names[i], h.Log(i))
		}
		t.Fatalf("source members healthy: %v", err)
	}
	return h
}

// AdoptingCluster is a 3-member NewCluster ns/name adopting the source at endpoints (spec.bootstrap.fromExisting),
// in plaintext as the source runs; the caller creates it.
func AdoptingCluster(ns, name string, endpoints []string) *etcdv1alpha1.EtcdCluster {
	c := NewCluster(ns, name, 3)
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{FromExisting: &etcdv1alpha1.ExistingSource{Endpoints: endpoints}}
	return c
}

// Client is a client of every member's client URL (authenticated as Username, if set), closed when t ends.
func (h *HostEtcd) Client(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: h.ClientURLs, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: h.Username, Password: h.Password, TLS: h.TLS})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Log is the end of member i's log, for a failing test's report.
func (h *HostEtcd) Log(i int) string {
	b, _ := os.ReadFile(filepath.Join(h.dir, h.Names[i]+".log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// stop stops the processes the test started, by their process IDs.
func (h *HostEtcd) stop() {
	for _, p := range h.procs {
		if p.Process != nil {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}
}

// writeTLS issues the members' certificate (server and client, for the node's address; the members share it)
// and a client's of ca, sets h.TLS, and returns etcd's TLS flags for both ports.
func (h *HostEtcd) writeTLS(t *testing.T, ca *pki.KeyPair) []string {
	t.Helper()
	member, err := ca.Issue(pki.Request{CommonName: "source-member", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP(testbed.NodeIP)},
		Server: true, Client: true, Lifetime: 24 * time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ca.Issue(pki.Request{CommonName: "source-admin", Client: true, Lifetime: 24 * time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"ca.crt": ca.CertPEM, "member.crt": member.CertPEM, "member.key": member.KeyPEM}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(h.dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pair, err := tls.X509KeyPair(cli.CertPEM, cli.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	h.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots, MinVersion: tls.VersionTLS12}
	caFile, certFile, keyFile := filepath.Join(h.dir, "ca.crt"), filepath.Join(h.dir, "member.crt"), filepath.Join(h.dir, "member.key")
	return []string{"--cert-file", certFile, "--key-file", keyFile, "--trusted-ca-file", caFile, "--client-cert-auth",
		"--peer-cert-file", certFile, "--peer-key-file", keyFile, "--peer-trusted-ca-file", caFile, "--peer-client-cert-auth"}
}

// FreeAddress is a free TCP address on the first node's address (nothing listens there once it returns).
func FreeAddress(t *testing.T) string {
	t.Helper()
	addr, err := testbed.NodeAddress()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
