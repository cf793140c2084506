package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
)

// The hibernation bench's data: hibernateValues values of benchValueSize bytes (1 GiB), of which
// hibernateSample are read back after each resume.
const (
	hibernateValues = 4096
	hibernateSample = 64
)

// etcdState is what a resume must keep: etcd's cluster ID and revision, and how many of fillEtcd's keys there are.
type etcdState struct {
	clusterID uint64
	revision  int64
	keys      int64
}

// benchHibernate times hibernating a 3-member TLS cluster holding 1 GiB (from the patch until the last member
// Pod is gone and until status.hibernation.phase is Hibernated) and resuming it (from the patch until Available,
// until every member Pod is Ready and until status.hibernation is cleared). Each resume must bring back the same
// cluster ID and revision and every key, a sample of them read back byte for byte; the section fails otherwise.
// The physical bound is three etcd processes on the host holding the same data, stopped one at a time (the
// leader last) and started again on their data dirs.
func benchHibernate(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	kubectl := kubectlOn(ctx, c)
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return section{}, err
	}
	const name = "bench-hibernate"
	// 4Gi: Steward derives a quota of 1.78 GiB from it (half of what the WAL reserve leaves), room for the 1 GiB.
	manifest := fmt.Sprintf("apiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: %s, namespace: default}\n"+
		"spec: {replicas: 3, version: %q, storage: {size: 4Gi}}\n", name, testbed.EtcdVersions[0])
	if _, err := kubectl(manifest, "apply", "-f", "-"); err != nil {
		return section{}, err
	}
	target, err := stewardTarget(ctx, c, name, true)
	if err != nil {
		return section{}, err
	}
	fillBegin := time.Now()
	dbSize, err := fillEtcd(ctx, target.config(), hibernateValues)
	if err != nil {
		return section{}, fmt.Errorf("write data: %w", err)
	}
	fillTook := time.Since(fillBegin)
	want, err := readBack(ctx, target.config(), hibernateValues)
	if err != nil {
		return section{}, err
	}
	first, err := getCluster(ctx, cs, name)
	if err != nil {
		return section{}, err
	}
	clusterID := first.Status.ClusterID
	patch := func(enabled bool) error {
		_, err := kubectl("", "patch", "etcdcluster", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"hibernation":{"enabled":%t}}}`, enabled))
		return err
	}
	var gone, hibernated, available, podsReady, cleared []time.Duration
	var kept int64
	for i := 0; i < runs; i++ {
		begin := time.Now()
		if err := patch(true); err != nil {
			return section{}, err
		}
		var lastGone, phaseAt time.Duration
		var status *etcdv1alpha1.HibernationStatus
		if err := testbed.Eventually(ctx, 10*time.Minute, 100*time.Millisecond, func() error {
			if lastGone == 0 {
				pods, err := memberPods(ctx, cs, name)
				if err != nil {
					return err
				}
				if len(pods) == 0 {
					lastGone = time.Since(begin)
				}
			}
			if phaseAt == 0 {
				got, err := getCluster(ctx, cs, name)
				if err != nil {
					return err
				}
				if h := got.Status.Hibernation; h != nil && h.Phase == etcdv1alpha1.HibernationHibernated {
					phaseAt, status = time.Since(begin), h
				}
			}
			if lastGone == 0 || phaseAt == 0 {
				return fmt.Errorf("not hibernated: last Pod gone after %s, Hibernated after %s", lastGone, phaseAt)
			}
			return nil
		}); err != nil {
			return section{}, fmt.Errorf("hibernate, run %d: %w", i, err)
		}
		gone, hibernated = append(gone, lastGone), append(hibernated, phaseAt)
		if len(status.Members) != 3 || status.Revision != want.revision || status.DataSizeBytes <= 0 {
			return section{}, fmt.Errorf("run %d: status.hibernation %+v, want 3 members, revision %d and the data size", i, *status, want.revision)
		}
		kept = status.DataSizeBytes
		pvcs, err := cs.CoreV1().PersistentVolumeClaims("default").List(ctx, metav1.ListOptions{LabelSelector: memberSelector(name)})
		if err != nil {
			return section{}, err
		}
		if len(pvcs.Items) != 3 {
			return section{}, fmt.Errorf("run %d: %d volume claims while hibernated, want the 3 members' kept", i, len(pvcs.Items))
		}

		begin = time.Now()
		if err := patch(false); err != nil {
			return section{}, err
		}
		var availableAt, readyAt, clearedAt time.Duration
		if err := testbed.Eventually(ctx, 10*time.Minute, 100*time.Millisecond, func() error {
			got, err := getCluster(ctx, cs, name)
			if err != nil {
				return err
			}
			now := time.Since(begin)
			if availableAt == 0 && meta.IsStatusConditionTrue(got.Status.Conditions, etcdv1alpha1.ConditionAvailable) {
				availableAt = now
			}
			if clearedAt == 0 && got.Status.Hibernation == nil {
				clearedAt = now
			}
			if readyAt == 0 {
				pods, err := memberPods(ctx, cs, name)
				if err != nil {
					return err
				}
				if ready := podsReadyCount(pods); ready == 3 {
					readyAt = time.Since(begin)
				}
			}
			if availableAt == 0 || readyAt == 0 || clearedAt == 0 {
				return fmt.Errorf("not resumed: Available after %s, 3 Pods Ready after %s, status.hibernation cleared after %s", availableAt, readyAt, clearedAt)
			}
			return nil
		}); err != nil {
			return section{}, fmt.Errorf("resume, run %d: %w", i, err)
		}
		available, podsReady, cleared = append(available, availableAt), append(podsReady, readyAt), append(cleared, clearedAt)
		// The Pods are new, and so are their IPs.
		if target, err = stewardTarget(ctx, c, name, true); err != nil {
			return section{}, err
		}
		got, err := readBack(ctx, target.config(), hibernateValues)
		if err != nil {
			return section{}, fmt.Errorf("run %d, after resuming: %w", i, err)
		}
		if got != want {
			return section{}, fmt.Errorf("run %d: after resuming etcd has cluster ID %x, revision %d, %d keys; before hibernating %x, %d, %d",
				i, got.clusterID, got.revision, got.keys, want.clusterID, want.revision, want.keys)
		}
		after, err := getCluster(ctx, cs, name)
		if err != nil {
			return section{}, err
		}
		if after.Status.ClusterID != clusterID {
			return section{}, fmt.Errorf("run %d: status.clusterID %s after resuming, was %s", i, after.Status.ClusterID, clusterID)
		}
	}
	if _, err := kubectl("", "delete", "etcdcluster", name, "--wait=true"); err != nil {
		return section{}, err
	}
	bound, err := etcdProcessesStopStart(ctx, filepath.Join(c.EtcdBinDir(testbed.EtcdVersions[0]), "etcd"), runs, hibernateValues)
	if err != nil {
		return section{}, fmt.Errorf("etcd processes: %w", err)
	}
	return render("hibernate", map[string]any{"Version": testbed.EtcdVersions[0], "Values": hibernateValues, "ValueKiB": benchValueSize >> 10,
		"DBMiB": fmt.Sprintf("%.0f", float64(dbSize)/(1<<20)), "FillTook": round(fillTook), "KeptMiB": fmt.Sprintf("%.0f", float64(kept)/(1<<20)),
		"Sample": hibernateSample, "Runs": runs, "WALMiB": fmt.Sprintf("%.0f", float64(bound.walBytes)/(1<<20)), "Snapshots": bound.snapshots,
		"Table": table([]row{{"hibernate: patch to the last member Pod gone", gone}, {"hibernate: patch to `Hibernated`", hibernated},
			{"resume: patch to `Available`", available}, {"resume: patch to all 3 member Pods Ready", podsReady},
			{"resume: patch to `status.hibernation` cleared", cleared},
			{"3 etcd processes stopped one at a time, the leader last", bound.stop},
			{"3 etcd processes started again on their data dirs, to all healthy", bound.start}})})
}

// getCluster reads EtcdCluster name through the API server, without kubectl's start in every poll.
func getCluster(ctx context.Context, cs kubernetes.Interface, name string) (*etcdv1alpha1.EtcdCluster, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/apis", etcdv1alpha1.GroupVersion.Group, etcdv1alpha1.GroupVersion.Version,
		"namespaces", "default", "etcdclusters", name).SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get etcdcluster %s: %w", name, err)
	}
	var cluster etcdv1alpha1.EtcdCluster
	if err := json.Unmarshal(raw, &cluster); err != nil {
		return nil, fmt.Errorf("etcdcluster %s: %w", name, err)
	}
	return &cluster, nil
}

// memberPods are the member Pods of EtcdCluster name that exist, terminating ones included.
func memberPods(ctx context.Context, cs kubernetes.Interface, name string) ([]corev1.Pod, error) {
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: memberSelector(name)})
	if err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// memberSelector selects the member objects (Pods, volume claims) of EtcdCluster name.
func memberSelector(name string) string {
	return resources.LabelCluster + "=" + name + "," + resources.LabelMember
}

// podsReadyCount is how many of pods are Ready and not being deleted.
func podsReadyCount(pods []corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// readBack waits until etcd answers through a client of cfg and returns its cluster ID, its revision and the
// number of fillEtcd's keys; it fails unless there are values keys and hibernateSample of them, spread over the
// range, hold what fillEtcd wrote. It writes nothing, so that the revision it reads is the data's.
func readBack(ctx context.Context, cfg clientv3.Config, values int) (etcdState, error) {
	cfg.DialTimeout, cfg.Logger = 5*time.Second, zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		return etcdState{}, err
	}
	defer func() { _ = cli.Close() }()
	var resp *clientv3.GetResponse
	if err := testbed.Eventually(ctx, 2*time.Minute, 200*time.Millisecond, func() error {
		octx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err = cli.Get(octx, "/bench/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err
	}); err != nil {
		return etcdState{}, fmt.Errorf("count the keys: %w", err)
	}
	state := etcdState{clusterID: resp.Header.ClusterId, revision: resp.Header.Revision, keys: resp.Count}
	if state.keys != int64(values) {
		return state, fmt.Errorf("%d keys under /bench/, want %d", state.keys, values)
	}
	want := make([]byte, benchValueSize)
	for i := 0; i < hibernateSample; i++ {
		k := i * values / hibernateSample
		got, err := cli.Get(ctx, benchKey(k))
		if err != nil {
			return state, fmt.Errorf("read %s: %w", benchKey(k), err)
		}
		benchValue(k, want)
		if len(got.Kvs) != 1 || !bytes.Equal(got.Kvs[0].Value, want) {
			return state, fmt.Errorf("%s does not hold the value written", benchKey(k))
		}
	}
	return state, nil
}

// stopStartBound is the physical bound of a hibernation and resume: the times of three etcd processes stopped
// one at a time and started again, and what each data dir held (the first's WAL and raft snapshot files).
type stopStartBound struct {
	stop, start []time.Duration
	walBytes    int64
	snapshots   int
}

// etcdProcessesStopStart forms a 3-process cluster of binary etcd on loopback holding values of fillEtcd's values,
// then runs times stops the processes one at a time (SIGTERM, as the kubelet stops a Pod's container; the leader
// last, as Steward does) and starts all three again on their data dirs until every one answers /health, each
// time checking that the data came back as it was.
func etcdProcessesStopStart(ctx context.Context, etcd string, runs, values int) (stopStartBound, error) {
	dir, err := os.MkdirTemp("", "steward-bench-hibernate-")
	if err != nil {
		return stopStartBound{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	peer := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", 37380+i) }
	clientURL := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", 37370+i) }
	initial := fmt.Sprintf("m0=%s,m1=%s,m2=%s", peer(0), peer(1), peer(2))
	cmds := make([]*exec.Cmd, 3)
	defer func() {
		for _, cmd := range cmds {
			if cmd != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}
	}()
	startAll := func() error {
		for i := range cmds {
			cmd := exec.CommandContext(ctx, etcd, loopbackMemberArgs(i, dir, clientURL(i), peer(i), initial, "new", "bench-hibernate")...)
			if err := cmd.Start(); err != nil {
				return err
			}
			cmds[i] = cmd
		}
		for i := range cmds {
			if err := testbed.Eventually(ctx, 5*time.Minute, 20*time.Millisecond, func() error { return testbed.HTTPHealthy(clientURL(i) + "/health")(ctx) }); err != nil {
				return fmt.Errorf("process %d: %w", i, err)
			}
		}
		return nil
	}
	cfg := clientv3.Config{Endpoints: []string{clientURL(0), clientURL(1), clientURL(2)}}
	if err := startAll(); err != nil {
		return stopStartBound{}, err
	}
	if _, err := fillEtcd(ctx, cfg, values); err != nil {
		return stopStartBound{}, fmt.Errorf("write data: %w", err)
	}
	want, err := readBack(ctx, cfg, values)
	if err != nil {
		return stopStartBound{}, err
	}
	var b stopStartBound
	for i := 0; i < runs; i++ {
		order, err := leaderLast(ctx, cfg)
		if err != nil {
			return stopStartBound{}, err
		}
		begin := time.Now()
		for _, m := range order {
			_ = cmds[m].Process.Signal(syscall.SIGTERM)
			_ = cmds[m].Wait()
			cmds[m] = nil
		}
		b.stop = append(b.stop, time.Since(begin))
		if i == 0 {
			if b.walBytes, b.snapshots, err = dataDirFiles(filepath.Join(dir, "0")); err != nil {
				return stopStartBound{}, err
			}
		}
		begin = time.Now()
		if err := startAll(); err != nil {
			return stopStartBound{}, err
		}
		b.start = append(b.start, time.Since(begin))
		got, err := readBack(ctx, cfg, values)
		if err != nil {
			return stopStartBound{}, err
		}
		if got != want {
			return stopStartBound{}, fmt.Errorf("after the restart: %+v, before %+v", got, want)
		}
	}
	return b, nil
}

// leaderLast is the indexes of the endpoints of cfg, the leader's last.
func leaderLast(ctx context.Context, cfg clientv3.Config) ([]int, error) {
	cfg.DialTimeout, cfg.Logger = 5*time.Second, zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cli.Close() }()
	var order []int
	leader := -1
	for i, ep := range cfg.Endpoints {
		st, err := cli.Status(ctx, ep)
		if err != nil {
			return nil, err
		}
		if st.Leader == st.Header.MemberId {
			leader = i
			continue
		}
		order = append(order, i)
	}
	if leader < 0 {
		return nil, errors.New("no leader among the processes")
	}
	return append(order, leader), nil
}

// dataDirFiles is the size of the WAL files and the number of raft snapshot files in etcd data dir dir.
func dataDirFiles(dir string) (walBytes int64, snapshots int, err error) {
	wal, err := filepath.Glob(filepath.Join(dir, "member", "wal", "*.wal"))
	if err != nil {
		return 0, 0, err
	}
	for _, f := range wal {
		fi, err := os.Stat(f)
		if err != nil {
			return 0, 0, err
		}
		walBytes += fi.Size()
	}
	snaps, err := filepath.Glob(filepath.Join(dir, "member", "snap", "*.snap"))
	return walBytes, len(snaps), err
}
