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
	// TLS for clusters that require it (nil: plaintext).
	TLS *tls.Config
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
}

// Start begins the load; Stop ends it and Verify judges it.
func Start(cfg Config) (*Load, error) {
	if cfg.Clients == 0 {
		cfg.Clients = 4
	}
	if cfg.SharedKeys == 0 {
		cfg.SharedKeys = 4
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = 2 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Load{cfg: cfg, start: time.Now(), cancel: cancel, acked: map[string]string{}}
	for i := 0; i < cfg.Clients; i++ {
		c, err := newClient(cfg.Endpoints, cfg.TLS)
		if err != nil {
			l.Stop()
			return nil, fmt.Errorf("client %d: %w", i, err)
		}
		l.client = append(l.client, c)
		l.wg.Add(1)
		go l.run(ctx, i, c)
	}
	return l, nil
}

func (l *Load) now() int64 { return time.Since(l.start).Nanoseconds() }

func (l *Load) run(ctx context.Context, id int, c *clientv3.Client) {
	defer l.wg.Done()
	rng := rand.New(rand.NewSource(int64(id) + 1)) //nolint:gosec // test load, not security
	for n := 0; ctx.Err() == nil; n++ {
		key := fmt.Sprintf("lin/shared/%d", rng.Intn(l.cfg.SharedKeys))
		value := fmt.Sprintf("c%d-%d", id, n)
		switch rng.Intn(3) {
		case 0: // shared write
			l.do(ctx, id, input{put: true, key: key, value: value}, func(rctx context.Context) (output, error) {
				_, err := c.Put(rctx, key, value)
				return output{}, err
			})
		case 1: // shared read
			l.do(ctx, id, input{key: key}, func(rctx context.Context) (output, error) {
				resp, err := c.Get(rctx, key)
				if err != nil || len(resp.Kvs) == 0 {
					return output{}, err
				}
				return output{value: string(resp.Kvs[0].Value)}, nil
			})
		default: // ledger write to a key of its own
			ledger := fmt.Sprintf("lin/ledger/%d/%d", id, n)
			rctx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
			_, err := c.Put(rctx, ledger, value)
			cancel()
			l.mu.Lock()
			l.ops++
			if err == nil {
				l.acked[ledger] = value
			} else {
				l.failed++
			}
			l.mu.Unlock()
		}
	}
}

// do runs one shared-key operation and records it. A write whose outcome is unknown (error, timeout) may take
// effect at any later time, so it is recorded as never returning; a failed read tells nothing and is dropped.
func (l *Load) do(ctx context.Context, id int, in input, op func(context.Context) (output, error)) {
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
			return
		}
		ret = math.MaxInt64
	}
	l.history = append(l.history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
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
}

func (r Result) String() string {
	return fmt.Sprintf("%d ops (%d failed), %d acknowledged ledger writes, %d lost, linearizability %s", r.Ops, r.Failed, r.Acked, r.Lost, r.Linearizable)
}

// Verify stops the load if running, reads back every acknowledged write and checks the history.
func (l *Load) Verify(ctx context.Context) (Result, error) {
	l.Stop()
	defer func() {
		for _, c := range l.client {
			_ = c.Close()
		}
	}()
	res := Result{Ops: l.ops, Failed: l.failed, Acked: len(l.acked)}
	// A fresh connection: a load client may still hold one to a member that was cut off or removed.
	c, err := newClient(l.cfg.Endpoints, l.cfg.TLS)
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
	res.Linearizable = porcupine.CheckOperationsTimeout(Model(), l.history, time.Minute)
	return res, nil
}

// newClient dials with keepalives, so a client whose connection goes to a member that vanished from the network
// notices within seconds and reconnects, as a production client would.
func newClient(endpoints []string, tlsConfig *tls.Config) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, DialKeepAliveTime: 2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second, Logger: zap.NewNop(), TLS: tlsConfig})
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
