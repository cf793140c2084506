package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
)

// restoreConfig is what `restore` needs besides the store: the member's identity in the new cluster, exactly as
// its etcd is started with, because etcdutl writes it into the restored data.
type restoreConfig struct {
	want                                  backup.Expected
	codec                                 backup.Codec
	dataDir, etcdutl                      string
	name, initialCluster, token, peerURLs string
	bumpRevision                          uint64
}

// install copies this executable to --to, so that a container of another image (the member's etcd image, which
// has etcdutl but no shell) can run it.
func install(args []string) int {
	to := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--to="); ok {
			to = v
		}
	}
	if to == "" {
		fmt.Fprintln(os.Stderr, "usage: steward-agent install --to=PATH")
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "find own executable: %v\n", err)
		return 1
	}
	if err := copyFile(self, to, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func copyFile(from, to string, mode os.FileMode) error {
	in, err := os.Open(from) //nolint:gosec // our own executable
	if err != nil {
		return fmt.Errorf("open %s: %w", from, err)
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode) //nolint:gosec // the install target named by the Pod spec
	if err != nil {
		return fmt.Errorf("create %s: %w", to, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copy to %s: %w", to, err)
	}
	return out.Close()
}

// verify reads the stored snapshot to the end and checks it against the backup's record and etcd's checksum.
func verify(ctx context.Context, store backup.Store, codec backup.Codec, want backup.Expected) backup.Result {
	start := time.Now()
	c, err := backup.CopyVerified(ctx, store, want, codec, io.Discard)
	if err != nil {
		return failed(err)
	}
	return backup.Result{Succeeded: true, Location: store.Location(), SizeBytes: c.SizeBytes, SHA256: c.SHA256, SnapshotSizeBytes: c.SnapshotSizeBytes,
		Message: backup.ReadThroughput(c, time.Since(start))}
}

func failed(err error) backup.Result {
	reason := etcdv1alpha1.ReasonRestoreFailed
	switch {
	case errors.Is(err, backup.ErrNoKey) || errors.Is(err, backup.ErrWrongKey):
		reason = etcdv1alpha1.ReasonEncryptionKeyMismatch
	case errors.Is(err, backup.ErrCorrupt):
		reason = etcdv1alpha1.ReasonSnapshotCorrupt
	case errors.Is(err, backup.ErrUnreadable):
		reason = etcdv1alpha1.ReasonSnapshotUnreadable
	}
	return backup.Result{Reason: reason, Message: err.Error()}
}

// holdsMember reports whether an etcd data dir holds a member: etcd has run on it, or a snapshot was restored
// into it.
func holdsMember(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, "member"))
	return err == nil
}

// restore makes dataDir a member restored from the snapshot, unless it already holds a member (a restarted
// Pod, or one that has run since): a data dir is never overwritten. The snapshot is copied next to the data dir
// and verified first, restored into a temporary dir by the release's own etcdutl, and renamed into place only
// when complete, so a crash at any point leaves either no data dir (the next run starts over) or a whole one.
func restore(ctx context.Context, store backup.Store, c restoreConfig) backup.Result {
	done := backup.Result{Succeeded: true, Location: store.Location(), SizeBytes: c.want.SizeBytes, SHA256: c.want.SHA256}
	if c.dataDir == "" || c.name == "" || c.initialCluster == "" || c.token == "" || c.peerURLs == "" {
		return backup.Result{Reason: etcdv1alpha1.ReasonRestoreFailed, Message: "restore needs --data-dir, --name, --initial-cluster, --initial-cluster-token and --initial-advertise-peer-urls"}
	}
	if holdsMember(c.dataDir) {
		done.Message = "the data dir already holds a member; nothing restored"
		return done
	}
	work := filepath.Dir(filepath.Clean(c.dataDir))
	snap := filepath.Join(work, "restore-snapshot.db")
	staging := filepath.Join(work, "restore-staging")
	defer func() { _ = os.Remove(snap); _ = os.RemoveAll(staging) }()

	f, err := os.OpenFile(snap, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600) //nolint:gosec // a fixed name next to the data dir
	if err != nil {
		return backup.Result{Reason: etcdv1alpha1.ReasonRestoreFailed, Message: fmt.Sprintf("create %s: %v", snap, err)}
	}
	_, err = backup.CopyVerified(ctx, store, c.want, c.codec, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return failed(err)
	}

	if err := os.RemoveAll(staging); err != nil {
		return backup.Result{Reason: etcdv1alpha1.ReasonRestoreFailed, Message: fmt.Sprintf("clear %s: %v", staging, err)}
	}
	args := []string{"snapshot", "restore", snap, "--data-dir=" + staging, "--name=" + c.name,
		"--initial-cluster=" + c.initialCluster, "--initial-cluster-token=" + c.token,
		"--initial-advertise-peer-urls=" + c.peerURLs}
	if c.bumpRevision > 0 {
		args = append(args, "--bump-revision="+strconv.FormatUint(c.bumpRevision, 10), "--mark-compacted")
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, c.etcdutl, args...) //nolint:gosec // etcdutl of the member's image, arguments from the Pod spec
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return backup.Result{Reason: etcdv1alpha1.ReasonRestoreFailed, Message: fmt.Sprintf("etcdutl snapshot restore: %v: %s", err, tail(out.String(), 1500))}
	}
	if err := os.Rename(staging, c.dataDir); err != nil {
		return backup.Result{Reason: etcdv1alpha1.ReasonRestoreFailed, Message: fmt.Sprintf("move restored data into %s: %v", c.dataDir, err)}
	}
	backup.SyncDir(work)
	done.Message = fmt.Sprintf("restored member %s from %s", c.name, store.Location())
	return done
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
