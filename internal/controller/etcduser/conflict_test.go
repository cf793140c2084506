package etcduser

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// TestSecondUserOfANameChangesNothing: of two EtcdUsers declaring one etcd user, the later reports the conflict
// and writes nothing (no Secret, no etcd call: the reconciler has no etcd pool, and would panic on one), and
// deleting it leaves the etcd user to the first, without waiting for the cluster.
func TestSecondUserOfANameChangesNothing(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := etcdv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	user := func(name string, created time.Time, secret string) *etcdv1alpha1.EtcdUser {
		return &etcdv1alpha1.EtcdUser{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created),
				Finalizers: []string{finalizer}},
			Spec: etcdv1alpha1.EtcdUserSpec{ClusterName: "db", UserName: "shared", Password: &etcdv1alpha1.UserPassword{SecretName: secret},
				Permissions: []etcdv1alpha1.KeyPermission{{Prefix: ptrTo("/" + name + "/"), Access: etcdv1alpha1.AccessReadWrite}}},
			Status: etcdv1alpha1.EtcdUserStatus{CreatedRole: name == "first"},
		}
	}
	// The cluster has no healthy member: the first user would wait for one; the second never needs one.
	cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: 1, Version: "3.6.16"}}
	now := time.Unix(1_800_000_000, 0)
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(cluster, user("first", now, "first-pw"), user("second", now.Add(time.Second), "second-pw")).
		WithStatusSubresource(&etcdv1alpha1.EtcdUser{}).
		WithIndex(&etcdv1alpha1.EtcdUser{}, "spec.clusterName", func(o client.Object) []string {
			return []string{o.(*etcdv1alpha1.EtcdUser).Spec.ClusterName}
		}).Build()
	events := record.NewFakeRecorder(10)
	r := &Reconciler{Client: c, APIReader: c, Recorder: events, Now: func() time.Time { return now }}
	ctx := context.Background()
	second := types.NamespacedName{Namespace: "ns", Name: "second"}

	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: second}); err != nil {
		t.Fatal(err)
	}
	var got etcdv1alpha1.EtcdUser
	if err := c.Get(ctx, second, &got); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != etcdv1alpha1.ReasonUserNameConflict || !strings.Contains(ready.Message, "first") {
		t.Fatalf("Ready = %+v, want False/%s naming EtcdUser first", ready, etcdv1alpha1.ReasonUserNameConflict)
	}
	if !got.Status.CreatedRole {
		t.Error("the owner's record of the role is not carried over")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "second-pw"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the second user's password Secret: %v, want none written", err)
	}

	if err := c.Delete(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: second}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, second, &got); !apierrors.IsNotFound(err) {
		t.Fatalf("the second EtcdUser after its deletion: %v (finalizers %v), want it gone", err, got.Finalizers)
	}
	select {
	case e := <-events.Events:
		if !strings.Contains(e, "UserKept") {
			t.Errorf("event %q, want UserKept", e)
		}
	default:
		t.Error("no event says the etcd user was kept")
	}
}

func ptrTo(s string) *string { return &s }
