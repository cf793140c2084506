package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/chaos"
	"steward.dev/steward/test/linearizability"
)

// TestMemberWithLostDataIsReplaced deletes a member's volume and Pod under client load: Steward removes the
// member from etcd and adds a successor with a new name and ID, with no acknowledged write lost.
func TestMemberWithLostDataIsReplaced(t *testing.T) {
	requireBed(t)
	startOperator(t)
	ctx := context.Background()
	createNamespace(t, "heal")
	c := newCluster("heal", "mended", 3)
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	got := waitSettled(t, key, 4*time.Minute)
	load, err := linearizability.Start(linearizability.Config{Endpoints: []string{clientServiceURL(t, got)}})
	if err != nil {
		t.Fatal(err)
	}
	// Pick a follower, so the test also does not depend on an election.
	var victim string
	var victimID string
	for _, m := range got.Status.Members {
		if m.Name != got.Status.Leader {
			victim, victimID = m.Name, m.ID
			break
		}
	}
	begin := time.Now()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "heal", Name: resources.PVCName(victim)}, pvc); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	if err := k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("heal"), client.MatchingLabels{resources.LabelMember: victim}); err != nil {
		t.Fatal(err)
	}
	poll(t, "member "+victim+" replaced", 4*time.Minute, func() error {
		if err := k8s.Get(ctx, key, got); err != nil {
			return err
		}
		for _, m := range got.Status.Members {
			if m.Name == victim || m.ID == victimID {
				return fmt.Errorf("member %s (%s) still listed: %s", victim, victimID, describe(got))
			}
		}
		return nil
	})
	got = waitSettled(t, key, 4*time.Minute)
	t.Logf("replaced member with lost data in %s", time.Since(begin).Round(100*time.Millisecond))
	checkStatusMatchesEtcd(t, got)
	vctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	res, err := load.Verify(vctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("load during replacement: %s", res)
	if res.Lost != 0 || res.Linearizable != porcupine.Ok || res.Acked == 0 {
		t.Fatalf("client load: %s (lost keys %v)", res, res.LostKeys)
	}
	deleteAndCheckNothingLeft(t, got)
}

// TestUnreachableMemberIsReplacedAfterGracePeriod cuts a follower off the network under client load: once it
// has been unhealthy longer than spec.replaceUnhealthyAfter, Steward removes it and adds a new member.
func TestUnreachableMemberIsReplacedAfterGracePeriod(t *testing.T) {
	requireBed(t)
	startOperator(t)
	ctx := context.Background()
	createNamespace(t, "partition")
	c := newCluster("partition", "islands", 3)
	c.Spec.ReplaceUnhealthyAfter = &metav1.Duration{Duration: 20 * time.Second}
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	got := waitSettled(t, key, 4*time.Minute)
	load, err := linearizability.Start(linearizability.Config{Endpoints: []string{clientServiceURL(t, got)}})
	if err != nil {
		t.Fatal(err)
	}
	var victim, victimID string
	for _, m := range got.Status.Members {
		if m.Name != got.Status.Leader {
			victim, victimID = m.Name, m.ID
			break
		}
	}
	var pod corev1.Pod
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "partition", Name: victim}, &pod); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if _, err := chaos.CutOffNetwork(&pod); err != nil {
		t.Fatal(err)
	}
	poll(t, "unreachable member "+victim+" replaced", 4*time.Minute, func() error {
		if err := k8s.Get(ctx, key, got); err != nil {
			return err
		}
		for _, m := range got.Status.Members {
			if m.Name == victim || m.ID == victimID {
				return fmt.Errorf("member %s still listed: %s", victim, describe(got))
			}
		}
		return nil
	})
	got = waitSettled(t, key, 4*time.Minute)
	took := time.Since(begin)
	if took < 20*time.Second {
		t.Errorf("replaced after %s, before the 20s grace period", took)
	}
	t.Logf("replaced an unreachable member %s after it was cut off (grace period 20s)", took.Round(100*time.Millisecond))
	checkStatusMatchesEtcd(t, got)
	vctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	res, err := load.Verify(vctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("load during replacement: %s", res)
	if res.Lost != 0 || res.Linearizable != porcupine.Ok || res.Acked == 0 {
		t.Fatalf("client load: %s (lost keys %v)", res, res.LostKeys)
	}
	deleteAndCheckNothingLeft(t, got)
}
