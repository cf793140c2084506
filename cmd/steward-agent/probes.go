package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// memberProbes answers the kubelet's readiness and liveness probes of a member for etcd (`run-etcd
// --probe-listen`), passing each on to etcd's own health endpoint (`/readyz`, `/livez` on its plain metrics
// port) and answering with etcd's status and body, with two differences while etcd starts in this container:
//
//   - A readiness probe that etcd fails before it has passed once waits for it: it asks etcd again every
//     askEvery until etcd passes or the probe has waited wait, and answers with etcd's last word.
//   - A liveness probe that etcd fails before its /livez has passed once is answered alive for the first grace
//     of the container's life: the part a startup probe played, which the Pod no longer has.
//
// Why: the kubelet probes once a period (a second at least), from tickers that run whatever the container does.
// A restarted or new member's etcd was seen started up to a second after the kubelet noticed its container (the
// startup probe's next tick: the kubelet runs no probe when it notices a container), and Ready up to a second
// after that. Every member step (the next member of a roll, a learner's successor, Available) waits for that
// Ready. Without a startup probe the kubelet runs the readiness probe as soon as it notices the container, and
// the waiting answer makes it pass as soon as etcd does. The periods, thresholds and windows stay, each probe
// gets one answer, and once etcd has passed each probe asks it once, so a member that stops being ready or live is
// seen as before.
type memberProbes struct {
	etcd     string // etcd's health base URL, e.g. http://127.0.0.1:2381
	wait     time.Duration
	grace    time.Duration
	started  time.Time
	now      func() time.Time
	askEvery time.Duration
	client   *http.Client
	ready    atomic.Bool // etcd's /readyz has passed in this container
	live     atomic.Bool // etcd's /livez has passed in this container
}

func newMemberProbes(etcd string, wait, grace time.Duration) *memberProbes {
	return &memberProbes{
		etcd:     etcd,
		wait:     wait,
		grace:    grace,
		started:  time.Now(),
		now:      time.Now,
		askEvery: 25 * time.Millisecond,
		// Each ask is bounded by the probe's own end too; this bounds one that is not.
		client: &http.Client{Timeout: 2 * time.Second},
	}
}

// ServeHTTP answers GET /readyz and /livez (the member's probes ask with no query, and none is passed on).
func (p *memberProbes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/readyz":
		status, body, err := p.askUntilPassed(r.Context(), p.etcd+"/readyz")
		answer(w, r, status, body, err)
	case "/livez":
		// A starting etcd that is slow to answer is starting: answered before the probe's timeout.
		ctx, cancel := p.starting(r.Context(), &p.live)
		defer cancel()
		status, body, err := p.ask(ctx, p.etcd+"/livez")
		if status == http.StatusOK {
			p.live.Store(true)
		} else if since := p.now().Sub(p.started); !p.live.Load() && since < p.grace {
			word := fmt.Sprintf("%d %s", status, body)
			if err != nil {
				word = err.Error()
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			//nolint:gosec // etcd's word, as plain text, for the kubelet's event
			_, _ = fmt.Fprintf(w, "etcd is starting (%s of the %s it may take): %s\n", since.Round(time.Second), p.grace, word)
			return
		}
		answer(w, r, status, body, err)
	default:
		http.NotFound(w, r)
	}
}

// askUntilPassed asks etcd's /readyz once if it has passed before, else until it passes or the wait is over, and
// returns etcd's last word.
func (p *memberProbes) askUntilPassed(ctx context.Context, url string) (int, []byte, error) {
	ctx, cancel := p.starting(ctx, &p.ready)
	defer cancel()
	var (
		status int
		body   []byte
		err    error
		asked  bool
	)
	for {
		s, b, askErr := p.ask(ctx, url)
		// An ask cut off by the wait's end says nothing of etcd: etcd's last word stands.
		if askErr == nil || !asked || ctx.Err() == nil {
			status, body, err, asked = s, b, askErr, true
		}
		if status == http.StatusOK {
			p.ready.Store(true)
		}
		if status == http.StatusOK || p.ready.Load() || ctx.Err() != nil || !p.pause(ctx) {
			return status, body, err
		}
	}
}

// starting bounds a probe's asks by the wait until the endpoint has passed once; after that, by the probe alone.
func (p *memberProbes) starting(ctx context.Context, passed *atomic.Bool) (context.Context, context.CancelFunc) {
	if passed.Load() {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, p.wait)
}

// answer writes etcd's word: its status and body, or 503 with what kept it from answering.
func answer(w http.ResponseWriter, r *http.Request, status int, body []byte, err error) {
	if err != nil {
		http.Error(w, fmt.Sprintf("etcd %s: %v", r.URL.Path, err), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body) //nolint:gosec // etcd's word, as plain text, for the kubelet's event
}

// ask is one GET of etcd's endpoint: its status and body, or the error that kept it from answering.
func (p *memberProbes) ask(ctx context.Context, url string) (int, []byte, error) {
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
func (p *memberProbes) pause(ctx context.Context) bool {
	t := time.NewTimer(p.askEvery)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
