package etcd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestReadyz: a member passes only with 200 OK on /readyz; a 503 (etcd's answer while a check fails), a member that
// does not answer within ReadyzTimeout and one nothing listens for do not pass; each is asked at its own address.
func TestReadyz(t *testing.T) {
	serve := func(h http.HandlerFunc) string {
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s.URL
	}
	release := make(chan struct{})
	defer close(release)
	ready := serve(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	failing := serve(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "[-]linearizable_read failed: etcdserver: leader changed", http.StatusServiceUnavailable)
	})
	hanging := serve(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	down := "http://127.0.0.1:1" // nothing listens there

	got := NewPool().Readyz(context.Background(), "ns/db", []string{ready, failing, hanging, down})
	want := map[string]bool{ready: true, failing: false, hanging: false, down: false}
	for ep, w := range want {
		if got[ep] != w {
			t.Errorf("%s: passed %v, want %v", ep, got[ep], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("answers for %d endpoints, want %d", len(got), len(want))
	}
}
