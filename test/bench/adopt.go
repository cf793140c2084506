package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"steward.dev/steward/internal/testbed"
)

// hostSource is a 3-member plaintext etcd cluster of processes on the host, listening on the node address (which
// Pods reach) and resolving cluster names, as an adoption's source must.
type hostSource struct {
	dir                   string
	names, peers, clients []string
	stop                  func()
	initial               string
	bin                   string
	started               []func()
}

// startHostSource starts the source's three members and waits until each answers /health.
func startHostSource(ctx context.Context, c *testbed.Cluster, token string) (*hostSource, error) {
	dir, err := os.MkdirTemp("", "steward-bench-source-")
	if err != nil {
		return nil, err
	}
	s := &hostSource{dir: dir, bin: filepath.Join(c.EtcdBinDir(testbed.EtcdVersions[0]), "etcd")}
	s.stop = func() {
		for _, stop := range s.started {
			stop()
		}
		_ = os.RemoveAll(dir)
	}
	var initial []string
	for i := 0; i < 3; i++ {
		peer, err := testbed.NodeAddress()
		if err != nil {
			s.stop()
			return nil, err
		}
		client, err := testbed.NodeAddress()
		if err != nil {
			s.stop()
			return nil, err
		}
		s.names = append(s.names, fmt.Sprintf("src%d", i))
		s.peers, s.clients = append(s.peers, "http://"+peer), append(s.clients, "http://"+client)
		initial = append(initial, s.names[i]+"="+s.peers[i])
	}
	s.initial = strings.Join(initial, ",")
	for i := 0; i < 3; i++ {
		if err := s.start(s.names[i], s.peers[i], s.clients[i], s.initial, "new", token); err != nil {
			s.stop()
			return nil, err
		}
	}
	// Each answers /health once the cluster has a leader, which needs two of them started.
	for _, client := range s.clients {
		if err := healthy(ctx, client); err != nil {
			s.stop()
			return nil, err
		}
	}
	return s, nil
}

// healthy waits until the member at client answers /health.
func healthy(ctx context.Context, client string) error {
	return testbed.Eventually(ctx, time.Minute, 50*time.Millisecond, func() error { return testbed.HTTPHealthy(client + "/health")(ctx) })
}

// start starts one member process.
func (s *hostSource) start(name, peer, client, initial, state, token string) error {
	cmd, err := testbed.ClusterDNSCommand(s.dir, s.bin, "--name", name, "--data-dir", filepath.Join(s.dir, name),
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--listen-client-urls", client, "--advertise-client-urls", client,
		"--initial-cluster", initial, "--initial-cluster-state", state, "--initial-cluster-token", token)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start source member %s: %w", name, err)
	}
	s.started = append(s.started, func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return nil
}

// joinByHand is the physical bound of one of Steward's members joining: a fourth process added to the source as
// a learner, started (receiving the leader's snapshot of the whole database) and promoted; it is removed and
// stopped again afterwards.
func (s *hostSource) joinByHand(ctx context.Context, cli *clientv3.Client, token string) (time.Duration, error) {
	peer, err := testbed.NodeAddress()
	if err != nil {
		return 0, err
	}
	client, err := testbed.NodeAddress()
	if err != nil {
		return 0, err
	}
	peer, client = "http://"+peer, "http://"+client
	begin := time.Now()
	var added *clientv3.MemberAddResponse
	if err := testbed.Eventually(ctx, time.Minute, 100*time.Millisecond, func() error {
		begin = time.Now()
		added, err = cli.MemberAddAsLearner(ctx, []string{peer})
		return err
	}); err != nil {
		return 0, fmt.Errorf("add learner: %w", err)
	}
	if err := s.start("bound", peer, client, s.initial+",bound="+peer, "existing", token); err != nil {
		return 0, err
	}
	if err := testbed.Eventually(ctx, 5*time.Minute, 100*time.Millisecond, func() error {
		_, err := cli.MemberPromote(ctx, added.Member.ID)
		return err
	}); err != nil {
		return 0, fmt.Errorf("promote: %w", err)
	}
	took := time.Since(begin)
	if _, err := cli.MemberRemove(ctx, added.Member.ID); err != nil {
		return 0, fmt.Errorf("remove the bound's member again: %w", err)
	}
	stop := s.started[len(s.started)-1]
	s.started = s.started[:len(s.started)-1]
	stop()
	return took, nil
}

// benchAdopt times adopting a 3-member source of etcd processes on the host holding 1 GiB (hibernateValues
// values of benchValueSize) into a 3-member EtcdCluster with handover Retire, from the EtcdCluster's creation
// until Steward's members are voters and the source's leave (status.adoption.phase Retiring, then Complete) and
// until the cluster has settled. Each run checks the adopted cluster: the source's cluster ID, revision and keys.
// Physical bound: a fourth process joining the source by hand (learner, start, promote); the adoption joins three
// members, one after another, and retires three.
func benchAdopt(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	kubectl := kubectlOn(ctx, c)
	var retiring, complete, settled, bound []time.Duration
	var dbSize int64
	var fillTook time.Duration
	for i := 0; i < runs; i++ {
		token := fmt.Sprintf("bench-adopt-%d", i)
		src, err := startHostSource(ctx, c, token)
		if err != nil {
			return section{}, err
		}
		err = func() error {
			defer src.stop()
			cfg := clientv3.Config{Endpoints: src.clients}
			begin := time.Now()
			if dbSize, err = fillEtcd(ctx, cfg, hibernateValues); err != nil {
				return fmt.Errorf("fill the source: %w", err)
			}
			fillTook = time.Since(begin)
			cli, err := clientv3.New(clientv3.Config{Endpoints: src.clients, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				return err
			}
			defer func() { _ = cli.Close() }()
			before, err := cli.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				return err
			}
			d, err := src.joinByHand(ctx, cli, token)
			if err != nil {
				return err
			}
			bound = append(bound, d)

			name := fmt.Sprintf("bench-adopt-%d", i)
			// 4Gi: a derived quota of 1.78 GiB, room for the source's database.
			manifest := fmt.Sprintf("apiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: %s, namespace: default}\n"+
				"spec: {replicas: 3, version: %q, storage: {size: 4Gi}, tls: {provider: None}, bootstrap: {fromExisting: {endpoints: [%s], handover: Retire}}}\n",
				name, testbed.EtcdVersions[0], strings.Join(src.clients, ", "))
			begin = time.Now()
			if _, err := kubectl(manifest, "apply", "-f", "-"); err != nil {
				return err
			}
			// phase reads the adoption's phase once and accepts any of want (a quick retirement can pass Retiring
			// between two polls).
			phase := func(want ...string) error {
				out, err := kubectl("", "get", "etcdcluster", name, "-o", `jsonpath={.status.adoption.phase}/{.status.conditions[?(@.type=="Progressing")].reason}`)
				if err != nil {
					return err
				}
				if got, _, _ := strings.Cut(out, "/"); !slices.Contains(want, got) {
					return fmt.Errorf("adoption %s", out)
				}
				return nil
			}
			if err := testbed.Eventually(ctx, 15*time.Minute, 200*time.Millisecond, func() error { return phase("Retiring", "Complete") }); err != nil {
				return fmt.Errorf("the members of Steward joined: %w", err)
			}
			retiring = append(retiring, time.Since(begin))
			if err := testbed.Eventually(ctx, 10*time.Minute, 200*time.Millisecond, func() error { return phase("Complete") }); err != nil {
				return fmt.Errorf("the source retired: %w", err)
			}
			complete = append(complete, time.Since(begin))
			if err := testbed.Eventually(ctx, 5*time.Minute, 200*time.Millisecond, func() error {
				out, err := kubectl("", "get", "etcdcluster", name, "-o",
					`jsonpath={.status.readyReplicas}/{.status.conditions[?(@.type=="Available")].status}/{.status.conditions[?(@.type=="Progressing")].status}`)
				if err != nil {
					return err
				}
				if out != "3/True/False" {
					return fmt.Errorf("not settled: %s", out)
				}
				return nil
			}); err != nil {
				return err
			}
			settled = append(settled, time.Since(begin))
			if err := checkAdopted(ctx, c, name, before); err != nil {
				return err
			}
			_, err = kubectl("", "delete", "etcdcluster", name, "--wait=true")
			return err
		}()
		if err != nil {
			return section{}, err
		}
	}
	return render("adopt", map[string]any{"Version": testbed.EtcdVersions[0], "Values": hibernateValues, "ValueKiB": benchValueSize >> 10,
		"DBMiB": fmt.Sprintf("%.0f", float64(dbSize)/(1<<20)), "FillTook": fillTook.Round(time.Second), "Runs": runs,
		"Table": table([]row{{"Steward's 3 members joined (phase Retiring)", retiring}, {"the source's 3 members retired (phase Complete)", complete},
			{"settled (Available, nothing in progress)", settled}, {"etcd process joins the source by hand (learner, start, promote)", bound}})})
}

// checkAdopted checks that the adopted cluster, read through Steward's members, is the source: the same cluster
// ID, the keys it had, and a revision not behind its own.
func checkAdopted(ctx context.Context, c *testbed.Cluster, name string, before *clientv3.GetResponse) error {
	target, err := stewardTarget(ctx, c, name, false)
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: target.endpoints, TLS: target.tls, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	after, err := cli.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("read the adopted cluster: %w", err)
	}
	if after.Header.ClusterId != before.Header.ClusterId || after.Count != before.Count || after.Header.Revision < before.Header.Revision {
		return fmt.Errorf("adopted cluster %x: %d keys at revision %d; the source was %x with %d keys at revision %d",
			after.Header.ClusterId, after.Count, after.Header.Revision, before.Header.ClusterId, before.Count, before.Header.Revision)
	}
	return nil
}
