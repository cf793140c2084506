package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// waitSettled waits until the cluster is Available, not Progressing, and has exactly spec.replicas members,
// Pods and PVCs (removed members' Pods and volumes are gone).
func waitSettled(t *testing.T, key client.ObjectKey, timeout time.Duration) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var got *etcdv1alpha1.EtcdCluster
	framework.Poll(t, "EtcdCluster "+key.String()+" settled", timeout, func() error {
		c, err := settled(key)
		got = c
		return err
	})
	return got
}

// settled returns the cluster, and an error saying why it has not settled: Available, not Progressing, its spec
// observed, as many ready members and PVCs as the spec asks for.
func settled(key client.ObjectKey) (*etcdv1alpha1.EtcdCluster, error) {
	var c etcdv1alpha1.EtcdCluster
	if err := framework.K8s.Get(context.Background(), key, &c); err != nil {
		return nil, err
	}
	if !meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionAvailable) ||
		!meta.IsStatusConditionFalse(c.Status.Conditions, etcdv1alpha1.ConditionProgressing) ||
		c.Status.ObservedGeneration != c.Generation || int(c.Status.ReadyReplicas) != int(c.Spec.Replicas) ||
		len(c.Status.Members) != int(c.Spec.Replicas) {
		return &c, fmt.Errorf("status: %s, %d members", describe(&c), len(c.Status.Members))
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := framework.K8s.List(context.Background(), &pvcs, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
		return &c, err
	}
	if len(pvcs.Items) != int(c.Spec.Replicas) {
		return &c, fmt.Errorf("%d PVCs, want %d", len(pvcs.Items), c.Spec.Replicas)
	}
	return &c, nil
}

// TestScaleUpAndDownUnderLoad scales 3 -> 5 -> 3 -> 1 -> 3 while clients read and write through the client
// Service, then checks the history is linearizable and no acknowledged write was lost.
func TestScaleUpAndDownUnderLoad(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "scale")
	framework.StartOperator(t, ns)
	c := newCluster(ns, "elastic", 3)
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	got := waitSettled(t, key, 4*time.Minute)
	load := startLoad(t, got)
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
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			t.Fatal(err)
		}
		if pdb.Spec.MinAvailable.IntValue() != int(resources.Quorum(replicas)) {
			t.Errorf("budget minAvailable %s at %d replicas", pdb.Spec.MinAvailable.String(), replicas)
		}
	}
	requireNoLostWrites(t, load, "3->5->3->1->3")
	deleteAndCheckNothingLeft(t, got)
}

// membershipState summarises what a scale-up step changes: etcd's voters and learners and the member Pods.
func membershipState(t *testing.T, c *etcdv1alpha1.EtcdCluster) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var eps []string
	for _, ep := range memberEndpoints(t, c) {
		eps = append(eps, ep)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), TLS: clusterTLS(t, c)})
	if err != nil {
		return "unreachable"
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return "unreachable"
	}
	voters, learners, started := 0, 0, 0
	for _, m := range resp.Members {
		if m.IsLearner {
			learners++
		} else {
			voters++
		}
		if m.Name != "" {
			started++
		}
	}
	return fmt.Sprintf("voters=%d learners=%d started=%d pods=%d", voters, learners, started, len(eps))
}

// TestScaleUpSurvivesOperatorRestartAtEveryStep scales 3 -> 5 and stops the operator after every step it takes
// (learner added, its Pod created, the learner started, promoted), starting a new one each time, under load.
func TestScaleUpSurvivesOperatorRestartAtEveryStep(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "restart")
	c := newCluster(ns, "stubborn", 3)
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	stop := framework.StartOperator(t, ns)
	got := waitSettled(t, key, 4*time.Minute)
	load := startLoad(t, got)
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Replicas = 5
	if err := framework.K8s.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	state := membershipState(t, got)
	restarts := 0
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if err := framework.K8s.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		if now := membershipState(t, got); now != state && now != "unreachable" {
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
	got = waitSettled(t, key, 4*time.Minute)
	if restarts < 4 {
		t.Errorf("only %d operator restarts observed; want one after each of at least 4 steps", restarts)
	}
	checkStatusMatchesEtcd(t, got)
	requireNoLostWrites(t, load, "restarted scale-up")
	deleteAndCheckNothingLeft(t, got)
}
