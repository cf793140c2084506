// Command steward-agent is the program of Steward's backup and restore Jobs and init containers. `steward-agent
// snapshot` streams a snapshot from the first healthy member it is given to a file on a mounted volume, an
// S3-compatible bucket, a Google Cloud Storage bucket or an Azure Blob Storage container, verifying etcd's checksum on
// the way and committing only a verified snapshot; `delete` deletes a stored snapshot; `verify` reads a stored snapshot
// back and checks it against its backup's record; `install` copies the agent into a shared volume, and `restore` (run
// from there inside the member's etcd image, next to the etcdutl of the member's release) fetches and verifies the
// snapshot and restores it into an empty data dir; `await-dns`, a bootstrap member's init container, waits until the
// cluster DNS knows every peer's name, without leaving a negative answer in its cache; `run-etcd`, a member's etcd
// container's entrypoint, starts etcd unless its data dir was emptied after the member had run, and answers the
// member's readiness and liveness probes for it; `follow` stores a cluster's changes as continuous backup's segments,
// `point-in-time` replays them onto a snapshot, `standby-seed` finds the snapshot a standby starts from in a
// primary's continuous backup, and `standby` replays the primary's segments into the standby as they are stored.
// The Jobs and restore containers report their result as one line of JSON in the container's termination message,
// which the controllers read into status. It never holds a whole snapshot in memory and never prints credentials.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/pitr"
)

// Environment variables the Job sets from the credentials Secret.
const (
	envAccessKeyID     = "STEWARD_S3_ACCESS_KEY_ID"
	envSecretAccessKey = "STEWARD_S3_SECRET_ACCESS_KEY" //nolint:gosec // the name of a variable, not a credential
	envCABundle        = "STEWARD_S3_CA_BUNDLE"
	// envGCSCredentials is a Google service account key file (JSON); unset: the client's default chain.
	envGCSCredentials = "STEWARD_GCS_CREDENTIALS" //nolint:gosec // the name of a variable, not a credential
	// envAzureAccountKey and envAzureSASToken are an Azure storage account's shared key or a SAS token; both
	// unset: the Azure SDK's default chain (workload identity).
	envAzureAccountKey = "STEWARD_AZURE_ACCOUNT_KEY" //nolint:gosec // the name of a variable, not a credential
	envAzureSASToken   = "STEWARD_AZURE_SAS_TOKEN"   //nolint:gosec // the name of a variable, not a credential
)

type memberList []string

func (m *memberList) String() string     { return strings.Join(*m, ",") }
func (m *memberList) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: steward-agent snapshot|delete|verify|restore|install|await-dns|run-etcd|follow|point-in-time|standby|standby-seed [flags]")
		os.Exit(2)
	}
	cmd := os.Args[1]
	switch cmd {
	case "install":
		os.Exit(install(os.Args[2:]))
	case "await-dns":
		os.Exit(awaitDNS(os.Args[2:]))
	case "run-etcd":
		os.Exit(runEtcd(os.Args[2:]))
	}
	runJob(cmd, os.Args[2:])
}

// jobFlags are the flags of the Job commands (snapshot, delete, verify, restore, follow, point-in-time): one set,
// since they share the destination, the members' credentials and the result file.
type jobFlags struct {
	members                                   memberList
	resultFile                                string
	timeout                                   time.Duration
	pvcRoot, pvcClaim, path                   string
	s3                                        backup.S3Config
	gcs                                       backup.GCSConfig
	azure                                     backup.AzureConfig
	caFile, certFile, keyFile, credentialsDir string
	want                                      backup.Expected
	rst                                       restoreConfig
	fc                                        followConfig
	endpoints, listen                         string
	pc                                        pointInTimeConfig
	poll                                      time.Duration
	sourceCluster                             string
	candidates, segments                      string
	compression, encryptionKeyFile            string
	readKeyFiles                              memberList
	targetRev                                 int64
	targetTime                                string
}

func (f *jobFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.members, "member", "name=clientURL of a member to snapshot from, in order of preference (repeatable)")
	fs.StringVar(&f.resultFile, "result-file", "/dev/termination-log", "where to write the JSON result")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Minute, "deadline of the whole operation")
	fs.StringVar(&f.pvcRoot, "pvc-root", "", "mount point of the destination volume (PVC destination)")
	fs.StringVar(&f.pvcClaim, "pvc-claim", "", "name of the destination PVC, for the reported location")
	fs.StringVar(&f.path, "path", "", "file path under --pvc-root, or the object key with --s3-endpoint, --gcs-bucket or --azure-container")
	fs.StringVar(&f.s3.Endpoint, "s3-endpoint", "", "S3 endpoint host[:port] (S3 destination)")
	fs.StringVar(&f.s3.Bucket, "s3-bucket", "", "S3 bucket")
	fs.StringVar(&f.s3.Region, "s3-region", "", "S3 region")
	fs.BoolVar(&f.s3.ForcePathStyle, "s3-path-style", false, "path-style bucket addressing")
	fs.BoolVar(&f.s3.Insecure, "s3-insecure", false, "plain HTTP")
	fs.StringVar(&f.gcs.Bucket, "gcs-bucket", "", "Google Cloud Storage bucket (GCS destination; --path is the object name)")
	fs.StringVar(&f.gcs.Endpoint, "gcs-endpoint", "", "GCS JSON API URL of an emulator or private endpoint (default: Google's)")
	fs.StringVar(&f.azure.Account, "azure-account", "", "Azure storage account (Azure destination, with --azure-container)")
	fs.StringVar(&f.azure.Container, "azure-container", "", "Azure Blob Storage container (Azure destination; --path is the blob name)")
	fs.StringVar(&f.azure.Endpoint, "azure-endpoint", "", "Azure Blob service URL of the account (default https://<account>.blob.core.windows.net)")
	fs.StringVar(&f.compression, "compression", "Zstd", "how new snapshots and segments are stored: Zstd or None")
	fs.StringVar(&f.encryptionKeyFile, "encryption-key-file", "", "age identities (AGE-SECRET-KEY-1...): new snapshots and segments are encrypted to the first, stored ones decrypted with any")
	fs.Var(&f.readKeyFiles, "decryption-key-file", "more age identities to read stored snapshots and segments with (repeatable)")
	fs.Int64Var(&f.want.SizeBytes, "size", 0, "verify/restore: the stored object's size as its backup recorded it")
	fs.Int64Var(&f.want.SnapshotSizeBytes, "snapshot-size", 0, "verify/restore: the snapshot's size before compression and encryption as its backup recorded it (0: not recorded)")
	fs.StringVar(&f.want.SHA256, "sha256", "", "verify/restore: the snapshot's sha256 as its backup recorded it")
	fs.StringVar(&f.rst.dataDir, "data-dir", "", "restore: the member's etcd data dir (must not hold a member yet)")
	fs.StringVar(&f.rst.etcdutl, "etcdutl", "/usr/local/bin/etcdutl", "restore: etcdutl of the member's release")
	fs.StringVar(&f.rst.name, "name", "", "restore: the member's name")
	fs.StringVar(&f.rst.initialCluster, "initial-cluster", "", "restore: the new cluster's --initial-cluster")
	fs.StringVar(&f.rst.token, "initial-cluster-token", "", "restore: the new cluster's --initial-cluster-token")
	fs.StringVar(&f.rst.peerURLs, "initial-advertise-peer-urls", "", "restore: the member's peer URLs")
	fs.Uint64Var(&f.rst.bumpRevision, "bump-revision", 0, "restore: raise the restored revision by this much and mark it compacted (a re-seed: clients have seen later revisions)")
	fs.StringVar(&f.caFile, "ca-file", "", "CA certificate members' certificates must chain to (TLS clusters; with --cert-file and --key-file)")
	fs.StringVar(&f.certFile, "cert-file", "", "client certificate to authenticate to members with")
	fs.StringVar(&f.keyFile, "key-file", "", "key of --cert-file")
	fs.StringVar(&f.credentialsDir, "credentials-dir", "", "directory of files username and password: the etcd user to authenticate as (clusters where members do not verify client certificates); missing files: none")
	fs.StringVar(&f.endpoints, "endpoints", "", "follow, standby: the cluster's client URLs, comma-separated (its client Service)")
	fs.DurationVar(&f.fc.interval, "interval", 5*time.Second, "follow: how often pending changes are stored as a segment")
	fs.DurationVar(&f.fc.heartbeat, "heartbeat", time.Minute, "follow: store an empty segment after this long without changes")
	fs.IntVar(&f.fc.maxEvents, "max-events", 10000, "follow: store a segment as soon as this many changes are pending")
	fs.StringVar(&f.fc.pruneFile, "prune-file", "", "follow: a file holding a revision; segments ending before it are deleted")
	fs.StringVar(&f.listen, "listen", ":8080", "follow, standby: address of the status endpoint (GET /status)")
	fs.DurationVar(&f.poll, "poll", 2*time.Second, "standby: how often the source is listed for new segments")
	fs.StringVar(&f.sourceCluster, "source-cluster", "", "standby-seed: the primary EtcdCluster's name; --path is its schedule's directory")
	fs.StringVar(&f.candidates, "candidates", "", "point-in-time: JSON list of full snapshots to start from (name, path, size, sha256, revision, time)")
	fs.StringVar(&f.segments, "segments", "", "point-in-time, standby: the segment directory (PVC path, S3, GCS or Azure prefix) of the cluster ID")
	fs.StringVar(&f.pc.clusterID, "cluster-id", "", "point-in-time, standby: the source cluster's etcd cluster ID (hex); segments of another are refused")
	fs.Int64Var(&f.targetRev, "target-revision", 0, "point-in-time: the revision to restore to")
	fs.StringVar(&f.targetTime, "target-time", "", "point-in-time: the time (RFC 3339) to restore to; neither: the latest point")
	fs.StringVar(&f.pc.etcd, "etcd", "/usr/local/bin/etcd", "point-in-time: etcd of the cluster's release")
	fs.StringVar(&f.pc.workDir, "work-dir", os.TempDir(), "point-in-time: scratch space for the snapshot and the throwaway member")
	fs.DurationVar(&f.pc.readyTimeout, "ready-timeout", 2*time.Minute, "point-in-time: how long the throwaway member may take to start")
	fs.IntVar(&f.pc.maxRequestBytes, "max-request-bytes", 64<<20, "point-in-time: the throwaway member's --max-request-bytes")
}

// destination returns how to address a file (storeAt) or a directory (dirAt) of the one destination the flags
// name, a volume or a bucket; it ends the program when they name none or more than one, or the bucket is
// unusable. Each kind of destination is one provider function below.
func (f *jobFlags) destination(ctx context.Context) (storeAt func(path string) (backup.Store, error), dirAt func(dir string) backup.ObjectDir) {
	var given []func(context.Context) (func(string) (backup.Store, error), func(string) backup.ObjectDir, error)
	if f.pvcRoot != "" {
		given = append(given, f.pvcDestination)
	}
	if f.s3.Endpoint != "" {
		given = append(given, f.s3Destination)
	}
	if f.gcs.Bucket != "" {
		given = append(given, f.gcsDestination)
	}
	if f.azure.Container != "" {
		given = append(given, f.azureDestination)
	}
	if len(given) != 1 {
		fmt.Fprintln(os.Stderr, "exactly one of --pvc-root, --s3-endpoint, --gcs-bucket or --azure-container is required")
		os.Exit(2)
	}
	storeAt, dirAt, err := given[0](ctx)
	if err != nil {
		finish(f.resultFile, backup.Result{Reason: etcdv1alpha1.ReasonUploadFailed, Message: err.Error()})
	}
	return storeAt, dirAt
}

// codec is how the flags say new objects are stored and stored ones read: the compression, and the keys of the
// encryption key file (the first encrypts) and of the decryption key files.
func (f *jobFlags) codec() (backup.Codec, error) {
	var c backup.Codec
	if f.encryptionKeyFile != "" {
		b, err := os.ReadFile(f.encryptionKeyFile) //nolint:gosec // the mounted Secret the Job's spec names
		if err != nil {
			return c, fmt.Errorf("read the encryption key: %w", err)
		}
		if c, err = backup.ParseKeys(string(b)); err != nil {
			return c, fmt.Errorf("%s: %w", f.encryptionKeyFile, err)
		}
	}
	for _, file := range f.readKeyFiles {
		b, err := os.ReadFile(file) //nolint:gosec // a mounted Secret the Job's spec names
		if err != nil {
			return c, fmt.Errorf("read a decryption key: %w", err)
		}
		more, err := backup.ParseKeys(string(b))
		if err != nil {
			return c, fmt.Errorf("%s: %w", file, err)
		}
		c.Identities = append(c.Identities, more.Identities...)
	}
	switch c.Compression = etcdv1alpha1.BackupCompression(f.compression); c.Compression {
	case etcdv1alpha1.CompressionZstd, etcdv1alpha1.CompressionNone:
	default:
		fmt.Fprintf(os.Stderr, "--compression %q: want Zstd or None\n", f.compression)
		os.Exit(2)
	}
	return c, nil
}

func (f *jobFlags) pvcDestination(context.Context) (func(string) (backup.Store, error), func(string) backup.ObjectDir, error) {
	return func(p string) (backup.Store, error) {
			return backup.FileStore{Root: f.pvcRoot, Path: p, Claim: f.pvcClaim}, nil
		}, func(d string) backup.ObjectDir {
			return backup.FileDir{Root: f.pvcRoot, Dir: d, Claim: f.pvcClaim}
		}, nil
}

func (f *jobFlags) s3Destination(context.Context) (func(string) (backup.Store, error), func(string) backup.ObjectDir, error) {
	f.s3.AccessKeyID, f.s3.SecretAccessKey = os.Getenv(envAccessKeyID), os.Getenv(envSecretAccessKey)
	f.s3.CABundle = os.Getenv(envCABundle)
	st, err := backup.NewS3Store(f.s3)
	if err != nil {
		return nil, nil, err
	}
	return func(p string) (backup.Store, error) {
		c := f.s3
		c.Key = p
		return backup.NewS3Store(c)
	}, func(d string) backup.ObjectDir { return st.Dir(d) }, nil
}

// gcsDestination is one client of the bucket for every object: the client holds the credentials (a key file,
// or the default chain's token source), found once.
func (f *jobFlags) gcsDestination(ctx context.Context) (func(string) (backup.Store, error), func(string) backup.ObjectDir, error) {
	f.gcs.CredentialsJSON = []byte(os.Getenv(envGCSCredentials))
	b, err := backup.NewGCSBucket(ctx, f.gcs)
	if err != nil {
		return nil, nil, err
	}
	return func(p string) (backup.Store, error) { return b.Store(p), nil },
		func(d string) backup.ObjectDir { return b.Dir(d) }, nil
}

// azureDestination is one client of the container for every blob, with the shared key or SAS token from the
// environment, or else the default chain (workload identity), found once.
func (f *jobFlags) azureDestination(context.Context) (func(string) (backup.Store, error), func(string) backup.ObjectDir, error) {
	f.azure.AccountKey, f.azure.SASToken = os.Getenv(envAzureAccountKey), os.Getenv(envAzureSASToken)
	c, err := backup.NewAzureContainer(f.azure)
	if err != nil {
		return nil, nil, err
	}
	return func(p string) (backup.Store, error) { return c.Store(p), nil },
		func(d string) backup.ObjectDir { return c.Dir(d) }, nil
}

// withSpace adds the destination volume's space to a result: a backup that fit and one that did not both say how
// much room is left for the next. A bucket has no size to report.
func (f *jobFlags) withSpace(r backup.Result) backup.Result {
	if f.pvcRoot == "" {
		return r
	}
	sp, err := backup.SpaceOf(f.pvcRoot)
	if err != nil {
		fmt.Fprintf(os.Stderr, "measure the destination volume: %v\n", err)
		return r
	}
	r.Space = sp
	return r
}

// memberAccess is how the Job authenticates to members: a client certificate (TLS clusters) and a password
// (clusters whose members do not verify client certificates), either or neither.
func (f *jobFlags) memberAccess() (*etcd.TLS, etcd.Password) {
	pw, err := loadPassword(f.credentialsDir)
	if err != nil {
		finish(f.resultFile, backup.Result{Reason: etcdv1alpha1.ReasonSnapshotFailed, Message: err.Error()})
	}
	var t *etcd.TLS
	if f.caFile != "" || f.certFile != "" || f.keyFile != "" {
		// No server name override: the agent dials members by their DNS names, which their certificates carry.
		if t, err = etcd.LoadTLS(f.caFile, f.certFile, f.keyFile, ""); err != nil {
			finish(f.resultFile, backup.Result{Reason: etcdv1alpha1.ReasonSnapshotFailed, Message: err.Error()})
		}
	}
	return t, pw
}

// runJob runs one Job command and ends the program with its result.
func runJob(cmd string, args []string) {
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	var f jobFlags
	f.register(fs)
	_ = fs.Parse(args)
	f.pc.etcdutl = f.rst.etcdutl

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	timeout := f.timeout
	if cmd == "follow" || cmd == "standby" {
		timeout = 100 * 365 * 24 * time.Hour // a follower or a standby's applier runs until it is stopped
	}
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	defer cancelT()

	storeAt, dirAt := f.destination(ctx)
	store, err := storeAt(f.path)
	if err != nil {
		finish(f.resultFile, backup.Result{Reason: etcdv1alpha1.ReasonUploadFailed, Message: err.Error()})
	}
	t, pw := f.memberAccess()
	codec, err := f.codec()
	if err != nil {
		finish(f.resultFile, backup.Result{Reason: etcdv1alpha1.ReasonEncryptionKeyNotFound, Message: err.Error()})
	}
	encodedDirAt := func(d string) backup.ObjectDir { return backup.EncodedDir{ObjectDir: dirAt(d), Codec: codec} }

	switch cmd {
	case "snapshot":
		finish(f.resultFile, f.withSpace(snapshot(ctx, f.members, store, codec, t, pw)))
	case "follow":
		os.Exit(runFollow(ctx, f.fc, f.endpoints, f.listen, t, pw, func(id string) backup.ObjectDir { return encodedDirAt(pitr.SegmentsDir(f.path, id)) }))
	case "standby":
		base := path.Dir(f.segments)
		os.Exit(runStandby(ctx, standbyConfig{tls: t, password: pw, segments: encodedDirAt(f.segments), clusterID: f.pc.clusterID, poll: f.poll,
			base: dirAt(base), dirOf: func(id string) backup.ObjectDir { return dirAt(path.Join(base, id)) }, identities: time.Minute},
			f.endpoints, f.listen))
	case "standby-seed":
		pc := f.pc
		pc.open, pc.codec = storeAt, codec
		finish(f.resultFile, standbySeed(ctx, seedConfig{pointInTimeConfig: pc, cluster: f.sourceCluster, prefix: f.path, dir: dirAt,
			wait: 2 * time.Minute, poll: 5 * time.Second}))
	case "point-in-time":
		pc := f.pc
		if pc.candidates, err = parseCandidates(f.candidates); err != nil {
			finish(f.resultFile, backup.Result{Reason: etcdv1alpha1.ReasonOutsideWindow, Message: err.Error()})
		}
		pc.target.Revision = f.targetRev
		if f.targetTime != "" {
			if pc.target.Time, err = time.Parse(time.RFC3339Nano, f.targetTime); err != nil {
				finish(f.resultFile, backup.Result{Reason: etcdv1alpha1.ReasonOutsideWindow, Message: fmt.Sprintf("--target-time: %v", err)})
			}
		}
		pc.open, pc.segments, pc.codec = storeAt, encodedDirAt(f.segments), codec
		finish(f.resultFile, f.withSpace(pointInTime(ctx, store, pc)))
	case "delete":
		r := backup.Result{Succeeded: true, Location: store.Location()}
		if err := store.Delete(ctx); err != nil {
			r = backup.Result{Reason: etcdv1alpha1.ReasonUploadFailed, Message: err.Error()}
		}
		finish(f.resultFile, r)
	case "verify":
		finish(f.resultFile, verify(ctx, store, codec, f.want))
	case "restore":
		rst := f.rst
		rst.want, rst.codec = f.want, codec
		finish(f.resultFile, restore(ctx, store, rst))
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", cmd)
		os.Exit(2)
	}
}

// snapshot tries the members in order until one delivers a verified snapshot to the store. A member that fails
// before any byte is stored is skipped; a checksum mismatch or a destination error ends the attempt (the next
// member would not fix the destination, and a corrupt stream is worth a human's look).
func snapshot(ctx context.Context, members []string, store backup.Store, codec backup.Codec, t *etcd.TLS, pw etcd.Password) backup.Result {
	var errs []string
	for _, m := range members {
		name, url, ok := strings.Cut(m, "=")
		if !ok {
			return backup.Result{Reason: etcdv1alpha1.ReasonSnapshotFailed, Message: fmt.Sprintf("bad --member %q: want name=url", m)}
		}
		snap, err := etcd.OpenSnapshot(ctx, url, t, pw)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		start := time.Now()
		v := backup.NewVerifier(snap.Data)
		stored, err := backup.PutEncoded(ctx, store, codec, v)
		_ = snap.Data.Close()
		switch {
		case errors.Is(err, backup.ErrExists):
			return backup.Result{Reason: etcdv1alpha1.ReasonDestinationExists, Message: err.Error()}
		case backup.IsNoSpace(err):
			return backup.Result{Reason: etcdv1alpha1.ReasonDestinationFull, Message: fmt.Sprintf("snapshot from %s: %v", name, err)}
		case errors.Is(err, backup.ErrDestination):
			return backup.Result{Reason: etcdv1alpha1.ReasonUploadFailed, Message: err.Error()}
		case errors.Is(err, backup.ErrChecksumMismatch) || v.Mismatch():
			return backup.Result{Reason: etcdv1alpha1.ReasonChecksumMismatch, Message: fmt.Sprintf("snapshot from %s after %d bytes: %v", name, v.Size(), err)}
		case err != nil && v.Size() == 0:
			// Nothing arrived: the member went away between status and stream; try the next.
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			continue
		case err != nil:
			return backup.Result{Reason: etcdv1alpha1.ReasonUploadFailed, Message: fmt.Sprintf("snapshot from %s: %v", name, err)}
		case !v.Verified():
			return backup.Result{Reason: etcdv1alpha1.ReasonChecksumMismatch, Message: "the destination stopped reading before the end of the snapshot"}
		}
		r := stored.Succeeded(codec, v.Size())
		r.Member, r.Endpoint, r.Revision = name, url, snap.Revision
		r.EtcdVersion, r.StorageVersion, r.ClusterID = snap.Version, snap.StorageVersion, etcd.FormatID(snap.ClusterID)
		r.Message = backup.Throughput(v.Size(), stored.SizeBytes, time.Since(start))
		return r
	}
	if len(members) == 0 {
		errs = append(errs, "no member given")
	}
	return backup.Result{Reason: etcdv1alpha1.ReasonSnapshotFailed, Message: "no member delivered a snapshot: " + strings.Join(errs, "; ")}
}

// finish writes the result where Kubernetes picks it up as the termination message, and exits non-zero on
// failure so that the Job fails.
func finish(resultFile string, r backup.Result) {
	b := backup.Encode(r)
	if err := os.WriteFile(resultFile, b, 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "write result to %s: %v\n", resultFile, err)
	}
	fmt.Println(string(b))
	if !r.Succeeded {
		os.Exit(1)
	}
	os.Exit(0)
}

// loadPassword reads the etcd user and password from the files username and password in dir (the mounted operator
// credentials Secret). The Secret's volume is optional, so missing files mean no password.
func loadPassword(dir string) (etcd.Password, error) {
	if dir == "" {
		return etcd.Password{}, nil
	}
	user, err := os.ReadFile(filepath.Join(dir, "username")) //nolint:gosec // the mounted Secret, in the directory --credentials-dir names
	if errors.Is(err, os.ErrNotExist) {
		return etcd.Password{}, nil
	}
	if err != nil {
		return etcd.Password{}, fmt.Errorf("read etcd user name: %w", err)
	}
	password, err := os.ReadFile(filepath.Join(dir, "password")) //nolint:gosec // as above
	if err != nil {
		return etcd.Password{}, fmt.Errorf("read the password of etcd user %s: %w", user, err)
	}
	return etcd.Password{User: strings.TrimSpace(string(user)), Password: string(password)}, nil
}
