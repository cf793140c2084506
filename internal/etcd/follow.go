package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"steward.dev/steward/internal/pitr"
)

// Follower watches a whole key space for continuous backup.
type Follower struct {
	c         *clientv3.Client
	clusterID uint64
	// leaseTTLs remembers each lease's granted TTL, asked once per lease.
	mu        sync.Mutex
	leaseTTLs map[int64]int64
}

// NewFollower connects to endpoints (the cluster's client Service, so that member replacements do not matter)
// and reads the cluster ID.
func NewFollower(ctx context.Context, endpoints []string, t *TLS, pw Password) (*Follower, error) {
	c, err := connect(ctx, endpoints, t, pw, func(cfg *clientv3.Config) {
		// A watch may stay idle for long; keepalives find a dead connection.
		cfg.DialKeepAliveTime, cfg.DialKeepAliveTimeout = 10*time.Second, 5*time.Second
	})
	if err != nil {
		return nil, err
	}
	f := &Follower{c: c, leaseTTLs: map[int64]int64{}}
	if _, err := f.Revision(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return f, nil
}

// Close releases the connection.
func (f *Follower) Close() error { return f.c.Close() }

// ClusterID is the etcd cluster ID the follower saw last.
func (f *Follower) ClusterID() uint64 { return f.clusterID }

// Revision is the key space's current revision (a linearizable read).
func (f *Follower) Revision(ctx context.Context) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	r, err := f.c.Get(rctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("read revision: %w", err)
	}
	f.clusterID = r.Header.ClusterId
	return r.Header.Revision, nil
}

// Batch is what one watch response brought: whole revisions of changes, or (Progress) the assurance that
// every change up to Revision has been delivered.
type Batch struct {
	Events    []pitr.Event
	Progress  bool
	Revision  int64
	ClusterID uint64
	// Compacted is set when etcd no longer has the revisions asked for: it compacted them (CompactRevision).
	Compacted int64
	// Asked is when the progress notification was requested: every change made before then is delivered.
	Asked time.Time
}

// ErrCompacted means the watch asked for revisions etcd compacted away.
var ErrCompacted = errors.New("required revision has been compacted")

// Watch streams every change from revision from on, over all keys, as batches. It asks etcd for a progress
// notification on every tick of progress, so that quiet periods are confirmed as quiet. The channel closes when
// the watch ends (ctx done, leader lost, compaction: the last batch says so); the caller watches again.
func (f *Follower) Watch(ctx context.Context, from int64, progress <-chan time.Time) <-chan Batch {
	out := make(chan Batch)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	wch := f.c.Watch(wctx, "", clientv3.WithPrefix(), clientv3.WithRev(from))
	go func() {
		defer close(out)
		defer cancel()
		var asked time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case <-progress:
				// Errors show up on the watch itself.
				asked = time.Now().UTC()
				_ = f.c.RequestProgress(wctx)
			case resp, ok := <-wch:
				if !ok {
					return
				}
				b := Batch{Revision: resp.Header.Revision, ClusterID: resp.Header.ClusterId, Progress: resp.IsProgressNotify()}
				if b.Progress {
					b.Asked = asked
				}
				if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
					b.Compacted = max(resp.CompactRevision, 1)
					select {
					case out <- b:
					case <-ctx.Done():
					}
					return
				}
				if err := resp.Err(); err != nil {
					return
				}
				now := time.Now().UTC()
				for _, ev := range resp.Events {
					b.Events = append(b.Events, f.event(ctx, ev, now))
				}
				select {
				case out <- b:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

func (f *Follower) event(ctx context.Context, ev *clientv3.Event, now time.Time) pitr.Event {
	e := pitr.Event{Revision: ev.Kv.ModRevision, Key: ev.Kv.Key, Observed: now}
	if ev.Type == mvccpb.DELETE {
		e.Type = pitr.Delete
		return e
	}
	e.Type, e.Value, e.Lease = pitr.Put, ev.Kv.Value, ev.Kv.Lease
	if e.Lease != 0 {
		e.LeaseTTL = f.leaseTTL(ctx, e.Lease)
	}
	return e
}

// leaseTTL is a lease's granted TTL, 0 when it is gone or cannot be read (a replay then grants a default).
func (f *Follower) leaseTTL(ctx context.Context, id int64) int64 {
	f.mu.Lock()
	ttl, ok := f.leaseTTLs[id]
	f.mu.Unlock()
	if ok {
		return ttl
	}
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	r, err := f.c.TimeToLive(rctx, clientv3.LeaseID(id))
	if err != nil || r.TTL < 0 {
		return 0
	}
	f.mu.Lock()
	f.leaseTTLs[id] = r.GrantedTTL
	f.mu.Unlock()
	return r.GrantedTTL
}

// Replayer applies recorded changes to a single throwaway etcd member restored from a snapshot, one transaction
// per recorded revision, so that every key's mod_revision, create_revision and version come out as they were.
type Replayer struct {
	c      *clientv3.Client
	leases etcdserverpb.LeaseClient
	// alive are the leases kept alive while the replay runs: a lease that expired mid-replay would delete keys
	// at a revision the history never had.
	alive  map[int64]bool
	cancel context.CancelFunc
	ctx    context.Context
	// minLeaseTTL is the least TTL a lease is granted with (0: the recorded TTL).
	minLeaseTTL int64
}

// DefaultReplayLeaseTTL is granted to a lease whose TTL the follower could not read (it was gone already).
const DefaultReplayLeaseTTL = 60

// NewReplayer connects to a local member with t (nil: plaintext) and keeps every lease it holds alive until Close.
func NewReplayer(ctx context.Context, endpoint string, t *TLS) (*Replayer, error) {
	cfg, err := t.Config()
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop(), Context: ctx,
		MaxCallSendMsgSize: 256 << 20, TLS: cfg})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", endpoint, err)
	}
	return newReplayer(ctx, c, 0)
}

// StandbyLeaseTTL is the least TTL a standby grants a replayed lease with, whatever the primary granted: the
// standby keeps its leases alive only while its applier runs, and an applier away for longer than a lease's TTL
// (a rescheduled Pod, a node drain) would let the standby's etcd expire the lease and delete its keys, a change
// the primary never made. The primary's own expiries arrive as recorded deletes.
const StandbyLeaseTTL = 600

// NewStandbyReplayer connects to a standby cluster (its client Service, with Steward's identity) to apply a
// primary's segments to it while it runs: leases are granted with at least StandbyLeaseTTL seconds, and every
// lease the standby holds is kept alive until Close.
func NewStandbyReplayer(ctx context.Context, endpoints []string, t *TLS, pw Password) (*Replayer, error) {
	c, err := connect(ctx, endpoints, t, pw, func(cfg *clientv3.Config) { cfg.MaxCallSendMsgSize = 256 << 20 })
	if err != nil {
		return nil, err
	}
	return newReplayer(ctx, c, StandbyLeaseTTL)
}

func newReplayer(ctx context.Context, c *clientv3.Client, minLeaseTTL int64) (*Replayer, error) {
	kctx, cancel := context.WithCancel(ctx)
	r := &Replayer{c: c, leases: clientv3.RetryLeaseClient(c), alive: map[int64]bool{}, cancel: cancel, ctx: kctx, minLeaseTTL: minLeaseTTL}
	ls, err := c.Leases(ctx)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("list leases: %w", err)
	}
	for _, l := range ls.Leases {
		if err := r.keepAlive(int64(l.ID)); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// Close stops the keepalives and the connection.
func (r *Replayer) Close() {
	r.cancel()
	_ = r.c.Close()
}

func (r *Replayer) keepAlive(id int64) error {
	ch, err := r.c.KeepAlive(r.ctx, clientv3.LeaseID(id))
	if err != nil {
		return fmt.Errorf("keep lease %x alive: %w", id, err)
	}
	r.alive[id] = true
	go func() {
		for range ch { //nolint:revive // drain: the client needs its keepalive responses read
		}
	}()
	return nil
}

// Versions are the etcd release and data format version (3.6+, empty before) of the member at endpoint.
func (r *Replayer) Versions(ctx context.Context, endpoint string) (version, storage string, err error) {
	st, err := r.c.Status(ctx, endpoint)
	if err != nil {
		return "", "", fmt.Errorf("status of %s: %w", endpoint, err)
	}
	return st.Version, st.StorageVersion, nil
}

// Revision is the member's current revision.
func (r *Replayer) Revision(ctx context.Context) (int64, error) {
	resp, err := r.c.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("read revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// ErrNotOneHistory means a replayed revision came out as another: the member's key space and the segments are not
// one history (the snapshot is of another cluster, or something else wrote to the member).
var ErrNotOneHistory = errors.New("the snapshot and the segments are not one history")

// Holds reports whether the member's key space has one recorded revision's changes at that revision: each put's
// key with its value and that mod revision, each delete's key absent. A member whose revision equals a recorded
// one but holds other changes at it took a write that is not in the history. Inconclusive (true) when the member
// compacted the revision away.
func (r *Replayer) Holds(ctx context.Context, group []pitr.Event) (bool, error) {
	for _, e := range group {
		resp, err := r.c.Get(ctx, string(e.Key), clientv3.WithRev(e.Revision))
		if errors.Is(err, rpctypes.ErrCompacted) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read %q at revision %d: %w", e.Key, e.Revision, err)
		}
		switch {
		case e.Type == pitr.Delete && len(resp.Kvs) != 0:
			return false, nil
		case e.Type == pitr.Put && (len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != e.Revision || !bytes.Equal(resp.Kvs[0].Value, e.Value)):
			return false, nil
		}
	}
	return true, nil
}

// Apply replays one revision's changes as one transaction and checks that etcd gave it the recorded revision:
// anything else means the snapshot and the segments are not one history, and the replay must stop.
func (r *Replayer) Apply(ctx context.Context, group []pitr.Event) error {
	if len(group) == 0 {
		return nil
	}
	rev := group[0].Revision
	ops := make([]clientv3.Op, 0, len(group))
	for _, e := range group {
		switch e.Type {
		case pitr.Put:
			var opts []clientv3.OpOption
			if e.Lease != 0 {
				if err := r.grant(ctx, e.Lease, e.LeaseTTL); err != nil {
					return err
				}
				opts = append(opts, clientv3.WithLease(clientv3.LeaseID(e.Lease)))
			}
			ops = append(ops, clientv3.OpPut(string(e.Key), string(e.Value), opts...))
		case pitr.Delete:
			ops = append(ops, clientv3.OpDelete(string(e.Key)))
		default:
			return fmt.Errorf("revision %d: event type %q", rev, e.Type)
		}
	}
	resp, err := r.c.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("replay revision %d (%d changes): %w", rev, len(ops), err)
	}
	if resp.Header.Revision != rev {
		return fmt.Errorf("%w: replay revision %d came out as revision %d", ErrNotOneHistory, rev, resp.Header.Revision)
	}
	return nil
}

func (r *Replayer) grant(ctx context.Context, id, ttl int64) error {
	if r.alive[id] {
		return nil
	}
	if ttl <= 0 {
		ttl = DefaultReplayLeaseTTL
	}
	ttl = max(ttl, r.minLeaseTTL)
	_, err := r.leases.LeaseGrant(ctx, &etcdserverpb.LeaseGrantRequest{ID: id, TTL: ttl})
	if err != nil && !errors.Is(err, rpctypes.ErrGRPCLeaseExist) && !errors.Is(err, rpctypes.ErrLeaseExist) {
		return fmt.Errorf("grant lease %x: %w", id, err)
	}
	return r.keepAlive(id)
}
