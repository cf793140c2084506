package etcd

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"steward.dev/steward/internal/etcdauth"
	"steward.dev/steward/internal/testbed"
)

// TestFenceRefusesWritesThenUnfenceOpensThem (integration: an etcd process of the test bed's cached release,
// authentication on): a store like a primary's (a readwrite role, a write-only role, a second user with the root
// role) is fenced through AuthStore and ApplyFence; a run cut short after the record and half of its calls is
// planned again from etcd and the record and converges to the same fence. Fenced, etcd itself refuses each
// user's put with its permission error and serves its get; Steward's identity still writes. Unfenced from the
// record, the same puts go through.
func TestFenceRefusesWritesThenUnfenceOpensThem(t *testing.T) {
	bin := testbed.NewestCachedEtcd(t, testing.Short())
	url := testbed.StartLoopbackEtcd(t, bin, t.TempDir())
	ctx := context.Background()
	endpoints := []string{url}
	dial := func(user, password string) *clientv3.Client {
		t.Helper()
		var c *clientv3.Client
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			c, err = clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: DialTimeout, Logger: zap.NewNop(), Username: user, Password: password})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("dial as %q: %v", user, err)
			}
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	// The primary's store, as a seed brings it: made while auth is off, then auth on as Steward turns it on.
	admin := dial("", "")
	for _, step := range []func() error{
		func() error { _, err := admin.RoleAdd(ctx, "app"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "app", "/app/", "/app0", clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.RoleAdd(ctx, "ingest"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "ingest", "/in/", "/in0", clientv3.PermissionType(clientv3.PermWrite))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "app", "app-pw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "app", "app"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "app", "ingest"); return err },
		func() error { _, err := admin.UserAdd(ctx, "ops", "ops-pw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "ops", etcdauth.RootRole); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("the primary's store: %v", err)
		}
	}
	pool := NewPool()
	const key = "ns/standby"
	defer pool.Forget(key)
	operator := Password{User: etcdauth.OperatorUser, Password: "steward-pw"}
	if err := pool.EnableAuth(ctx, key, endpoints, operator); err != nil {
		t.Fatal(err)
	}
	pool.SetPassword(key, operator)
	exempt := map[string]bool{etcdauth.RootUser: true, etcdauth.OperatorUser: true}

	// A fence cut short: the record kept, then only half of its calls made.
	roles, users, err := pool.AuthStore(ctx, key, endpoints)
	if err != nil {
		t.Fatal(err)
	}
	ops, record := etcdauth.Fence(roles, users, exempt, etcdauth.FenceRecord{})
	if len(ops) < 3 {
		t.Fatalf("fence plans %v", ops)
	}
	if err := pool.ApplyFence(ctx, key, endpoints, ops[:len(ops)/2]); err != nil {
		t.Fatal(err)
	}
	// The next run plans from etcd and the record: the rest, and a record unchanged.
	roles, users, err = pool.AuthStore(ctx, key, endpoints)
	if err != nil {
		t.Fatal(err)
	}
	rest, again := etcdauth.Fence(roles, users, exempt, record)
	if !reflect.DeepEqual(again, record) || len(rest) == 0 || len(rest) >= len(ops) {
		t.Fatalf("re-run after half: calls %v, record %+v; want the rest of %v and record %+v", rest, again, ops, record)
	}
	if err := pool.ApplyFence(ctx, key, endpoints, rest); err != nil {
		t.Fatal(err)
	}
	roles, users, err = pool.AuthStore(ctx, key, endpoints)
	if err != nil {
		t.Fatal(err)
	}
	if more, _ := etcdauth.Fence(roles, users, exempt, record); len(more) != 0 {
		t.Fatalf("a fenced store still plans %v", more)
	}

	// Fenced: etcd refuses every user's write with its permission error and serves their reads.
	app, ops2 := dial("app", "app-pw"), dial("ops", "ops-pw")
	steward := dial(operator.User, operator.Password)
	if _, err := steward.Put(ctx, "/app/k", "from the applier"); err != nil {
		t.Fatalf("Steward's identity cannot write to a fenced store: %v", err)
	}
	denied := func(who string, err error) {
		t.Helper()
		if !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Fatalf("%s: %v, want etcd's %v", who, err, rpctypes.ErrPermissionDenied)
		}
	}
	_, err = app.Put(ctx, "/app/k", "v")
	denied("app's put under its readwrite prefix", err)
	_, err = app.Put(ctx, "/in/k", "v")
	denied("app's put under its write-only prefix", err)
	_, err = ops2.Put(ctx, "/app/k", "v")
	denied("a root user's put", err)
	if resp, err := app.Get(ctx, "/app/k"); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "from the applier" {
		t.Fatalf("app's read on a fenced store: %v, %v", resp, err)
	}

	// Unfenced from the record: the same writes go through.
	roles, users, err = pool.AuthStore(ctx, key, endpoints)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.ApplyFence(ctx, key, endpoints, etcdauth.Unfence(roles, users, record)); err != nil {
		t.Fatal(err)
	}
	for who, put := range map[string]func() error{
		"app under its readwrite prefix":  func() error { _, err := app.Put(ctx, "/app/k", "v"); return err },
		"app under its write-only prefix": func() error { _, err := app.Put(ctx, "/in/k", "v"); return err },
		"the root user":                   func() error { _, err := ops2.Put(ctx, "/app/k", "v2"); return err },
	} {
		if err := put(); err != nil {
			t.Errorf("%s after unfencing: %v", who, err)
		}
	}
	roles, users, err = pool.AuthStore(ctx, key, endpoints)
	if err != nil {
		t.Fatal(err)
	}
	if again := etcdauth.Unfence(roles, users, record); len(again) != 0 {
		t.Fatalf("an unfenced store still plans %v", again)
	}
}
