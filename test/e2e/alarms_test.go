package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/test/e2e/framework"
)

// TestNoSpaceAlarmIsReported fills a 3-member cluster on the smallest volume admission takes (512Mi, so a
// derived quota of 32Mi) until etcd refuses writes with its NOSPACE alarm: the disk never fills first, status
// lists the alarm per member, Degraded says NoSpaceAlarm with what to do, a Warning Event is recorded, and the
// cluster still serves every acknowledged write. After the runbook's recovery (compact, defragment every member,
// disarm), the condition clears and writes resume, with every acknowledged write still there.
func TestNoSpaceAlarmIsReported(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "nospace")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "full", 3)
	c.Spec.Storage.Size = resource.MustParse("512Mi")
	key, got := framework.Settle(t, c)
	framework.CheckQuota(t, got, 32<<20)
	ids := framework.MemberIDs(got)
	cli, eps := framework.MemberClient(t, got)
	defer func() { _ = cli.Close() }()
	begin := time.Now()
	filled := framework.Overwrite(t, cli, 1000)
	if filled.NoSpaceKey == "" {
		t.Fatal("1000 writes of 256KiB and no NOSPACE: the quota is not 32Mi")
	}
	t.Logf("NOSPACE after %s of 256KiB writes", time.Since(begin).Round(100*time.Millisecond))

	var degraded metav1.Condition
	framework.Poll(t, "NOSPACE reported in status", 2*time.Minute, func() error {
		var cur etcdv1alpha1.EtcdCluster
		if err := framework.K8s.Get(ctx, key, &cur); err != nil {
			return err
		}
		noSpace := 0
		for _, a := range cur.Status.Alarms {
			if a.Alarm == "NOSPACE" {
				noSpace++
			}
		}
		d := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if noSpace == 0 || d == nil || d.Reason != etcdv1alpha1.ReasonNoSpaceAlarm {
			return fmt.Errorf("alarms %v, Degraded %+v", cur.Status.Alarms, d)
		}
		// Reads and deletes still work, the members are in step: no quorum is lost, and nothing is replaced.
		if !meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1alpha1.ConditionAvailable) || cur.Status.ReadyReplicas != 3 {
			return fmt.Errorf("under NOSPACE: ready %d, conditions %+v", cur.Status.ReadyReplicas, cur.Status.Conditions)
		}
		degraded = *d
		return nil
	})
	t.Logf("Degraded: %s", degraded.Message)
	if degraded.Status != metav1.ConditionTrue {
		t.Errorf("Degraded is not True with reason NoSpaceAlarm")
	}
	if ev := framework.EventsWithin(t, got, etcdv1alpha1.ReasonNoSpaceAlarm, begin, 1); len(ev) == 0 {
		t.Errorf("no Warning Event NoSpaceAlarm")
	}
	filled.Check(t, cli)

	// The runbook (docs/operations/alerts-and-runbooks.md): compact, defragment every member, disarm.
	status, err := cli.Status(ctx, framework.AnyEndpoint(eps))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, status.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact: %v", err)
	}
	for _, ep := range eps {
		if _, err := cli.Defragment(ctx, ep); err != nil {
			t.Fatalf("defragment %s: %v", ep, err)
		}
	}
	alarms, err := cli.AlarmList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alarms.Alarms {
		if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm}); err != nil {
			t.Fatalf("disarm %v: %v", a, err)
		}
		if a.Alarm != etcdserverpb.AlarmType_NOSPACE {
			t.Errorf("alarm %v besides NOSPACE", a)
		}
	}
	framework.Poll(t, "NOSPACE cleared from status", 2*time.Minute, func() error {
		var cur etcdv1alpha1.EtcdCluster
		if err := framework.K8s.Get(ctx, key, &cur); err != nil {
			return err
		}
		if d := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionDegraded); len(cur.Status.Alarms) > 0 || d == nil || d.Status != metav1.ConditionFalse {
			return fmt.Errorf("alarms %v, Degraded %+v", cur.Status.Alarms, d)
		}
		return nil
	})
	if _, err := cli.Put(ctx, "after", "recovered"); err != nil {
		t.Fatalf("write after the recovery: %v", err)
	}
	filled.Check(t, cli)
	got = framework.WaitSettled(t, key, time.Minute)
	if now := framework.MemberIDs(got); fmt.Sprint(now) != fmt.Sprint(ids) {
		t.Errorf("members changed %v -> %v: a NOSPACE alarm is no reason to replace any", ids, now)
	}
	framework.DeleteAndCheckNothingLeft(t, got)
}
