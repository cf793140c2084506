package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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
