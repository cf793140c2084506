package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// startingProbes answers the kubelet's startup and readiness probes of a member for etcd (`run-etcd
// --probe-listen`), passing each on to etcd's own health endpoint (`/livez`, `/readyz` on its plain metrics
// port). Until an endpoint has passed once in this container, a probe that etcd fails is not answered at once:
// it asks etcd again every askEvery until etcd passes or the probe has waited wait, and answers with that.
//
// Why: the kubelet probes once a period (a second at least), so a member whose etcd came up between two probes
// is seen started up to a second later, and Ready up to a second after that (the readiness probe's first run
// after the startup probe passed often finds etcd live but not yet ready). Every member step (the next member of
// a roll, a learner's successor, Available) waits for that Ready. Answering as soon as etcd passes makes the
// kubelet's view follow etcd's within milliseconds, while its own rules stay: the same period, threshold and
// window, one answer per probe. Once an endpoint has passed, each probe asks etcd once, so a member that stops
// being ready is seen as before.
type startingProbes struct {
	etcd     string // etcd's health base URL, e.g. http://127.0.0.1:2381
	wait     time.Duration
	askEvery time.Duration
	client   *http.Client
	passed   map[string]*atomic.Bool // by path: it has passed once
}

func newStartingProbes(etcd string, wait time.Duration) *startingProbes {
	return &startingProbes{
		etcd:     etcd,
		wait:     wait,
		askEvery: 25 * time.Millisecond,
		// Each ask is bounded by what is left of the wait; this bounds one that the probe's own end does not.
		client: &http.Client{Timeout: 2 * time.Second},
		passed: map[string]*atomic.Bool{"/livez": {}, "/readyz": {}},
	}
}

// ServeHTTP answers GET /livez and /readyz (query kept, as etcd reads `exclude` and `verbose`) with etcd's
// status and body.
func (p *startingProbes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	passed, ok := p.passed[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	ctx := r.Context()
	if !passed.Load() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.wait)
		defer cancel()
	}
	url := p.etcd + r.URL.Path
	if r.URL.RawQuery != "" {
		url += "?" + r.URL.RawQuery
	}
	var (
		status int
		body   []byte
		err    error
	)
	for {
		s, b, askErr := p.ask(ctx, url)
		// An ask cut off by the wait's end says nothing of etcd: etcd's last word stands.
		if askErr == nil || status == 0 || ctx.Err() == nil {
			status, body, err = s, b, askErr
		}
		if status == http.StatusOK {
			passed.Store(true)
		}
		// Asked once (passed before), etcd passed, or the wait is over: answer with its last word.
		if status == http.StatusOK || passed.Load() || ctx.Err() != nil || !p.pause(ctx) {
			break
		}
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("etcd %s: %v", r.URL.Path, err), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// ask is one GET of etcd's endpoint: its status and body, or the error that kept it from answering.
func (p *startingProbes) ask(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, body, nil
}

// pause waits askEvery, and reports false if the wait ended first.
func (p *startingProbes) pause(ctx context.Context) bool {
	t := time.NewTimer(p.askEvery)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
