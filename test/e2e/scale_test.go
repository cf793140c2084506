package e2e

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// TestScaleUpAndDownUnderLoad scales 3 -> 5 -> 3 -> 1 -> 3 while clients read and write through the client
// Service, then checks the history is linearizable and no acknowledged write was lost.
func TestScaleUpAndDownUnderLoad(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "scale")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "elastic", 3)
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	got := framework.WaitSettled(t, key, 4*time.Minute)
	load := framework.StartLoad(t, got)
	// A member name is never reused: no member after a step has the name of a member removed before.
	removed := map[string]bool{}
	previous := got.Status.Members
	for _, replicas := range []int32{5, 3, 1, 3} {
		begin := time.Now()
		if err := framework.K8s.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(got.DeepCopy())
		got.Spec.Replicas = replicas
		if err := framework.K8s.Patch(ctx, got, patch); err != nil {
			t.Fatal(err)
		}
		got = framework.WaitSettled(t, key, 5*time.Minute)
		t.Logf("scaled to %d in %s", replicas, time.Since(begin).Round(100*time.Millisecond))
		framework.CheckStatusMatchesEtcd(t, got)
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
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			t.Fatal(err)
		}
		if pdb.Spec.MinAvailable.IntValue() != plan.Quorum(int(replicas)) {
			t.Errorf("budget minAvailable %s at %d replicas", pdb.Spec.MinAvailable.String(), replicas)
		}
	}
	framework.RequireNoLostWrites(t, load, "3->5->3->1->3")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestScaleUpSurvivesOperatorRestartAtEveryStep scales 3 -> 5 and stops the operator after every step it takes
// (learner added, its Pod created, the learner started, promoted), starting a new one each time, under load.
func TestScaleUpSurvivesOperatorRestartAtEveryStep(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "restart")
	c := framework.NewCluster(ns, "stubborn", 3)
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	stop := framework.StartOperator(t, ns)
	got := framework.WaitSettled(t, key, 4*time.Minute)
	load := framework.StartLoad(t, got)
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Replicas = 5
	if err := framework.K8s.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	state := framework.MembershipState(t, got)
	restarts := 0
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if err := framework.K8s.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		if now := framework.MembershipState(t, got); now != state && now != "unreachable" {
			stop()
			restarts++
			t.Logf("step: %s -> %s; operator restarted (%d)", state, now, restarts)
			state = now
			stop = framework.StartOperator(t, ns)
		}
		if state == "voters=5 learners=0 started=5 pods=5" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	got = framework.WaitSettled(t, key, 4*time.Minute)
	if restarts < 4 {
		t.Errorf("only %d operator restarts observed; want one after each of at least 4 steps", restarts)
	}
	framework.CheckStatusMatchesEtcd(t, got)
	framework.RequireNoLostWrites(t, load, "restarted scale-up")
	framework.DeleteAndCheckNothingLeft(t, got)
}
