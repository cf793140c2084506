package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/pitr"
)

// followConfig is what `follow` needs: where etcd is, where segments go, and when to cut them.
type followConfig struct {
	endpoints []string
	tls       *etcd.TLS
	password  etcd.Password
	// dir returns the segment directory of one etcd cluster ID.
	dir func(clusterID string) backup.ObjectDir
	// interval is how often pending changes are stored (after etcd confirmed it delivered everything up to
	// then); maxEvents stores them sooner; heartbeat stores an empty segment after that long without changes,
	// so that a time target in a quiet stretch is known to be covered.
	interval, heartbeat time.Duration
	maxEvents           int
	// pruneFile holds a revision: segments that end before it extend no snapshot any more and are deleted.
	pruneFile string
}

// follower is one run of `follow`: the chain it extends and what it reports.
type follower struct {
	cfg followConfig
	mu  sync.Mutex
	st  pitr.FollowerStatus

	dir       backup.ObjectDir
	next      int64 // first revision of the next segment
	pending   []pitr.Event
	lastWrite time.Time
}

func (f *follower) status() pitr.FollowerStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

func (f *follower) update(fn func(*pitr.FollowerStatus)) {
	f.mu.Lock()
	fn(&f.st)
	f.mu.Unlock()
}

func (f *follower) fail(err error) {
	log.Printf("follow: %v", err)
	now := time.Now().UTC()
	f.update(func(s *pitr.FollowerStatus) { s.Error, s.ErrorTime, s.Watching = err.Error(), &now, false })
}

// serveStatus answers GET /status with what status returns (a follower's or an applier's report: positions and
// times only) and /healthz.
func serveStatus(ctx context.Context, addr string, status func() any) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(status())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	go func() { _ = srv.Serve(l) }()
	return nil
}

// run follows the cluster until ctx ends, reconnecting after failures. It returns an error only when the cluster
// ID changed (a restored cluster): the process exits and its restart starts a chain for the new ID.
func (f *follower) run(ctx context.Context) error {
	for ctx.Err() == nil {
		err := f.followOnce(ctx)
		if errors.Is(err, errClusterChanged) {
			return err
		}
		if err != nil && ctx.Err() == nil {
			f.fail(err)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}
	// Store what is pending before the process goes (SIGTERM gives it the Pod's grace period).
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if len(f.pending) > 0 {
		last := f.pending[len(f.pending)-1]
		if err := f.flush(sctx, last.Revision, last.Observed); err != nil {
			log.Printf("follow: store pending changes at exit: %v", err)
		}
	}
	return nil
}

var errClusterChanged = errors.New("the etcd cluster ID changed")

// errRewatch ends a watch that must start again from where the follower now is (a new chain after a compaction).
var errRewatch = errors.New("watch again")

func (f *follower) followOnce(ctx context.Context) error {
	fl, err := etcd.NewFollower(ctx, f.cfg.endpoints, f.cfg.tls, f.cfg.password)
	if err != nil {
		return err
	}
	defer func() { _ = fl.Close() }()
	id := etcd.FormatID(fl.ClusterID())
	if f.dir == nil {
		if err := f.resume(ctx, fl, id); err != nil {
			return err
		}
	} else if f.st.ClusterID != id {
		return fmt.Errorf("%w: was %s, now %s", errClusterChanged, f.st.ClusterID, id)
	}
	ticker := time.NewTicker(f.cfg.interval)
	defer ticker.Stop()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	from := f.next
	if n := len(f.pending); n > 0 {
		from = f.pending[n-1].Revision + 1
	}
	// etcd answers a progress request only once the store has reached the revision a watch started from, so a
	// watch from the future (a quiet cluster) would never hear one: it starts at the current revision at most and
	// drops what it had already.
	cur, err := fl.Revision(ctx)
	if err != nil {
		return err
	}
	f.update(func(s *pitr.FollowerStatus) { s.Watching = true })
	lastPrune := time.Time{}
	batches := fl.Watch(wctx, min(from, cur), ticker.C)
	flushTick := time.NewTicker(f.cfg.interval)
	defer flushTick.Stop()
	for open := true; open; {
		select {
		case <-flushTick.C:
			// etcd answers a progress request only while the watch has caught up, which under steady writes it
			// rarely has: pending changes are stored every interval anyway, up to the last one received.
			if n := len(f.pending); n > 0 && time.Since(f.lastWrite) >= f.cfg.interval {
				if err := f.flush(ctx, f.pending[n-1].Revision, f.pending[n-1].Observed); err != nil {
					return err
				}
			}
			if f.cfg.pruneFile != "" && time.Since(lastPrune) > time.Minute {
				lastPrune = time.Now()
				f.prune(ctx)
			}
		case b, ok := <-batches:
			if !ok {
				open = false
				break
			}
			switch err := f.receive(ctx, fl, id, from, b); {
			case errors.Is(err, errRewatch):
				return nil
			case err != nil:
				return err
			}
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	// What the watch delivered is committed: store it now rather than wait for a progress notification that may
	// never come (a cluster that lost quorum).
	if n := len(f.pending); n > 0 {
		if err := f.flush(ctx, f.pending[n-1].Revision, f.pending[n-1].Observed); err != nil {
			return err
		}
	}
	return errors.New("watch ended (leader lost or connection closed); watching again")
}

// resume finds where the stored chain ends and continues it, or starts a new chain at the current revision.
func (f *follower) resume(ctx context.Context, fl *etcd.Follower, id string) error {
	d := f.cfg.dir(id)
	names, err := d.List(ctx)
	if err != nil {
		return err
	}
	var refs []pitr.Ref
	for _, n := range names {
		if r, ok := pitr.ParseName(n); ok {
			refs = append(refs, r)
		}
	}
	pitr.Sort(refs)
	f.dir = d
	// The status endpoint reads st meanwhile: every write to it takes the lock.
	f.update(func(s *pitr.FollowerStatus) { s.ClusterID, s.Location = id, d.Location() })
	if len(refs) == 0 {
		return f.startChain(ctx, fl)
	}
	// The chain the follower extends is the unbroken run of segments that ends with the newest.
	last := refs[len(refs)-1]
	start := last
	covered := last.First
	for i := len(refs) - 2; i >= 0; i-- {
		if refs[i].Last+1 < covered {
			break
		}
		start = refs[i]
		covered = min(covered, refs[i].First)
	}
	end := refs[0].Last
	for _, r := range refs {
		end = max(end, r.Last)
	}
	f.next, f.lastWrite = end+1, last.LastTime
	var startTime time.Time
	if b, err := d.Get(ctx, start.Name); err == nil {
		if seg, err := pitr.Parse(b); err == nil {
			startTime = seg.Header.FirstTime
		}
	}
	f.update(func(s *pitr.FollowerStatus) {
		s.ChainStart, s.ChainStartTime, s.LastRevision, s.LastTime = covered, startTime, end, last.LastTime
	})
	log.Printf("follow: resuming the chain of %s at revision %d (%d segments stored)", d.Location(), f.next, len(refs))
	return nil
}

func (f *follower) startChain(ctx context.Context, fl *etcd.Follower) error {
	rev, err := fl.Revision(ctx)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	f.next, f.pending = rev+1, nil
	f.update(func(s *pitr.FollowerStatus) {
		s.ChainStart, s.ChainStartTime, s.LastRevision, s.LastTime, s.CurrentRevision = rev+1, now, rev, now, rev
	})
	log.Printf("follow: starting a new chain of %s at revision %d", f.dir.Location(), rev+1)
	return nil
}

// restartAfterCompaction stores what the watch delivered before the gap, says so, and starts a new chain.
func (f *follower) restartAfterCompaction(ctx context.Context, fl *etcd.Follower, compacted int64) error {
	if n := len(f.pending); n > 0 {
		if err := f.flush(ctx, f.pending[n-1].Revision, f.pending[n-1].Observed); err != nil {
			return err
		}
	}
	now := time.Now().UTC()
	f.update(func(s *pitr.FollowerStatus) { s.CompactedAt, s.CompactedRevision = &now, compacted })
	log.Printf("follow: etcd compacted revision %d before the follower read it (needed %d): starting a new chain", compacted, f.next)
	return f.startChain(ctx, fl)
}

// flush stores the pending changes up to revision last as one segment covering f.next..last, certified up to
// lastTime.
func (f *follower) flush(ctx context.Context, last int64, lastTime time.Time) error {
	n := 0
	for n < len(f.pending) && f.pending[n].Revision <= last {
		n++
	}
	h := pitr.Header{ClusterID: f.st.ClusterID, First: f.next, Last: last, LastTime: lastTime.UTC()}
	h.FirstTime = h.LastTime
	if n > 0 {
		h.FirstTime = f.pending[0].Observed
		if h.LastTime.Before(h.FirstTime) {
			h.LastTime = f.pending[n-1].Observed
		}
	}
	b, err := pitr.Encode(pitr.Segment{Header: h, Events: f.pending[:n]})
	if err != nil {
		return err
	}
	if err := f.dir.Put(ctx, pitr.Name(h), b); err != nil {
		return err
	}
	f.pending = append([]pitr.Event(nil), f.pending[n:]...)
	f.next, f.lastWrite = last+1, time.Now()
	f.update(func(s *pitr.FollowerStatus) {
		s.LastRevision, s.LastTime, s.Pending = last, h.LastTime, len(f.pending)
		s.Segments++
		s.Bytes += int64(len(b))
		s.Error, s.ErrorTime = "", nil
	})
	return nil
}

// prune deletes the segments that end before the revision in the prune file (the oldest snapshot kept).
func (f *follower) prune(ctx context.Context) {
	b, err := os.ReadFile(f.cfg.pruneFile)
	if err != nil {
		return
	}
	before, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || before <= 0 {
		return
	}
	names, err := f.dir.List(ctx)
	if err != nil {
		log.Printf("follow: prune: %v", err)
		return
	}
	deleted := 0
	for _, n := range names {
		if r, ok := pitr.ParseName(n); ok && r.Last < before {
			if err := f.dir.Delete(ctx, n); err != nil {
				log.Printf("follow: prune: %v", err)
				return
			}
			deleted++
		}
	}
	if deleted > 0 {
		log.Printf("follow: pruned %d segments ending before revision %d", deleted, before)
	}
}

// runFollow is the `follow` command: it serves the status endpoint and follows until SIGTERM. Exit status 1
// after the cluster ID changed (the restart starts a new chain), 2 for bad flags.
func runFollow(ctx context.Context, cfg followConfig, endpoints, listen string, t *etcd.TLS, pw etcd.Password, dir func(string) backup.ObjectDir) int {
	cfg.endpoints = strings.Split(endpoints, ",")
	cfg.tls, cfg.password, cfg.dir = t, pw, dir
	if endpoints == "" || cfg.interval <= 0 || cfg.maxEvents <= 0 || cfg.heartbeat < cfg.interval {
		fmt.Fprintln(os.Stderr, "follow needs --endpoints, --interval > 0, --max-events > 0 and --heartbeat >= --interval")
		return 2
	}
	f := &follower{cfg: cfg}
	if err := serveStatus(ctx, listen, func() any { return f.status() }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := f.run(ctx); err != nil {
		log.Printf("follow: %v", err)
		return 1
	}
	return 0
}

// dropBefore drops the events of revisions before from (delivered again by a watch that started earlier).
func dropBefore(events []pitr.Event, from int64) []pitr.Event {
	for len(events) > 0 && events[0].Revision < from {
		events = events[1:]
	}
	return events
}

// receive takes one watch batch: changes are added to the pending segment (stored at once when it is full), a
// progress notification stores what is pending (or, after heartbeat without changes, an empty segment) as known
// complete up to when it was asked for.
func (f *follower) receive(ctx context.Context, fl *etcd.Follower, id string, from int64, b etcd.Batch) error {
	b.Events = dropBefore(b.Events, from)
	if b.ClusterID != 0 && etcd.FormatID(b.ClusterID) != id {
		return fmt.Errorf("%w: was %s, now %s", errClusterChanged, id, etcd.FormatID(b.ClusterID))
	}
	switch {
	case b.Compacted != 0:
		if err := f.restartAfterCompaction(ctx, fl, b.Compacted); err != nil {
			return err
		}
		return errRewatch
	case len(b.Events) > 0:
		f.pending = append(f.pending, b.Events...)
		f.update(func(s *pitr.FollowerStatus) { s.CurrentRevision, s.Pending = b.Revision, len(f.pending) })
		if len(f.pending) >= f.cfg.maxEvents {
			last := f.pending[len(f.pending)-1]
			return f.flush(ctx, last.Revision, last.Observed)
		}
	case b.Progress && !b.Asked.IsZero():
		f.update(func(s *pitr.FollowerStatus) { s.CurrentRevision = b.Revision })
		if len(f.pending) > 0 || time.Since(f.lastWrite) >= f.cfg.heartbeat {
			return f.flush(ctx, max(b.Revision, f.next-1), b.Asked)
		}
	}
	return nil
}
