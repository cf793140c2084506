package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// TestDefragmentation: a 3-member cluster with a defragmentation threshold and a maintenance window gets 30MiB of
// old revisions, compacted, under client load. While the window is closed the defragmentation waits
// (status.maintenanceWindow lists it, Progressing says MaintenanceDeferred), and a member whose data is lost is
// still replaced at once (its successor joins by a snapshot of the leader's file, garbage and all). The window is
// then moved to one open now: Steward defragments every member that held the garbage once, one at a time, the
// leader last after handing leadership over; every database file shrinks, status and an Event per member record
// it, no write is lost.
func TestDefragmentation(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "defrag")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "tidy", 3)
	c.Spec.Maintenance = &etcdv1alpha1.Maintenance{Defragmentation: &etcdv1alpha1.Defragmentation{
		MinFreeBytes: ptr.To(resource.MustParse("16Mi")), MinFreePercent: ptr.To[int32](50)},
		Window: closedWindow()}
	key, got := framework.Settle(t, c)
	load := framework.StartLoad(t, got)
	cli, eps := framework.MemberClient(t, got)
	defer func() { _ = cli.Close() }()
	filled := framework.Overwrite(t, cli, 120)
	status, err := cli.Status(ctx, framework.AnyEndpoint(eps))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, status.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	compacted := time.Now()
	framework.Poll(t, "the defragmentation deferred to the window", 2*time.Minute, func() error {
		var cur etcdv1alpha1.EtcdCluster
		if err := framework.K8s.Get(ctx, key, &cur); err != nil {
			return err
		}
		w := cur.Status.MaintenanceWindow
		if w == nil || w.Open || w.NextOpens == nil || len(w.Deferred) == 0 || !strings.HasPrefix(w.Deferred[0], "maintenance: defragmenting member") {
			return fmt.Errorf("status.maintenanceWindow %+v", w)
		}
		if p := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionProgressing); p == nil || p.Reason != etcdv1alpha1.ReasonMaintenanceDeferred {
			return fmt.Errorf("Progressing %+v", p)
		}
		want := time.Date(time.Now().In(tokyo(t)).Year(), 1, 1, 3, 0, 0, 0, tokyo(t))
		if !want.After(time.Now()) {
			want = want.AddDate(1, 0, 0)
		}
		if !w.NextOpens.Time.Equal(want) {
			t.Fatalf("the window next opens %s, want %s", w.NextOpens.Time, want)
		}
		return nil
	})
	if ev := framework.EventsWithin(t, got, "MaintenanceDeferred", compacted, 1); len(ev) != 1 {
		t.Errorf("MaintenanceDeferred events %v, want one", ev)
	}

	// What keeps data safe does not wait: a member whose data is lost is replaced with the window closed.
	victim, victimID := framework.AFollower(t, got)
	deleteMemberData(t, ns, victim)
	framework.WaitMemberGone(t, key, victim, victimID, 4*time.Minute)
	got = framework.WaitAvailable(t, key, 4*time.Minute)
	framework.Poll(t, "a successor of "+victim, 4*time.Minute, func() error {
		var err error
		got, err = framework.Settled(key)
		if err != nil {
			return err
		}
		if p := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionProgressing); p.Reason != etcdv1alpha1.ReasonMaintenanceDeferred {
			return fmt.Errorf("Progressing %s: %s", p.Reason, p.Message)
		}
		return nil
	})
	if ev := framework.EventsOf(t, got, "MemberDefragmented", compacted); len(ev) > 0 {
		t.Fatalf("defragmented with the window closed: %v", ev)
	}
	fragmented := map[string]bool{}
	for _, m := range got.Status.Members {
		if m.Name != victim && m.DBSizeBytes-m.DBSizeInUseBytes >= 16<<20 {
			fragmented[m.Name] = true
		}
	}
	// The successor joined by a snapshot of the leader's database file, free pages and all: it may hold the garbage too.
	if len(fragmented) < 2 {
		t.Fatalf("members with the garbage after the replacement: %v, want at least the two that stayed", fragmented)
	}

	// The window is moved to today's window that began this minute: open now, and the deferred work runs.
	opens := time.Now()
	openWindowNow(t, key)
	framework.Poll(t, "the members that held the garbage defragmented", 5*time.Minute, func() error {
		var cur etcdv1alpha1.EtcdCluster
		if err := framework.K8s.Get(ctx, key, &cur); err != nil {
			return err
		}
		var todo []string
		for _, m := range cur.Status.Members {
			if d := m.LastDefragmentation; fragmented[m.Name] && (d == nil || d.ReclaimedBytes < 16<<20) {
				todo = append(todo, fmt.Sprintf("%s (db %d, in use %d, last %+v)", m.Name, m.DBSizeBytes, m.DBSizeInUseBytes, m.LastDefragmentation))
			}
		}
		if len(todo) > 0 {
			return fmt.Errorf("not defragmented (window %+v): %s", cur.Status.MaintenanceWindow, strings.Join(todo, "; "))
		}
		return nil
	})
	began := time.Now()
	if began.Before(opens) {
		t.Fatalf("defragmented at %s, before the window opened at %s", began, opens)
	}
	got = framework.WaitSettled(t, key, 2*time.Minute)
	framework.RequireNoLostWrites(t, load, "a replacement with the window closed, then defragmenting in the window")
	var total int64
	for _, m := range got.Status.Members {
		if !fragmented[m.Name] {
			continue
		}
		total += m.LastDefragmentation.ReclaimedBytes
		if m.DBSizeBytes > 24<<20 {
			t.Errorf("member %s: database file %d bytes after its defragmentation", m.Name, m.DBSizeBytes)
		}
	}
	if w := got.Status.MaintenanceWindow; w == nil || len(w.Deferred) != 0 {
		t.Errorf("status.maintenanceWindow %+v after the work ran, want nothing deferred", w)
	}
	events := framework.EventsWithin(t, got, "MemberDefragmented", compacted, len(fragmented))
	t.Logf("%d members defragmented %s after the window opened, %d MiB given back in all; events: %v", len(fragmented),
		began.Sub(opens).Round(100*time.Millisecond), total>>20, events)
	if len(events) != len(fragmented) {
		t.Errorf("%d MemberDefragmented events, want one per member that held the garbage (%d)", len(events), len(fragmented))
	}
	if moved := framework.EventsWithin(t, got, "LeaderMoved", compacted, 1); len(moved) != 1 {
		t.Errorf("LeaderMoved events %v: the leader is defragmented after handing leadership over, once", moved)
	}
	filled.Check(t, cli2(t, got))
	// A second pass finds nothing to do: the files are compact now.
	time.Sleep(10 * time.Second)
	if again := framework.EventsOf(t, got, "MemberDefragmented", compacted); len(again) != len(fragmented) {
		t.Errorf("defragmented again without new garbage: %v", again)
	}
	framework.DeleteAndCheckNothingLeft(t, got)
}

// openWindowNow moves the cluster's maintenance window to a daily one that opened at the start of this minute
// (UTC) for an hour: open from the operator's next pass.
func openWindowNow(t *testing.T, key client.ObjectKey) {
	t.Helper()
	now := time.Now().UTC()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Maintenance.Window = &etcdv1alpha1.MaintenanceWindow{Schedule: fmt.Sprintf("%d %d * * *", now.Minute(), now.Hour()),
			Duration: metav1.Duration{Duration: time.Hour}}
	})
}

// closedWindow is a maintenance window that opens on New Year's Day only, in Tokyo: closed for any test.
func closedWindow() *etcdv1alpha1.MaintenanceWindow {
	return &etcdv1alpha1.MaintenanceWindow{Schedule: "0 3 1 1 *", TimeZone: "Asia/Tokyo", Duration: metav1.Duration{Duration: time.Hour}}
}

// tokyo is Asia/Tokyo.
func tokyo(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// cli2 is a client of the cluster's current members, closed with the test.
func cli2(t *testing.T, c *etcdv1alpha1.EtcdCluster) *clientv3.Client {
	t.Helper()
	cli, _ := framework.MemberClient(t, c)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// deleteMemberData deletes member's volume and Pod: its data is gone.
func deleteMemberData(t *testing.T, ns, member string) {
	t.Helper()
	ctx := context.Background()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.PVCName(member)}, pvc); err != nil {
		t.Fatal(err)
	}
	if err := framework.K8s.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	if err := framework.K8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels{resources.LabelMember: member}); err != nil {
		t.Fatal(err)
	}
}

// TestNoSpaceRecovery fills a 3-member cluster with a 32Mi quota (512Mi volumes) and spec.maintenance
// .recoverFromNoSpace under client load until etcd raises NOSPACE and writes fail; Steward compacts, defragments
// every member and disarms the alarm by itself, writes resume, and no write acknowledged before or after is lost.
func TestNoSpaceRecovery(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "nospace-auto")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "phoenix", 3)
	c.Spec.Storage.Size = resource.MustParse("512Mi")
	c.Spec.Maintenance = &etcdv1alpha1.Maintenance{RecoverFromNoSpace: &etcdv1alpha1.NoSpaceRecovery{RevisionMargin: ptr.To[int64](10)}}
	key, got := framework.Settle(t, c)
	ids := framework.MemberIDs(got)
	load := framework.StartLoad(t, got)
	cli, _ := framework.MemberClient(t, got)
	defer func() { _ = cli.Close() }()
	begin := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			framework.LogEvents(t, got, begin)
			var now etcdv1alpha1.EtcdCluster
			if err := framework.K8s.Get(ctx, key, &now); err == nil {
				t.Logf("cluster at the end: %s", framework.Describe(&now))
			}
		}
	})
	filled := framework.Overwrite(t, cli, 1000)
	if filled.NoSpaceKey == "" {
		t.Fatal("1000 writes of 256KiB and no NOSPACE")
	}
	raised := time.Since(begin)
	framework.Poll(t, "writes accepted again", 4*time.Minute, func() error {
		_, err := cli.Put(ctx, "after", "recovered")
		return err
	})
	recovered := time.Since(begin) - raised
	for _, reason := range []string{"NoSpaceCompacted", "MemberDefragmented", "NoSpaceRecovered"} {
		if ev := framework.EventsWithin(t, got, reason, begin, 1); len(ev) == 0 {
			t.Errorf("no %s event", reason)
		}
	}
	got = framework.WaitSettled(t, key, 2*time.Minute)
	if d := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionDegraded); d == nil || d.Status != "False" || len(got.Status.Alarms) > 0 {
		t.Errorf("after the recovery: alarms %v, Degraded %+v", got.Status.Alarms, d)
	}
	framework.RequireNoLostWrites(t, load, "filling the quota, NOSPACE and Steward's recovery")
	filled.Check(t, cli)
	t.Logf("NOSPACE after %s of 256KiB writes; writes accepted again %s later", raised.Round(100*time.Millisecond), recovered.Round(100*time.Millisecond))
	if now := framework.MemberIDs(got); fmt.Sprint(now) != fmt.Sprint(ids) {
		t.Errorf("members changed %v -> %v", ids, now)
	}
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestNoSpaceQuotaRaised fills a 3-member cluster with a 32Mi quota under client load with live data (every
// value under its own key, so no compaction frees it) until etcd raises NOSPACE. With recoverFromNoSpace and a
// maximum of 128Mi, Steward compacts and defragments, finds the data still fills the quota, raises it to 64Mi,
// restarts the members with it one at a time (the leader last), and disarms the alarm: writes resume, every
// member runs with the new quota, and no acknowledged write is lost.
func TestNoSpaceQuotaRaised(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "nospace-raise")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "roomier", 3)
	c.Spec.Etcd.QuotaBackendBytes = ptr.To(resource.MustParse("32Mi"))
	c.Spec.Maintenance = &etcdv1alpha1.Maintenance{RecoverFromNoSpace: &etcdv1alpha1.NoSpaceRecovery{RevisionMargin: ptr.To[int64](10),
		MaxQuotaBackendBytes: ptr.To(resource.MustParse("128Mi"))}}
	key, got := framework.Settle(t, c)
	ids := framework.MemberIDs(got)
	load := framework.StartLoad(t, got)
	cli, _ := framework.MemberClient(t, got)
	defer func() { _ = cli.Close() }()
	begin := time.Now()
	filled := framework.WriteValues(t, cli, 1000, 1000)
	if filled.NoSpaceKey == "" {
		t.Fatal("1000 writes of 256KiB and no NOSPACE")
	}
	raised := time.Since(begin)
	// The members restart on new Pods, with new IPs: each try dials the members there are.
	framework.Poll(t, "writes accepted again", 5*time.Minute, func() error {
		now, _ := framework.MemberClient(t, got)
		defer func() { _ = now.Close() }()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := now.Put(pctx, "after", "recovered")
		return err
	})
	recovered := time.Since(begin) - raised
	for _, reason := range []string{"QuotaRaised", "NoSpaceRecovered"} {
		if ev := framework.EventsWithin(t, got, reason, begin, 1); len(ev) != 1 {
			t.Errorf("%s events %v, want one", reason, ev)
		}
	}
	if ev := framework.EventsWithin(t, got, "MemberRestarting", begin, 3); len(ev) != 3 {
		t.Errorf("MemberRestarting events %v, want one per member", ev)
	}
	got = framework.WaitSettled(t, key, 2*time.Minute)
	// Twice the quota, or more when the data in use needs it (bbolt's pages for 256KiB values take more than the
	// values), at most the maximum.
	quota := got.Status.RaisedQuotaBackendBytes
	if quota < 64<<20 || quota > 128<<20 || quota%(1<<20) != 0 {
		t.Errorf("raised quota %d, want whole MiB from 64Mi to 128Mi", quota)
	}
	framework.CheckQuota(t, got, quota)
	if d := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionDegraded); d == nil || d.Status != "False" || len(got.Status.Alarms) > 0 {
		t.Errorf("after the recovery: alarms %v, Degraded %+v", got.Status.Alarms, d)
	}
	framework.RequireNoLostWrites(t, load, "filling the quota with live data, NOSPACE, the quota raised and members restarted")
	after, _ := framework.MemberClient(t, got)
	defer func() { _ = after.Close() }()
	filled.Check(t, after)
	t.Logf("NOSPACE after %s of 256KiB writes (%d keys); writes accepted again %s later (quota raised 32Mi -> %dMi, 3 restarts)",
		raised.Round(100*time.Millisecond), len(filled.Acked), recovered.Round(100*time.Millisecond), quota>>20)
	if now := framework.MemberIDs(got); fmt.Sprint(now) != fmt.Sprint(ids) {
		t.Errorf("members changed %v -> %v", ids, now)
	}
	framework.DeleteAndCheckNothingLeft(t, got)
}
