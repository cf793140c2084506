package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/chaos"
	"steward.dev/steward/test/e2e/framework"
)

// TestMemberWithLostDataIsReplaced deletes a member's volume and Pod under client load: Steward removes the
// member from etcd and adds a successor with a new name and ID, with no acknowledged write lost.
func TestMemberWithLostDataIsReplaced(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "heal")
	framework.StartOperator(t, ns)
	ctx := context.Background()
	key, got := framework.CreateSettled(t, ns, "mended", 0)
	load := framework.StartLoad(t, got)
	victim, victimID := framework.AFollower(t, got)
	begin := time.Now()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.PVCName(victim)}, pvc); err != nil {
		t.Fatal(err)
	}
	if err := framework.K8s.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	if err := framework.K8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels{resources.LabelMember: victim}); err != nil {
		t.Fatal(err)
	}
	framework.WaitMemberGone(t, key, victim, victimID, 4*time.Minute)
	got = framework.WaitSettled(t, key, 4*time.Minute)
	t.Logf("replaced member with lost data in %s", time.Since(begin).Round(100*time.Millisecond))
	framework.CheckStatusMatchesEtcd(t, got)
	framework.RequireNoLostWrites(t, load, "replacement")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestUnreachableMemberIsReplacedAfterGracePeriod cuts a follower off the network under client load: once it
// has been unhealthy longer than spec.replaceUnhealthyAfter, Steward removes it and adds a new member.
func TestUnreachableMemberIsReplacedAfterGracePeriod(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "partition")
	framework.StartOperator(t, ns)
	ctx := context.Background()
	key, got := framework.CreateSettled(t, ns, "islands", 20*time.Second)
	load := framework.StartLoad(t, got)
	victim, victimID := framework.AFollower(t, got)
	var pod corev1.Pod
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, &pod); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if _, err := chaos.CutOffNetwork(&pod); err != nil {
		t.Fatal(err)
	}
	framework.WaitMemberGone(t, key, victim, victimID, 4*time.Minute)
	got = framework.WaitSettled(t, key, 4*time.Minute)
	took := time.Since(begin)
	if took < 20*time.Second {
		t.Errorf("replaced after %s, before the 20s grace period", took)
	}
	t.Logf("replaced an unreachable member %s after it was cut off (grace period 20s)", took.Round(100*time.Millisecond))
	framework.CheckStatusMatchesEtcd(t, got)
	framework.RequireNoLostWrites(t, load, "replacement")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestStuckLearnerIsReplaced scales 3 -> 5 under load and cuts the first learner's Pod off the network as soon as
// its sandbox exists, before etcd starts in it: the learner never catches up (its etcd, reaching no peer, exits
// and waits to restart). Once it has been a learner longer than spec.replaceUnhealthyAfter since its etcd started,
// or, while its etcd does not run, once its Pod is a minute plus that old, Steward removes it from etcd, deletes
// its Pod and volume, and adds a fresh learner; the cluster settles at 5 healthy voters.
func TestStuckLearnerIsReplaced(t *testing.T) {
	serial(t, "races a window of milliseconds (a learner's sandbox exists, its etcd has not started) that the load of other tests on the node would move")
	ns := framework.NewNamespace(t, "laggard")
	framework.StartOperator(t, ns)
	ctx := context.Background()
	key, got := framework.CreateSettled(t, ns, "tortoise", 20*time.Second)
	original := map[string]bool{}
	for _, m := range got.Status.Members {
		original[m.Name] = true
	}
	load := framework.StartLoad(t, got)
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Replicas = 5
	if err := framework.K8s.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	// Poll fast: the cut must land between the sandbox (network namespace) and the etcd container's start.
	var victim string
	var begin, created time.Time
	if err := testbed.Eventually(ctx, 2*time.Minute, 20*time.Millisecond, func() error {
		var pods corev1.PodList
		if err := framework.K8s.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
			return err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if original[p.Name] {
				continue
			}
			if _, err := chaos.CutOffNetwork(p); err != nil {
				return err // no sandbox yet
			}
			victim, begin, created = p.Name, time.Now(), p.CreationTimestamp.Time
			return nil
		}
		return fmt.Errorf("no learner Pod yet")
	}); err != nil {
		t.Fatalf("cut off the first learner: %v", err)
	}
	t.Logf("learner %s cut off the network", victim)
	framework.WaitMemberGone(t, key, victim, "", 4*time.Minute)
	removed, age := time.Since(begin), time.Since(created)
	got = framework.WaitSettled(t, key, 5*time.Minute)
	t.Logf("stuck learner removed %s after it was cut off, %s after its Pod was created (bound 20s after its etcd started, or 1m20s while it does not run); cluster settled at 5 voters after %s",
		removed.Round(100*time.Millisecond), age.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond))
	// Either bound ends at least 20s (whole seconds, rounded down) after the Pod's creation.
	if age < 20*time.Second {
		t.Errorf("learner removed %s after its Pod was created, before the 20s bound", age)
	}
	if msg := framework.RemovalEvent(t, got, victim); !strings.Contains(msg, etcdv1alpha1.ReasonReplacingLearner) {
		t.Errorf("learner %s removed for another reason: %s", victim, msg)
	}
	for _, m := range got.Status.Members {
		if m.Role == etcdv1alpha1.RoleLearner || m.Name == victim {
			t.Errorf("member %+v after the replacement", m)
		}
	}
	framework.CheckStatusMatchesEtcd(t, got)
	framework.RequireNoLostWrites(t, load, "3->5 with a stuck learner")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// replaceWiped wipes and crashes member victim and waits until Steward has replaced it and the cluster settled.
func replaceWiped(t *testing.T, key client.ObjectKey, kind, victim, victimID string) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	begin := time.Now()
	framework.WipeAndCrash(t, key.Namespace, victim)
	framework.WaitMemberGone(t, key, victim, victimID, 4*time.Minute)
	removed := time.Since(begin)
	got := framework.WaitSettled(t, key, 4*time.Minute)
	t.Logf("%s %s (%s) on an emptied data dir: removed after %s, replaced and settled after %s", kind, victim, victimID,
		removed.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond))
	msg := framework.RemovalEvent(t, got, victim)
	t.Logf("event: %s", msg)
	if !strings.Contains(msg, "lost or corrupt") {
		t.Errorf("%s removed for another reason: %s", victim, msg)
	}
	framework.CheckStatusMatchesEtcd(t, got)
	return got
}

// TestEmptiedDataDirIsReplaced empties a follower's data dir on its intact volume and crashes it, under load:
// restarted, steward-agent run-etcd refuses to start etcd on it (this Pod's etcd had held the member); Steward reads
// that from the container's termination message, removes the member (it must not rejoin under its old ID) and adds
// a successor with a new name and ID. Then the same to that successor, which joined as a learner: etcd alone would
// panic once and then take a snapshot from the leader and serve again under its old ID. replaceUnhealthyAfter is
// an hour, so only that evidence can trigger this.
func TestEmptiedDataDirIsReplaced(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "wiped")
	framework.StartOperator(t, ns)
	key, got := framework.CreateSettled(t, ns, "amnesiac", time.Hour)
	bootstrap := map[string]bool{}
	for _, m := range got.Status.Members {
		bootstrap[m.Name] = true
	}
	load := framework.StartLoad(t, got)
	victim, victimID := framework.AFollower(t, got)
	got = replaceWiped(t, key, "bootstrap member", victim, victimID)
	for _, m := range got.Status.Members {
		if !bootstrap[m.Name] {
			victim, victimID = m.Name, m.ID // the successor, which joined as a learner
		}
	}
	got = replaceWiped(t, key, "joined member", victim, victimID)
	framework.RequireNoLostWrites(t, load, "two members restarted on emptied data dirs")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestStrayMembersAreRemoved adds, by hand through etcd's API and under load, a learner and a voter that Steward
// did not create and that never start (their peer URLs are in TEST-NET-1, where nothing answers): Steward removes
// both (they hold no data) and the cluster settles as it was.
func TestStrayMembersAreRemoved(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "stray")
	framework.StartOperator(t, ns)
	ctx := context.Background()
	key, got := framework.CreateSettled(t, ns, "crowded", 0)
	load := framework.StartLoad(t, got)
	var eps []string
	for _, ep := range framework.MemberEndpoints(t, got) {
		eps = append(eps, ep)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: framework.ClusterTLS(t, got)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	begin := time.Now()
	strays := map[uint64]string{}
	for _, add := range []struct {
		kind string
		call func(context.Context, []string) (*clientv3.MemberAddResponse, error)
		url  string
	}{{"learner", cli.MemberAddAsLearner, "http://192.0.2.10:2380"}, {"voter", cli.MemberAdd, "http://192.0.2.11:2380"}} {
		// etcd refuses a membership change while it considers the cluster unhealthy (a member just became active,
		// or Steward's own removal of the first stray is being applied): retry.
		framework.Poll(t, "add stray "+add.kind, time.Minute, func() error {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			resp, err := add.call(actx, []string{add.url})
			if err != nil {
				return err
			}
			strays[resp.Member.ID] = add.kind
			return nil
		})
	}
	t.Logf("added strays %v", strays)
	framework.Poll(t, "stray members removed from etcd", 4*time.Minute, func() error {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := cli.MemberList(lctx)
		if err != nil {
			return err
		}
		for _, m := range resp.Members {
			if kind, ok := strays[m.ID]; ok {
				return fmt.Errorf("stray %s %x still a member", kind, m.ID)
			}
		}
		return nil
	})
	removed := time.Since(begin)
	got = framework.WaitSettled(t, key, 4*time.Minute)
	t.Logf("both strays removed %s after they were added; settled after %s", removed.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond))
	for id := range strays {
		if msg := framework.RemovalEvent(t, got, plan.StrayMemberName(id)); !strings.Contains(msg, etcdv1alpha1.ReasonUnknownMember) {
			t.Errorf("stray %x removed for another reason: %s", id, msg)
		}
	}
	framework.CheckStatusMatchesEtcd(t, got)
	framework.RequireNoLostWrites(t, load, "stray members added and removed")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestWipedFirstMemberOfGrownCluster: a cluster created with one member and scaled to three, under load. Its first
// member's Pod bootstrapped it alone (--initial-cluster-state=new, itself the whole initial cluster): were that
// member's data dir emptied, its etcd would start an empty cluster under the old identity, the only one etcd then
// lists, and the two members holding the data would look removed. So once three voters keep a quorum, Steward
// restarts that member on its volume, and the new Pod asks its peers instead. Then its data dir is emptied and
// it is crashed: it does not come back empty; Steward replaces it (replaceUnhealthyAfter 20 s), with every key and
// no acknowledged write lost.
func TestWipedFirstMemberOfGrownCluster(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "grown")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "grown", 1)
	c.Spec.ReplaceUnhealthyAfter = &metav1.Duration{Duration: 20 * time.Second}
	key, got := framework.Settle(t, c)
	first := got.Status.Members[0]
	var pod corev1.Pod
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: first.Name}, &pod); err != nil {
		t.Fatal(err)
	}
	if !resources.PodBootstrapsAlone(&pod) {
		t.Fatalf("the first Pod of a one-member cluster does not bootstrap alone: %v", pod.Spec.Containers[0].Command)
	}
	firstUID := pod.UID
	keys := framework.WriteBackupKeys(t, got)
	load := framework.StartLoad(t, got)
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 3 })
	framework.Poll(t, "first member's Pod re-created so that it no longer bootstraps alone", 3*time.Minute, func() error {
		if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: first.Name}, &pod); err != nil {
			return err
		}
		if pod.UID == firstUID || resources.PodBootstrapsAlone(&pod) {
			return fmt.Errorf("Pod %s (first %s), bootstraps alone: %v", pod.UID, firstUID, resources.PodBootstrapsAlone(&pod))
		}
		return nil
	})
	got = framework.WaitSettled(t, key, 3*time.Minute)
	if len(got.Status.Members) != 3 {
		t.Fatalf("members %+v, want 3", got.Status.Members)
	}
	begin := time.Now()
	framework.WipeAndCrash(t, ns, first.Name)
	framework.WaitMemberGone(t, key, first.Name, first.ID, 4*time.Minute)
	got = framework.WaitSettled(t, key, 4*time.Minute)
	t.Logf("first member %s wiped and crashed: replaced, settled in %s", first.Name, time.Since(begin).Round(100*time.Millisecond))
	read, _ := framework.ReadKeys(t, got, framework.BackupKeyPrefix)
	framework.RequireSameKeys(t, "after the first member was wiped", read, keys)
	framework.RequireNoLostWrites(t, load, "a grown cluster's first member restarted, then wiped and replaced")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestWedgedMembersAreRestartedByTheirLivenessProbe wedges etcd in member Pods under client load (SIGSTOP: the
// process stays and holds its ports and files but answers nothing, as an etcd stuck on a hung disk does): one
// follower, then two members at once (a majority: no quorum), then all three. The liveness probe, which the agent
// answers from etcd's /livez, fails for each, and the kubelet restarts its etcd container (Event "failed liveness
// probe"); the same members come back on their volumes by themselves, none is replaced (replaceUnhealthyAfter is
// its default, 5 minutes), and no acknowledged write is lost.
func TestWedgedMembersAreRestartedByTheirLivenessProbe(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "wedged")
	framework.StartOperator(t, ns)
	ctx := context.Background()
	key, got := framework.CreateSettled(t, ns, "wedged", 0)
	load := framework.StartLoad(t, got)
	follower, _ := framework.AFollower(t, got)
	all := framework.MemberNames(got)
	majority := []string{follower}
	for _, m := range all {
		if m != follower && len(majority) < 2 {
			majority = append(majority, m)
		}
	}
	for _, wedged := range [][]string{{follower}, majority, all} {
		restarts := framework.ContainerRestarts(t, key)
		for _, m := range wedged {
			var pod corev1.Pod
			if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: m}, &pod); err != nil {
				t.Fatal(err)
			}
			// Until etcd's /livez has passed once in a container, the agent answers its liveness probe as a start
			// (the startup grace, 5 minutes): ask it once here, as the kubelet does, so the wedge is of a member
			// that has run, whatever the probe's ticker did in the seconds since the Pod started.
			framework.Poll(t, m+" live", 30*time.Second, func() error { return livez(pod.Status.PodIP) })
			if err := chaos.WedgeProcess(&pod, resources.EtcdContainer, "etcd"); err != nil {
				t.Fatal(err)
			}
		}
		begin := time.Now()
		what := fmt.Sprintf("%d of 3 members wedged %v", len(wedged), wedged)
		framework.Poll(t, what+": etcd containers restarted", 4*time.Minute, func() error {
			now := framework.ContainerRestarts(t, key)
			for _, m := range wedged {
				if now[m] <= restarts[m] {
					return fmt.Errorf("etcd container of %s not restarted yet (%d restarts)", m, now[m])
				}
			}
			return nil
		})
		restarted := time.Since(begin)
		got = framework.WaitSettled(t, key, 4*time.Minute)
		t.Logf("%s: restarted after %s, settled after %s", what, restarted.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond))
		var events corev1.EventList
		if err := framework.K8s.List(ctx, &events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, m := range wedged {
			found := false
			for _, e := range events.Items {
				found = found || (e.InvolvedObject.Name == m && strings.Contains(e.Message, "failed liveness probe"))
			}
			if !found {
				t.Errorf("%s: no Event says the kubelet restarted %s for its liveness probe", what, m)
			}
		}
		if now := framework.MemberNames(got); fmt.Sprint(now) != fmt.Sprint(all) {
			t.Errorf("%s: members %v afterwards, want the same %v back on their volumes", what, now, all)
		}
		framework.CheckStatusMatchesEtcd(t, got)
	}
	framework.RequireNoLostWrites(t, load, "one, two and three members wedged in turn")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// livez asks a member's agent for its liveness answer (what the kubelet's liveness probe gets), nil for 200.
func livez(podIP string) error {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s/livez", net.JoinHostPort(podIP, strconv.Itoa(resources.ProbePort))))
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK || strings.HasPrefix(string(body), "etcd is starting") {
		return fmt.Errorf("liveness answer %d: %s", resp.StatusCode, body)
	}
	return nil
}
