package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// TestHibernationUnderLoad hibernates a 3-member TLS cluster with authentication on, an EtcdUser and a backup
// schedule, under client load: the members stop one at a time with the leader last, no member Pod runs, the
// volumes stay, status says Hibernated with the data kept, the schedule pauses and says why, and nothing starts
// while the spec changes its version. Resumed, the same members come back on their volumes with the same cluster
// ID and revisions, the version change made while hibernated is rolled out, the user still writes under its
// prefix, the schedule backs up again, and no acknowledged write is lost.
func TestHibernationUnderLoad(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "hibernate")
	framework.StartOperator(t, ns)
	framework.CreateBackupClaim(t, ns, "1Gi")
	c := framework.NewClusterAt(ns, "sleeper", "3.6.15")
	c.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true}
	key, _ := framework.Settle(t, c)
	c = framework.WaitAuthEnabled(t, key, true)
	users := map[string]*etcdv1alpha1.EtcdUser{"app": framework.NewEtcdUser(ns, "app", c.Name, "/app/", etcdv1alpha1.AccessReadWrite, false)}
	framework.CreateUsersReady(t, users)
	framework.MayWrite(t, "app before hibernation", framework.UserClient(t, c, users["app"]), "/app/before", true)
	schedule := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: c.Name, Schedule: "@every 30s",
			Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "sleeper"}},
			Retention:   etcdv1alpha1.Retention{MaxCount: ptr.To[int32](3)}}}
	if err := framework.K8s.Create(ctx, schedule); err != nil {
		t.Fatal(err)
	}
	waitBackupAfter(t, schedule, time.Time{})

	load := framework.StartLoad(t, c)
	time.Sleep(3 * time.Second) // writes acknowledged before the stop
	c = framework.WaitAvailable(t, key, time.Minute)
	members, leader, clusterID := framework.MemberNames(c), c.Status.Leader, c.Status.ClusterID
	began := time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Hibernation = &etcdv1alpha1.Hibernation{Enabled: true} })

	// One at a time, the leader last: when one Pod is left, it is the leader's.
	framework.Poll(t, "one member Pod left", 2*time.Minute, func() error {
		running := runningMemberPods(t, key)
		switch {
		case len(running) == 1 && running[0] != leader:
			t.Fatalf("the last member running is %s, want the leader %s", running[0], leader)
		case len(running) == 0:
			t.Fatalf("every member Pod went before one was seen left alone: not one at a time")
		case len(running) > 1:
			return fmt.Errorf("%d running: %v", len(running), running)
		}
		return nil
	})
	var hib *etcdv1alpha1.EtcdCluster
	framework.Poll(t, "hibernated", 2*time.Minute, func() error {
		got := &etcdv1alpha1.EtcdCluster{}
		if err := framework.K8s.Get(ctx, key, got); err != nil {
			return err
		}
		if h := got.Status.Hibernation; h == nil || h.Phase != etcdv1alpha1.HibernationHibernated {
			return fmt.Errorf("status.hibernation %+v", got.Status.Hibernation)
		}
		hib = got
		return nil
	})
	t.Logf("hibernated %s after the change: %+v", time.Since(began).Round(100*time.Millisecond), *hib.Status.Hibernation)
	h := hib.Status.Hibernation
	if fmt.Sprint(h.Members) != fmt.Sprint(members) || h.DataSizeBytes <= 0 || h.Revision <= 0 {
		t.Errorf("status.hibernation %+v, want members %v, the data size and the revision", *h, members)
	}
	if a := meta.FindStatusCondition(hib.Status.Conditions, etcdv1alpha1.ConditionAvailable); a == nil || a.Reason != etcdv1alpha1.ReasonHibernated {
		t.Errorf("Available %+v, want reason Hibernated", a)
	}
	if d := meta.FindStatusCondition(hib.Status.Conditions, etcdv1alpha1.ConditionDegraded); d == nil || d.Status != metav1.ConditionFalse {
		t.Errorf("Degraded %+v, want False: hibernation is asked for", d)
	}
	if got := framework.EventsWithin(t, hib, "MemberStopped", began, 3); len(got) != 3 {
		t.Errorf("MemberStopped events %v, want 3", got)
	}
	requirePVCs(t, key, members)
	waitScheduleReason(t, schedule, etcdv1alpha1.ReasonHibernated)
	paused := time.Now().Add(time.Second)

	// A change made while hibernated waits: nothing starts, for longer than the schedule's interval.
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.6.16" })
	framework.Poll(t, "the pending version change in status", time.Minute, func() error {
		got := &etcdv1alpha1.EtcdCluster{}
		if err := framework.K8s.Get(ctx, key, got); err != nil {
			return err
		}
		if a := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionAvailable); a == nil || !strings.Contains(a.Message, "version 3.6.15 -> 3.6.16") {
			return fmt.Errorf("Available %+v", a)
		}
		return nil
	})
	for end := time.Now().Add(40 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Second) {
		if running := runningMemberPods(t, key); len(running) > 0 {
			t.Fatalf("member Pods %v run while the cluster hibernates", running)
		}
	}
	if made := backupsAfter(t, schedule, paused); len(made) > 0 {
		t.Errorf("%d scheduled backups while hibernated, want none", len(made))
	}

	resumed := time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Hibernation.Enabled = false })
	framework.WaitAvailable(t, key, 4*time.Minute)
	t.Logf("Available %s after resuming", time.Since(resumed).Round(100*time.Millisecond))
	c = framework.WaitSettled(t, key, 6*time.Minute)
	t.Logf("settled on 3.6.16 %s after resuming", time.Since(resumed).Round(time.Second))
	if got := framework.MemberNames(c); fmt.Sprint(got) != fmt.Sprint(members) {
		t.Errorf("members %v after resuming, want the same %v back on their volumes", got, members)
	}
	if c.Status.ClusterID != clusterID || c.Status.Revision < h.Revision || c.Status.Hibernation != nil || c.Status.CurrentVersion != "3.6.16" {
		t.Errorf("after resuming: cluster ID %s (was %s), revision %d (was %d at the stop), hibernation %+v, version %s (want 3.6.16)",
			c.Status.ClusterID, clusterID, c.Status.Revision, h.Revision, c.Status.Hibernation, c.Status.CurrentVersion)
	}
	framework.CheckStatusMatchesEtcd(t, c)
	framework.RequireNoLostWrites(t, load, "hibernation and resume")
	framework.MayWrite(t, "app after resuming", framework.UserClient(t, c, users["app"]), "/app/after", true)
	framework.MayWrite(t, "app after resuming", framework.UserClient(t, c, users["app"]), "/elsewhere", false)
	waitScheduleReason(t, schedule, etcdv1alpha1.ReasonScheduled)
	waitBackupAfter(t, schedule, resumed)
	for _, reason := range []string{"Hibernated", "Resuming", "Resumed"} {
		if got := framework.EventsWithin(t, c, reason, began, 1); len(got) != 1 {
			t.Errorf("%s events %v, want one", reason, got)
		}
	}
	framework.DeleteAndCheckNothingLeft(t, c)
}

// runningMemberPods are the names of the cluster's member Pods that are not being deleted.
func runningMemberPods(t *testing.T, key client.ObjectKey) []string {
	t.Helper()
	var pods corev1.PodList
	if err := framework.K8s.List(context.Background(), &pods, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Labels[resources.LabelMember] != "" {
			out = append(out, p.Name)
		}
	}
	return out
}

// requirePVCs fails the test unless the cluster's volume claims are exactly those of members.
func requirePVCs(t *testing.T, key client.ObjectKey, members []string) {
	t.Helper()
	var pvcs corev1.PersistentVolumeClaimList
	if err := framework.K8s.List(context.Background(), &pvcs, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pvcs.Items {
		if p.DeletionTimestamp == nil {
			got = append(got, p.Name)
		}
	}
	want := make([]string, len(members))
	for i, m := range members {
		want[i] = resources.PVCName(m)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("volume claims %v, want %v kept", got, want)
	}
}

// scheduledBackups are the schedule's EtcdBackups.
func scheduledBackups(t *testing.T, s *etcdv1alpha1.EtcdBackupSchedule) []etcdv1alpha1.EtcdBackup {
	t.Helper()
	var list etcdv1alpha1.EtcdBackupList
	if err := framework.K8s.List(context.Background(), &list, client.InNamespace(s.Namespace), client.MatchingLabels{resources.LabelSchedule: s.Name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitBackupAfter waits until the schedule has a Complete backup created at or after since.
func waitBackupAfter(t *testing.T, s *etcdv1alpha1.EtcdBackupSchedule, since time.Time) {
	t.Helper()
	framework.Poll(t, "a Complete backup of schedule "+s.Name+" created after "+since.Format(time.RFC3339), 3*time.Minute, func() error {
		made := backupsAfter(t, s, since)
		for _, b := range made {
			if meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) {
				return nil
			}
		}
		return fmt.Errorf("%d backups made since, none Complete", len(made))
	})
}

// backupsAfter are the schedule's backups created at or after since (to the second).
func backupsAfter(t *testing.T, s *etcdv1alpha1.EtcdBackupSchedule, since time.Time) []etcdv1alpha1.EtcdBackup {
	t.Helper()
	var out []etcdv1alpha1.EtcdBackup
	for _, b := range scheduledBackups(t, s) {
		if !b.CreationTimestamp.Time.Before(since.Truncate(time.Second)) {
			out = append(out, b)
		}
	}
	return out
}

// waitScheduleReason waits until the schedule's Ready condition has reason.
func waitScheduleReason(t *testing.T, s *etcdv1alpha1.EtcdBackupSchedule, reason string) {
	t.Helper()
	framework.Poll(t, "schedule "+s.Name+" Ready reason "+reason, 2*time.Minute, func() error {
		if err := framework.K8s.Get(context.Background(), client.ObjectKeyFromObject(s), s); err != nil {
			return err
		}
		if r := meta.FindStatusCondition(s.Status.Conditions, etcdv1alpha1.ConditionReady); r == nil || r.Reason != reason {
			return fmt.Errorf("Ready %+v", r)
		}
		return nil
	})
}
