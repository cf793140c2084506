package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeEtcdHealth stands in for etcd's health endpoints: it fails the first failures asks of each path with 503
// (or never passes if failures < 0) and counts the asks.
type fakeEtcdHealth struct {
	failures atomic.Int64
	asks     atomic.Int64
}

func (f *fakeEtcdHealth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, failures := f.asks.Add(1), f.failures.Load()
	if failures < 0 || n <= failures {
		http.Error(w, "[-]raft not ready: "+r.URL.RawQuery, http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok " + r.URL.RawQuery))
}

// TestStartingProbes: a probe of an etcd that has not passed yet waits for it and answers with its word (passing
// as soon as etcd passes, failing with etcd's status and body when the wait is over); once passed, each probe asks
// etcd once, so a member that stops being ready is seen as before.
func TestStartingProbes(t *testing.T) {
	tests := map[string]struct {
		failures   int64
		wait       time.Duration
		path       string
		wantStatus int
		wantBody   string
		wantAsks   int64 // 0: more than one, not counted
	}{
		"etcd passes after a few asks: the probe passes":    {failures: 3, wait: time.Minute, path: "/readyz", wantStatus: 200, wantBody: "ok", wantAsks: 4},
		"etcd passes at once: asked once":                   {failures: 0, wait: time.Minute, path: "/livez", wantStatus: 200, wantBody: "ok", wantAsks: 1},
		"etcd never passes: its failure when the wait ends": {failures: -1, wait: 100 * time.Millisecond, path: "/readyz", wantStatus: 503, wantBody: "raft not ready"},
		"the query goes to etcd":                            {failures: 0, wait: time.Minute, path: "/readyz?exclude=data_corruption", wantStatus: 200, wantBody: "ok exclude=data_corruption", wantAsks: 1},
		"another path is not etcd's to answer":              {failures: 0, wait: time.Minute, path: "/metrics", wantStatus: 404, wantAsks: -1},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			etcd := &fakeEtcdHealth{}
			etcd.failures.Store(tt.failures)
			backend := httptest.NewServer(etcd)
			defer backend.Close()
			p := newStartingProbes(backend.URL, tt.wait)
			p.askEvery = time.Millisecond
			rec := httptest.NewRecorder()
			p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
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

// TestStartingProbesAfterPassing: once an endpoint has passed in this container, a failing etcd is answered
// after one ask, without waiting, and the other endpoint still waits for its first pass.
func TestStartingProbesAfterPassing(t *testing.T) {
	etcd := &fakeEtcdHealth{}
	backend := httptest.NewServer(etcd)
	defer backend.Close()
	p := newStartingProbes(backend.URL, time.Minute)
	p.askEvery = time.Millisecond
	probe := func(path string) int {
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	if code := probe("/readyz"); code != 200 {
		t.Fatalf("first probe %d, want 200", code)
	}
	etcd.failures.Store(-1)
	etcd.asks.Store(0)
	if code := probe("/readyz"); code != 503 || etcd.asks.Load() != 1 {
		t.Errorf("after passing: %d after %d asks, want 503 after 1", code, etcd.asks.Load())
	}
	p.wait = 50 * time.Millisecond
	if code := probe("/livez"); code != 503 || etcd.asks.Load() < 3 {
		t.Errorf("/livez, not passed yet: %d after %d asks in all, want 503 after waiting", code, etcd.asks.Load())
	}
}
