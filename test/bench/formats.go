package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"filippo.io/age"
	clientv3 "go.etcd.io/etcd/client/v3"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/testbed"
)

// The database of the backup-formats section: formatValues values of benchValueSize bytes, half of them
// pseudo-random (nothing compresses them) and half JSON shaped like Kubernetes objects (what an API server stores).
const formatValues = 4096

// storedFormat is one way of storing a backup.
type storedFormat struct {
	name  string
	codec backup.Codec
}

// benchBackupFormats measures the agent's data path for every stored format, on the host: a snapshot streamed
// from a bare etcd member through the codec into a file store (a backup Job's work) and read back through
// CopyVerified (a verify Job's or restoring member's), next to the plain copy.
func benchBackupFormats(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	dir, err := os.MkdirTemp("", "steward-bench-formats-")
	if err != nil {
		return section{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	version := testbed.EtcdVersions[0]
	clientURL, peer := "http://127.0.0.1:37390", "http://127.0.0.1:37391"
	cmd := exec.CommandContext(ctx, filepath.Join(c.EtcdBinDir(version), "etcd"),
		append(loopbackMemberArgs(0, dir, clientURL, peer, "m0="+peer, "new", "bench-formats"), "--quota-backend-bytes=4294967296")...)
	if err := cmd.Start(); err != nil {
		return section{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := testbed.Eventually(ctx, time.Minute, 20*time.Millisecond, func() error { return testbed.HTTPHealthy(clientURL + "/health")(ctx) }); err != nil {
		return section{}, err
	}
	fillStart := time.Now()
	dbSize, err := fillEtcdWith(ctx, clientv3.Config{Endpoints: []string{clientURL}}, formatValues, mixedValue)
	if err != nil {
		return section{}, fmt.Errorf("write data: %w", err)
	}
	fillTook := time.Since(fillStart)

	id, err := age.GenerateX25519Identity()
	if err != nil {
		return section{}, err
	}
	enc := backup.Codec{Recipient: id.Recipient(), RecipientName: id.Recipient().String(), Identities: []age.Identity{id}}
	none := backup.Codec{Compression: etcdv1alpha1.CompressionNone}
	noneEnc := enc
	noneEnc.Compression = etcdv1alpha1.CompressionNone
	formats := []storedFormat{{"plain (`compression: None`, as before)", none}, {"zstd (the default)", backup.Codec{}},
		{"age, uncompressed", noneEnc}, {"zstd + age", enc}}

	var rows []string
	var snapSize int64
	for fi, f := range formats {
		var put, read []time.Duration
		var stored int64
		for i := 0; i < runs; i++ {
			store := backup.FileStore{Root: dir, Path: fmt.Sprintf("out/%d-%d.db", fi, i), Claim: "bench"}
			begin := time.Now()
			snap, err := etcd.OpenSnapshot(ctx, clientURL, nil, etcd.Password{})
			if err != nil {
				return section{}, err
			}
			v := backup.NewVerifier(snap.Data)
			st, err := backup.PutEncoded(ctx, store, f.codec, v)
			_ = snap.Data.Close()
			if err != nil {
				return section{}, fmt.Errorf("%s: store: %w", f.name, err)
			}
			put = append(put, time.Since(begin))
			snapSize, stored = v.Size(), st.SizeBytes
			// Dropped from the page cache is not possible without root on every machine; the read is warm, as a
			// verify Job's read of a just-written claim or object usually is not: a bound on the codec's cost.
			begin = time.Now()
			if _, err := backup.CopyVerified(ctx, store, backup.Expected{SizeBytes: st.SizeBytes, SHA256: st.SHA256, SnapshotSizeBytes: v.Size()}, f.codec, io.Discard); err != nil {
				return section{}, fmt.Errorf("%s: read back: %w", f.name, err)
			}
			read = append(read, time.Since(begin))
			if err := store.Delete(ctx); err != nil {
				return section{}, err
			}
		}
		ps, rs := sorted(put), sorted(read)
		rows = append(rows, fmt.Sprintf("| %s | %.0f | %.2f | %s | %.0f | %s | %.0f |", f.name, float64(stored)/(1<<20), float64(snapSize)/float64(stored),
			round(ps[len(ps)/2]), float64(snapSize)/(1<<20)/ps[len(ps)/2].Seconds(), round(rs[len(rs)/2]), float64(snapSize)/(1<<20)/rs[len(rs)/2].Seconds()))
	}
	table := "| stored as | MiB stored | ratio | backup (median) | MiB/s | read back and verify (median) | MiB/s |\n|---|---|---|---|---|---|---|\n" +
		strings.Join(rows, "\n") + "\n"
	return render("backup-formats", map[string]any{"Version": version, "Values": formatValues, "ValueKiB": benchValueSize >> 10,
		"DBMiB": fmt.Sprintf("%.0f", float64(dbSize)/(1<<20)), "SnapMiB": fmt.Sprintf("%.0f", float64(snapSize)/(1<<20)),
		"FillTook": round(fillTook), "Runs": runs, "Table": table})
}

// mixedValue is value k of the backup-formats database: even keys pseudo-random (benchValue), odd keys JSON
// shaped like Kubernetes objects (kubeLikeValue).
func mixedValue(k int, value []byte) {
	if k%2 == 0 {
		benchValue(k, value)
		return
	}
	kubeLikeValue(k, value)
}

// kubeLikeValue fills value with JSON objects like a ConfigMap's or a Pod's: the same field names and shapes,
// names, uids and resource versions that differ per object.
func kubeLikeValue(k int, value []byte) {
	var b strings.Builder
	for i := 0; b.Len() < len(value); i++ {
		fmt.Fprintf(&b, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-%d-%d","namespace":"team-%d","uid":"%08x-%04x-4%03x-8%03x-%012x",`+
			`"resourceVersion":"%d","labels":{"app":"web","pod-template-hash":"%x"}},"spec":{"containers":[{"name":"web","image":"registry.example.com/web:v1.%d",`+
			`"resources":{"requests":{"cpu":"100m","memory":"128Mi"}}}],"nodeName":"node-%d"},"status":{"phase":"Running","podIP":"10.%d.%d.%d"}}`+"\n",
			k, i, k%17, k*7919+i, i, k%4096, i%4096, k*104729+i, 100000+k*31+i, k*i, i%9, (k+i)%50, k%250, i%250, (k+i)%250)
	}
	copy(value, b.String())
}
