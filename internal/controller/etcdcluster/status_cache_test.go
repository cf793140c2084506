package etcdcluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// TestAwaitCachedStatus: after its status write a pass returns only once the cache holds a newer object than
// the one the pass started from, so the next pass does not decide again on the old one (once: a second
// hash check and a second Warning Event in the same second); a cache that cannot be read does not hold it.
func TestAwaitCachedStatus(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		stale    int
		fail     bool
		wantGets int
	}{
		"cache already caught up":             {0, false, 1},
		"cache three reads behind":            {3, false, 4},
		"cache unreadable: no wait at all":    {0, true, 1},
		"cache behind, then unreadable: stop": {2, true, 1},
	} {
		t.Run(name, func(t *testing.T) {
			cluster := testCluster()
			base := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(cluster).WithStatusSubresource(cluster).Build()
			before := &etcdv1alpha1.EtcdCluster{}
			if err := base.Get(ctx, client.ObjectKeyFromObject(cluster), before); err != nil {
				t.Fatal(err)
			}
			written := before.DeepCopy()
			written.Status.Replicas = 3
			if err := base.Status().Update(ctx, written); err != nil {
				t.Fatal(err)
			}
			gets, stale := 0, tc.stale
			c := interceptor.NewClient(base, interceptor.Funcs{
				Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					gets++
					if tc.fail {
						return errors.New("cache not started")
					}
					if stale > 0 {
						stale--
						before.DeepCopyInto(obj.(*etcdv1alpha1.EtcdCluster))
						return nil
					}
					return cl.Get(ctx, key, obj, opts...)
				},
			})
			r := &Reconciler{Client: c}
			begin := time.Now()
			r.awaitCachedStatus(ctx, before)
			if gets != tc.wantGets {
				t.Errorf("%d reads of the cache, want %d", gets, tc.wantGets)
			}
			if took := time.Since(begin); took >= cacheCatchUp {
				t.Errorf("waited %s, the bound is %s", took, cacheCatchUp)
			}
		})
	}
}
