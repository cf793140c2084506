package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/test/e2e/framework"
)

// TestEtcdUserNameConflict: two EtcdUsers declaring one etcd user, on a 1-member cluster with authentication on,
// next to a role of that name made by hand. The second reports the conflict and changes nothing in etcd (not the
// user's roles, not the hand-made role's permissions); the first keeps working; deleting the second leaves the
// etcd user to the first; deleting the first deletes the etcd user, and the hand-made role survives both.
func TestEtcdUserNameConflict(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "user-conflict")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "shared", 1)
	c.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true}
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	framework.WaitAvailable(t, key, 4*time.Minute)
	c = framework.WaitAuthEnabled(t, key, true)

	root, _ := framework.MemberClient(t, c)
	defer func() { _ = root.Close() }()
	if _, err := root.RoleAdd(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.RoleGrantPermission(ctx, "app", "/hand/", "/hand0", clientv3.PermissionType(clientv3.PermRead)); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Put(ctx, "/hand/x", "made by hand"); err != nil {
		t.Fatal(err)
	}
	handMade := func(when string) {
		t.Helper()
		role, err := root.RoleGet(ctx, "app")
		if err != nil {
			t.Fatalf("%s: the hand-made role: %v", when, err)
		}
		if len(role.Perm) != 1 || string(role.Perm[0].Key) != "/hand/" || string(role.Perm[0].RangeEnd) != "/hand0" {
			t.Fatalf("%s: the hand-made role's permissions changed: %v", when, role.Perm)
		}
	}

	// first grants the hand-made role; second asks for permissions of its own, which would go into a role of
	// the same name.
	first := &etcdv1alpha1.EtcdUser{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}, Spec: etcdv1alpha1.EtcdUserSpec{
		ClusterName: c.Name, UserName: "app", Roles: []string{"app"},
		Certificate: &etcdv1alpha1.UserCertificate{SecretName: "first-tls"}}}
	if err := framework.K8s.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	first = framework.WaitUserReady(t, client.ObjectKeyFromObject(first), 2*time.Minute)
	second := framework.NewEtcdUser(ns, "second", c.Name, "/second/", etcdv1alpha1.AccessReadWrite, false)
	second.Spec.UserName = "app"
	if err := framework.K8s.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	framework.WaitUserReason(t, client.ObjectKeyFromObject(second), etcdv1alpha1.ReasonUserNameConflict, "EtcdUser first")
	handMade("with both EtcdUsers")
	app := framework.UserClient(t, c, first)
	framework.MayRead(t, "first", app, "/hand/x", true)
	framework.MayWrite(t, "first", app, "/second/1", false)
	userRoles := func(when string) {
		t.Helper()
		u, err := root.UserGet(ctx, "app")
		if err != nil {
			t.Fatalf("%s: etcd user app: %v", when, err)
		}
		if len(u.Roles) != 1 || u.Roles[0] != "app" {
			t.Fatalf("%s: etcd user app holds roles %v, want [app]", when, u.Roles)
		}
	}
	userRoles("with both EtcdUsers")

	deleted := func(u *etcdv1alpha1.EtcdUser) {
		t.Helper()
		if err := framework.K8s.Delete(ctx, u); err != nil {
			t.Fatal(err)
		}
		framework.Poll(t, "EtcdUser "+u.Name+" gone", time.Minute, func() error {
			if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(u), &etcdv1alpha1.EtcdUser{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %w", err)
			}
			return nil
		})
	}
	deleted(second)
	userRoles("after the second EtcdUser is deleted")
	handMade("after the second EtcdUser is deleted")
	framework.MayRead(t, "first, after the second is deleted", app, "/hand/x", true)
	framework.WaitUserReady(t, client.ObjectKeyFromObject(first), time.Minute)

	deleted(first)
	if _, err := root.UserGet(ctx, "app"); err == nil {
		t.Fatal("etcd user app outlived the last EtcdUser declaring it")
	}
	handMade("after both EtcdUsers are deleted")
}
