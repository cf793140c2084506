package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/pitr"
)

// standbyConfig is what `standby` needs: the standby's etcd, the source's segment directory of the primary's
// cluster ID, and how often to look for new segments.
type standbyConfig struct {
	endpoints []string
	tls       *etcd.TLS
	password  etcd.Password
	segments  backup.ObjectDir
	clusterID string
	poll      time.Duration
	// base is the segment base the identities' directories are in and dirOf one identity's directory (both
	// listed only), nil to skip the check for a re-seeded primary; identities is how often they are listed.
	base       backup.ObjectDir
	dirOf      func(id string) backup.ObjectDir
	identities time.Duration
}

// applier replays a primary's segments into a standby as they are stored. Its memory is the standby's own
// revision, read from etcd on every poll: nothing but the applier writes to a standby, so that revision is exactly
// what has been applied, and a restarted applier continues where the last one stopped, neither losing nor repeating
// a change. What it keeps in memory is only for its report, and for noticing a write it did not make.
type applier struct {
	cfg standbyConfig
	mu  sync.Mutex
	st  pitr.StandbyStatus

	rp *etcd.Replayer
	// left is the revision the applier left the standby at, 0 before its first poll: a standby found at another
	// revision took a write it did not make, or the applier just started; either way its tip is checked against
	// the history before anything is applied on top.
	left int64
	// listed fingerprints the source's segment list, to notice when it changes (fencing counts from then).
	listed string
	// stopped is set once for good: the applier never applies past a gap, a corrupt segment or a divergence.
	stopped bool
	// checkedIdentities is when the segment base was last listed for a newer identity; newerSeen the newest
	// segment time of a newer identity seen then.
	checkedIdentities, newerSeen time.Time
}

func (a *applier) status() pitr.StandbyStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}

func (a *applier) update(fn func(*pitr.StandbyStatus)) {
	a.mu.Lock()
	fn(&a.st)
	a.mu.Unlock()
}

// stop ends applying for good, with a Standby condition reason and the words for it.
func (a *applier) stop(reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	log.Printf("standby: stopped (%s): %s", reason, msg)
	a.stopped = true
	a.update(func(s *pitr.StandbyStatus) { s.Stopped, s.Message = reason, msg })
}

// run polls until ctx ends. Failures that may pass (the source or the standby unreachable) are reported and
// retried; a stop keeps the applier reporting, and applying nothing.
func (a *applier) run(ctx context.Context) {
	now := time.Now().UTC()
	// Until the applier has seen the source change, it counts the fencing window from its own start: a restart
	// never shortens the wait for a quiet source.
	a.update(func(s *pitr.StandbyStatus) {
		s.SourceClusterID, s.Location, s.SourceChanged = a.cfg.clusterID, a.cfg.segments.Location(), now
	})
	defer func() {
		if a.rp != nil {
			a.rp.Close()
		}
	}()
	t := time.NewTicker(a.cfg.poll)
	defer t.Stop()
	for {
		if err := a.poll(ctx); err != nil && ctx.Err() == nil {
			log.Printf("standby: %v", err)
			a.update(func(s *pitr.StandbyStatus) { s.Error = err.Error() })
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll applies every stored segment that continues the standby's revision, and reports.
func (a *applier) poll(ctx context.Context) error {
	if a.rp == nil {
		rp, err := etcd.NewStandbyReplayer(ctx, a.cfg.endpoints, a.cfg.tls, a.cfg.password)
		if err != nil {
			return err
		}
		a.rp = rp
	}
	applied, err := a.rp.Revision(ctx)
	if err != nil {
		a.rp.Close()
		a.rp = nil
		return err
	}
	names, err := a.cfg.segments.List(ctx)
	if err != nil {
		return fmt.Errorf("list the source's segments: %w", err)
	}
	refs := a.sourceChanged(names)
	defer func() { a.report(applied, refs) }()
	if err := a.checkIdentities(ctx); err != nil || a.stopped {
		return err
	}
	segs, gap := pitr.NextSegments(applied, refs)
	if applied != a.left {
		ok, err := a.checkTip(ctx, applied, refs)
		if err != nil || a.stopped {
			return err
		}
		if !ok {
			// Nothing stored shows the primary at the standby's revision yet, or continues from it: apply
			// nothing on top until something does, unless what follows is a gap anyway.
			segs = nil
		}
	}
	for _, r := range segs {
		if applied, err = a.apply(ctx, r, applied); err != nil || a.stopped {
			return err
		}
	}
	if gap != nil {
		a.stop(etcdv1alpha1.ReasonSegmentGap, "%v (in %s); the standby never skips revisions: create a new standby to start from a newer snapshot",
			gap, a.cfg.segments.Location())
	}
	return nil
}

// sourceChanged parses the listing and notes when it differs from the last one.
func (a *applier) sourceChanged(names []string) []pitr.Ref {
	var refs []pitr.Ref
	for _, n := range names {
		if r, ok := pitr.ParseName(n); ok {
			refs = append(refs, r)
		}
	}
	pitr.Sort(refs)
	seen := make([]string, len(refs))
	for i, r := range refs {
		seen[i] = r.Name
	}
	fp := strings.Join(seen, ",")
	if a.listed != "" && fp != a.listed {
		now := time.Now().UTC()
		a.update(func(s *pitr.StandbyStatus) { s.SourceChanged = now })
	}
	a.listed = fp
	return refs
}

// checkIdentities stops the standby when another etcd cluster ID of the primary has a segment newer than the
// newest of the one it follows: the primary was re-seeded from a backup (or restored to a point in time), and its
// history from there does not continue the standby's. Once a cluster ID has gone quiet its primary is gone, so
// the newer directory is also what makes a promotion's fencing see the source still advancing.
//
// It keeps looking after the stop: the re-seeded primary's segments changing are the source advancing, which a
// promotion's fencing must see.
func (a *applier) checkIdentities(ctx context.Context) error {
	if a.cfg.base == nil || time.Since(a.checkedIdentities) < a.cfg.identities {
		return nil
	}
	id, newest, err := newestIdentity(ctx, a.cfg.base, a.cfg.dirOf)
	if err != nil {
		return err
	}
	a.checkedIdentities = time.Now()
	if id == a.cfg.clusterID || !newest.After(a.newerSeen) {
		return nil
	}
	a.newerSeen = newest
	now := time.Now().UTC()
	a.update(func(s *pitr.StandbyStatus) { s.SourceChanged = now })
	if !a.stopped {
		a.stop(etcdv1alpha1.ReasonSourceChanged, "the source's segments of etcd cluster %s are newer than those of %s, which the standby follows: the primary was re-seeded, "+
			"and its history from there does not continue the standby's; create a new standby to follow it", id, a.cfg.clusterID)
	}
	return nil
}

// checkTip compares the standby's key space at its revision with the primary's changes at that revision: a
// standby at a revision with other changes at it than the primary's took a write of someone else's, and applying
// on top would hide that for good. ok is false when no stored segment covers the revision yet and none continues
// from it (a write beyond what the source has stored, or a snapshot a moment past the newest segment): the tip is
// checked once one does. A tip no segment covers but one continues from (the snapshot a chain starts after) has
// nothing to check against.
func (a *applier) checkTip(ctx context.Context, applied int64, refs []pitr.Ref) (bool, error) {
	i := slices.IndexFunc(refs, func(r pitr.Ref) bool { return r.First <= applied && applied <= r.Last })
	if i < 0 {
		if !slices.ContainsFunc(refs, func(r pitr.Ref) bool { return r.First == applied+1 }) {
			return false, nil
		}
		a.left = applied
		return true, nil
	}
	seg, err := readSegment(ctx, a.cfg.segments, refs[i], a.cfg.clusterID)
	if err != nil {
		return false, a.unreadable(refs[i], err)
	}
	for _, g := range pitr.Revisions(seg.Events) {
		if g[0].Revision != applied {
			continue
		}
		ok, err := a.rp.Holds(ctx, g)
		if err != nil {
			return false, err
		}
		if !ok {
			a.stop(etcdv1alpha1.ReasonDiverged, "the standby is at revision %d, but its changes at that revision are not the primary's (segment %s): something other than the applier wrote to it",
				applied, refs[i])
			return false, nil
		}
	}
	a.left = applied
	return true, nil
}

// apply replays one segment onto a standby at revision applied and returns the revision reached.
func (a *applier) apply(ctx context.Context, r pitr.Ref, applied int64) (int64, error) {
	seg, err := readSegment(ctx, a.cfg.segments, r, a.cfg.clusterID)
	if err != nil {
		return applied, a.unreadable(r, err)
	}
	for _, g := range pitr.Revisions(pitr.Replayable([]pitr.Segment{seg}, applied, pitr.Target{})) {
		err := a.rp.Apply(ctx, g)
		if errors.Is(err, etcd.ErrNotOneHistory) {
			a.stop(etcdv1alpha1.ReasonDiverged, "segment %s: %v: something other than the applier wrote to the standby", r, err)
			return applied, nil
		}
		if err != nil {
			return applied, fmt.Errorf("segment %s: %w", r, err)
		}
		applied = g[0].Revision
		a.left = applied
	}
	a.update(func(s *pitr.StandbyStatus) { s.LastSegment = r.Name })
	return applied, nil
}

// unreadable sorts a segment that could not be read: corrupt (checksum, name, cluster) stops the standby; a key
// that does not decrypt, or the store failing, may pass.
func (a *applier) unreadable(r pitr.Ref, err error) error {
	if errors.Is(err, pitr.ErrCorrupt) {
		a.stop(etcdv1alpha1.ReasonSegmentCorrupt, "%v", err)
		return nil
	}
	return fmt.Errorf("read segment %s: %w", r, err)
}

// report records where the standby is after a poll: its revision, the source's end and the lag, and clears the
// last error.
func (a *applier) report(applied int64, refs []pitr.Ref) {
	l := pitr.LagOf(applied, refs)
	now := time.Now().UTC()
	a.update(func(s *pitr.StandbyStatus) {
		s.AppliedRevision, s.SourceRevision, s.SourceTime = applied, l.SourceRevision, l.SourceTime
		s.LagRevisions, s.LagSeconds, s.LagKnown = l.Revisions, l.Behind.Seconds(), l.Known
		s.Error, s.Time = "", now
	})
}

// runStandby is the `standby` command: it serves the status endpoint and applies until SIGTERM. Exit status 2 for
// bad flags.
func runStandby(ctx context.Context, cfg standbyConfig, endpoints, listen string) int {
	cfg.endpoints = strings.Split(endpoints, ",")
	if endpoints == "" || cfg.clusterID == "" || cfg.poll <= 0 {
		fmt.Fprintln(os.Stderr, "standby needs --endpoints, --cluster-id, --segments and --poll > 0")
		return 2
	}
	a := &applier{cfg: cfg}
	if err := serveStatus(ctx, listen, func() any { return a.status() }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	a.run(ctx)
	return 0
}
