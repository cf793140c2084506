package etcduser

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/etcdauth"
)

// TestFinalizeNeverHoldsTheUser: a deleted EtcdUser goes at once when its cluster is gone or being deleted (as in a
// namespace's deletion), and after etcdauth.RemovalGiveUpAfter, with a UserLeftBehind Event naming the etcd user,
// when its cluster exists but has no member to delete the user through.
func TestFinalizeNeverHoldsTheUser(t *testing.T) {
	tests := []struct {
		name      string
		cluster   func() *etcdv1alpha1.EtcdCluster
		since     time.Duration
		held      bool
		wantEvent string
	}{
		{name: "cluster gone", cluster: func() *etcdv1alpha1.EtcdCluster { return nil }},
		{name: "cluster being deleted", cluster: func() *etcdv1alpha1.EtcdCluster {
			c := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", Finalizers: []string{"test/hold"}}}
			c.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			return c
		}},
		{name: "cluster without a healthy member", since: time.Minute, held: true, cluster: func() *etcdv1alpha1.EtcdCluster {
			return &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}
		}},
		{name: "cluster without a healthy member past the bound", since: etcdauth.RemovalGiveUpAfter, wantEvent: "UserLeftBehind",
			cluster: func() *etcdv1alpha1.EtcdCluster {
				return &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			if err := etcdv1alpha1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			user := &etcdv1alpha1.EtcdUser{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", Finalizers: []string{finalizer}},
				Spec: etcdv1alpha1.EtcdUserSpec{ClusterName: "db"}}
			objs := []client.Object{user}
			if c := tt.cluster(); c != nil {
				objs = append(objs, c)
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
				WithIndex(&etcdv1alpha1.EtcdUser{}, "spec.clusterName", func(o client.Object) []string {
					return []string{o.(*etcdv1alpha1.EtcdUser).Spec.ClusterName}
				}).Build()
			if err := c.Delete(ctx, user); err != nil {
				t.Fatal(err)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(user), user); err != nil {
				t.Fatal(err)
			}
			events := record.NewFakeRecorder(10)
			r := &Reconciler{Client: c, APIReader: c, Recorder: events, Etcd: etcd.NewPool(),
				Now: func() time.Time { return user.DeletionTimestamp.Add(tt.since) }}
			res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(user)})
			if err != nil {
				t.Fatal(err)
			}
			err = c.Get(ctx, client.ObjectKeyFromObject(user), user)
			if held := err == nil; held != tt.held {
				t.Fatalf("held %v, want %v (%v)", held, tt.held, err)
			}
			if !tt.held && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			if tt.held && (res.RequeueAfter <= 0 || tt.since+res.RequeueAfter > etcdauth.RemovalGiveUpAfter) {
				t.Fatalf("held without a look within the bound: %+v", res)
			}
			var got string
			if len(events.Events) > 0 {
				got = <-events.Events
			}
			if !strings.Contains(got, tt.wantEvent) || tt.wantEvent != "" && !strings.Contains(got, "etcd user app") {
				t.Fatalf("event %q, want %q naming the etcd user", got, tt.wantEvent)
			}
		})
	}
}
