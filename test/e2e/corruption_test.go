package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/chaos"
	"steward.dev/steward/test/e2e/framework"
)

// corruptedKey is the key the corruption tests write once and then rewrite behind etcd's back in some members'
// databases; the client load never touches it.
const corruptedKey = "/corruption-test/ledger"

// corruptMembers stops the Pods of members (the cluster paused, so that Steward does not bring them back at
// once), rewrites corruptedKey in each one's database to a value of its own, and lets Steward re-create the Pods
// on their volumes.
func corruptMembers(t *testing.T, key client.ObjectKey, members ...string) {
	t.Helper()
	ctx := context.Background()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Paused = true })
	for _, m := range members {
		if err := framework.K8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: m}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range members {
		framework.Poll(t, "Pod "+m+" gone", 2*time.Minute, func() error {
			err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: m}, &corev1.Pod{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%w)", err)
		})
		var pvc corev1.PersistentVolumeClaim
		if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: resources.PVCName(m)}, &pvc); err != nil {
			t.Fatal(err)
		}
		var pv corev1.PersistentVolume
		if err := framework.K8s.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
			t.Fatal(err)
		}
		n, err := chaos.CorruptKey(&pv, corruptedKey, "rewritten on "+m)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %d revision(s) of %s in the database of member %s", n, corruptedKey, m)
	}
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Paused = false })
}

// writeLedger writes corruptedKey through the cluster.
func writeLedger(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	cli, _ := framework.MemberClient(t, c)
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, corruptedKey, "the value every member agreed on"); err != nil {
		t.Fatal(err)
	}
}

// servedBy is what member's own copy of corruptedKey holds (a serializable read, answered from its database).
func servedBy(t *testing.T, c *etcdv1alpha1.EtcdCluster, member string) (string, error) {
	t.Helper()
	ep := framework.MemberEndpoints(t, c)[member]
	if ep == "" {
		return "", fmt.Errorf("member %s has no endpoint", member)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: framework.ClusterTLS(t, c)})
	if err != nil {
		return "", err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, corruptedKey, clientv3.WithSerializable())
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// waitHashCheck waits until status.hashCheck, written after since, has result, and returns the cluster.
func waitHashCheck(t *testing.T, key client.ObjectKey, since time.Time, result string, timeout time.Duration) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	framework.Poll(t, "hash check "+result, timeout, func() error {
		if err := framework.K8s.Get(context.Background(), key, &c); err != nil {
			return err
		}
		h := c.Status.HashCheck
		if h == nil || h.Time.Time.Before(since.Truncate(time.Second)) || h.Result != result {
			return fmt.Errorf("last hash check %+v", h)
		}
		return nil
	})
	return &c
}

// degradedBy returns the Degraded condition of c, failing the test unless it is True with reason.
func degradedBy(t *testing.T, c *etcdv1alpha1.EtcdCluster, reason string) string {
	t.Helper()
	d := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionDegraded)
	if d == nil || d.Status != metav1.ConditionTrue || d.Reason != reason {
		t.Errorf("Degraded %+v, want True %s", d, reason)
		return ""
	}
	return d.Message
}

// TestHashMismatchIsFoundAndReplaced runs a 3-member cluster with etcd's own checks off (so that a member with
// diverged data starts at all) and Steward's comparison every 10s. One follower's copy of a key is rewritten in
// its database while it is stopped; from the moment it serves the rewritten value, under client load, Steward's next hash
// comparison names it (status.hashCheck, Degraded MemberDataMismatch, a Warning Event) and replaces nothing
// until spec.maintenance.corruptionCheck.replaceMismatchedMembers is set; then it is removed and a successor
// joins with the majority's data. No acknowledged write is lost. Then the same fault in a majority, each member
// diverged its own way: no majority agrees, Steward says so and replaces nothing, however it is allowed to.
func TestHashMismatchIsFoundAndReplaced(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "hashkv")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "ledger", 3)
	c.Spec.Maintenance = &etcdv1alpha1.Maintenance{CorruptionCheck: &etcdv1alpha1.CorruptionCheck{
		EtcdChecks: ptr.To(false), Interval: &metav1.Duration{Duration: 10 * time.Second}}}
	key, got := framework.Settle(t, c)
	writeLedger(t, got)
	waitHashCheck(t, key, time.Now(), plan.HashConsistent, 2*time.Minute)

	victim, victimID := framework.AFollower(t, got)
	begin := time.Now()
	corruptMembers(t, key, victim)
	// The load starts once the victim serves its rewritten copy. A follower that is down while more than etcd's
	// catch-up entries (5,000) are written is sent the leader's whole database when it returns, which undoes the
	// fault: under a load started before the fault, a fast machine did exactly that (docs/development/flakes.md).
	framework.Poll(t, victim+" serves its rewritten copy", 2*time.Minute, func() error {
		v, err := servedBy(t, got, victim)
		if err != nil {
			return err
		}
		if v != "rewritten on "+victim {
			return fmt.Errorf("serves %q", v)
		}
		return nil
	})
	load := framework.StartLoad(t, got)
	got = waitHashCheck(t, key, begin, plan.HashMismatch, 3*time.Minute)
	found := time.Since(begin)
	if h := got.Status.HashCheck; !slices.Equal(h.MismatchedMembers, []string{victim}) {
		t.Errorf("mismatched members %v, want [%s]: %s", h.MismatchedMembers, victim, h.Message)
	}
	msg := degradedBy(t, got, "MemberDataMismatch")
	t.Logf("found %s %s after its restart: %s", victim, found.Round(100*time.Millisecond), msg)
	if v, err := servedBy(t, got, victim); err != nil || v != "rewritten on "+victim {
		t.Errorf("member %s serves %q (%v), want the rewritten value", victim, v, err)
	}
	if ev := framework.EventsWithin(t, got, "MemberDataMismatch", begin, 1); len(ev) != 1 {
		t.Errorf("MemberDataMismatch events %v, want one", ev)
	}
	// Report only: the member stays until a human or the spec says otherwise.
	time.Sleep(15 * time.Second)
	if err := framework.K8s.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	if _, ok := framework.MemberIDs(got)[victim]; !ok {
		t.Fatalf("member %s was removed without replaceMismatchedMembers: %s", victim, framework.Describe(got))
	}

	begin = time.Now()
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Maintenance.CorruptionCheck.ReplaceMismatchedMembers = true
	})
	framework.WaitMemberGone(t, key, victim, victimID, 3*time.Minute)
	framework.WaitSettled(t, key, 4*time.Minute)
	got = waitHashCheck(t, key, time.Now(), plan.HashConsistent, 2*time.Minute)
	t.Logf("replaced %s and found every member consistent %s after replacement was allowed", victim, time.Since(begin).Round(100*time.Millisecond))
	if msg := framework.RemovalEvent(t, got, victim); !strings.Contains(msg, "differs from the majority") {
		t.Errorf("%s removed for another reason: %s", victim, msg)
	}
	if d := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionDegraded); d == nil || d.Status != metav1.ConditionFalse {
		t.Errorf("still Degraded after the replacement: %+v", d)
	}
	for _, m := range framework.MemberNames(got) {
		if v, err := servedBy(t, got, m); err != nil || v != "the value every member agreed on" {
			t.Errorf("member %s serves %q (%v) after the replacement", m, v, err)
		}
	}
	framework.CheckStatusMatchesEtcd(t, got)
	framework.RequireNoLostWrites(t, load, "a member with diverged data found and replaced")

	// A majority diverged, each its own way: three hashes, no majority. Replacement is allowed, and must not
	// happen: Steward cannot tell which data is right.
	before := framework.MemberIDs(got)
	names := framework.MemberNames(got)
	begin = time.Now()
	corruptMembers(t, key, names[0], names[1])
	got = waitHashCheck(t, key, begin, plan.HashNoMajority, 3*time.Minute)
	msg = degradedBy(t, got, "MemberDataMismatch")
	t.Logf("majority diverged: %s", msg)
	if !strings.Contains(msg, "no majority agrees") {
		t.Errorf("Degraded message does not say no majority agrees: %s", msg)
	}
	time.Sleep(25 * time.Second) // two more checks
	if err := framework.K8s.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	if now := framework.MemberIDs(got); fmt.Sprint(now) != fmt.Sprint(before) {
		t.Errorf("members changed %v -> %v with no majority to trust", before, now)
	}
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestInitialCorruptionCheck runs a 3-member cluster with the defaults (etcd's own checks on) under client load
// and rewrites a key in a stopped follower's database: restarted, etcd's initial corruption check compares its
// hash with its peers' and the member refuses to start, so its diverged data is never served. Once it has been
// down longer than replaceUnhealthyAfter, Steward replaces it; the successor joins with the majority's data.
func TestInitialCorruptionCheck(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "initcheck")
	framework.StartOperator(t, ns)
	key, got := framework.CreateSettled(t, ns, "sentinel", 30*time.Second)
	writeLedger(t, got)
	load := framework.StartLoad(t, got)
	victim, victimID := framework.AFollower(t, got)
	begin := time.Now()
	corruptMembers(t, key, victim)
	// The member's container exits on the check: its termination message (etcd's last log lines) says why.
	framework.Poll(t, victim+" refused to start", 2*time.Minute, func() error {
		var pod corev1.Pod
		if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: victim}, &pod); err != nil {
			return err
		}
		for _, s := range pod.Status.ContainerStatuses {
			for _, st := range []corev1.ContainerState{s.State, s.LastTerminationState} {
				if st.Terminated != nil && strings.Contains(st.Terminated.Message, "found data inconsistency with peers") {
					return nil
				}
			}
		}
		return fmt.Errorf("no termination for a data inconsistency: %+v", pod.Status.ContainerStatuses)
	})
	t.Logf("%s refused to start on diverged data %s after it was stopped", victim, time.Since(begin).Round(100*time.Millisecond))
	if v, err := servedBy(t, got, victim); err == nil {
		t.Errorf("member %s answered %q: it should not be serving", victim, v)
	}
	framework.WaitMemberGone(t, key, victim, victimID, 4*time.Minute)
	got = framework.WaitSettled(t, key, 4*time.Minute)
	t.Logf("replaced %s %s after it was stopped", victim, time.Since(begin).Round(100*time.Millisecond))
	for _, m := range framework.MemberNames(got) {
		if v, err := servedBy(t, got, m); err != nil || v != "the value every member agreed on" {
			t.Errorf("member %s serves %q (%v)", m, v, err)
		}
	}
	framework.CheckStatusMatchesEtcd(t, got)
	framework.RequireNoLostWrites(t, load, "a member with diverged data refused to start and was replaced")
	framework.DeleteAndCheckNothingLeft(t, got)
}
