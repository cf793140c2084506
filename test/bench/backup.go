package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
)

// The database the backup-restore section copies: benchValues values of benchValueSize bytes (256 MiB).
const (
	benchValues    = 1024
	benchValueSize = 256 << 10
)

// benchBackupRestore times a Steward backup of a 256 MiB database to a PVC (EtcdBackup created to Complete) and
// a new cluster restored from it (EtcdCluster with bootstrap.fromBackup created to restore Complete and cluster
// Available), next to etcdctl snapshot save / etcdutl snapshot restore of the same member on the host.
func benchBackupRestore(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	kubectl := kubectlOn(ctx, c)
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return section{}, err
	}
	const name, claim = "bench-backup", "bench-backups"
	version := testbed.EtcdVersions[0]
	// Plaintext (tls provider None), so that the raw tools reach the same member the same way as before TLS
	// became the default; the snapshot's bytes do not depend on the transport.
	cluster := func(name, bootstrap string) string {
		return fmt.Sprintf("apiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: %s, namespace: default}\n"+
			"spec: {replicas: 1, version: %q, tls: {provider: None}, storage: {size: 5Gi}, etcd: {quotaBackendBytes: 2Gi}%s}\n", name, version, bootstrap)
	}
	manifest := cluster(name, "") + "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: " + claim + ", namespace: default}\n" +
		"spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 4Gi}}}\n"
	if _, err := kubectl(manifest, "apply", "-f", "-"); err != nil {
		return section{}, err
	}
	if _, err := kubectl("", "wait", "--for=condition=Available", "etcdcluster/"+name, "--timeout=5m"); err != nil {
		return section{}, err
	}
	member, err := kubectl("", "get", "etcdcluster", name, "-o", "jsonpath={.status.members[0].name}")
	if err != nil {
		return section{}, err
	}
	ip, err := kubectl("", "get", "pod", member, "-o", "jsonpath={.status.podIP}")
	if err != nil {
		return section{}, err
	}
	endpoint := "http://" + ip + ":2379"
	dbSize, err := fillEtcd(ctx, clientv3.Config{Endpoints: []string{endpoint}}, benchValues)
	if err != nil {
		return section{}, fmt.Errorf("write data: %w", err)
	}
	// finished polls an object's Complete and Failed conditions (and, for a cluster, Available) until done.
	finished := func(kind, name string, timeout time.Duration) error {
		var failed error
		err := testbed.Eventually(ctx, timeout, 200*time.Millisecond, func() error {
			out, err := kubectl("", "get", kind, name, "-o",
				`jsonpath={.status.conditions[?(@.type=="Complete")].status}/{.status.conditions[?(@.type=="Failed")].status}/{.status.conditions[?(@.type=="Available")].status}`)
			if err != nil {
				return err
			}
			if strings.HasPrefix(out, "True/") || (kind == "etcdcluster" && strings.HasSuffix(out, "/True")) {
				return nil
			}
			if strings.Contains(out, "/True/") {
				failed = fmt.Errorf("%s %s failed", kind, name)
				return nil
			}
			return fmt.Errorf("%s %s not finished: %s", kind, name, out)
		})
		if err != nil {
			return err
		}
		return failed
	}
	var backup, backupJob, restore, verifyJob, restoreInit, rawSave, rawRestore, rawStart []time.Duration
	var backupBytes, rawBytes int64
	for i := 0; i < runs; i++ {
		b := fmt.Sprintf("bench-backup-%d", i)
		begin := time.Now()
		if _, err := kubectl(fmt.Sprintf("apiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdBackup\nmetadata: {name: %s, namespace: default}\n"+
			"spec: {clusterName: %s, destination: {pvc: {claimName: %s, path: bench/%d.db}}}\n", b, name, claim, i), "apply", "-f", "-"); err != nil {
			return section{}, err
		}
		if err := finished("etcdbackup", b, 10*time.Minute); err != nil {
			return section{}, err
		}
		backup = append(backup, time.Since(begin))
		out, err := kubectl("", "get", "etcdbackup", b, "-o", "jsonpath={.status.snapshotSizeBytes}/{.status.jobName}")
		if err != nil {
			return section{}, err
		}
		size, job, _ := strings.Cut(out, "/")
		if backupBytes, err = strconv.ParseInt(size, 10, 64); err != nil {
			return section{}, fmt.Errorf("backup %s size %q: %w", b, size, err)
		}
		if d, ok := agentRun(ctx, cs, job); ok {
			backupJob = append(backupJob, d)
		}

		restored := fmt.Sprintf("bench-restored-%d", i)
		begin = time.Now()
		if _, err := kubectl(cluster(restored, ", bootstrap: {fromBackup: {backupName: "+b+"}}"), "apply", "-f", "-"); err != nil {
			return section{}, err
		}
		if err := finished("etcdrestore", restored+"-from-backup", 10*time.Minute); err != nil {
			return section{}, err
		}
		if err := finished("etcdcluster", restored, 10*time.Minute); err != nil {
			return section{}, err
		}
		restore = append(restore, time.Since(begin))
		if job, err := kubectl("", "get", "etcdrestore", restored+"-from-backup", "-o", "jsonpath={.status.verifyJobName}"); err == nil {
			if d, ok := agentRun(ctx, cs, job); ok {
				verifyJob = append(verifyJob, d)
			}
		}
		if pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: resources.LabelCluster + "=" + restored}); err == nil {
			for _, p := range pods.Items {
				for _, st := range p.Status.InitContainerStatuses {
					if t := st.State.Terminated; st.Name == resources.RestoreContainer && t != nil {
						restoreInit = append(restoreInit, t.FinishedAt.Sub(t.StartedAt.Time))
					}
				}
			}
		}
		if _, err := kubectl("", "delete", "etcdcluster", restored, "--wait=true"); err != nil {
			return section{}, err
		}

		save, restoreTime, start, n, err := etcdutlSaveRestore(ctx, c, endpoint)
		if err != nil {
			return section{}, err
		}
		rawSave, rawRestore, rawStart, rawBytes = append(rawSave, save), append(rawRestore, restoreTime), append(rawStart, start), n
	}
	for i := 0; i < runs; i++ {
		if _, err := kubectl("", "delete", "etcdbackup", fmt.Sprintf("bench-backup-%d", i), "--wait=true"); err != nil {
			return section{}, err
		}
	}
	if _, err := kubectl("", "delete", "etcdcluster/"+name, "pvc/"+claim, "--wait=true"); err != nil {
		return section{}, err
	}
	parts := table([]row{{"backup agent container, start to end", backupJob}, {"restore verify agent container, start to end", verifyJob},
		{"member's restore init container", restoreInit}})
	return render("backup-restore", map[string]any{"Version": version, "Values": benchValues, "ValueKiB": benchValueSize >> 10, "DBMiB": fmt.Sprintf("%.0f", float64(dbSize)/(1<<20)), "Runs": runs, "Table": rateTable([]rateRow{{"Steward backup (EtcdBackup to PVC)", backup, backupBytes},
		{"`etcdctl snapshot save`", rawSave, rawBytes},
		{"Steward restore (fromBackup to Available)", restore, backupBytes},
		{"`etcdutl snapshot restore`", rawRestore, rawBytes},
		{"`etcdutl snapshot restore` + etcd to healthy", rawStart, rawBytes}}), "Parts": parts})
}

// fillEtcd writes values values of benchValueSize bytes (benchValue's, under benchKey's keys) through a client of
// cfg, 8 at a time, and returns the database size of cfg's first endpoint.
func fillEtcd(ctx context.Context, cfg clientv3.Config, values int) (int64, error) {
	return fillEtcdWith(ctx, cfg, values, benchValue)
}

// fillEtcdWith is fillEtcd with the values value(k) fills in.
func fillEtcdWith(ctx context.Context, cfg clientv3.Config, values int, value func(k int, value []byte)) (int64, error) {
	cfg.DialTimeout, cfg.Logger = 5*time.Second, zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		return 0, err
	}
	defer func() { _ = cli.Close() }()
	keys := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, benchValueSize)
			for k := range keys {
				value(k, buf)
				if _, err := cli.Put(ctx, benchKey(k), string(buf)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	go func() {
		defer close(keys)
		for k := 0; k < values; k++ {
			select {
			case keys <- k:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	st, err := cli.Status(ctx, cfg.Endpoints[0])
	if err != nil {
		return 0, err
	}
	return st.DbSize, nil
}

// benchKey is the key of fillEtcd's value k.
func benchKey(k int) string { return fmt.Sprintf("/bench/%05d", k) }

// benchValue fills value with fillEtcd's value k: pseudo-random bytes (nothing for a file system or a snapshot
// to compress) of a stream seeded with its key, so that a bench can check any key it reads back without keeping
// what it wrote.
func benchValue(k int, value []byte) {
	_, _ = rand.NewChaCha8(sha256.Sum256([]byte(benchKey(k)))).Read(value)
}

// agentRun is how long the agent container of Job name ran (Kubernetes timestamps, 1 s resolution): the agent's
// own work, without its Pod's start or anyone noticing its end.
func agentRun(ctx context.Context, cs kubernetes.Interface, name string) (time.Duration, bool) {
	if name == "" {
		return 0, false
	}
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + name})
	if err != nil {
		return 0, false
	}
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			if t := st.State.Terminated; st.Name == resources.AgentContainer && t != nil {
				return t.FinishedAt.Sub(t.StartedAt.Time), true
			}
		}
	}
	return 0, false
}

// etcdutlSaveRestore times etcdctl snapshot save from endpoint to a file, etcdutl snapshot restore of that file
// into a data dir, and (separately, on a second restore) restore plus an etcd process started on it until /health.
func etcdutlSaveRestore(ctx context.Context, c *testbed.Cluster, endpoint string) (save, restore, restoreStart time.Duration, size int64, err error) {
	dir, err := os.MkdirTemp("", "steward-bench-snapshot-")
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	bin := c.EtcdBinDir(testbed.EtcdVersions[0])
	run := func(name string, args ...string) (time.Duration, error) {
		begin := time.Now()
		out, err := exec.CommandContext(ctx, filepath.Join(bin, name), args...).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%s %v: %w: %s", name, args, err, out)
		}
		return time.Since(begin), nil
	}
	snap := filepath.Join(dir, "snapshot.db")
	if save, err = run("etcdctl", "--endpoints="+endpoint, "snapshot", "save", snap); err != nil {
		return 0, 0, 0, 0, err
	}
	fi, err := os.Stat(snap)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	const peer, client = "http://127.0.0.1:36380", "http://127.0.0.1:36379"
	restoreArgs := func(data string) []string {
		return []string{"snapshot", "restore", snap, "--data-dir=" + data, "--name=default",
			"--initial-cluster=default=" + peer, "--initial-advertise-peer-urls=" + peer}
	}
	if restore, err = run("etcdutl", restoreArgs(filepath.Join(dir, "restored"))...); err != nil {
		return 0, 0, 0, 0, err
	}
	data := filepath.Join(dir, "started")
	begin := time.Now()
	if _, err := run("etcdutl", restoreArgs(data)...); err != nil {
		return 0, 0, 0, 0, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "etcd"), "--name=default", "--data-dir="+data,
		"--listen-client-urls="+client, "--advertise-client-urls="+client, "--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer, "--initial-cluster=default="+peer, "--quota-backend-bytes=2147483648")
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, 0, err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if err := testbed.Eventually(ctx, time.Minute, 20*time.Millisecond, func() error { return testbed.HTTPHealthy(client + "/health")(ctx) }); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("etcd on the restored data: %w", err)
	}
	return save, restore, time.Since(begin), fi.Size(), nil
}

type rateRow struct {
	name  string
	times []time.Duration
	bytes int64
}

// rateTable is table with the throughput at the median time: bytes over it in MiB/s.
func rateTable(rows []rateRow) string {
	var b strings.Builder
	b.WriteString("| measurement | runs | median | min | max | MiB/s (median) |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		t := sorted(r.times)
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %.0f |\n", r.name, len(t), round(t[len(t)/2]), round(t[0]), round(t[len(t)-1]),
			float64(r.bytes)/(1<<20)/t[len(t)/2].Seconds())
	}
	return b.String()
}
