package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/chaos"
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
	load := startLoad(t, got)
	victim, victimID := aFollower(t, got)
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
	requireNoLostWrites(t, load, "replacement")
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
	load := startLoad(t, got)
	victim, victimID := aFollower(t, got)
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
	requireNoLostWrites(t, load, "replacement")
	deleteAndCheckNothingLeft(t, got)
}
