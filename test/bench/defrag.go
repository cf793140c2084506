package main

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"steward.dev/steward/internal/testbed"
)

// Garbage of the defragmentation bench: 800 values of 256 KiB written over 8 keys, 200 MiB of old revisions
// once compacted.
const (
	defragGarbageWrites = 800
	defragValueSize     = 256 << 10
	defragClients       = 6
)

// clientOp is one operation of the latency load: when it started, how long it took, what it was and how it ended.
type clientOp struct {
	start time.Time
	took  time.Duration
	put   bool
	err   error
}

// benchDefrag measures Steward's defragmentation of a 3-member cluster holding 200 MiB of compacted garbage: from
// turning spec.maintenance.defragmentation on to every member's defragmentation recorded, each member's database
// file before and after, and the latency clients see meanwhile against a baseline just before. Each client is
// pinned to one member, as a client connected through the Service is to the member its connection landed on.
func benchDefrag(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	kubectl := kubectlOn(ctx, c)
	const name = "bench-defrag"
	runs = min(runs, 3)
	var took, baseP99, duringP99, duringMax []time.Duration
	var before, after []int64
	var slow, moves []string
	for i := 0; i < runs; i++ {
		manifest := fmt.Sprintf("apiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: %s, namespace: default}\n"+
			"spec: {replicas: 3, version: %q, tls: {provider: None}, storage: {size: 2Gi}}\n", name, testbed.EtcdVersions[0])
		if _, err := kubectl(manifest, "apply", "-f", "-"); err != nil {
			return section{}, err
		}
		ips, err := settledMemberIPs(ctx, kubectl, name)
		if err != nil {
			return section{}, err
		}
		var endpoints []string
		for _, ip := range ips {
			endpoints = append(endpoints, "http://"+ip+":2379")
		}
		size, err := writeGarbage(ctx, endpoints)
		if err != nil {
			return section{}, fmt.Errorf("write garbage: %w", err)
		}
		before = append(before, size)
		stop := make(chan struct{})
		ops := make(chan []clientOp, defragClients)
		for w := 0; w < defragClients; w++ {
			go func() { ops <- latencyLoad(ctx, endpoints[w%len(endpoints)], w%len(endpoints), stop) }()
		}
		time.Sleep(10 * time.Second)
		begin := time.Now()
		if _, err := kubectl("", "patch", "etcdcluster", name, "--type=merge", "-p",
			`{"spec":{"maintenance":{"defragmentation":{"minFreeBytes":"64Mi","minFreePercent":50}}}}`); err != nil {
			close(stop)
			return section{}, err
		}
		var sizes string
		err = testbed.Eventually(ctx, 10*time.Minute, 100*time.Millisecond, func() error {
			out, err := kubectl("", "get", "etcdcluster", name, "-o", `jsonpath={range .status.members[*]}{.lastDefragmentation.reclaimedBytes}={.dbSizeBytes} {end}`)
			if err != nil {
				return err
			}
			done := 0
			for _, f := range strings.Fields(out) {
				if reclaimed, _, _ := strings.Cut(f, "="); reclaimed != "" {
					done++
				}
			}
			if done < 3 {
				return fmt.Errorf("defragmented: %s", out)
			}
			sizes = out
			return nil
		})
		end := time.Now()
		time.Sleep(2 * time.Second)
		close(stop)
		var all []clientOp
		for w := 0; w < defragClients; w++ {
			all = append(all, <-ops...)
		}
		if err != nil {
			return section{}, err
		}
		took = append(took, end.Sub(begin))
		var largest int64
		for _, f := range strings.Fields(sizes) {
			_, db, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(db, 10, 64)
			largest = max(largest, n)
		}
		after = append(after, largest)
		var base, during []time.Duration
		for _, op := range all {
			switch {
			case op.start.Before(begin) && op.start.After(begin.Add(-10*time.Second)):
				base = append(base, op.took)
			case !op.start.Before(begin) && op.start.Before(end):
				during = append(during, op.took)
				if op.took > time.Second {
					slow = append(slow, describeOp(op, begin))
				}
			}
		}
		baseP99, duringP99 = append(baseP99, percentile(base, 99)), append(duringP99, percentile(during, 99))
		duringMax = append(duringMax, percentile(during, 100))
		events, err := kubectl("", "get", "events", "--field-selector", "involvedObject.name="+name+",reason=LeaderMoved", "-o",
			`jsonpath={range .items[*]}{.firstTimestamp}{" "}{end}`)
		if err != nil {
			return section{}, err
		}
		for _, at := range strings.Fields(events) {
			if t, err := time.Parse(time.RFC3339, at); err == nil && !t.Before(begin.Truncate(time.Second)) {
				moves = append(moves, fmt.Sprintf("+%s", t.Sub(begin.Truncate(time.Second))))
			}
		}
		if _, err := kubectl("", "delete", "etcdcluster", name, "--wait=true"); err != nil {
			return section{}, err
		}
	}
	return render("defrag", map[string]any{"GarbageWrites": defragGarbageWrites, "ValueKiB": defragValueSize >> 10, "SizeBefore": mib(median64(before)), "Clients": defragClients, "Runs": runs, "Table": table([]row{{"3 members defragmented (patch to last recorded)", took}, {"client op p99, 10 s before", baseP99},
		{"client op p99, during", duringP99}, {"client op max, during", duringMax}}), "SizeAfter": mib(median64(after)), "Slow": orNone(slow), "LeaderMoves": orNone(moves)})
}

// settledMemberIPs waits until EtcdCluster name has three ready members and nothing in progress, and returns its
// member Pods' IPs.
func settledMemberIPs(ctx context.Context, kubectl func(string, ...string) (string, error), name string) ([]string, error) {
	var ips []string
	err := testbed.Eventually(ctx, 5*time.Minute, 200*time.Millisecond, func() error {
		out, err := kubectl("", "get", "etcdcluster", name, "-o", `jsonpath={.status.readyReplicas}/{.status.conditions[?(@.type=="Progressing")].status}`)
		if err != nil {
			return err
		}
		if out != "3/False" {
			return fmt.Errorf("not settled: %s", out)
		}
		pods, err := kubectl("", "get", "pods", "-l", "etcd.steward.dev/cluster="+name, "-o", `jsonpath={.items[*].status.podIP}`)
		if err != nil {
			return err
		}
		if ips = strings.Fields(pods); len(ips) != 3 {
			return fmt.Errorf("pod IPs %q", pods)
		}
		return nil
	})
	return ips, err
}

// writeGarbage overwrites 8 keys defragGarbageWrites times with defragValueSize bytes, compacts to the last
// revision (physically), and returns the database size a member then reports.
func writeGarbage(ctx context.Context, endpoints []string) (int64, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, err
	}
	defer func() { _ = cli.Close() }()
	value := string(bytes.Repeat([]byte{'g'}, defragValueSize))
	var rev int64
	for i := 0; i < defragGarbageWrites; i++ {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := cli.Put(wctx, fmt.Sprintf("garbage-%d", i%8), value)
		cancel()
		if err != nil {
			return 0, err
		}
		rev = resp.Header.Revision
	}
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, err
	}
	s, err := cli.Status(ctx, endpoints[0])
	if err != nil {
		return 0, err
	}
	return s.DbSize, nil
}

// latencyLoad alternates a small put and a linearizable get against the member at endpoint until stop closes,
// and returns every operation with its latency (a failed one counts with the time it took to fail).
func latencyLoad(ctx context.Context, endpoint string, member int, stop <-chan struct{}) []clientOp {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil
	}
	defer func() { _ = cli.Close() }()
	var ops []clientOp
	value := string(bytes.Repeat([]byte{'v'}, 100))
	for i := 0; ; i++ {
		select {
		case <-stop:
			return ops
		default:
		}
		start := time.Now()
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		put := i%2 == 0
		var err error
		if put {
			_, err = cli.Put(octx, fmt.Sprintf("latency-%d", member), value)
		} else {
			_, err = cli.Get(octx, fmt.Sprintf("latency-%d", member))
		}
		cancel()
		ops = append(ops, clientOp{start: start, took: time.Since(start), put: put, err: err})
	}
}

// percentile is the p-th percentile of times (100: the largest); 0 without any.
func percentile(times []time.Duration, p int) time.Duration {
	if len(times) == 0 {
		return 0
	}
	t := sorted(times)
	i := (len(t)*p + 99) / 100
	return t[max(0, min(i, len(t))-1)]
}

func median64(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]int64(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// describeOp says what a slow operation was, when it started (after the patch) and how it ended.
func describeOp(op clientOp, begin time.Time) string {
	kind, outcome := "get", "ok"
	if op.put {
		kind = "put"
	}
	if op.err != nil {
		outcome = op.err.Error()
	}
	return fmt.Sprintf("a %s at +%s took %s (%s)", kind, op.start.Sub(begin).Round(10*time.Millisecond), op.took.Round(10*time.Millisecond), outcome)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "; ")
}
