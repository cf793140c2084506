package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
)

// rollWatcher watches a cluster's Pods and etcd's leader while its members are restarted on a new release: for
// each member, whether it led the cluster when its Pod was switched, and the most members down at one time.
type rollWatcher struct {
	mu sync.Mutex
	// restarted lists members in the order their Pods were switched to the target version, and switchedAt when
	// the watcher saw each.
	restarted  []string
	switchedAt []time.Time
	// ledWhenRestarted holds members that were etcd's leader at the moment their Pod was switched.
	ledWhenRestarted []string
	maxDown          int
	leaderMoves      int
	// reasons are the Progressing reasons seen on the cluster.
	reasons   map[string]bool
	namespace string
	stop      chan struct{}
	done      chan struct{}
}

func watchRoll(t *testing.T, c *etcdv1alpha1.EtcdCluster, target string) *rollWatcher {
	t.Helper()
	w := &rollWatcher{stop: make(chan struct{}), done: make(chan struct{}), reasons: map[string]bool{}, namespace: c.Namespace}
	go func() {
		defer close(w.done)
		seen := map[string]bool{}
		leader := ""
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			var pods corev1.PodList
			if err := framework.K8s.List(context.Background(), &pods, client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
				continue
			}
			down := 0
			for _, p := range pods.Items {
				if !framework.PodIsReady(&p) {
					down++
				}
			}
			now := framework.CurrentLeader(c, pods.Items)
			var cur etcdv1alpha1.EtcdCluster
			cluster := framework.K8s.Get(context.Background(), client.ObjectKeyFromObject(c), &cur)
			w.mu.Lock()
			if p := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionProgressing); cluster == nil && p != nil {
				w.reasons[p.Reason] = true
			}
			if down > w.maxDown {
				w.maxDown = down
			}
			if now != "" && leader != "" && now != leader {
				w.leaderMoves++
			}
			for _, p := range pods.Items {
				if p.Annotations[resources.AnnotationVersion] == target && !seen[p.Name] {
					seen[p.Name] = true
					w.restarted = append(w.restarted, p.Name)
					w.switchedAt = append(w.switchedAt, time.Now())
					if p.Name == leader && len(pods.Items) > 1 {
						w.ledWhenRestarted = append(w.ledWhenRestarted, p.Name)
					}
				}
			}
			w.mu.Unlock()
			if now != "" {
				leader = now
			}
		}
	}()
	return w
}

// firstSwitch and lastSwitch are when the watcher saw the first and the last member switched (zero: none).
func (w *rollWatcher) firstSwitch() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.switchedAt) == 0 {
		return time.Time{}
	}
	return w.switchedAt[0]
}

func (w *rollWatcher) lastSwitch() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.switchedAt) == 0 {
		return time.Time{}
	}
	return w.switchedAt[len(w.switchedAt)-1]
}

func (w *rollWatcher) finish() {
	close(w.stop)
	<-w.done
}

// check fails the test unless every member was switched, none while it led, and never two down at once.
func (w *rollWatcher) check(t *testing.T, members int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("restart order %v, %d leadership changes, at most %d member(s) down at once", w.restarted, w.leaderMoves, w.maxDown)
	if len(w.restarted) != members {
		t.Errorf("%d members switched, want %d: %v", len(w.restarted), members, w.restarted)
	}
	// The watcher samples the leader every 100ms; Steward may hand leadership over and restart the former leader
	// inside one sample. etcd's MoveLeader returns only once the transfer is done, so a LeaderMoved Event from
	// the member is the evidence that it no longer led when it was restarted.
	for _, name := range w.ledWhenRestarted {
		if movedFrom(t, w.namespace, name) {
			t.Logf("%s looked like the leader when restarted, but leadership had been moved from it first", name)
			continue
		}
		t.Errorf("member %s was restarted while leading", name)
	}
	if w.maxDown > 1 {
		t.Errorf("%d members down at once; one at a time is the rule", w.maxDown)
	}
}

// movedFrom reports whether Steward recorded a LeaderMoved Event handing leadership away from member name.
func movedFrom(t *testing.T, namespace, name string) bool {
	t.Helper()
	var events corev1.EventList
	if err := framework.K8s.List(context.Background(), &events, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == "LeaderMoved" && strings.HasPrefix(e.Message, "Moved leadership from "+name+" ") {
			return true
		}
	}
	return false
}

// rollTo changes spec.version under watch and waits for every member to run it, in place. It returns the
// cluster and the Progressing reasons seen on the way.
func rollTo(t *testing.T, key client.ObjectKey, version string) (*etcdv1alpha1.EtcdCluster, map[string]bool) {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	if err := framework.K8s.Get(context.Background(), key, &c); err != nil {
		t.Fatal(err)
	}
	before := framework.MemberIDs(&c)
	w := watchRoll(t, &c, version)
	begin := time.Now()
	framework.SetVersion(t, key, version)
	got := framework.WaitAtVersion(t, key, version, before, 8*time.Minute)
	w.finish()
	t.Logf("%s -> %s: %d members in %s", c.Spec.Version, version, len(before), time.Since(begin).Round(100*time.Millisecond))
	w.check(t, len(before))
	return got, w.reasons
}

// TestMinorUpgradesUnderLoad upgrades a three-member cluster 3.5 -> 3.6 -> 3.7 while clients read and write:
// one member at a time, followers first, the leader after handing leadership over, same members throughout.
func TestMinorUpgradesUnderLoad(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "upgrade")
	framework.StartOperator(t, ns)
	c := framework.NewClusterAt(ns, "rising", "3.5.35")
	// etcd 3.7 cannot replay log entries written under 3.5: before 3.6 -> 3.7, Steward waits until every member
	// has taken a raft snapshot past the point where the cluster reached 3.6. A smaller snapshot interval than
	// etcd's default (10000) keeps that wait short under the test's load.
	c.Spec.Etcd.SnapshotCount = ptr.To[int64](1000)
	key, got := framework.Settle(t, c)
	load := framework.StartLoad(t, got)
	_, first := rollTo(t, key, "3.6.16")
	if first[etcdv1alpha1.ReasonWaitingForSnapshot] {
		t.Errorf("3.5 -> 3.6 waited for snapshots, but the cluster was created at 3.5: it has no older log")
	}
	got, reasons := rollTo(t, key, "3.7.3")
	if !reasons[etcdv1alpha1.ReasonWaitingForSnapshot] {
		t.Errorf("3.6 -> 3.7 never waited for snapshots past the 3.5-era log (reasons seen: %v)", reasons)
	}
	if got.Status.ClusterVersionSince == nil || got.Status.ClusterVersionSince.Version != "3.7.0" || got.Status.ClusterVersionSince.RaftIndex == 0 {
		t.Errorf("status.clusterVersionSince = %+v, want 3.7.0 from a raft index", got.Status.ClusterVersionSince)
	}
	framework.RequireNoLostWrites(t, load, "3.5.35 -> 3.6.16 -> 3.7.3")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestMultiMinorUpgradeUnderLoad sets spec.version from 3.5.35 to 3.7.3 in one change, under load: Steward passes
// through the operator's 3.6 release (--upgrade-via, 3.6.16 by default), every member on it before any moves on,
// each stage one member at a time, followers first and the leader last, with the waits etcd needs between two
// minors (the cluster version raised, snapshots past the 3.5-era log). No acknowledged write is lost.
func TestMultiMinorUpgradeUnderLoad(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "multiminor")
	framework.StartOperator(t, ns)
	c := framework.NewClusterAt(ns, "leaping", "3.5.35")
	c.Spec.Etcd.SnapshotCount = ptr.To[int64](1000) // as TestMinorUpgradesUnderLoad: a short snapshot wait
	key, got := framework.Settle(t, c)
	load := framework.StartLoad(t, got)
	before := framework.MemberIDs(got)
	stage, last := watchRoll(t, got, "3.6.16"), watchRoll(t, got, "3.7.3")
	begin := time.Now()
	framework.SetVersion(t, key, "3.7.3")
	got = framework.WaitAtVersion(t, key, "3.7.3", before, 10*time.Minute)
	stage.finish()
	last.finish()
	t.Logf("3.5.35 -> 3.7.3 through 3.6.16: %d members in %s", len(before), time.Since(begin).Round(100*time.Millisecond))
	stage.check(t, len(before))
	last.check(t, len(before))
	if !last.firstSwitch().After(stage.lastSwitch()) {
		t.Errorf("a member was switched to 3.7.3 at %s, before the last one reached 3.6.16 at %s", last.firstSwitch().Format(time.StampMilli), stage.lastSwitch().Format(time.StampMilli))
	}
	if !last.reasons[etcdv1alpha1.ReasonWaitingForSnapshot] {
		t.Errorf("3.6 -> 3.7 never waited for snapshots past the 3.5-era log (reasons seen: %v)", last.reasons)
	}
	framework.RequireNoLostWrites(t, load, "3.5.35 -> 3.7.3 through 3.6.16")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestPatchUpgradeUnderLoad moves a cluster from 3.6.15 to 3.6.16 under load.
func TestPatchUpgradeUnderLoad(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "patch")
	framework.StartOperator(t, ns)
	key, got := framework.Settle(t, framework.NewClusterAt(ns, "mended", "3.6.15"))
	load := framework.StartLoad(t, got)
	got, _ = rollTo(t, key, "3.6.16")
	framework.RequireNoLostWrites(t, load, "3.6.15 -> 3.6.16")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestDowngradesUnderLoad downgrades 3.7 -> 3.6 -> 3.5 through etcd's downgrade API under load: the downgrade is
// enabled (status shows its target), each member restarts on the older release only once etcd migrated its
// storage version down, and etcd ends the downgrade when every member runs the target.
func TestDowngradesUnderLoad(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "downgrade")
	framework.StartOperator(t, ns)
	key, got := framework.Settle(t, framework.NewClusterAt(ns, "falling", "3.7.3"))
	load := framework.StartLoad(t, got)
	for _, to := range []string{"3.6.16", "3.5.35"} {
		var targets sync.Map
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				var cur etcdv1alpha1.EtcdCluster
				if framework.K8s.Get(context.Background(), key, &cur) == nil && cur.Status.DowngradeTarget != "" {
					targets.Store(cur.Status.DowngradeTarget, true)
				}
			}
		}()
		got, _ = rollTo(t, key, to)
		close(stop)
		v, _ := plan.ParseVersion(to)
		if _, ok := targets.Load(v.MinorString() + ".0"); !ok {
			t.Errorf("status never showed the downgrade to %s", v.MinorString())
		}
	}
	framework.RequireNoLostWrites(t, load, "3.7.3 -> 3.6.16 -> 3.5.35")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestUpgradeSurvivesOperatorRestarts stops the operator as soon as it has switched a member in a 3.5 -> 3.6
// upgrade (the member's Pod marked with the new release) and starts a new one, under load.
//
// The switches are seen on a watch of the member Pods, not by polling: a new operator needs seconds before its
// next switch (it must win its Lease, re-observe, and see the switched member healthy), the watch delivers in
// milliseconds, so the operator is restarted after every member's switch, however slow the machine.
func TestUpgradeSurvivesOperatorRestarts(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "upgrade-restart")
	c := framework.NewClusterAt(ns, "phoenix", "3.5.35")
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	stop := framework.StartOperator(t, ns)
	got := framework.WaitSettled(t, key, 4*time.Minute)
	before := framework.MemberIDs(got)
	load := framework.StartLoad(t, got)
	watchCtx, cancelWatch := context.WithTimeout(ctx, 6*time.Minute)
	defer cancelWatch()
	w, err := framework.Clientset.CoreV1().Pods(ns).Watch(watchCtx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{resources.LabelCluster: c.Name}).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	framework.SetVersion(t, key, "3.6.16")
	switched := map[string]bool{}
	for len(switched) < 3 {
		ev, ok := <-w.ResultChan()
		if !ok {
			t.Fatalf("upgrade not done after 6m: members switched %v; %s", switched, framework.RollState(t, got))
		}
		pod, isPod := ev.Object.(*corev1.Pod)
		if !isPod || ev.Type == watch.Deleted || pod.Annotations[resources.AnnotationVersion] != "3.6.16" || switched[pod.Name] {
			continue
		}
		switched[pod.Name] = true
		stop()
		stop = framework.StartOperator(t, ns)
		t.Logf("member %s switched to 3.6.16; operator restarted (%d)", pod.Name, len(switched))
	}
	got = framework.WaitAtVersion(t, key, "3.6.16", before, 4*time.Minute)
	framework.RequireNoLostWrites(t, load, "upgrade with operator restarts")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestUpgradeContinuesAfterMemberFailure deletes the Pod of a member that has not been upgraded yet, in the
// middle of a 3.5 -> 3.6 upgrade under load: the member comes back on its volume's release, and the upgrade
// carries on to every member.
func TestUpgradeContinuesAfterMemberFailure(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "upgrade-fail")
	framework.StartOperator(t, ns)
	ctx := context.Background()
	key, got := framework.Settle(t, framework.NewClusterAt(ns, "sturdy", "3.5.35"))
	before := framework.MemberIDs(got)
	load := framework.StartLoad(t, got)
	framework.SetVersion(t, key, "3.6.16")
	var victim string
	framework.Poll(t, "first member switched", 3*time.Minute, func() error {
		var pods corev1.PodList
		if err := framework.K8s.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
			return err
		}
		var old []string
		switched := 0
		for _, p := range pods.Items {
			if p.Annotations[resources.AnnotationVersion] == "3.6.16" {
				switched++
			} else {
				old = append(old, p.Name)
			}
		}
		if switched == 0 || len(old) == 0 {
			return fmt.Errorf("%d switched, not yet: %v", switched, old)
		}
		sort.Strings(old)
		victim = old[0]
		return nil
	})
	var pod corev1.Pod
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: victim}, &pod); err != nil {
		t.Fatal(err)
	}
	if err := framework.K8s.Delete(ctx, &pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted the Pod of member %s mid-upgrade", victim)
	got = framework.WaitAtVersion(t, key, "3.6.16", before, 6*time.Minute)
	framework.RequireNoLostWrites(t, load, "upgrade with a member failing")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestVersionChangeOfMind: a cluster that pins its image (spec.image), mid-way through a 3.5 -> 3.6 upgrade,
// is asked for 3.7, which etcd cannot reach from a cluster still at 3.5 and Steward cannot pass through 3.6 for
// (it does not know which image would hold the 3.6 release; without a pinned image it would, as
// TestMultiMinorUpgradeUnderLoad shows): Steward refuses in status (Degraded, VersionChangeRefused) and restarts
// nobody. The user goes back to 3.6 (the roll carries on), then changes their mind again to 3.5 while members
// are still rolling: the members already on 3.6 are rolled back. Under load throughout.
func TestVersionChangeOfMind(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "mind")
	framework.StartOperator(t, ns)
	ctx := context.Background()
	c := framework.NewClusterAt(ns, "fickle", "3.5.35")
	c.Spec.Image = testbed.EtcdRepository + ":v3.5.35"
	key, got := framework.Settle(t, c)
	before := framework.MemberIDs(got)
	load := framework.StartLoad(t, got)
	setVersion := func(t *testing.T, key client.ObjectKey, version string) {
		t.Helper()
		framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Version, c.Spec.Image = version, testbed.EtcdRepository+":v"+version
		})
	}
	setVersion(t, key, "3.6.16")
	waitFirstPodAt(t, got, "3.6.16")
	setVersion(t, key, "3.7.3")
	framework.Poll(t, "3.7.3 refused in status", time.Minute, func() error {
		if err := framework.K8s.Get(ctx, key, got); err != nil {
			return err
		}
		d := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if d == nil || d.Status != "True" || d.Reason != etcdv1alpha1.ReasonVersionChangeRefused || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("not refused: %s", framework.Describe(got))
		}
		t.Logf("refused: %s", d.Message)
		return nil
	})
	// Nothing moves while refused: the Pods' releases stay as they are over several passes.
	pods := podReleases(t, got)
	for deadline := time.Now().Add(12 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if now := podReleases(t, got); now != pods {
			t.Fatalf("members changed while the change was refused: %s -> %s", pods, now)
		}
	}
	if err := framework.K8s.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ClusterVersion != "3.5.0" {
		t.Fatalf("cluster version %s while the upgrade is half done, want 3.5.0", got.Status.ClusterVersion)
	}
	// Back to 3.6, and (before the roll is over) back to 3.5.
	setVersion(t, key, "3.6.16")
	framework.Poll(t, "3.6.16 no longer refused", time.Minute, func() error {
		if err := framework.K8s.Get(ctx, key, got); err != nil {
			return err
		}
		if d := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionDegraded); d == nil || d.Reason == etcdv1alpha1.ReasonVersionChangeRefused || got.Status.ObservedGeneration != got.Generation {
			return fmt.Errorf("still refused: %s", framework.Describe(got))
		}
		return nil
	})
	t.Logf("members when asked for 3.5.35 again: %s (cluster version %s)", podReleases(t, got), got.Status.ClusterVersion)
	setVersion(t, key, "3.5.35")
	got = framework.WaitAtVersion(t, key, "3.5.35", before, 6*time.Minute)
	framework.RequireNoLostWrites(t, load, "upgrade, refused jump, back and forth")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// waitFirstPodAt waits, looking often, until Steward has re-created a member's Pod for version: the moment a
// roll has begun and its first member is still starting, so that a change made now comes mid-roll. A member
// reporting the version in status comes too late: a quick roll can have finished, and etcd raised the cluster
// version, by then.
func waitFirstPodAt(t *testing.T, c *etcdv1alpha1.EtcdCluster, version string) {
	t.Helper()
	err := testbed.Eventually(context.Background(), 3*time.Minute, 100*time.Millisecond, func() error {
		pods := framework.MemberPodsOf(t, c)
		for _, p := range pods.Items {
			if p.Annotations[resources.AnnotationVersion] == version {
				return nil
			}
		}
		return fmt.Errorf("no member Pod at %s yet: %s", version, podReleases(t, c))
	})
	if err != nil {
		t.Fatalf("a member Pod at %s: %v", version, err)
	}
}

// podReleases lists each member Pod's version annotation and etcd image.
func podReleases(t *testing.T, c *etcdv1alpha1.EtcdCluster) string {
	t.Helper()
	pods := framework.MemberPodsOf(t, c)
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name+"="+p.Annotations[resources.AnnotationVersion]+"/"+p.Spec.Containers[0].Image)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
