package main

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"steward.dev/steward/internal/controller/etcdbackupschedule"
	"steward.dev/steward/internal/pitr"
	"steward.dev/steward/internal/testbed"
)

// The continuous-backup bench's load: put-only clients spread over the members, 256-byte values.
const (
	pitrClients     = 8
	pitrValueSize   = 256
	pitrPhase       = 15 * time.Second
	pitrSampleEvery = 250 * time.Millisecond
)

// benchPITR measures continuous backup on a 3-member cluster: the write throughput clients get with the follower
// off and on (alternating phases, so that drift of the machine affects both alike), how far the stored segments
// trail the cluster while it writes (sampled from the follower's report), and a point-in-time backup of the
// latest point after the load: its time per million replayed changes.
func benchPITR(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	kubectl := kubectlOn(ctx, c)
	const name = "bench-pitr"
	runs = min(runs, 3)
	manifest := fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %[1]s-backups, namespace: default}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 4Gi}}}
---
apiVersion: etcd.steward.dev/v1alpha1
kind: EtcdCluster
metadata: {name: %[1]s, namespace: default}
spec: {replicas: 3, version: %[2]q, tls: {provider: None}, storage: {size: 4Gi}}
---
apiVersion: etcd.steward.dev/v1alpha1
kind: EtcdBackupSchedule
metadata: {name: %[1]s, namespace: default}
spec:
  clusterName: %[1]s
  schedule: "@every 6h"
  destination: {pvc: {claimName: %[1]s-backups, path: pitr}}
  continuous: {enabled: false}
`, name, testbed.EtcdVersions[0])
	if _, err := kubectl(manifest, "apply", "-f", "-"); err != nil {
		return section{}, err
	}
	defer func() {
		_, _ = kubectl("", "delete", "etcdbackupschedule,etcdbackup,etcdcluster", "--all", "-n", "default", "--wait=true", "--timeout=5m")
		_, _ = kubectl("", "delete", "pvc", name+"-backups", "-n", "default", "--wait=true", "--timeout=2m")
	}()
	ips, err := settledMemberIPs(ctx, kubectl, name)
	if err != nil {
		return section{}, err
	}
	var endpoints []string
	for _, ip := range ips {
		endpoints = append(endpoints, "http://"+ip+":2379")
	}
	setContinuous := func(on bool) error {
		if _, err := kubectl("", "patch", "etcdbackupschedule", name, "--type=merge", "-p",
			fmt.Sprintf(`{"spec":{"continuous":{"enabled":%t}}}`, on)); err != nil {
			return err
		}
		return testbed.Eventually(ctx, 3*time.Minute, 200*time.Millisecond, func() error {
			out, err := kubectl("", "get", "etcdbackupschedule", name, "-o", `jsonpath={.status.conditions[?(@.type=="ContinuousBackup")].status}/{.status.continuous.follower}`)
			if err != nil {
				return err
			}
			pods, err := kubectl("", "get", "pods", "-l", "app.kubernetes.io/component=continuous-backup", "-o", "name")
			if err != nil {
				return err
			}
			if on && (out != "True/"+name+"-follower" || pods == "") || !on && (out != "/" || pods != "") {
				return fmt.Errorf("continuous backup %t: %q, pods %q", on, out, pods)
			}
			return nil
		})
	}
	var off, on []float64
	var lagRevs []int64
	var lagTimes []time.Duration
	var seq atomic.Int64
	for i := 0; i < runs; i++ {
		for _, follow := range []bool{false, true} {
			if err := setContinuous(follow); err != nil {
				return section{}, err
			}
			var sample func() (pitr.FollowerStatus, error)
			if follow {
				ip, err := kubectl("", "get", "pods", "-l", "app.kubernetes.io/component=continuous-backup", "-o", "jsonpath={.items[0].status.podIP}")
				if err != nil {
					return section{}, err
				}
				sample = func() (pitr.FollowerStatus, error) { return etcdbackupschedule.FetchFollowerStatus(ctx, ip) }
				// A follower turned on again first reads what was written while it was off: the phase starts once
				// it has caught up, so that it measures the steady state.
				if err := waitStored(ctx, endpoints, ip); err != nil {
					return section{}, err
				}
			}
			rate, revs, times, err := putLoad(ctx, endpoints, &seq, sample)
			if err != nil {
				return section{}, err
			}
			if follow {
				on, lagRevs, lagTimes = append(on, rate), append(lagRevs, revs...), append(lagTimes, times...)
			} else {
				off = append(off, rate)
			}
		}
	}
	// Every change the load made is stored; then the latest point is materialised.
	ip, err := kubectl("", "get", "pods", "-l", "app.kubernetes.io/component=continuous-backup", "-o", "jsonpath={.items[0].status.podIP}")
	if err != nil {
		return section{}, err
	}
	if err := waitStored(ctx, endpoints, ip); err != nil {
		return section{}, err
	}
	begin := time.Now()
	if _, err := kubectl(fmt.Sprintf(`apiVersion: etcd.steward.dev/v1alpha1
kind: EtcdBackup
metadata: {name: %[1]s-latest, namespace: default}
spec:
  clusterName: %[1]s
  destination: {pvc: {claimName: %[1]s-backups, path: pit/latest.db}}
  pointInTime: {scheduleName: %[1]s}
`, name), "apply", "-f", "-"); err != nil {
		return section{}, err
	}
	var message, failure string
	if err := testbed.Eventually(ctx, 20*time.Minute, 200*time.Millisecond, func() error {
		out, err := kubectl("", "get", "etcdbackup", name+"-latest", "-o",
			`jsonpath={.status.conditions[?(@.type=="Complete")].status}|{.status.conditions[?(@.type=="Failed")].status}|{.status.conditions[?(@.type=="Complete")].message}|{.status.conditions[?(@.type=="Failed")].message}`)
		if err != nil {
			return err
		}
		parts := strings.SplitN(out, "|", 4)
		switch {
		case len(parts) != 4:
			return fmt.Errorf("status %q", out)
		case parts[1] == "True":
			failure = parts[3]
		case parts[0] != "True":
			return fmt.Errorf("not complete: %s", out)
		}
		message = parts[2]
		return nil
	}); err != nil {
		return section{}, err
	}
	if failure != "" {
		return section{}, fmt.Errorf("point-in-time backup failed: %s", failure)
	}
	took := time.Since(begin)
	changes := 0
	if m := regexp.MustCompile(`: (\d+) changes in`).FindStringSubmatch(message); m != nil {
		changes, _ = strconv.Atoi(m[1])
	}
	perMillion := time.Duration(0)
	if changes > 0 {
		perMillion = time.Duration(float64(took) / float64(changes) * 1e6)
	}
	sort.Float64s(off)
	sort.Float64s(on)
	sort.Slice(lagRevs, func(i, j int) bool { return lagRevs[i] < lagRevs[j] })
	return render("pitr", map[string]any{"Version": testbed.EtcdVersions[0], "Clients": pitrClients, "ValueBytes": pitrValueSize, "Phase": pitrPhase, "Runs": runs, "SampleEvery": pitrSampleEvery, "OffMedian": fmt.Sprintf("%.0f", off[len(off)/2]), "OffMin": fmt.Sprintf("%.0f", off[0]), "OffMax": fmt.Sprintf("%.0f", off[len(off)-1]), "OnMedian": fmt.Sprintf("%.0f", on[len(on)/2]), "OnMin": fmt.Sprintf("%.0f", on[0]), "OnMax": fmt.Sprintf("%.0f", on[len(on)-1]), "OnPercentOfOff": fmt.Sprintf("%.1f", 100*on[len(on)/2]/off[len(off)/2]), "LagSamples": len(lagRevs), "LagRevsP50": pct64(lagRevs, 50), "LagRevsP99": pct64(lagRevs, 99), "LagRevsMax": pct64(lagRevs, 100), "LagP50": round(percentile(lagTimes, 50)), "LagP99": round(percentile(lagTimes, 99)), "LagMax": round(percentile(lagTimes, 100)), "RestoreTook": round(took), "Changes": changes, "Message": message, "PerMillion": round(perMillion)})
}

func pct64(xs []int64, p int) int64 {
	if len(xs) == 0 {
		return 0
	}
	i := (len(xs)*p + 99) / 100
	return xs[max(0, min(i, len(xs))-1)]
}

// putLoad runs pitrClients put-only clients for pitrPhase and returns their acknowledged puts per second, and,
// with sample, the follower's lag sampled meanwhile.
func putLoad(ctx context.Context, endpoints []string, seq *atomic.Int64, sample func() (pitr.FollowerStatus, error)) (float64, []int64, []time.Duration, error) {
	value := strings.Repeat("v", pitrValueSize)
	var acked atomic.Int64
	var failed atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < pitrClients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoints[w%len(endpoints)]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				failed.Store(err)
				return
			}
			defer func() { _ = cli.Close() }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				octx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := cli.Put(octx, fmt.Sprintf("load/%d/%d", w, seq.Add(1)%5000), value)
				cancel()
				if err == nil {
					acked.Add(1)
				}
			}
		}()
	}
	var revs []int64
	var ages []time.Duration
	begin := time.Now()
	for time.Since(begin) < pitrPhase {
		time.Sleep(pitrSampleEvery)
		if sample == nil {
			continue
		}
		if st, err := sample(); err == nil && st.Watching && !st.LastTime.IsZero() {
			revs = append(revs, max(st.CurrentRevision-st.LastRevision, 0))
			ages = append(ages, time.Since(st.LastTime))
		}
	}
	n := acked.Load()
	elapsed := time.Since(begin)
	close(stop)
	wg.Wait()
	if err, ok := failed.Load().(error); ok && err != nil {
		return 0, nil, nil, err
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i] < revs[j] })
	return float64(n) / elapsed.Seconds(), revs, ages, nil
}

// waitStored waits until the follower at podIP has stored every revision the cluster has now.
func waitStored(ctx context.Context, endpoints []string, podIP string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	now, err := cli.Get(ctx, "x", clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	return testbed.Eventually(ctx, 5*time.Minute, 200*time.Millisecond, func() error {
		st, err := etcdbackupschedule.FetchFollowerStatus(ctx, podIP)
		if err != nil {
			return err
		}
		if st.LastRevision < now.Header.Revision {
			return fmt.Errorf("stored through %d of %d", st.LastRevision, now.Header.Revision)
		}
		return nil
	})
}
