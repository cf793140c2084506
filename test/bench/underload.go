package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"

	"steward.dev/steward/internal/testbed"
)

// The steady client load the steps run under: a few application clients, each with its own connection balanced
// over the three members' endpoints, alternating a 256-byte put and a linearizable get as fast as answers come.
const (
	underLoadClients = 8
	underLoadTimeout = 10 * time.Second
)

// underLoadStep is one step of the under-load bench and what it took, idle and loaded, with the client operations
// that started during each loaded run.
type underLoadStep struct {
	name          string
	idle, loaded  []time.Duration
	p99, worst    []time.Duration
	failed, total int
	slow          []string
}

// benchUnderLoad times the steps that change members or versions, and a deleted member Pod coming back, on a
// 3-member TLS cluster without and with a steady client load, and reports the latency the clients saw during
// each step: the gap clients see while a member restarts and leadership moves.
func benchUnderLoad(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	runs = min(runs, 3)
	const from, to = "3.5.35", "3.6.16"
	kubectl := kubectlOn(ctx, c)
	steps := []*underLoadStep{{name: "scale 3 -> 5"}, {name: "scale 5 -> 3"}, {name: "a follower's Pod deleted, back to healthy"},
		{name: "rolling upgrade " + from + " -> " + to}}
	var baseline []time.Duration
	var restartBound []time.Duration
	for i := 0; i < 2*runs; i++ {
		loaded := i%2 == 1
		name := fmt.Sprintf("bench-load-%d", i)
		target, err := stewardDataPathCluster(ctx, c, name, from, true, "")
		if err != nil {
			return section{}, err
		}
		if err := settledVersion(ctx, kubectl, name, 3, from, "3.5.0"); err != nil {
			return section{}, err
		}
		if target, err = byMemberNames(ctx, kubectl, name, target); err != nil {
			return section{}, err
		}
		var load *steadyLoad
		if loaded {
			if load, err = startSteadyLoad(ctx, target); err != nil {
				return section{}, err
			}
			time.Sleep(5 * time.Second)
		}
		actions := []func() error{
			func() error { return scaleTo(ctx, kubectl, name, 5, from) },
			func() error { return scaleTo(ctx, kubectl, name, 3, from) },
			func() error { return followerPodBack(ctx, kubectl, name) },
			func() error {
				if _, err := kubectl("", "patch", "etcdcluster", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"version":%q}}`, to)); err != nil {
					return err
				}
				return settledVersion(ctx, kubectl, name, 3, to, "3.6.0")
			},
		}
		var spans [][2]time.Time
		for s, act := range actions {
			begin := time.Now()
			if err := act(); err != nil {
				if load != nil {
					load.stop()
				}
				return section{}, fmt.Errorf("%s: %w", steps[s].name, err)
			}
			end := time.Now()
			spans = append(spans, [2]time.Time{begin, end})
			if loaded {
				steps[s].loaded = append(steps[s].loaded, end.Sub(begin))
			} else {
				steps[s].idle = append(steps[s].idle, end.Sub(begin))
			}
		}
		if load != nil {
			ops := load.stop()
			var before []time.Duration
			for _, op := range ops {
				if op.start.Before(spans[0][0]) {
					before = append(before, op.took)
				}
			}
			baseline = append(baseline, percentile(before, 99))
			for s, span := range spans {
				var during []time.Duration
				for _, op := range ops {
					if op.start.Before(span[0]) || !op.start.Before(span[1]) {
						continue
					}
					during = append(during, op.took)
					steps[s].total++
					if op.err != nil {
						steps[s].failed++
					}
					if op.took > time.Second || op.err != nil {
						steps[s].slow = append(steps[s].slow, describeOp(op, span[0]))
					}
				}
				steps[s].p99 = append(steps[s].p99, percentile(during, 99))
				steps[s].worst = append(steps[s].worst, percentile(during, 100))
			}
		}
		if _, err := kubectl("", "delete", "etcdcluster", name, "--wait=true"); err != nil {
			return section{}, err
		}
		if !loaded {
			d, err := etcdProcessesRestartGroups(ctx, c, to, to, [][]int{{1}})
			if err != nil {
				return section{}, err
			}
			restartBound = append(restartBound, d)
		}
	}
	var b strings.Builder
	b.WriteString("| step | idle | under load | client op p99 during | client op max during | client ops failed |\n|---|---|---|---|---|---|\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d of %d |\n", s.name, round(median(s.idle)), round(median(s.loaded)),
			round(median(s.p99)), round(percentile(s.worst, 100)), s.failed, s.total)
	}
	var slow []string
	for _, s := range steps {
		if len(s.slow) > 0 {
			slow = append(slow, fmt.Sprintf("%s: %s", s.name, strings.Join(s.slow, "; ")))
		}
	}
	return render("under-load", map[string]any{"From": from, "To": to, "Clients": underLoadClients, "Timeout": underLoadTimeout, "Runs": runs, "BaselineP99": round(median(baseline)), "Table": b.String(), "RestartBound": round(median(restartBound)), "RestartRuns": len(restartBound), "Slow": orNone(slow)})
}

// median is the middle of times (the upper one of an even count); 0 without any.
func median(times []time.Duration) time.Duration {
	if len(times) == 0 {
		return 0
	}
	return sorted(times)[len(times)/2]
}

// settledVersion waits until EtcdCluster name has replicas ready members on version, etcd's cluster version is
// clusterVersion, and nothing is in progress for the current generation.
func settledVersion(ctx context.Context, kubectl func(string, ...string) (string, error), name string, replicas int, version, clusterVersion string) error {
	return testbed.Eventually(ctx, 10*time.Minute, 100*time.Millisecond, func() error {
		out, err := kubectl("", "get", "etcdcluster", name, "-o",
			`jsonpath={.status.currentVersion}/{.status.clusterVersion}/{.status.readyReplicas}/{.status.conditions[?(@.type=="Progressing")].status}/{.metadata.generation}/{.status.observedGeneration}/{.status.members[*].name}`)
		if err != nil {
			return err
		}
		parts := strings.Split(out, "/")
		if len(parts) != 7 || parts[0] != version || parts[1] != clusterVersion || parts[2] != fmt.Sprint(replicas) ||
			parts[3] != "False" || parts[4] != parts[5] || len(strings.Fields(parts[6])) != replicas {
			return fmt.Errorf("not settled at %d members of %s: %s", replicas, version, out)
		}
		return nil
	})
}

// scaleTo patches EtcdCluster name to replicas and waits until it is settled there.
func scaleTo(ctx context.Context, kubectl func(string, ...string) (string, error), name string, replicas int, version string) error {
	if _, err := kubectl("", "patch", "etcdcluster", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)); err != nil {
		return err
	}
	clusterVersion := version[:strings.LastIndex(version, ".")] + ".0"
	return settledVersion(ctx, kubectl, name, replicas, version, clusterVersion)
}

// followerPodBack deletes the Pod of a member that is not the leader (its volume stays) and waits until a new Pod
// of that member is ready and the cluster has all its members ready again.
func followerPodBack(ctx context.Context, kubectl func(string, ...string) (string, error), name string) error {
	out, err := kubectl("", "get", "etcdcluster", name, "-o", "jsonpath={.status.leader}/{.status.members[*].name}/{.status.readyReplicas}")
	if err != nil {
		return err
	}
	parts := strings.Split(out, "/")
	if len(parts) != 3 {
		return fmt.Errorf("status %q", out)
	}
	victim := ""
	for _, m := range strings.Fields(parts[1]) {
		if m != parts[0] {
			victim = m
		}
	}
	uid, err := kubectl("", "get", "pod", victim, "-o", "jsonpath={.metadata.uid}")
	if err != nil {
		return err
	}
	if _, err := kubectl("", "delete", "pod", victim, "--wait=false"); err != nil {
		return err
	}
	return testbed.Eventually(ctx, 5*time.Minute, 50*time.Millisecond, func() error {
		pod, err := kubectl("", "get", "pod", victim, "--ignore-not-found", "-o", `jsonpath={.metadata.uid}/{.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil {
			return err
		}
		if pod == "" || strings.HasPrefix(pod, uid+"/") || !strings.HasSuffix(pod, "/True") {
			return fmt.Errorf("pod of %s: %q", victim, pod)
		}
		ready, err := kubectl("", "get", "etcdcluster", name, "-o", "jsonpath={.status.readyReplicas}")
		if err != nil {
			return err
		}
		if ready != parts[2] {
			return fmt.Errorf("%s of %s ready", ready, parts[2])
		}
		return nil
	})
}

// steadyLoad is the client load of benchUnderLoad, running until stop.
type steadyLoad struct {
	done    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	ops     []clientOp
	clients []*clientv3.Client
}

// startSteadyLoad starts underLoadClients clients against t.
func startSteadyLoad(ctx context.Context, t dataPathTarget) (*steadyLoad, error) {
	l := &steadyLoad{done: make(chan struct{})}
	value := strings.Repeat("v", dataPathValue)
	for w := 0; w < underLoadClients; w++ {
		cli, err := clientv3.New(t.config())
		if err != nil {
			l.stop()
			return nil, fmt.Errorf("connect to %v: %w", t.endpoints, err)
		}
		l.clients = append(l.clients, cli)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			var ops []clientOp
			for i := 0; ; i++ {
				select {
				case <-l.done:
					l.mu.Lock()
					l.ops = append(l.ops, ops...)
					l.mu.Unlock()
					return
				default:
				}
				key := fmt.Sprintf("load-%d", w)
				start := time.Now()
				put := i%2 == 0
				err := putOrGet(ctx, cli, underLoadTimeout, put, key, value)
				ops = append(ops, clientOp{start: start, took: time.Since(start), put: put, err: err})
			}
		}()
	}
	return l, nil
}

// stop ends the load and returns every operation it made.
func (l *steadyLoad) stop() []clientOp {
	close(l.done)
	l.wg.Wait()
	for _, cli := range l.clients {
		_ = cli.Close()
	}
	return l.ops
}

// byMemberNames turns a target of Pod IPs into one of the members' DNS names (the client URLs they advertise),
// resolved through the test bed's cluster DNS as a client in the cluster resolves them: a member whose Pod is
// re-created on a new IP (an upgrade that changes etcd's flags) keeps its name.
func byMemberNames(ctx context.Context, kubectl func(string, ...string) (string, error), name string, t dataPathTarget) (dataPathTarget, error) {
	out, err := kubectl("", "get", "etcdcluster", name, "-o", "jsonpath={.status.members[*].name}")
	if err != nil {
		return t, err
	}
	cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	scheme, _, _ := strings.Cut(t.endpoints[0], "://")
	t.endpoints = nil
	for _, m := range strings.Fields(out) {
		t.endpoints = append(t.endpoints, fmt.Sprintf("%s://%s:%d", scheme, resources.MemberHost(cluster, m, resources.Options{ClusterDomain: testbed.ClusterDomain}), resources.ClientPort))
	}
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(testbed.DNSServiceIP, "53"))
	}}
	dialer := &net.Dialer{Resolver: resolver}
	t.dial = []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return dialer.DialContext(ctx, "tcp", addr)
	})}
	return t, waitServing(ctx, t)
}
