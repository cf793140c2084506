package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// silentListener accepts connections (the kernel does, into the backlog) and never reads them: etcd between
// opening its peer listener and serving on it.
func silentListener(t *testing.T) (string, net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return "https://" + ln.Addr().String(), ln
}

func absentPeer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there any more
	return "https://" + addr
}

// TestPeerStateOf tells the three states of a peer's port apart: refused, silent, answering (a TLS server
// answers the plain line, as a plain one would).
func TestPeerStateOf(t *testing.T) {
	silent, _ := silentListener(t)
	tlsServer := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsServer.Close()
	plainServer := httptest.NewServer(http.NotFoundHandler())
	defer plainServer.Close()
	for name, tt := range map[string]struct {
		url  string
		want peerState
	}{
		"nothing listens":          {absentPeer(t), peerAbsent},
		"a name that resolves not": {"https://peer.invalid:2380", peerAbsent},
		"not a URL":                {"::", peerAbsent},
		"listening, silent":        {silent, peerBootstrapping},
		"a TLS server answers":     {tlsServer.URL, peerServing},
		"a plain server answers":   {plainServer.URL, peerServing},
	} {
		t.Run(name, func(t *testing.T) {
			// A second: a loaded machine's server answers well within it, and only the silent case waits it out.
			if got := peerStateOf(tt.url, time.Second); got != tt.want {
				t.Errorf("peerStateOf(%s) = %s, want %s", tt.url, got, tt.want)
			}
		})
	}
}

// TestAwaitPeersBootstrapped: a first start goes at once when every member ranked before it serves, waits while
// one is absent or in its bootstrap and goes once it serves, and goes anyway when the limit is reached.
func TestAwaitPeersBootstrapped(t *testing.T) {
	server := httptest.NewTLSServer(http.NotFoundHandler())
	defer server.Close()
	if got := awaitPeersBootstrapped(nil, time.Minute, time.Millisecond); got != "" {
		t.Errorf("no peers: %q, want no wait", got)
	}
	if got := awaitPeersBootstrapped([]string{server.URL}, time.Minute, time.Millisecond); got != "" {
		t.Errorf("peers serving: %q, want no wait", got)
	}
	silent, _ := silentListener(t)
	absent := absentPeer(t)
	for peer, state := range map[string]peerState{silent: peerBootstrapping, absent: peerAbsent} {
		got := awaitPeersBootstrapped([]string{server.URL, peer}, 300*time.Millisecond, time.Millisecond)
		if want := fmt.Sprintf("%s (%s)", peer, state); !strings.Contains(got, "not serving after") || !strings.Contains(got, want) {
			t.Errorf("a peer %s throughout: %q, want the limit reached, naming it as %q", state, got, want)
		}
	}
	// Peers that start serving while the member waits: etcd leaving its bootstrap, and one that had not opened its
	// listener yet.
	leaving, ln := silentListener(t)
	coming := absentPeer(t)
	go func() {
		time.Sleep(200 * time.Millisecond)
		server := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
		_ = server.Serve(ln)
	}()
	go func() {
		time.Sleep(100 * time.Millisecond)
		ln, err := net.Listen("tcp", strings.TrimPrefix(coming, "https://"))
		if err != nil {
			return // the port was taken in between: the wait then ends at the limit, which the test reports
		}
		t.Cleanup(func() { _ = ln.Close() })
		server := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
		_ = server.Serve(ln)
	}()
	if got := awaitPeersBootstrapped([]string{leaving, coming}, 10*time.Second, time.Millisecond); !strings.Contains(got, "serve after") {
		t.Errorf("peers that start serving: %q, want the wait to end when they serve", got)
	}
}
