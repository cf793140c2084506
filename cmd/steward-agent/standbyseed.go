package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/pitr"
)

// seedConfig is what `standby-seed` needs: the primary's schedule directory in the source, read only.
type seedConfig struct {
	pointInTimeConfig
	// cluster is the primary EtcdCluster's name; prefix the schedule's directory (path or key prefix).
	cluster, prefix string
	// dir is the source directory (snapshots in it, the segment base under it), not decoded: only listed.
	dir func(p string) backup.ObjectDir
	// wait is how long to wait for the primary's follower to store a segment that reaches a snapshot newer than
	// every segment (it stores one at least once a minute).
	wait, poll time.Duration
}

// standbySeed finds what a standby starts from, in a primary's continuous backup, without anything the primary's
// namespace holds: the etcd cluster ID whose segments were stored last (the primary's current identity), and its
// newest snapshot that those segments continue. The snapshot is read whole and checked against etcd's own
// checksum (no backup recorded it here), restored into a throwaway member, and its key space at its revision
// compared with the changes the covering segment recorded at that revision: a snapshot of an older identity (before
// a re-seed) is skipped for an older snapshot. The result records the snapshot object (path, size, sha256), its
// revision and versions, and the primary's cluster ID: an EtcdBackup's record of it.
func standbySeed(ctx context.Context, c seedConfig) backup.Result {
	fail := func(reason, format string, a ...any) backup.Result {
		return backup.Result{Reason: reason, Message: fmt.Sprintf(format, a...)}
	}
	base := pitr.SegmentsBase(c.prefix, c.cluster)
	id, _, err := newestIdentity(ctx, c.dir(base), func(id string) backup.ObjectDir { return c.dir(pitr.SegmentsDir(base, id)) })
	if err != nil {
		return fail(etcdv1alpha1.ReasonOutsideWindow, "%v", err)
	}
	segments := backup.EncodedDir{ObjectDir: c.dir(pitr.SegmentsDir(base, id)), Codec: c.codec}
	names, err := c.dir(c.prefix).List(ctx)
	if err != nil {
		return fail(etcdv1alpha1.ReasonSnapshotFailed, "list snapshots: %v", err)
	}
	type snap struct {
		name string
		at   time.Time
	}
	var snaps []snap
	for _, n := range names {
		if at, ok := backup.ParseArtifactName(c.cluster, n); ok {
			snaps = append(snaps, snap{n, at})
		}
	}
	sort.Slice(snaps, func(i, j int) bool { return snaps[i].at.After(snaps[j].at) })
	if len(snaps) == 0 {
		return fail(etcdv1alpha1.ReasonOutsideWindow, "no snapshot of cluster %s in %s", c.cluster, c.dir(c.prefix).Location())
	}
	var skipped []string
	for _, s := range snaps {
		r, why := seedFrom(ctx, c, path.Join(c.prefix, s.name), segments, id)
		if why == "" {
			return r
		}
		if r.Reason != "" {
			return r
		}
		skipped = append(skipped, fmt.Sprintf("%s: %s", s.name, why))
	}
	return fail(etcdv1alpha1.ReasonOutsideWindow, "no snapshot in %s is continued by the segments of etcd cluster %s: %v",
		c.dir(c.prefix).Location(), id, skipped)
}

// newestIdentity is the etcd cluster ID under base whose newest segment is the newest of all, and that segment's
// time.
func newestIdentity(ctx context.Context, base backup.ObjectDir, dirOf func(id string) backup.ObjectDir) (string, time.Time, error) {
	ids, err := base.Dirs(ctx)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("list the source's etcd cluster IDs: %w", err)
	}
	var best string
	var newest time.Time
	for _, id := range ids {
		names, err := dirOf(id).List(ctx)
		if err != nil {
			return "", time.Time{}, fmt.Errorf("list the segments of etcd cluster %s: %w", id, err)
		}
		for _, n := range names {
			if r, ok := pitr.ParseName(n); ok && r.LastTime.After(newest) {
				best, newest = id, r.LastTime
			}
		}
	}
	if best == "" {
		return "", time.Time{}, fmt.Errorf("no segments in %s: is continuous backup on for the primary's schedule?", base.Location())
	}
	return best, newest, nil
}

// seedFrom checks one snapshot object. why says why it is skipped for an older one ("" when it is the seed, or
// when r is a failure that ends the seed).
func seedFrom(ctx context.Context, c seedConfig, object string, segments backup.ObjectDir, id string) (r backup.Result, why string) {
	work, err := os.MkdirTemp(c.workDir, "seed-")
	if err != nil {
		return backup.Result{Reason: etcdv1alpha1.ReasonReplayFailed, Message: fmt.Sprintf("work dir: %v", err)}, "failed"
	}
	defer func() { _ = os.RemoveAll(work) }()
	store, err := c.open(object)
	if err != nil {
		return backup.Result{Reason: etcdv1alpha1.ReasonSnapshotFailed, Message: err.Error()}, "failed"
	}
	snapFile := filepath.Join(work, "snapshot.db")
	f, err := os.Create(snapFile) //nolint:gosec // in our own work dir
	if err != nil {
		return backup.Result{Reason: etcdv1alpha1.ReasonReplayFailed, Message: err.Error()}, "failed"
	}
	checked, err := backup.CopyMeasured(ctx, store, c.codec, f)
	_ = f.Close()
	switch {
	case errors.Is(err, backup.ErrCorrupt):
		return backup.Result{}, err.Error()
	case err != nil:
		return failed(err), "failed"
	}
	tw, err := startThrowaway(ctx, c.pointInTimeConfig, snapFile, work)
	if err != nil {
		return backup.Result{Reason: etcdv1alpha1.ReasonReplayFailed, Message: fmt.Sprintf("etcd from snapshot %s: %v", object, err)}, "failed"
	}
	defer tw.stop()
	rev, err := tw.rp.Revision(ctx)
	if err != nil {
		return backup.Result{Reason: etcdv1alpha1.ReasonReplayFailed, Message: err.Error()}, "failed"
	}
	deadline := time.Now().Add(c.wait)
	for {
		refs, err := listRefs(ctx, segments)
		if err != nil {
			return backup.Result{Reason: etcdv1alpha1.ReasonSnapshotFailed, Message: err.Error()}, "failed"
		}
		i := slices.IndexFunc(refs, func(r pitr.Ref) bool { return r.First <= rev && rev <= r.Last })
		continues := slices.ContainsFunc(refs, func(r pitr.Ref) bool { return r.First == rev+1 })
		if i >= 0 {
			seg, err := readSegment(ctx, segments, refs[i], id)
			if err != nil {
				return backup.Result{Reason: etcdv1alpha1.ReasonSegmentCorrupt, Message: err.Error()}, "failed"
			}
			for _, g := range pitr.Revisions(seg.Events) {
				if g[0].Revision != rev {
					continue
				}
				if ok, err := tw.rp.Holds(ctx, g); err != nil || !ok {
					return backup.Result{}, fmt.Sprintf("its changes at revision %d are not those of etcd cluster %s (segment %s): a snapshot of another identity", rev, id, refs[i])
				}
			}
		}
		if i >= 0 || continues {
			if _, gap := pitr.NextSegments(rev, refs); gap != nil {
				return backup.Result{Reason: etcdv1alpha1.ReasonOutsideWindow, Message: fmt.Sprintf("snapshot %s (revision %d): %v", object, rev, gap)}, "failed"
			}
			break
		}
		if !time.Now().Before(deadline) {
			return backup.Result{}, fmt.Sprintf("no segment of etcd cluster %s reaches its revision %d", id, rev)
		}
		select {
		case <-ctx.Done():
			return backup.Result{Reason: etcdv1alpha1.ReasonSnapshotFailed, Message: ctx.Err().Error()}, "failed"
		case <-time.After(c.poll):
		}
	}
	version, storage, err := tw.rp.Versions(ctx, tw.clientURL)
	if err != nil {
		return backup.Result{Reason: etcdv1alpha1.ReasonReplayFailed, Message: err.Error()}, "failed"
	}
	r = backup.Result{Succeeded: true, Member: backup.PointInTimeMember, Location: store.Location(), Path: object, SizeBytes: checked.SizeBytes,
		SHA256: checked.SHA256, SnapshotSizeBytes: checked.SnapshotSizeBytes, Revision: rev, ClusterID: id, EtcdVersion: version, StorageVersion: storage,
		Message: fmt.Sprintf("standby seed: snapshot %s at revision %d, continued by the segments of etcd cluster %s", object, rev, id)}
	if checked.Compressed {
		r.Compression = string(etcdv1alpha1.CompressionZstd)
	}
	return r, ""
}

// listRefs lists the segments of a directory, in chain order.
func listRefs(ctx context.Context, d backup.ObjectDir) ([]pitr.Ref, error) {
	names, err := d.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	var refs []pitr.Ref
	for _, n := range names {
		if r, ok := pitr.ParseName(n); ok {
			refs = append(refs, r)
		}
	}
	pitr.Sort(refs)
	return refs, nil
}
