package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/etcdauth"
	"steward.dev/steward/internal/pitr"
	"steward.dev/steward/internal/pki"
)

// Candidate is a full snapshot a point-in-time backup may start from.
type Candidate = pitr.Candidate

// pointInTimeConfig is what `point-in-time` needs besides the output store.
type pointInTimeConfig struct {
	candidates []Candidate
	// open returns the store of a candidate's snapshot (same destination, another path).
	open     func(path string) (backup.Store, error)
	segments backup.ObjectDir
	// codec reads the candidates and writes the result (the segments' directory decodes by itself).
	codec  backup.Codec
	target pitr.Target
	// clusterID is the source cluster's, recorded in the result so that the backup stays one of that cluster.
	clusterID       string
	etcd, etcdutl   string
	workDir         string
	readyTimeout    time.Duration
	maxRequestBytes int
}

// pointInTime writes a new snapshot of the key space as it was at the target: the newest candidate snapshot
// before it, restored into a throwaway single etcd member on loopback, with every change the segments recorded
// after the snapshot and up to the target replayed one recorded revision at a time (so revisions come out as
// they were), snapshotted again into the store. Everything it reads is verified first: the snapshot against its
// record and etcd's checksum, every segment against its own checksum, its name and the chain (no gap).
func pointInTime(ctx context.Context, out backup.Store, c pointInTimeConfig) backup.Result {
	snaps := make([]pitr.Snapshot, len(c.candidates))
	byName := map[string]Candidate{}
	for i, cand := range c.candidates {
		snaps[i] = pitr.Snapshot{Name: cand.Name, Revision: cand.Revision, Time: cand.Time}
		byName[cand.Name] = cand
	}
	names, err := c.segments.List(ctx)
	if err != nil {
		return backup.Result{Reason: etcdv1alpha1.ReasonSnapshotFailed, Message: fmt.Sprintf("list segments: %v", err)}
	}
	var refs []pitr.Ref
	for _, n := range names {
		if r, ok := pitr.ParseName(n); ok {
			refs = append(refs, r)
		}
	}
	chains, err := pitr.Plan(snaps, refs, c.target)
	if err != nil {
		return backup.Result{Reason: etcdv1alpha1.ReasonOutsideWindow, Message: fmt.Sprintf("%v (segments in %s)", err, c.segments.Location())}
	}
	cache := map[string]pitr.Segment{}
	// Every segment any usable chain needs is read and checked before anything else happens.
	for _, ch := range chains {
		for _, r := range ch.Segments {
			if _, ok := cache[r.Name]; ok {
				continue
			}
			seg, err := readSegment(ctx, c.segments, r, c.clusterID)
			if errors.Is(err, backup.ErrNoKey) || errors.Is(err, backup.ErrWrongKey) {
				return backup.Result{Reason: etcdv1alpha1.ReasonEncryptionKeyMismatch, Message: err.Error() + " (the schedule's spec.encryption names the key Secret segments are read with)"}
			}
			if err != nil {
				return backup.Result{Reason: etcdv1alpha1.ReasonSegmentCorrupt, Message: err.Error()}
			}
			cache[r.Name] = seg
		}
	}
	var tried []string
	for _, ch := range chains {
		segs := make([]pitr.Segment, len(ch.Segments))
		for i, r := range ch.Segments {
			segs[i] = cache[r.Name]
		}
		cand := byName[ch.Snapshot.Name]
		r, past := replayOnto(ctx, out, c, cand, segs)
		if past {
			tried = append(tried, fmt.Sprintf("%s holds changes past the target", cand.Name))
			continue
		}
		return r
	}
	return backup.Result{Reason: etcdv1alpha1.ReasonOutsideWindow, Message: fmt.Sprintf("no snapshot before %s: %v", c.target, tried)}
}

func readSegment(ctx context.Context, d backup.ObjectDir, r pitr.Ref, clusterID string) (pitr.Segment, error) {
	b, err := d.Get(ctx, r.Name)
	if err != nil {
		return pitr.Segment{}, fmt.Errorf("segment %s: %w", r, err)
	}
	seg, err := pitr.Parse(b)
	if err != nil {
		return pitr.Segment{}, fmt.Errorf("segment %s in %s: %w", r, d.Location(), err)
	}
	if !r.Matches(seg.Header) {
		return pitr.Segment{}, fmt.Errorf("segment %s in %s: %w: its header says revisions %d..%d", r, d.Location(), pitr.ErrCorrupt, seg.Header.First, seg.Header.Last)
	}
	if clusterID != "" && seg.Header.ClusterID != clusterID {
		return pitr.Segment{}, fmt.Errorf("segment %s in %s: %w: of etcd cluster %s, not %s", r, d.Location(), pitr.ErrCorrupt, seg.Header.ClusterID, clusterID)
	}
	return seg, nil
}

// replayOnto does the work for one candidate. past is true when the restored snapshot turned out to hold changes
// past the target (it was taken while the target's revisions were being written): the caller tries an older one.
func replayOnto(ctx context.Context, out backup.Store, c pointInTimeConfig, cand Candidate, segs []pitr.Segment) (backup.Result, bool) {
	fail := func(reason, format string, a ...any) (backup.Result, bool) {
		return backup.Result{Reason: reason, Message: fmt.Sprintf(format, a...)}, false
	}
	work, err := os.MkdirTemp(c.workDir, "pitr-")
	if err != nil {
		return fail(etcdv1alpha1.ReasonReplayFailed, "work dir: %v", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	snapFile, failure := fetchCandidate(ctx, c, cand, work)
	if failure != nil {
		return *failure, false
	}

	tw, err := startThrowaway(ctx, c, snapFile, work)
	if err != nil {
		return fail(etcdv1alpha1.ReasonReplayFailed, "etcd from snapshot %s: %v", cand.Name, err)
	}
	defer tw.stop()
	rp, clientURL, access := tw.rp, tw.clientURL, tw.access
	actual, err := rp.Revision(ctx)
	if err != nil {
		return fail(etcdv1alpha1.ReasonReplayFailed, "%v", err)
	}
	if pitr.SnapshotPast(segs, actual, c.target) {
		return backup.Result{}, true
	}
	events := pitr.Replayable(segs, actual, c.target)
	groups := pitr.Revisions(events)
	for _, g := range groups {
		if err := rp.Apply(ctx, g); err != nil {
			return fail(etcdv1alpha1.ReasonReplayFailed, "onto backup %s (revision %d): %v", cand.Name, actual, err)
		}
	}
	final, err := rp.Revision(ctx)
	if err != nil {
		return fail(etcdv1alpha1.ReasonReplayFailed, "%v", err)
	}
	r := storeReplayed(ctx, out, c.codec, clientURL, access)
	if r.Succeeded {
		r.Revision, r.ClusterID = final, c.clusterID
		r.Message = fmt.Sprintf("backup %s (revision %d) carried to %s: %d changes in %d revisions replayed from %d segments, revision %d",
			cand.Name, actual, c.target, len(events), len(groups), len(segs), final)
	}
	return r, false
}

// throwaway is a single etcd member on loopback, restored from a snapshot, serving TLS with a CA of its own, and
// a replayer connected to it as root.
type throwaway struct {
	rp        *etcd.Replayer
	clientURL string
	access    *etcd.TLS
	// stop closes the replayer and kills the member, and waits for it to go.
	stop func()
}

// startThrowaway restores snapFile into a data dir under work and starts the member from it with c's etcd,
// waiting up to c.readyTimeout for it to answer; the error carries the tail of etcd's log.
func startThrowaway(ctx context.Context, c pointInTimeConfig, snapFile, work string) (*throwaway, error) {
	peer, client, err := freePorts()
	if err != nil {
		return nil, err
	}
	peerURL, clientURL := "http://127.0.0.1:"+peer, "https://127.0.0.1:"+client
	tlsArgs, access, err := replayTLS(work)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(work, "data")
	if err := restoreThrowaway(ctx, c.etcdutl, snapFile, data, peerURL); err != nil {
		return nil, err
	}
	_ = os.Remove(snapFile)
	var log bytes.Buffer
	ectx, kill := context.WithCancel(ctx)
	member := exec.CommandContext(ectx, c.etcd, "--name=pitr", "--data-dir="+data, //nolint:gosec // etcd of the cluster's image
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL, "--initial-cluster=pitr="+peerURL,
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		// One recorded revision is one transaction however many keys it touched (a range delete of thousands).
		"--max-txn-ops=1000000", "--max-request-bytes="+strconv.Itoa(c.maxRequestBytes),
		// Throwaway: its result is read back and verified through a snapshot, and a crash starts it over, so an
		// fsync per replayed revision would buy nothing and cost most of the replay's time.
		"--unsafe-no-fsync",
		"--quota-backend-bytes="+strconv.FormatInt(8<<30, 10))
	member.Args = append(member.Args, tlsArgs...)
	member.Stdout, member.Stderr = &log, &log
	if err := member.Start(); err != nil {
		kill()
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	// exited closes when the member is gone; kill (cancelling ectx) kills it. Its exit status says nothing the
	// log tail does not.
	exited := make(chan struct{})
	go func() { _ = member.Wait(); close(exited) }()
	rp, err := waitReplayer(ctx, clientURL, access, c.readyTimeout, exited)
	if err != nil {
		kill()
		<-exited
		return nil, fmt.Errorf("%w: %s", err, tail(log.String(), 1500))
	}
	return &throwaway{rp: rp, clientURL: clientURL, access: access, stop: func() { rp.Close(); kill(); <-exited }}, nil
}

// restoreThrowaway restores snapFile into data, the data dir of the one-member throwaway cluster at peerURL.
func restoreThrowaway(ctx context.Context, etcdutl, snapFile, data, peerURL string) error {
	var log bytes.Buffer
	restore := exec.CommandContext(ctx, etcdutl, "snapshot", "restore", snapFile, "--data-dir="+data, "--name=pitr", //nolint:gosec // etcdutl of the cluster's image
		"--initial-cluster=pitr="+peerURL, "--initial-advertise-peer-urls="+peerURL, "--initial-cluster-token=steward-pitr")
	restore.Stdout, restore.Stderr = &log, &log
	if err := restore.Run(); err != nil {
		return fmt.Errorf("etcdutl snapshot restore: %w: %s", err, tail(log.String(), 1500))
	}
	return nil
}

// fetchCandidate copies the candidate's snapshot into work, verified against its backup's record, and returns
// the file; or the result that ends the replay.
func fetchCandidate(ctx context.Context, c pointInTimeConfig, cand Candidate, work string) (string, *backup.Result) {
	src, err := c.open(cand.Path)
	if err != nil {
		return "", &backup.Result{Reason: etcdv1alpha1.ReasonSnapshotFailed, Message: fmt.Sprintf("snapshot %s: %v", cand.Name, err)}
	}
	snapFile := filepath.Join(work, "snapshot.db")
	f, err := os.Create(snapFile) //nolint:gosec // in our own work dir
	if err != nil {
		return "", &backup.Result{Reason: etcdv1alpha1.ReasonReplayFailed, Message: fmt.Sprintf("create %s: %v", snapFile, err)}
	}
	_, err = backup.CopyVerified(ctx, src, backup.Expected{SizeBytes: cand.SizeBytes, SHA256: cand.SHA256, SnapshotSizeBytes: cand.SnapshotSizeBytes}, c.codec, f)
	_ = f.Close()
	if err != nil {
		r := failed(err)
		r.Message = fmt.Sprintf("snapshot of backup %s: %s", cand.Name, r.Message)
		return "", &r
	}
	return snapFile, nil
}

// storeReplayed stores a verified snapshot of the replayed member at out: a result that succeeded, with the
// location, size, checksum and etcd versions (the caller adds the revision and the account), or why not.
func storeReplayed(ctx context.Context, out backup.Store, codec backup.Codec, clientURL string, access *etcd.TLS) backup.Result {
	snap, err := etcd.OpenSnapshot(ctx, clientURL, access, etcd.Password{})
	if err != nil {
		return backup.Result{Reason: etcdv1alpha1.ReasonSnapshotFailed, Message: fmt.Sprintf("snapshot of the replayed member: %v", err)}
	}
	v := backup.NewVerifier(snap.Data)
	stored, err := backup.PutEncoded(ctx, out, codec, v)
	_ = snap.Data.Close()
	switch {
	case errors.Is(err, backup.ErrExists):
		return backup.Result{Reason: etcdv1alpha1.ReasonDestinationExists, Message: err.Error()}
	case backup.IsNoSpace(err):
		return backup.Result{Reason: etcdv1alpha1.ReasonDestinationFull, Message: err.Error()}
	case err != nil:
		return backup.Result{Reason: etcdv1alpha1.ReasonUploadFailed, Message: err.Error()}
	case !v.Verified():
		return backup.Result{Reason: etcdv1alpha1.ReasonChecksumMismatch, Message: "the snapshot of the replayed member did not verify"}
	}
	r := stored.Succeeded(codec, v.Size())
	r.Member, r.EtcdVersion, r.StorageVersion = backup.PointInTimeMember, snap.Version, snap.StorageVersion
	return r
}

// replayTLS makes a CA of its own for the throwaway member, its serving certificate and a client certificate for
// user root, writes the member's files into work, and returns the member's TLS flags and the client's TLS. The
// snapshot may come from a cluster with authentication on: then every write needs a user with the right to it,
// and root exists in every such store (etcd refuses to enable auth without it), while its other users' passwords
// are not Steward's to know. A client certificate's common name is the user etcd takes it for.
func replayTLS(work string) ([]string, *etcd.TLS, error) {
	now := time.Now()
	ca, err := pki.NewCA("steward point-in-time replay", now)
	if err != nil {
		return nil, nil, err
	}
	server, err := ca.Issue(pki.Request{CommonName: "pitr", DNSNames: []string{replayServerName}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		Server: true, Client: true, Lifetime: 24 * time.Hour}, now)
	if err != nil {
		return nil, nil, err
	}
	root, err := ca.Issue(pki.Request{CommonName: etcdauth.RootUser, Client: true, Lifetime: 24 * time.Hour}, now)
	if err != nil {
		return nil, nil, err
	}
	files := map[string][]byte{"ca.crt": ca.CertPEM, "server.crt": server.CertPEM, "server.key": server.KeyPEM}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(work, name), data, 0o600); err != nil {
			return nil, nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	args := []string{"--cert-file=" + filepath.Join(work, "server.crt"), "--key-file=" + filepath.Join(work, "server.key"),
		"--trusted-ca-file=" + filepath.Join(work, "ca.crt"), "--client-cert-auth"}
	return args, &etcd.TLS{CA: ca.CertPEM, Cert: root.CertPEM, Key: root.KeyPEM, ServerName: replayServerName}, nil
}

// replayServerName is the name the throwaway member's certificate carries.
const replayServerName = "localhost"

// waitReplayer waits until the throwaway member answers.
func waitReplayer(ctx context.Context, endpoint string, access *etcd.TLS, timeout time.Duration, exited <-chan struct{}) (*etcd.Replayer, error) {
	deadline := time.Now().Add(timeout)
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		rp, err := etcd.NewReplayer(ctx, endpoint, access)
		if err == nil {
			if _, err = rp.Revision(rctx); err == nil {
				cancel()
				return rp, nil
			}
			rp.Close()
		}
		cancel()
		select {
		case <-exited:
			return nil, errors.New("etcd exited")
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("not ready after %s: %w", timeout, err)
		}
	}
}

func freePorts() (string, string, error) {
	var ports []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", "", fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		_, p, _ := net.SplitHostPort(l.Addr().String())
		ports = append(ports, p)
	}
	return ports[0], ports[1], nil
}

// parseCandidates reads --candidates (JSON).
func parseCandidates(s string) ([]Candidate, error) {
	var c []Candidate
	if err := json.NewDecoder(bytes.NewReader([]byte(s))).Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("--candidates: %w", err)
	}
	return c, nil
}
