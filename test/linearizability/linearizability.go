// Package linearizability drives concurrent etcd clients while an operation runs and then judges what they saw:
// the history of reads and writes on a few shared keys must be linearizable (checked with porcupine), and every
// write etcd acknowledged must still be readable afterwards. It is a test helper for the e2e scenarios; it
// talks to etcd only through its client API.
package linearizability

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Config sets up a load.
type Config struct {
	// Endpoints clients connect to, typically the client Service.
	Endpoints []string
	// Clients is the number of concurrent clients (default 4).
	Clients int
	// SharedKeys is the number of keys all clients read and write (default 4).
	SharedKeys int
	// OpTimeout bounds each request (default 2s).
	OpTimeout time.Duration
	// Interval is the least time from one operation's start to the next one's, per client (default
	// DefaultInterval; negative: back to back, as fast as the cluster answers).
	Interval time.Duration
	// TLS for clusters that require it (nil: plaintext).
	TLS *tls.Config
	// Username and Password: the etcd user the clients authenticate as, for clusters that enforce
	// authentication (empty: none; while auth is off etcd takes any).
	Username, Password string
	// Prefix of every key the load writes (default "lin/"). The model starts from empty keys, so a second load on
	// the same cluster needs a prefix of its own.
	Prefix string
	// Alternates are further ways to reach the same cluster, as a client that knows its cluster is switching
	// between plaintext and TLS would hold them: after a failed operation a client moves on to the next way.
	// Verify reads back through whichever answers.
	Alternates []Target
}

// Target is one way to reach the cluster. TLSFrom, when set, gives TLS on first use (a certificate that is only
// issued once the switch to TLS has begun).
type Target struct {
	Endpoints []string
	TLS       *tls.Config
	TLSFrom   func() (*tls.Config, error)
	// Username and Password as in Config.
	Username, Password string
}

func (t Target) dial() (*clientv3.Client, error) {
	cfg := t.TLS
	if cfg == nil && t.TLSFrom != nil {
		var err error
		if cfg, err = t.TLSFrom(); err != nil {
			return nil, err
		}
	}
	return newClient(t.Endpoints, cfg, t.Username, t.Password)
}

func (c Config) targets() []Target {
	return append([]Target{{Endpoints: c.Endpoints, TLS: c.TLS, Username: c.Username, Password: c.Password}}, c.Alternates...)
}

// input and output are one operation on a shared key, as porcupine sees it.
type input struct {
	put   bool
	key   string
	value string
}

type output struct {
	value string
}

// Load is a running set of clients.
type Load struct {
	cfg     Config
	start   time.Time
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	history []porcupine.Operation
	// acked are the ledger writes etcd acknowledged: each to its own key, so each must survive exactly.
	acked  map[string]string
	failed int
	ops    int
	client []*clientv3.Client
	// succeeded are the times of successful operations, for the longest stretch without one.
	succeeded []int64
}

// Start begins the load; Stop ends it and Verify judges it.
func Start(cfg Config) (*Load, error) {
	if cfg.Clients == 0 {
		cfg.Clients = 4
	}
	if cfg.SharedKeys == 0 {
		cfg.SharedKeys = 4
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "lin/"
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = 2 * time.Second
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Load{cfg: cfg, start: time.Now(), cancel: cancel, acked: map[string]string{}}
	for i := 0; i < cfg.Clients; i++ {
		c, err := cfg.targets()[0].dial()
		if err != nil {
			l.Stop()
			return nil, fmt.Errorf("client %d: %w", i, err)
		}
		l.mu.Lock()
		l.client = append(l.client, c)
		l.mu.Unlock()
		l.wg.Add(1)
		go l.run(ctx, i, c)
	}
	return l, nil
}

func (l *Load) now() int64 { return time.Since(l.start).Nanoseconds() }

func (l *Load) run(ctx context.Context, id int, first *clientv3.Client) {
	defer l.wg.Done()
	rng := rand.New(rand.NewSource(int64(id) + 1)) //nolint:gosec // test load, not security
	targets := l.cfg.targets()
	cs := make([]*clientv3.Client, len(targets))
	cs[0] = first
	next := time.Now()
	for n, cur := 0, 0; ctx.Err() == nil; n++ {
		if l.cfg.Interval > 0 {
			if !sleepUntil(ctx, next) {
				return
			}
			next = next.Add(l.cfg.Interval)
			if now := time.Now(); next.Before(now) {
				next = now // behind (a slow answer): no burst to catch up
			}
		}
		i := cur % len(cs)
		if cs[i] == nil {
			c, err := targets[i].dial()
			if err != nil {
				cur++
				time.Sleep(100 * time.Millisecond)
				continue
			}
			l.mu.Lock()
			l.client = append(l.client, c)
			l.mu.Unlock()
			cs[i] = c
		}
		c := cs[i]
		var err error
		key := fmt.Sprintf("%sshared/%d", l.cfg.Prefix, rng.Intn(l.cfg.SharedKeys))
		value := fmt.Sprintf("c%d-%d", id, n)
		switch rng.Intn(3) {
		case 0: // shared write
			err = l.do(ctx, id, input{put: true, key: key, value: value}, func(rctx context.Context) (output, error) {
				_, err := c.Put(rctx, key, value)
				return output{}, err
			})
		case 1: // shared read
			err = l.do(ctx, id, input{key: key}, func(rctx context.Context) (output, error) {
				resp, err := c.Get(rctx, key)
				if err != nil || len(resp.Kvs) == 0 {
					return output{}, err
				}
				return output{value: string(resp.Kvs[0].Value)}, nil
			})
		default: // ledger write to a key of its own
			ledger := fmt.Sprintf("%sledger/%d/%d", l.cfg.Prefix, id, n)
			rctx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
			_, err = c.Put(rctx, ledger, value)
			cancel()
			l.mu.Lock()
			l.ops++
			if err == nil {
				l.acked[ledger] = value
				l.succeeded = append(l.succeeded, l.now())
			} else {
				l.failed++
			}
			l.mu.Unlock()
		}
		if err != nil {
			cur++
		}
	}
}

// DefaultInterval paces each client to at most 25 operations a second (100 for the default 4 clients, a third of
// them acknowledged writes): a steady stream through every membership, version and TLS change a test makes, as
// applications give a cluster, and not a flood. The four clients still overlap in every step; what a faster pace
// adds is CPU, which three tests and their clusters share on the suite's two cores (the loads and the etcd work
// they cause were about half of the machine at 40 a second per client), and the tests beside them, and the
// operator under test, wait for it.
const DefaultInterval = 40 * time.Millisecond

// sleepUntil waits until t, and reports false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// do runs one shared-key operation and records it. A write whose outcome is unknown (error, timeout) may take
// effect at any later time, so it is recorded as never returning; a failed read tells nothing and is dropped.
func (l *Load) do(ctx context.Context, id int, in input, op func(context.Context) (output, error)) error {
	rctx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
	defer cancel()
	call := l.now()
	out, err := op(rctx)
	ret := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops++
	if err != nil {
		l.failed++
		if !in.put {
			return err
		}
		ret = math.MaxInt64
	} else {
		l.succeeded = append(l.succeeded, ret)
	}
	l.history = append(l.history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
	return err
}

// Stop ends the load and waits for the clients.
func (l *Load) Stop() {
	l.cancel()
	l.wg.Wait()
}

// Result is what Verify found.
type Result struct {
	Ops, Failed int
	// Acked is the number of acknowledged ledger writes; Lost of those were not readable afterwards.
	Acked, Lost int
	// Linearizable is porcupine's verdict on the shared-key history: Ok, Illegal or Unknown (timed out).
	Linearizable porcupine.CheckResult
	LostKeys     []string
	// LongestGap is the longest stretch in which no client's operation succeeded (a measurement to report, not
	// to assert on).
	LongestGap time.Duration
	// CheckTime is how long porcupine took, and CheckWait how long the check waited for another to finish.
	CheckTime, CheckWait time.Duration
	// Unobserved is how many writes of unknown outcome whose value no read returned were left out of the check
	// (see withoutUnobservedWrites).
	Unobserved int
}

// checking lets one porcupine check run at a time in a process. A check keeps up to one core per shared key busy
// for as long as a minute; in the parallel e2e tier, the clusters other tests hold under load need that CPU more
// than a finished test needs its verdict early.
var checking = make(chan struct{}, 1)

func (r Result) String() string {
	return fmt.Sprintf("%d ops (%d failed), %d acknowledged ledger writes, %d lost, linearizability %s (checked in %s after waiting %s; %d unobserved writes of unknown outcome left out), longest stretch without a successful operation %s",
		r.Ops, r.Failed, r.Acked, r.Lost, r.Linearizable, r.CheckTime.Round(time.Millisecond), r.CheckWait.Round(time.Millisecond), r.Unobserved, r.LongestGap.Round(time.Millisecond))
}

// Verify stops the load if running, reads back every acknowledged write and checks the history.
func (l *Load) Verify(ctx context.Context) (Result, error) {
	l.Stop()
	defer func() {
		for _, c := range l.client {
			_ = c.Close()
		}
	}()
	res := Result{Ops: l.ops, Failed: l.failed, Acked: len(l.acked), LongestGap: longestGap(l.succeeded)}
	// A fresh connection: a load client may still hold one to a member that was cut off or removed.
	c, err := l.answering(ctx)
	if err != nil {
		return res, err
	}
	defer func() { _ = c.Close() }()
	for key, want := range l.acked {
		var got string
		err := retry(ctx, func(rctx context.Context) error {
			resp, err := c.Get(rctx, key)
			if err != nil {
				return err
			}
			got = ""
			if len(resp.Kvs) == 1 {
				got = string(resp.Kvs[0].Value)
			}
			return nil
		})
		if err != nil {
			return res, fmt.Errorf("read back %s: %w", key, err)
		}
		if got != want {
			res.Lost++
			res.LostKeys = append(res.LostKeys, key)
		}
	}
	waiting := time.Now()
	select {
	case checking <- struct{}{}:
	case <-ctx.Done():
		return res, fmt.Errorf("wait for another linearizability check: %w", ctx.Err())
	}
	defer func() { <-checking }()
	began := time.Now()
	res.CheckWait = began.Sub(waiting)
	history, unobserved := withoutUnobservedWrites(l.history)
	res.Unobserved = unobserved
	res.Linearizable = porcupine.CheckOperationsTimeout(Model(), history, time.Minute)
	res.CheckTime = time.Since(began)
	return res, nil
}

// withoutUnobservedWrites leaves out the writes of unknown outcome (they never returned) whose value no read
// returned. Values are unique, so such a write either never took effect or was overwritten before anyone read
// it: in both cases it changes nothing a read saw, and the history is linearizable with it exactly when it is
// without it. Acknowledged writes always stay. Without this, every write that failed during an outage stays a
// pending operation that may take effect at any time, and porcupine's search grows exponentially with them (a
// minute of quorum loss under load left hundreds and made the check time out).
func withoutUnobservedWrites(history []porcupine.Operation) ([]porcupine.Operation, int) {
	read := map[string]bool{}
	for _, op := range history {
		if in := op.Input.(input); !in.put {
			read[in.key+"\x00"+op.Output.(output).value] = true
		}
	}
	kept := make([]porcupine.Operation, 0, len(history))
	for _, op := range history {
		if in := op.Input.(input); in.put && op.Return == math.MaxInt64 && !read[in.key+"\x00"+in.value] {
			continue
		}
		kept = append(kept, op)
	}
	return kept, len(history) - len(kept)
}

// answering returns a new client through a target that answers a read, trying them in turn.
func (l *Load) answering(ctx context.Context) (*clientv3.Client, error) {
	var clients []*clientv3.Client
	defer func() {
		for _, c := range clients {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	for _, target := range l.cfg.targets() {
		c, err := target.dial()
		if err != nil {
			continue
		}
		clients = append(clients, c)
	}
	var last error
	for attempt := 0; attempt < 20; attempt++ {
		for i, c := range clients {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := c.Get(rctx, "lin/probe")
			cancel()
			if err == nil {
				clients[i] = nil // kept open for the caller
				return c, nil
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("no way to reach the cluster answers: %w", last)
}

// longestGap is the longest time between two successes (times in ns, in any order).
func longestGap(times []int64) time.Duration {
	sorted := append([]int64(nil), times...)
	slices.Sort(sorted)
	var gap int64
	for i := 1; i < len(sorted); i++ {
		gap = max(gap, sorted[i]-sorted[i-1])
	}
	return time.Duration(gap)
}

// newClient dials with keepalives, so a client whose connection goes to a member that vanished from the network
// notices within seconds and reconnects, as a production client would.
func newClient(endpoints []string, tlsConfig *tls.Config, username, password string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, DialKeepAliveTime: 2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second, Logger: zap.NewNop(), TLS: tlsConfig, Username: username, Password: password})
}

func retry(ctx context.Context, f func(context.Context) error) error {
	var err error
	for i := 0; i < 20; i++ {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = f(rctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return err
}

// Model is a register per key: a put sets it, a get returns it (empty when never written).
func Model() porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			for _, op := range history {
				k := op.Input.(input).key
				byKey[k] = append(byKey[k], op)
			}
			var out [][]porcupine.Operation
			for _, ops := range byKey {
				out = append(out, ops)
			}
			return out
		},
		Init: func() any { return "" },
		Step: func(state, in, out any) (bool, any) {
			i := in.(input)
			if i.put {
				return true, i.value
			}
			return out.(output).value == state.(string), state
		},
		DescribeOperation: func(in, out any) string {
			i := in.(input)
			if i.put {
				return fmt.Sprintf("put(%s, %s)", i.key, i.value)
			}
			return fmt.Sprintf("get(%s) -> %q", i.key, out.(output).value)
		},
	}
}
