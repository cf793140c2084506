package etcdrestore

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/metrics"
)

// TestEndedRestoreCountedOnce: a restore that fails is counted, and its Event recorded, on the pass that ends
// it; passes after that (the restore is finished) count nothing, and neither does a pass that read a stale copy
// of the restore (its status write conflicts and is retried from the finished object).
func TestEndedRestoreCountedOnce(t *testing.T) {
	ctx := context.Background()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := etcdv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	rs := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "counted-once", BackupName: "missing"}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(rs).WithStatusSubresource(rs).Build()
	rec := record.NewFakeRecorder(10)
	r := &Reconciler{Client: c, APIReader: c, Recorder: rec, Now: time.Now}
	metrics.Register()
	defer metrics.Forget("ns", "counted-once")

	var stale etcdv1alpha1.EtcdRestore
	if err := c.Get(ctx, client.ObjectKeyFromObject(rs), &stale); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rs)}
	for range 3 {
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	var got etcdv1alpha1.EtcdRestore
	if err := c.Get(ctx, client.ObjectKeyFromObject(rs), &got); err != nil {
		t.Fatal(err)
	}
	if !etcdv1alpha1.Finished(got.Status.Conditions) {
		t.Fatalf("restore not finished: %+v", got.Status.Conditions)
	}
	// A status write from a pass that read the restore before it ended is refused.
	before := stale.DeepCopy()
	stale.Status.CompletionTime = &metav1.Time{Time: time.Now()}
	if err := c.Status().Patch(ctx, &stale, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err == nil {
		t.Error("a stale write that ends the restore again was accepted")
	}
	if n := len(rec.Events); n != 1 {
		t.Errorf("%d Events, want 1", n)
	}
	n, err := testutil.GatherAndCount(ctrlmetrics.Registry, "steward_restores_total")
	if err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Fatal("no restore counted")
	}
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "steward_restores_total" {
			continue
		}
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["cluster"] == "counted-once" {
				if labels["result"] != metrics.ResultFailed || labels["reason"] != "ClusterNotFound" || m.Counter.GetValue() != 1 {
					t.Errorf("counted %v = %v, want result failed, reason ClusterNotFound, 1", labels, m.Counter.GetValue())
				}
			}
		}
	}
}
