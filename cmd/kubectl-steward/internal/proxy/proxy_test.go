package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"steward.dev/steward/internal/pki"
)

func TestPrivateDir(t *testing.T) {
	base := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", base)
	dir, cleanup, err := PrivateDir()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != base {
		t.Errorf("dir %s is not under $XDG_RUNTIME_DIR %s", dir, base)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, %v; want 0700", fi.Mode(), err)
	}
	l, path, err := Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket %v, %v", fi.Mode(), err)
	}
	_ = l.Close()
	cleanup()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s: %v", dir, err)
	}

	// A runtime directory whose socket path would be too long is skipped for the next base.
	long := filepath.Join(base, strings.Repeat("d", 90))
	if err := os.Mkdir(long, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", long)
	dir, cleanup, err = PrivateDir()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if strings.HasPrefix(dir, long) || len(filepath.Join(dir, SocketName)) > maxSocketPath {
		t.Errorf("dir %s: socket path too long", dir)
	}
}

// echo is a member stand-in answering each line with "echo: <line>".
func echo(t *testing.T) Dialer {
	t.Helper()
	return DialerFunc(func(context.Context) (net.Conn, error) {
		a, b := net.Pipe()
		go func() {
			defer func() { _ = b.Close() }()
			r := bufio.NewReader(b)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				fmt.Fprint(b, "echo: "+line)
			}
		}()
		return a, nil
	})
}

func TestServeCarriesConnectionsAndStops(t *testing.T) {
	dir := t.TempDir()
	l, path, err := Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{Dialer: echo(t)}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, l) }()

	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Error(err)
				return
			}
			defer func() { _ = c.Close() }()
			fmt.Fprintf(c, "hello %d\n", i)
			got, err := bufio.NewReader(c).ReadString('\n')
			if err != nil || got != fmt.Sprintf("echo: hello %d\n", i) {
				t.Errorf("connection %d: %q, %v", i, got, err)
			}
		}()
	}
	wg.Wait()

	// A connection still open when the command ends is closed, and Serve returns.
	open, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(open, "still here")
	if _, err := bufio.NewReader(open).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	_ = open.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := open.Read(make([]byte, 1)); err == nil {
		t.Error("the open connection was not closed")
	}
}

func TestConnectionErrorsAreReported(t *testing.T) {
	dir := t.TempDir()
	l, path, err := Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reported []string
	p := &Proxy{
		Dialer: DialerFunc(func(context.Context) (net.Conn, error) { return nil, errors.New("pod db-aaaaa is gone") }),
		Errorf: func(format string, args ...any) {
			mu.Lock()
			reported = append(reported, fmt.Sprintf(format, args...))
			mu.Unlock()
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Serve(ctx, l) }()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the connection stayed open although the member could not be reached")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 || !strings.Contains(reported[0], "pod db-aaaaa is gone") {
		t.Errorf("reported %q", reported)
	}
}

func TestTLSConfigRefusesBadMaterial(t *testing.T) {
	if _, err := TLSConfig([]byte("not pem"), nil, nil, "x"); err == nil || !strings.Contains(err.Error(), "ca.crt") {
		t.Errorf("bad CA: %v", err)
	}
}

// A TLS server that does not speak HTTP/2 (no ALPN "h2") is not an etcd client port: etcd selects gRPC by ALPN,
// and without it etcdctl's requests would time out unexplained. Connect says so instead.
func TestConnectRequiresHTTP2(t *testing.T) {
	ca, err := pki.NewCA("ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue(pki.Request{CommonName: "m", DNSNames: []string{"db.ns.svc"}, Server: true, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue(pki.Request{CommonName: "c", Client: true, Lifetime: time.Hour}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := TLSConfig(ca.CertPEM, client.CertPEM, client.KeyPEM, "db.ns.svc")
	if err != nil {
		t.Fatal(err)
	}
	for _, protos := range [][]string{nil, {"h2"}} {
		cert, _ := tls.X509KeyPair(server.CertPEM, server.KeyPEM)
		l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: protos, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { _ = c.(*tls.Conn).Handshake(); time.Sleep(time.Second); _ = c.Close() }()
			}
		}()
		p := &Proxy{TLS: cfg, Dialer: DialerFunc(func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", l.Addr().String())
		})}
		conn, err := p.Connect(context.Background())
		if protos == nil && (err == nil || !strings.Contains(err.Error(), "did not agree to HTTP/2")) {
			t.Errorf("a server without h2: %v", err)
		}
		if protos != nil && err != nil {
			t.Errorf("a server with h2: %v", err)
		}
		if conn != nil {
			_ = conn.Close()
		}
		_ = l.Close()
	}
}
