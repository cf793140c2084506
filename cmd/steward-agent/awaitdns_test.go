package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// cachingDNS is a name server in front of a cache that keeps every negative answer for ever, by name and type, as
// the cluster DNS does for its TTL: a name asked for before it exists stays "no such host" for that type.
type cachingDNS struct {
	addr string

	mu       sync.Mutex
	appear   map[string]time.Time // when each name gets its record
	negative map[string]bool      // name/type answered NXDOMAIN
	asked    map[dnsmessage.Type]int
	reused   []string         // a name/type asked again after a negative answer
	rcode    dnsmessage.RCode // when set, the answer to everything
}

func newCachingDNS(t *testing.T, appear map[string]time.Duration) *cachingDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	s := &cachingDNS{addr: pc.LocalAddr().String(), appear: map[string]time.Time{}, negative: map[string]bool{}, asked: map[dnsmessage.Type]int{}}
	now := time.Now()
	for n, d := range appear {
		s.appear[n] = now.Add(d)
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			reply := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, RCode: s.answer(q)})
			_ = reply.StartQuestions()
			_ = reply.Question(q)
			out, _ := reply.Finish()
			_, _ = pc.WriteTo(out, from)
		}
	}()
	return s
}

func (s *cachingDNS) answer(q dnsmessage.Question) dnsmessage.RCode {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := strings.TrimSuffix(q.Name.String(), ".")
	key := name + "/" + q.Type.String()
	s.asked[q.Type]++
	if s.rcode != 0 {
		return s.rcode
	}
	if s.negative[key] {
		s.reused = append(s.reused, key)
		return dnsmessage.RCodeNameError
	}
	if at, ok := s.appear[name]; ok && !time.Now().Before(at) {
		return dnsmessage.RCodeSuccess
	}
	s.negative[key] = true
	return dnsmessage.RCodeNameError
}

func TestWaitForNamesNeverMeetsItsOwnNegativeAnswers(t *testing.T) {
	names := []string{"m-a.db-peer.ns.svc.cluster.local", "m-b.db-peer.ns.svc.cluster.local", "m-c.db-peer.ns.svc.cluster.local"}
	s := newCachingDNS(t, map[string]time.Duration{names[0]: 0, names[1]: 300 * time.Millisecond, names[2]: 700 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	begin := time.Now()
	if err := waitForNames(ctx, s.addr, names, 20*time.Millisecond); err != nil {
		t.Fatalf("waitForNames: %v", err)
	}
	if took := time.Since(begin); took < 700*time.Millisecond {
		t.Errorf("returned after %s, before the last name had a record", took)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reused) > 0 {
		t.Errorf("asked again for a name and type answered NXDOMAIN (a cache would answer from it): %v", s.reused)
	}
	for _, typ := range []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA} {
		if s.asked[typ] > 0 {
			t.Errorf("asked %d times for %s records, which etcd's lookups would then find cached", s.asked[typ], typ)
		}
	}
	for typ := range s.asked {
		if typ < 65280 || typ > 65534 {
			t.Errorf("asked for type %d, outside the private-use range", typ)
		}
	}
}

func TestWaitForNamesGivesUpNamingWhatIsMissing(t *testing.T) {
	s := newCachingDNS(t, map[string]time.Duration{"m-a.x": 0})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := waitForNames(ctx, s.addr, []string{"m-a.x", "m-gone.x"}, 20*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "1 not found: m-gone.x") {
		t.Fatalf("waitForNames = %v, want it to name m-gone.x", err)
	}
}

// A name server that refuses unknown record types ends the wait at once instead of holding etcd for the timeout.
func TestWaitForNamesStopsAtAServerThatCannotAnswer(t *testing.T) {
	s := newCachingDNS(t, nil)
	s.mu.Lock()
	s.rcode = dnsmessage.RCodeNotImplemented
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	begin := time.Now()
	err := waitForNames(ctx, s.addr, []string{"m-a.x"}, 20*time.Millisecond)
	if !errors.Is(err, errUnanswerable) || time.Since(begin) > 2*time.Second {
		t.Fatalf("waitForNames = %v after %s, want errUnanswerable at once", err, time.Since(begin))
	}
}

func TestNameServer(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ conf, want string }{
		{"search ns.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n", "10.96.0.10:53"},
		{"nameserver fd00::a\nnameserver 10.0.0.1\n", "[fd00::a]:53"},
		{"search x\n", ""},
	} {
		p := filepath.Join(dir, "resolv.conf")
		if err := os.WriteFile(p, []byte(tt.conf), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := nameServer(p)
		if got != tt.want || (tt.want == "") != (err != nil) {
			t.Errorf("nameServer(%q) = %q, %v; want %q", tt.conf, got, err, tt.want)
		}
	}
}

// A restarted member (a member in its data dir) and a missing name server never hold etcd back.
func TestAwaitDNSNeverBlocksAStart(t *testing.T) {
	data := t.TempDir()
	if err := os.MkdirAll(filepath.Join(data, "member", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if code := awaitDNS([]string{"--data-dir=" + data, "--host=m-gone.x", "--resolv-conf=/nonexistent", "--timeout=1m"}); code != 0 {
		t.Errorf("exit %d for a restart", code)
	}
	if code := awaitDNS([]string{"--data-dir=" + t.TempDir(), "--host=m-gone.x", "--resolv-conf=/nonexistent", "--timeout=1m"}); code != 0 {
		t.Errorf("exit %d without a name server", code)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("took %s", took)
	}
}

// With --install-to the agent is installed before anything else, also for a restart that waits for nothing, and
// a failed install fails the container (etcd's entrypoint would be missing), unlike any failure of the wait.
func TestAwaitDNSInstallsFirst(t *testing.T) {
	restarted := t.TempDir()
	if err := os.MkdirAll(filepath.Join(restarted, "member", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "steward-agent")
	if code := awaitDNS([]string{"--data-dir=" + restarted, "--host=m-gone.x", "--resolv-conf=/nonexistent", "--install-to=" + to}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if fi, err := os.Stat(to); err != nil || fi.Mode()&0o111 == 0 || fi.Size() == 0 {
		t.Fatalf("agent not installed at %s: %v, %v", to, fi, err)
	}
	if code := awaitDNS([]string{"--data-dir=" + restarted, "--install-to=" + filepath.Join(t.TempDir(), "missing", "steward-agent")}); code == 0 {
		t.Error("exit 0 although the agent could not be installed")
	}
}
