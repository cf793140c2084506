// Package proxy lets a local etcdctl reach one member of a cluster without any key on disk: it listens on a
// Unix socket in a directory only the user can open, and carries each connection to the member's client port
// through the Kubernetes API (a port-forward to the member Pod), wrapping it in TLS with the cluster's client
// certificate held in memory. etcdctl talks plaintext to the socket and never sees the certificate or key;
// the member sees Steward's client certificate, and the proxy checks the member's certificate against the
// cluster's CA and the name every member's certificate carries.
//
// It owns the socket's private directory (created 0700, removed on exit), the forwarding and the TLS; it
// never reads from or writes to etcd itself, and it decides nothing about which member to use.
package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Dialer opens a byte stream to the member's client port.
type Dialer interface {
	Dial(ctx context.Context) (net.Conn, error)
}

// DialerFunc adapts a function to Dialer.
type DialerFunc func(ctx context.Context) (net.Conn, error)

// Dial calls f.
func (f DialerFunc) Dial(ctx context.Context) (net.Conn, error) { return f(ctx) }

// TLSConfig is the client side of a member connection: the cluster's CA (PEM) as the only trusted root, the
// client certificate and key (PEM) presented to the member, and serverName, the name the member's certificate
// must carry. The key stays in this process's memory.
func TLSConfig(caPEM, certPEM, keyPEM []byte, serverName string) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("the client Secret's ca.crt holds no PEM certificate")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the client Secret's tls.crt and tls.key: %w", err)
	}
	// etcd serves gRPC and HTTP on one TLS port and tells them apart by ALPN: without "h2" it takes the
	// connection for HTTP/1.1 and etcdctl's gRPC (HTTP/2, which it speaks in cleartext to the socket) fails.
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: serverName, MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"}}, nil
}

// handshakeTimeout bounds a TLS handshake with a member: a member that accepts the stream but does not answer
// would otherwise hang etcdctl until its own, longer, timeouts.
const handshakeTimeout = 10 * time.Second

// Proxy accepts connections on a listener and carries each to the member through its Dialer, in TLS when TLS is
// set. Errors of single connections (the member went away, a certificate was refused) go to Errorf: etcdctl
// only sees a closed connection, and the user needs to know why.
type Proxy struct {
	Dialer Dialer
	TLS    *tls.Config
	Errorf func(format string, args ...any)

	wg sync.WaitGroup
}

// Connect opens one connection to the member, TLS handshake included. The caller uses it to check, before it
// starts etcdctl, that the member is reachable and its certificate is accepted, so that a wrong CA or a name
// the certificate lacks is an error the user reads at once, not a timeout of etcdctl.
func (p *Proxy) Connect(ctx context.Context) (net.Conn, error) {
	conn, err := p.Dialer.Dial(ctx)
	if err != nil {
		return nil, err
	}
	if p.TLS == nil {
		return conn, nil
	}
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	tconn := tls.Client(conn, p.TLS)
	if err := tconn.HandshakeContext(hctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("TLS handshake with the member (checking its certificate for %s against the cluster's CA): %w", p.TLS.ServerName, err)
	}
	if slices.Contains(p.TLS.NextProtos, "h2") && tconn.ConnectionState().NegotiatedProtocol != "h2" {
		_ = tconn.Close()
		return nil, fmt.Errorf("the member did not agree to HTTP/2 in the TLS handshake (ALPN %q): it is not an etcd client port", tconn.ConnectionState().NegotiatedProtocol)
	}
	return tconn, nil
}

// Serve accepts connections until l is closed or ctx ends, then waits for the connections it carries to end.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	defer p.wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept on %s: %w", l.Addr(), err)
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.carry(ctx, c)
		}()
	}
}

// carry copies between the local connection and a new member connection until either side ends.
func (p *Proxy) carry(ctx context.Context, local net.Conn) {
	defer func() { _ = local.Close() }()
	remote, err := p.Connect(ctx)
	if err != nil {
		if p.Errorf != nil && ctx.Err() == nil {
			p.Errorf("connection to the member: %v", err)
		}
		return
	}
	defer func() { _ = remote.Close() }()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(remote, local); done <- struct{}{} }()
	go func() { _, _ = io.Copy(local, remote); done <- struct{}{} }()
	// gRPC connections are bidirectional and long-lived: when either side ends, or the command is
	// interrupted, the connection is over.
	select {
	case <-done:
	case <-ctx.Done():
	}
	_ = local.Close()
	_ = remote.Close()
	<-done
}

// maxSocketPath is the longest Unix socket path every supported OS accepts (sun_path is 104 bytes on darwin,
// 108 on Linux, including the terminating NUL).
const maxSocketPath = 103

// PrivateDir creates a directory only the user can open (0700), for the socket: in $XDG_RUNTIME_DIR when set
// (per user, on tmpfs, removed at logout), else in /dev/shm when it exists (tmpfs), else in the system's temp
// directory. The caller removes it with the returned function, on every exit path.
func PrivateDir() (string, func(), error) {
	var bases []string
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		bases = append(bases, d)
	}
	bases = append(bases, "/dev/shm", os.TempDir())
	var errs []error
	for _, base := range bases {
		dir, err := privateDirIn(base)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if dir != "" {
			return dir, func() { _ = os.RemoveAll(dir) }, nil //nolint:gosec // the directory privateDirIn just created
		}
	}
	return "", nil, fmt.Errorf("create a private directory for the etcdctl socket: %w", errors.Join(errs...))
}

// privateDirIn is PrivateDir in base; "" without error when base is not a directory.
//
//nolint:gosec // base is the user's own runtime or temp directory, and the directory needs its x bit (0700)
func privateDirIn(base string) (string, error) {
	if fi, err := os.Stat(base); err != nil || !fi.IsDir() {
		return "", nil
	}
	dir, err := os.MkdirTemp(base, "kubectl-steward-")
	if err != nil {
		return "", err
	}
	// MkdirTemp creates 0700 already; chmod again so that an unusual file system cannot leave it wider.
	if err := os.Chmod(dir, 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	if len(filepath.Join(dir, SocketName)) > maxSocketPath {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("%s: path too long for a Unix socket", dir)
	}
	return dir, nil
}

// SocketName is the socket's file name in the private directory.
const SocketName = "etcd.sock"

// Listen listens on the socket in dir and restricts it to the user (the directory already does; the socket's
// own mode is belt and braces for systems that honour it).
func Listen(dir string) (net.Listener, string, error) {
	path := filepath.Join(dir, SocketName)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close()
		return nil, "", fmt.Errorf("restrict %s: %w", path, err)
	}
	return l, path, nil
}
