package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/linearizability"
)

// waitSettled waits until the cluster is Available, not Progressing, and has exactly spec.replicas members,
// Pods and PVCs (removed members' Pods and volumes are gone).
func waitSettled(t *testing.T, key client.ObjectKey, timeout time.Duration) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	poll(t, "EtcdCluster "+key.String()+" settled", timeout, func() error {
		if err := k8s.Get(context.Background(), key, &c); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionAvailable) ||
			!meta.IsStatusConditionFalse(c.Status.Conditions, etcdv1alpha1.ConditionProgressing) ||
			c.Status.ObservedGeneration != c.Generation || int(c.Status.ReadyReplicas) != int(c.Spec.Replicas) ||
			len(c.Status.Members) != int(c.Spec.Replicas) {
			return fmt.Errorf("status: %s, %d members", describe(&c), len(c.Status.Members))
		}
		var pvcs corev1.PersistentVolumeClaimList
		if err := k8s.List(context.Background(), &pvcs, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
			return err
		}
		if len(pvcs.Items) != int(c.Spec.Replicas) {
			return fmt.Errorf("%d PVCs, want %d", len(pvcs.Items), c.Spec.Replicas)
		}
		return nil
	})
	return &c
}

// TestScaleUpAndDownUnderLoad scales 3 -> 5 -> 3 -> 1 -> 3 while clients read and write through the client
// Service, then checks the history is linearizable and no acknowledged write was lost.
func TestScaleUpAndDownUnderLoad(t *testing.T) {
	requireBed(t)
	startOperator(t)
	ctx := context.Background()
	createNamespace(t, "scale")
	c := newCluster("scale", "elastic", 3)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	got := waitSettled(t, key, 4*time.Minute)
	load, err := linearizability.Start(linearizability.Config{Endpoints: []string{clientServiceURL(t, got)}})
	if err != nil {
		t.Fatal(err)
	}
	// A member name is never reused: no member after a step has the name of a member removed before.
	removed := map[string]bool{}
	previous := got.Status.Members
	for _, replicas := range []int32{5, 3, 1, 3} {
		begin := time.Now()
		if err := k8s.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(got.DeepCopy())
		got.Spec.Replicas = replicas
		if err := k8s.Patch(ctx, got, patch); err != nil {
			t.Fatal(err)
		}
		got = waitSettled(t, key, 5*time.Minute)
		t.Logf("scaled to %d in %s", replicas, time.Since(begin).Round(100*time.Millisecond))
		checkStatusMatchesEtcd(t, got)
		current := map[string]bool{}
		for _, m := range got.Status.Members {
			current[m.Name] = true
			if m.Role == etcdv1alpha1.RoleLearner {
				t.Errorf("member %s still a learner", m.Name)
			}
			if removed[m.Name] {
				t.Errorf("member name %s reused after its member was removed", m.Name)
			}
		}
		for _, m := range previous {
			if !current[m.Name] {
				removed[m.Name] = true
			}
		}
		previous = got.Status.Members
		var pdb = resources.PodDisruptionBudget(got)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			t.Fatal(err)
		}
		if pdb.Spec.MinAvailable.IntValue() != int(resources.Quorum(replicas)) {
			t.Errorf("budget minAvailable %s at %d replicas", pdb.Spec.MinAvailable.String(), replicas)
		}
	}
	vctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	res, err := load.Verify(vctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("load during 3->5->3->1->3: %s", res)
	if res.Lost != 0 || res.Linearizable != porcupine.Ok || res.Acked == 0 {
		t.Fatalf("client load: %s (lost keys %v)", res, res.LostKeys)
	}
	deleteAndCheckNothingLeft(t, got)
}
