package etcd

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"steward.dev/steward/internal/testbed"
)

// TestAddLearnerAsksEachMemberOnItsOwn (integration: etcd processes of the test bed's cached release): once a
// cluster's adds have been refused as ErrClusterNotSettled for AskEachAfter, AddLearner asks every member on its
// own and says which refused; when one accepts, the add is done and the run of refusals ends. The refusals come
// from etcd's own check, right after a member restarted (both members then count the other connected for less
// than 5 s).
func TestAddLearnerAsksEachMemberOnItsOwn(t *testing.T) {
	bin := testbed.NewestCachedEtcd(t, testing.Short())
	dir := t.TempDir()
	type member struct{ name, peer, client string }
	members := []member{{name: "a"}, {name: "b"}}
	var initial []string
	for i := range members {
		members[i].peer, members[i].client = "http://127.0.0.1:"+freePort(t), "http://127.0.0.1:"+freePort(t)
		initial = append(initial, members[i].name+"="+members[i].peer)
	}
	start := func(m member) *exec.Cmd {
		cmd := exec.Command(bin, "--name="+m.name, "--data-dir="+filepath.Join(dir, m.name),
			"--listen-peer-urls="+m.peer, "--initial-advertise-peer-urls="+m.peer, "--initial-cluster="+strings.Join(initial, ","),
			"--listen-client-urls="+m.client, "--advertise-client-urls="+m.client, "--log-level=error")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	start(members[0])
	b := start(members[1])
	endpoints := []string{members[0].client, members[1].client}
	ctx := context.Background()
	pool := NewPool()
	const key = "ns/two"
	defer pool.Forget(key)
	serving := func() {
		t.Helper()
		c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: DialTimeout, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
			_, err := c.Get(rctx, "health")
			cancel()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not serving within 30s: %v", err)
			}
		}
	}
	serving()

	// A restart of b: for 5 s after it both members refuse adds. A run of refusals as old as AskEachAfter (set
	// here, as a long run would have) makes the add ask each member.
	_ = b.Process.Kill()
	_ = b.Wait()
	start(members[1])
	serving()
	pool.mu.Lock()
	pool.refusals[key] = refusalRun{since: time.Now().Add(-time.Minute), last: time.Now()}
	pool.mu.Unlock()
	_, err := pool.AddLearner(ctx, key, endpoints, "http://127.0.0.1:"+freePort(t))
	var refused *RefusedError
	if !errors.As(err, &refused) || !errors.Is(err, ErrClusterNotSettled) {
		t.Fatalf("add right after a restart: %v, want a RefusedError (ErrClusterNotSettled)", err)
	}
	if strings.Join(refused.Refusing, ",") != strings.Join(endpoints, ",") || len(refused.Unreachable) > 0 {
		t.Errorf("refusing %v, unreachable %v; want every member refusing on its own: %v", refused.Refusing, refused.Unreachable, endpoints)
	}

	// Once etcd's window has passed, the add goes through and the run ends.
	var id uint64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if id, err = pool.AddLearner(ctx, key, endpoints, "http://127.0.0.1:"+freePort(t)); !errors.Is(err, ErrClusterNotSettled) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("add still refused 30s after the restart: %v", err)
		}
	}
	if err != nil || id == 0 {
		t.Fatalf("add after the window: member %x, %v", id, err)
	}
	pool.mu.Lock()
	_, running := pool.refusals[key]
	pool.mu.Unlock()
	if running {
		t.Error("the run of refusals was not ended by the add that went through")
	}
}

func freePort(t *testing.T) string { return testbed.FreeLoopbackPort(t) }
