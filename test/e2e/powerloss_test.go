package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/chaos"
	"steward.dev/steward/test/e2e/framework"
)

// TestEveryMemberKilledAtOnce is a power loss as the members meet it: under client load, every process of every
// member's etcd container is SIGKILLed at once (no member left to lead, nothing flushed on the way out), twice in a
// row. Each time the kubelet restarts the containers after its crash back-off (10 s, then 20 s: the return gets
// slower, which docs/user/scaling-and-healing.md tells users to expect), the same members come back from their own write-ahead
// logs on their volumes, none is replaced, and no acknowledged write is lost.
func TestEveryMemberKilledAtOnce(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "powerloss")
	framework.StartOperator(t, ns)
	ctx := context.Background()
	key, got := framework.CreateSettled(t, ns, "powerloss", 0)
	load := framework.StartLoad(t, got)
	all := framework.MemberNames(got)
	for round := 1; round <= 2; round++ {
		restarts := framework.ContainerRestarts(t, key)
		// Every Pod is read first, so that the kills follow each other within milliseconds.
		pods := make([]corev1.Pod, len(all))
		for i, m := range all {
			if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: m}, &pods[i]); err != nil {
				t.Fatal(err)
			}
		}
		begin := time.Now()
		for i := range pods {
			if err := chaos.KillContainer(&pods[i], resources.EtcdContainer); err != nil {
				t.Fatal(err)
			}
		}
		what := fmt.Sprintf("kill %d of every member's etcd", round)
		framework.Poll(t, what+": etcd containers restarted", 4*time.Minute, func() error {
			now := framework.ContainerRestarts(t, key)
			for _, m := range all {
				if now[m] <= restarts[m] {
					return fmt.Errorf("etcd container of %s not restarted yet (%d restarts)", m, now[m])
				}
			}
			return nil
		})
		restarted := time.Since(begin)
		got = framework.WaitSettled(t, key, 4*time.Minute)
		t.Logf("%s: restarted after %s, settled after %s", what, restarted.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond))
		if now := framework.MemberNames(got); fmt.Sprint(now) != fmt.Sprint(all) {
			t.Errorf("%s: members %v afterwards, want the same %v back on their volumes", what, now, all)
		}
		framework.CheckStatusMatchesEtcd(t, got)
	}
	framework.RequireNoLostWrites(t, load, "every member's etcd killed at once, twice")
	framework.DeleteAndCheckNothingLeft(t, got)
}
