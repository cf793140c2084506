package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakeEtcdHealth stands in for etcd's health endpoints: it fails the first `failures` asks with 503 (every ask if
// failures < 0, after 200 ms if -3) and counts the asks.
type fakeEtcdHealth struct {
	failures atomic.Int64
	asks     atomic.Int64
}

func (f *fakeEtcdHealth) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	n, failures := f.asks.Add(1), f.failures.Load()
	if failures == -3 { // slow: answers after the probe's wait
		time.Sleep(200 * time.Millisecond)
	}
	if failures < 0 || n <= failures {
		http.Error(w, "[-]raft not ready", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

func probeOnce(p *memberProbes, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

// TestMemberProbes: a readiness probe of an etcd that has not passed yet waits for it and answers with its word
// (passing as soon as etcd passes, failing with etcd's status and body when the wait is over); a liveness probe
// of an etcd that has not passed yet is answered alive within the start grace, and by etcd after it.
func TestMemberProbes(t *testing.T) {
	tests := map[string]struct {
		failures   int64
		wait       time.Duration
		startedAgo time.Duration
		path       string
		wantStatus int
		wantBody   string
		wantAsks   int64 // -1: none; 0: more than one
	}{
		"ready after a few asks: passes":                {failures: 3, wait: time.Minute, path: "/readyz", wantStatus: 200, wantBody: "ok", wantAsks: 4},
		"ready at once: asked once":                     {failures: 0, wait: time.Minute, path: "/readyz", wantStatus: 200, wantBody: "ok", wantAsks: 1},
		"never ready: its failure when the wait ends":   {failures: -1, wait: time.Second, path: "/readyz", wantStatus: 503, wantBody: "raft not ready"},
		"live: passes, asked once":                      {failures: 0, path: "/livez", wantStatus: 200, wantBody: "ok", wantAsks: 1},
		"not live yet, starting: alive, asked once":     {failures: -1, startedAgo: time.Minute, path: "/livez", wantStatus: 200, wantBody: "etcd is starting (1m0s of the 5m0s", wantAsks: 1},
		"not live after the grace: etcd's failure":      {failures: -1, startedAgo: 6 * time.Minute, path: "/livez", wantStatus: 503, wantBody: "raft not ready", wantAsks: 1},
		"slow to answer, starting: alive":               {failures: -3, wait: 50 * time.Millisecond, startedAgo: time.Second, path: "/livez", wantStatus: 200, wantBody: "context deadline exceeded", wantAsks: 1},
		"another path is not etcd's to answer":          {failures: 0, path: "/metrics", wantStatus: 404, wantAsks: -1},
		"etcd is not listening yet, starting: alive":    {failures: -2, startedAgo: time.Second, path: "/livez", wantStatus: 200, wantBody: "connection refused", wantAsks: -1},
		"etcd is not listening when the wait ends: 503": {failures: -2, wait: time.Second, path: "/readyz", wantStatus: 503, wantBody: "connection refused", wantAsks: -1},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			etcd := &fakeEtcdHealth{}
			etcd.failures.Store(tt.failures)
			backend := httptest.NewServer(etcd)
			url := backend.URL
			if tt.failures == -2 {
				backend.Close() // nothing listens there any more
			} else {
				defer backend.Close()
			}
			wait := tt.wait
			if wait == 0 {
				wait = time.Minute
			}
			p := newMemberProbes(url, wait, 5*time.Minute)
			p.askEvery = time.Millisecond
			now := p.started.Add(tt.startedAgo)
			p.now = func() time.Time { return now }
			rec := probeOnce(p, tt.path)
			if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("answered %d %q, want %d with %q", rec.Code, rec.Body.String(), tt.wantStatus, tt.wantBody)
			}
			switch asks := etcd.asks.Load(); {
			case tt.wantAsks > 0 && asks != tt.wantAsks:
				t.Errorf("asked etcd %d times, want %d", asks, tt.wantAsks)
			case tt.wantAsks < 0 && asks != 0:
				t.Errorf("asked etcd %d times, want none", asks)
			case tt.wantAsks == 0 && asks < 2:
				t.Errorf("asked etcd %d times, want it asked again while waiting", asks)
			}
		})
	}
}

// TestMemberProbesAfterPassing: once etcd has passed in this container, a failing etcd is answered at once
// with its failure, for readiness without waiting and for liveness within the start grace too; each endpoint
// goes by its own first pass.
func TestMemberProbesAfterPassing(t *testing.T) {
	etcd := &fakeEtcdHealth{}
	backend := httptest.NewServer(etcd)
	defer backend.Close()
	p := newMemberProbes(backend.URL, time.Minute, 5*time.Minute)
	p.askEvery = time.Millisecond
	if rec := probeOnce(p, "/readyz"); rec.Code != 200 {
		t.Fatalf("first readiness probe %d, want 200", rec.Code)
	}
	etcd.failures.Store(-1)
	etcd.asks.Store(0)
	if rec := probeOnce(p, "/readyz"); rec.Code != 503 || etcd.asks.Load() != 1 {
		t.Errorf("readiness after passing: %d after %d asks, want 503 after 1", rec.Code, etcd.asks.Load())
	}
	if rec := probeOnce(p, "/livez"); rec.Code != 200 || !strings.Contains(rec.Body.String(), "starting") {
		t.Errorf("liveness not passed yet, in the grace: %d %q, want alive (starting)", rec.Code, rec.Body.String())
	}
	etcd.failures.Store(0)
	etcd.asks.Store(0)
	if rec := probeOnce(p, "/livez"); rec.Code != 200 {
		t.Fatalf("liveness %d, want 200", rec.Code)
	}
	etcd.failures.Store(-1)
	if rec := probeOnce(p, "/livez"); rec.Code != 503 {
		t.Errorf("liveness after passing, in the grace: %d %q, want etcd's 503", rec.Code, rec.Body.String())
	}
}

// TestRunEtcdAnswersProbes runs `run-etcd --probe-listen` around a real etcd (integration: the test bed's cached
// release), the way a member's container does, and probes it as the kubelet would through its start (nothing
// listening yet, then etcd up), a wedge (SIGSTOP) and etcd's end.
func TestRunEtcdAnswersProbes(t *testing.T) {
	bin := etcdBin(t)
	dir := t.TempDir()
	dataDir, pidFile := filepath.Join(dir, "data"), filepath.Join(dir, "pid")
	probes, metrics := "127.0.0.1:"+port(t), "http://127.0.0.1:"+port(t)
	peer, client := "http://127.0.0.1:"+port(t), "http://127.0.0.1:"+port(t)
	// The shell records etcd's PID (exec keeps it) and holds etcd back a while: a slow start, nothing listening.
	script := fmt.Sprintf("echo $$ > %s; sleep 1.5; exec %s --name=m --data-dir=%s --listen-peer-urls=%s "+
		"--initial-advertise-peer-urls=%s --initial-cluster=m=%s --listen-client-urls=%s --advertise-client-urls=%s "+
		"--listen-metrics-urls=%s --log-level=error", pidFile, filepath.Join(bin, "etcd"), dataDir, peer, peer, peer,
		client, client, metrics)
	exited := make(chan int, 1)
	t.Cleanup(func() { // etcd must not outlive a failed test
		if raw, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	go func() {
		exited <- runEtcd([]string{"--guard-data-dir=" + dataDir, "--guard-mark=" + filepath.Join(dir, "mark"),
			"--probe-listen=" + probes, "--probe-etcd=" + metrics, "--probe-start-grace=1m", "--", "sh", "-c", script})
	}()
	kubelet := &http.Client{Timeout: 2 * time.Second} // the members' probes' timeout
	probe := func(path string) (int, string) {
		resp, err := kubelet.Get("http://" + probes + path)
		if err != nil {
			return 0, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 30s", what)
			}
		}
	}
	var status int
	var body string
	eventually("answer to a liveness probe", func() bool { status, body = probe("/livez"); return status != 0 })
	if _, err := os.Stat(filepath.Join(dataDir, "member")); err == nil {
		t.Skip("etcd started before the first probe; the start was not seen")
	}
	if status != 200 || !strings.Contains(body, "etcd is starting") {
		t.Errorf("liveness while etcd starts: %d %q, want alive, starting", status, body)
	}
	if status, body = probe("/readyz"); status != 503 {
		t.Errorf("readiness while nothing listens: %d %q, want 503", status, body)
	}
	eventually("passing readiness probe", func() bool { status, body = probe("/readyz"); return status == 200 })
	if status, body = probe("/livez"); status != 200 || strings.Contains(body, "starting") {
		t.Errorf("liveness of a started etcd: %d %q, want etcd's own pass", status, body)
	}
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	etcdProcess, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := etcdProcess.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// kill(2) returns before every thread has stopped: a probe in that moment was answered by etcd (flakes.md).
	eventually("every thread of etcd stopped", func() bool { return allThreadsStopped(pid) })
	for _, path := range []string{"/livez", "/readyz"} {
		if status, body = probe(path); status == 200 {
			t.Errorf("%s of a stopped etcd: %d %q, want a failure", path, status, body)
		}
	}
	if err := etcdProcess.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually("passing liveness probe after SIGCONT", func() bool { status, _ = probe("/livez"); return status == 200 })
	if err := etcdProcess.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 128+int(syscall.SIGKILL) {
			t.Errorf("run-etcd exited %d, want etcd's SIGKILL (137)", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run-etcd did not exit with etcd")
	}
	if status, body = probe("/livez"); status != 0 {
		t.Errorf("liveness after etcd's end: %d %q, want no answer (the container ends)", status, body)
	}
}

// allThreadsStopped: every thread of process pid is in the stopped state ('T' in /proc/PID/task/TID/stat).
func allThreadsStopped(pid int) bool {
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if len(stats) == 0 {
		return false
	}
	for _, f := range stats {
		raw, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		// The state follows the command name in parentheses, which may itself hold spaces or parentheses.
		rest := string(raw[strings.LastIndexByte(string(raw), ')')+1:])
		if fields := strings.Fields(rest); len(fields) == 0 || fields[0] != "T" {
			return false
		}
	}
	return true
}
