package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
	"steward.dev/steward/test/linearizability"
)

// reasonMemberRecreated is the reason of the Event Steward records when it re-creates member Pods on their volumes.
const reasonMemberRecreated = "MemberRecreated"

// lostPod is a deleted member Pod as it was before the deletion, and the Pod re-created under its name as first
// seen, with the TLS mode its volume recorded then.
type lostPod struct {
	uid                    types.UID
	version, tls           string
	againVersion, againTLS string
	volumeTLS              string
}

// podLoss is one round: the Pods of some members deleted at once.
type podLoss struct {
	key      client.ObjectKey
	replicas int
	victims  []string
	// all deletes every member Pod with one DeleteAllOf by the cluster's label; otherwise one Delete per victim,
	// issued concurrently.
	all bool
	// operator, when set, is stopped before the deletion and started again once the deleted Pods are gone.
	operator *framework.Operator
	// hold keeps the deleted Pods Terminating (by a finalizer of the test's) this long before they go, as a Pod
	// whose kubelet does not confirm the deletion stays: their containers stop, the quorum is lost, and Steward
	// cannot re-create them yet.
	hold time.Duration
}

// newPodLoss is a round that deletes the Pods of n members of c (its leader first when withLeader, then
// followers by name), with op stopped around the deletion unless op is nil.
func newPodLoss(t *testing.T, c *etcdv1alpha1.EtcdCluster, n int, withLeader bool, op *framework.Operator) podLoss {
	t.Helper()
	var names, followers []string
	for _, m := range c.Status.Members {
		if m.Name == c.Status.Leader {
			if withLeader {
				names = append(names, m.Name)
			}
			continue
		}
		followers = append(followers, m.Name)
	}
	sort.Strings(followers)
	names = append(names, followers...)
	if len(names) < n || (withLeader && c.Status.Leader == "") {
		t.Fatalf("cannot pick %d members (leader %t) of %v, leader %q", n, withLeader, framework.MemberNames(c), c.Status.Leader)
	}
	return podLoss{key: client.ObjectKeyFromObject(c), replicas: int(c.Spec.Replicas), victims: names[:n], all: n == int(c.Spec.Replicas), operator: op}
}

func (r podLoss) String() string {
	s := fmt.Sprintf("%d of %d Pods deleted", len(r.victims), r.replicas)
	if r.operator != nil {
		s += " with the operator stopped"
	}
	if r.hold > 0 {
		s += fmt.Sprintf(" and held Terminating for %s", r.hold)
	}
	return s
}

// run deletes the victims' Pods and waits until the cluster is Available again, as of a status transition after the
// deletion, with a Pod re-created under each victim's name (on the release and TLS mode the deleted Pod ran) and a
// MemberRecreated Event naming each victim. While quorum is lost, status must say so (Available=False, QuorumLost)
// truthfully. It logs the time from the deletion to Available and returns the cluster and when the deletion began.
func (r podLoss) run(t *testing.T) (*etcdv1alpha1.EtcdCluster, time.Time) {
	t.Helper()
	ctx := context.Background()
	what := r.String()
	lost := map[string]*lostPod{}
	for _, name := range r.victims {
		var p corev1.Pod
		if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: r.key.Namespace, Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		mode, _ := resources.PodTLS(&p)
		lost[name] = &lostPod{uid: p.UID, version: p.Annotations[resources.AnnotationVersion], tls: mode}
	}
	if r.hold > 0 {
		release := framework.HoldPods(t, r.key.Namespace, r.victims)
		defer release()
	}
	if r.operator != nil {
		r.operator.Halt()
	}
	outage := watchOutage(r.key)
	begin := time.Now()
	r.deletePods(t)
	t.Logf("%s: %v", what, r.victims)
	if r.hold > 0 {
		// The Pods stay Terminating for the whole hold (a bounded check, not a wait for something to happen).
		for time.Since(begin) < r.hold {
			requireNoRestore(t, r.key, begin)
			for name, l := range lost {
				var p corev1.Pod
				if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: r.key.Namespace, Name: name}, &p); err != nil || p.UID != l.uid || p.DeletionTimestamp.IsZero() {
					t.Fatalf("Pod %s not held Terminating: %v", name, err)
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
		framework.HoldPods(t, r.key.Namespace, nil)
		t.Logf("%s: Pods released after %s", what, time.Since(begin).Round(100*time.Millisecond))
	}
	var restarted time.Duration
	if r.operator != nil {
		framework.Poll(t, "deleted Pods gone", 2*time.Minute, func() error {
			for name, l := range lost {
				var p corev1.Pod
				err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: r.key.Namespace, Name: name}, &p)
				if err == nil && p.UID == l.uid {
					return fmt.Errorf("Pod %s still there", name)
				}
				if err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			return nil
		})
		restarted = time.Since(begin)
		r.operator.Start()
	}
	var c etcdv1alpha1.EtcdCluster
	framework.Poll(t, what+": Available again", 5*time.Minute, func() error {
		requireNoRestore(t, r.key, begin)
		for name, l := range lost {
			if l.againVersion != "" {
				continue
			}
			var p corev1.Pod
			err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: r.key.Namespace, Name: name}, &p)
			if apierrors.IsNotFound(err) || (err == nil && p.UID == l.uid) {
				return fmt.Errorf("Pod %s not re-created yet", name)
			}
			if err != nil {
				return err
			}
			l.againVersion = p.Annotations[resources.AnnotationVersion]
			l.againTLS, _ = resources.PodTLS(&p)
			var pvc corev1.PersistentVolumeClaim
			if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: r.key.Namespace, Name: resources.PVCName(name)}, &pvc); err != nil {
				return err
			}
			l.volumeTLS = pvc.Annotations[resources.AnnotationTLSMode]
		}
		if err := framework.K8s.Get(ctx, r.key, &c); err != nil {
			return err
		}
		a := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable)
		if a == nil || a.Status != metav1.ConditionTrue || a.LastTransitionTime.Time.Before(begin.Truncate(time.Second)) ||
			c.Status.ObservedGeneration != c.Generation {
			return fmt.Errorf("not Available again yet: %s", framework.Describe(&c))
		}
		return nil
	})
	took := time.Since(begin)
	notAvailable, progressing := outage.finish()
	if r.operator != nil {
		t.Logf("%s: Available again after %s (Pods gone and operator started after %s)", what, took.Round(100*time.Millisecond), restarted.Round(100*time.Millisecond))
	} else {
		t.Logf("%s: Available again after %s", what, took.Round(100*time.Millisecond))
	}
	t.Logf("status while without quorum: Available %q; Progressing reasons %v", notAvailable, progressing)
	r.checkOutageStatus(t, notAvailable)
	for _, name := range r.victims {
		lost[name].check(t, name)
	}
	requireRecreatedEvents(t, &c, r.victims, begin)
	return &c, begin
}

// requireNoRestore fails the test at once if an EtcdRestore exists in the cluster's namespace: members whose Pods
// were deleted with their volumes intact come back on them, and a re-seed from a backup would discard the writes
// made since the backup.
func requireNoRestore(t *testing.T, key client.ObjectKey, begin time.Time) {
	t.Helper()
	var list etcdv1alpha1.EtcdRestoreList
	if err := framework.K8s.List(context.Background(), &list, client.InNamespace(key.Namespace)); err != nil || len(list.Items) == 0 {
		return
	}
	var c etcdv1alpha1.EtcdCluster
	_ = framework.K8s.Get(context.Background(), key, &c)
	r := list.Items[0]
	t.Fatalf("EtcdRestore %s (backup %s, labels %v) created %s after the deletion; cluster: %s, quorum lost since %v",
		r.Name, r.Spec.BackupName, r.Labels, r.CreationTimestamp.Sub(begin.Truncate(time.Second)), framework.Describe(&c), c.Status.QuorumLostSince)
}

// check fails the test unless the member came back as its deleted Pod ran: on the same release (or, when Steward
// moved a member that was down on to the release of an upgrade under way, a newer one: never an older one, which
// might not read its data) and in the same TLS mode (or the one its volume records, when Steward moved it on).
func (l *lostPod) check(t *testing.T, name string) {
	t.Helper()
	was, err1 := plan.ParseVersion(l.version)
	now, err2 := plan.ParseVersion(l.againVersion)
	switch {
	case err1 != nil || err2 != nil || now.Less(was):
		t.Errorf("member %s came back on release %q; its Pod ran %q", name, l.againVersion, l.version)
	case l.againVersion != l.version:
		t.Logf("member %s came back on release %s; its Pod ran %s (moved on with the upgrade while it was down)", name, l.againVersion, l.version)
	}
	switch l.againTLS {
	case l.tls:
	case l.volumeTLS:
		t.Logf("member %s came back in TLS mode %s, as its volume records; its Pod ran %s", name, l.againTLS, l.tls)
	default:
		t.Errorf("member %s came back in TLS mode %s; its Pod ran %s, its volume records %q", name, l.againTLS, l.tls, l.volumeTLS)
	}
	if l.againVersion == l.version && l.againTLS == l.tls {
		t.Logf("member %s came back on release %s in TLS mode %s, as its Pod ran", name, l.againVersion, l.againTLS)
	}
}

func (r podLoss) deletePods(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if r.all {
		if err := framework.K8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(r.key.Namespace), client.MatchingLabels{resources.LabelCluster: r.key.Name}); err != nil {
			t.Fatal(err)
		}
		return
	}
	errs := make([]error, len(r.victims))
	var wg sync.WaitGroup
	for i, name := range r.victims {
		wg.Go(func() {
			errs[i] = framework.K8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: r.key.Namespace, Name: name}})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("delete Pod %s: %v", r.victims[i], err)
		}
	}
}

// checkOutageStatus fails the test unless status, while the quorum was lost, said so (Available=False,
// QuorumLost) and never reported a cluster of no voting members (what a status computed from an empty member
// list says). A message naming every member coming back on its volume is logged when one was caught: it may
// last only from the pass that re-creates the Pods to the next one.
func (r podLoss) checkOutageStatus(t *testing.T, notAvailable []string) {
	t.Helper()
	quorumLost, named := false, ""
	for _, s := range notAvailable {
		if strings.Contains(s, "of 0 voting members") {
			t.Errorf("status without a member list: %q", s)
		}
		if !strings.HasPrefix(s, etcdv1alpha1.ReasonQuorumLost+": ") {
			continue
		}
		quorumLost = true
		all := true
		for _, v := range r.victims {
			all = all && strings.Contains(s, v)
		}
		if all && named == "" {
			named = s
		}
	}
	switch {
	case !quorumLost:
		t.Errorf("status never said Available=False/%s while the quorum was lost (saw %q)", etcdv1alpha1.ReasonQuorumLost, notAvailable)
	case named == "":
		t.Logf("no Available=False/%s message caught that names every member coming back %v", etcdv1alpha1.ReasonQuorumLost, r.victims)
	default:
		t.Logf("status named the members coming back: %q", named)
	}
}

// requireRecreatedEvents waits for MemberRecreated Events on the cluster, recorded since begin, naming each member.
func requireRecreatedEvents(t *testing.T, c *etcdv1alpha1.EtcdCluster, members []string, begin time.Time) {
	t.Helper()
	framework.Poll(t, "MemberRecreated events for "+strings.Join(members, ", "), 30*time.Second, func() error {
		var events corev1.EventList
		if err := framework.K8s.List(context.Background(), &events, client.InNamespace(c.Namespace)); err != nil {
			return err
		}
		for _, m := range members {
			found := false
			for _, e := range events.Items {
				found = found || (e.InvolvedObject.Name == c.Name && e.Reason == reasonMemberRecreated &&
					!e.LastTimestamp.Time.Before(begin.Truncate(time.Second)) && strings.Contains(e.Message, m))
			}
			if !found {
				return fmt.Errorf("no %s event for %s since the deletion among %d events", reasonMemberRecreated, m, len(events.Items))
			}
		}
		return nil
	})
}

// outageWatch records what a cluster's status said while it recovered: each distinct Available condition that
// was not True ("reason: message") and each Progressing reason, in the order first seen.
type outageWatch struct {
	mu           sync.Mutex
	notAvailable []string
	progressing  []string
	stop, done   chan struct{}
}

func watchOutage(key client.ObjectKey) *outageWatch {
	w := &outageWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			var c etcdv1alpha1.EtcdCluster
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := framework.K8s.Get(ctx, key, &c)
			cancel()
			if err != nil {
				continue
			}
			w.mu.Lock()
			if a := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable); a != nil && a.Status != metav1.ConditionTrue {
				if s := a.Reason + ": " + a.Message; !slices.Contains(w.notAvailable, s) {
					w.notAvailable = append(w.notAvailable, s)
				}
			}
			if p := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionProgressing); p != nil && !slices.Contains(w.progressing, p.Reason) {
				w.progressing = append(w.progressing, p.Reason)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *outageWatch) finish() (notAvailable, progressing []string) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.notAvailable, w.progressing
}

// requireSameMembers waits until the cluster has settled and fails the test unless it has the members it had
// before (names, etcd member IDs, volume UIDs: nobody was replaced), every member serves the keys
// WriteAndReadThroughService wrote from its own data, and status matches etcd.
func requireSameMembers(t *testing.T, key client.ObjectKey, before string) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	got := framework.WaitSettled(t, key, 4*time.Minute)
	if after := framework.Identities(t, got); after != before {
		t.Errorf("members or volumes changed:\n before %s\n after  %s", before, after)
	}
	for _, m := range got.Status.Members {
		framework.ReadKeysFromMember(t, got, m.Name)
	}
	framework.CheckStatusMatchesEtcd(t, got)
	return got
}

// TestPodLossOneMember deletes the Pod of a 1-member cluster under load, with the operator running and then with
// the operator stopped before the deletion and started after: each time, Steward re-creates the Pod on its
// volume without a member list, and the member comes back with its name, ID, volume and data.
func TestPodLossOneMember(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "podloss-1")
	op := framework.RunOperator(t, ns)
	key, got, before := framework.CreatePodLossCluster(t, framework.NewCluster(ns, "solo", 1))
	load := framework.StartLoad(t, got)
	for _, stopping := range []*framework.Operator{nil, op} {
		r := newPodLoss(t, got, 1, true, stopping)
		if !t.Run(r.String(), func(t *testing.T) {
			r.run(t)
			got = requireSameMembers(t, key, before)
		}) {
			break
		}
	}
	op.Start() // when a round failed with the operator stopped
	framework.RequireNoLostWrites(t, load, "1 of 1 Pods deleted, twice")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestPodLossThreeMembers deletes 2 of 3 and 3 of 3 member Pods at once under load, each with the operator
// running and with the operator stopped before the deletion and started after: each time, the cluster is
// Available again on the same members (names, IDs, volumes) with every key. The cluster has the quorum-loss
// policy RestoreLatestBackup after 30s and a Complete backup: re-creating the members' Pods comes first, so no
// EtcdRestore is ever created and the cluster keeps its identity. A last round holds the 2 deleted Pods
// Terminating for longer than the policy's delay (the quorum is lost all that time, and the members' volumes are
// intact): still no re-seed. Restores are watched from before the first deletion to 30s past the policy's delay
// after the last.
func TestPodLossThreeMembers(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "podloss-3")
	op := framework.RunOperator(t, ns)
	ctx := context.Background()
	framework.CreateS3Secret(t, ns)
	const after = 30 * time.Second
	c := framework.NewCluster(ns, "trio", 3)
	c.Spec.QuorumLossRecovery = &etcdv1alpha1.QuorumLossRecovery{Policy: etcdv1alpha1.QuorumLossRestoreLatestBackup, After: &metav1.Duration{Duration: after}}
	key, got, before := framework.CreatePodLossCluster(t, c)
	b := framework.NewBackup(ns, "before-loss", key.Name, framework.S3Destination(ns+"/trio.db"))
	if err := framework.K8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 2*time.Minute)
	framework.RequireComplete(t, b, got)
	clusterID := got.Status.ClusterID
	restores := watchRestores(ns)

	load := framework.StartLoad(t, got)
	var last time.Time
	for _, round := range []struct {
		n          int
		withLeader bool
		stopped    *framework.Operator
		hold       time.Duration
	}{{2, true, nil, 0}, {3, true, nil, 0}, {2, false, op, 0}, {3, true, op, 0}, {2, true, nil, after + 10*time.Second}} {
		r := newPodLoss(t, got, round.n, round.withLeader, round.stopped)
		r.hold = round.hold
		if !t.Run(r.String(), func(t *testing.T) {
			_, last = r.run(t)
			got = requireSameMembers(t, key, before)
		}) {
			break
		}
	}
	op.Start() // when a round failed with the operator stopped
	// The policy must not act on any loss: watch from before the first deletion to at least its delay and 30s more
	// past the last one.
	for time.Since(last) < after+30*time.Second {
		if seen := restores.seen(); len(seen) > 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if seen := restores.finish(); len(seen) > 0 {
		t.Errorf("EtcdRestores created while members came back on their volumes: %v", seen)
	} else {
		t.Logf("no EtcdRestore in %s from before the first deletion until %s after the last", ns, time.Since(last).Round(time.Second))
	}
	if got.Status.ClusterID != clusterID || len(got.Status.FormerClusterIDs) != 0 {
		t.Errorf("cluster ID %s (former %v), was %s: the cluster was re-seeded", got.Status.ClusterID, got.Status.FormerClusterIDs, clusterID)
	}
	framework.RequireNoLostWrites(t, load, "2 of 3 and 3 of 3 Pods deleted, with and without the operator")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// restoreWatch lists a namespace's EtcdRestores until finished and keeps the name of every one it saw.
type restoreWatch struct {
	mu         sync.Mutex
	names      []string
	stop, done chan struct{}
}

func watchRestores(ns string) *restoreWatch {
	w := &restoreWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			var list etcdv1alpha1.EtcdRestoreList
			if err := framework.K8s.List(context.Background(), &list, client.InNamespace(ns)); err == nil {
				w.mu.Lock()
				for _, r := range list.Items {
					if s := r.Name + " (backup " + r.Spec.BackupName + ")"; !slices.Contains(w.names, s) {
						w.names = append(w.names, s)
					}
				}
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *restoreWatch) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.names...)
}

func (w *restoreWatch) finish() []string {
	close(w.stop)
	<-w.done
	return w.seen()
}

// TestPodLossFiveMembers deletes 3 of 5 member Pods at once under load (the leader among them), with the operator
// running and then, other members, with the operator stopped before the deletion and started after.
func TestPodLossFiveMembers(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "podloss-5")
	op := framework.RunOperator(t, ns)
	key, got, before := framework.CreatePodLossCluster(t, framework.NewCluster(ns, "quintet", 5))
	load := framework.StartLoad(t, got)
	for _, stopping := range []*framework.Operator{nil, op} {
		// The leader among the deleted members, then (with the operator stopped) followers only.
		r := newPodLoss(t, got, 3, stopping == nil, stopping)
		if !t.Run(r.String(), func(t *testing.T) {
			r.run(t)
			got = requireSameMembers(t, key, before)
		}) {
			break
		}
	}
	op.Start() // when a round failed with the operator stopped
	framework.RequireNoLostWrites(t, load, "3 of 5 Pods deleted, twice")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestPodLossDuringUpgrade deletes 2 of 3 member Pods at once in the middle of a 3.5 -> 3.6 upgrade under load,
// once one member runs 3.6: the member already upgraded and the leader (not upgraded yet). Each comes back on
// the release its Pod ran (its data may be in a format only that release reads), the cluster is Available again,
// and the upgrade finishes on the same members.
func TestPodLossDuringUpgrade(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "podloss-upgrade")
	framework.StartOperator(t, ns)
	key, got, before := framework.CreatePodLossCluster(t, framework.NewClusterAt(ns, "climber", "3.5.35"))
	ids := framework.MemberIDs(got)
	load := framework.StartLoad(t, got)
	framework.SetVersion(t, key, "3.6.16")
	var upgraded, leader string
	framework.Poll(t, "a follower upgraded", 4*time.Minute, func() error {
		var c etcdv1alpha1.EtcdCluster
		if err := framework.K8s.Get(context.Background(), key, &c); err != nil {
			return err
		}
		for _, m := range c.Status.Members {
			if m.Version == "3.6.16" && m.Name != c.Status.Leader && c.Status.Leader != "" {
				upgraded, leader = m.Name, c.Status.Leader
				return nil
			}
		}
		return fmt.Errorf("none yet: %s", framework.Describe(&c))
	})
	r := podLoss{key: key, replicas: 3, victims: []string{upgraded, leader}}
	r.run(t)
	got = framework.WaitAtVersion(t, key, "3.6.16", ids, 6*time.Minute)
	requireSameMembers(t, key, before)
	framework.RequireNoLostWrites(t, load, "2 of 3 Pods deleted mid-upgrade")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestPodLossDuringTLSSwitch deletes 2 of 3 member Pods at once in the middle of a switch from plaintext to TLS
// (provider Steward) under load that dials both ways, once a member runs in Bridge mode: that member and the
// leader. Each comes back in the TLS mode its Pod ran, the cluster is Available again, and the switch finishes on
// the same members.
func TestPodLossDuringTLSSwitch(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "podloss-tls")
	framework.StartOperator(t, ns)
	ctx := context.Background()
	c := framework.NewCluster(ns, "turncoat", 3)
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	key, got, before := framework.CreatePodLossCluster(t, c)
	plain, secure := framework.ServiceTargets(t, got)
	load, err := linearizability.Start(linearizability.Config{Endpoints: plain.Endpoints, Alternates: []linearizability.Target{secure}})
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderSteward}
	if err := framework.K8s.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	var bridge, leader string
	framework.Poll(t, "a member in Bridge mode", 4*time.Minute, func() error {
		var c etcdv1alpha1.EtcdCluster
		if err := framework.K8s.Get(ctx, key, &c); err != nil {
			return err
		}
		for _, m := range c.Status.Members {
			if m.TLS == resources.MemberTLSBridge && m.Name != c.Status.Leader && c.Status.Leader != "" {
				bridge, leader = m.Name, c.Status.Leader
				return nil
			}
		}
		return fmt.Errorf("none yet: %s", framework.Describe(&c))
	})
	r := podLoss{key: key, replicas: 3, victims: []string{bridge, leader}}
	r.run(t)
	got = framework.WaitMembersTLS(t, key, resources.MemberTLSOn, 8*time.Minute)
	requireSameMembers(t, key, before)
	framework.RequireNoLostWrites(t, load, "2 of 3 Pods deleted mid-switch to TLS")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestPodLossVolumeDeletedUnderRunningMember deletes a follower's PVC while its Pod runs, under load: the PVC
// stays Terminating (the Pod holds it) and status says so (Degraded, MemberVolumeDeleting). Steward replaces the
// member while it still serves: its successor (new name, new ID) joins before it is removed, the cluster stays
// Available throughout, and the doomed member's Pod and volume go.
func TestPodLossVolumeDeletedUnderRunningMember(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "podloss-pvc")
	framework.StartOperator(t, ns)
	ctx := context.Background()
	key, got, _ := framework.CreatePodLossCluster(t, framework.NewCluster(ns, "doomed", 3))
	original := framework.MemberIDs(got)
	load := framework.StartLoad(t, got)
	victim, victimID := framework.AFollower(t, got)
	var pvc corev1.PersistentVolumeClaim
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: resources.PVCName(victim)}, &pvc); err != nil {
		t.Fatal(err)
	}
	// The cluster must stay Available while the member is replaced (the watch's TLS checks hold trivially: no
	// switch runs).
	available := framework.WatchSwitch(t, key)
	begin := time.Now()
	if err := framework.K8s.Delete(ctx, &pvc); err != nil {
		t.Fatal(err)
	}
	degraded := framework.WaitDegraded(t, key, etcdv1alpha1.ReasonMemberVolumeDeleting, victim)
	if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(&pvc), &pvc); err != nil || pvc.DeletionTimestamp.IsZero() {
		t.Errorf("volume %s while Degraded: %v, deletion %v; want it Terminating, held by the running Pod", pvc.Name, err, pvc.DeletionTimestamp)
	}
	d := meta.FindStatusCondition(degraded.Status.Conditions, etcdv1alpha1.ConditionDegraded)
	t.Logf("volume of %s deleted under its running Pod: Degraded after %s: %s", victim, time.Since(begin).Round(100*time.Millisecond), d.Message)

	// The successor is listed (as a learner, then a voter) while the doomed member still is.
	var successor string
	var roles []string
	joinedFirst := false
	framework.Poll(t, "member "+victim+" replaced", 4*time.Minute, func() error {
		var c etcdv1alpha1.EtcdCluster
		if err := framework.K8s.Get(ctx, key, &c); err != nil {
			return err
		}
		listed := false
		for _, m := range c.Status.Members {
			switch {
			case m.Name == victim || m.ID == victimID:
				listed = true
			case original[m.Name] == "":
				successor = m.Name + " (" + m.ID + ")"
				if r := string(m.Role); !slices.Contains(roles, r) {
					roles = append(roles, r)
				}
			}
		}
		if listed {
			joinedFirst = joinedFirst || successor != ""
			return fmt.Errorf("member %s still listed (successor %q): %s", victim, successor, framework.Describe(&c))
		}
		return nil
	})
	removed := time.Since(begin)
	got = framework.WaitSettled(t, key, 4*time.Minute)
	t.Logf("member %s with a deleted volume: removed from etcd after %s, replaced by %s and settled after %s",
		victim, removed.Round(100*time.Millisecond), successor, time.Since(begin).Round(100*time.Millisecond))
	if !joinedFirst {
		t.Errorf("member %s was removed before its successor %q joined: it must be replaced while it serves", victim, successor)
	}
	t.Logf("successor %s listed as %v while %s was still a member", successor, roles, victim)
	framework.RemovalEvent(t, got, victim)
	framework.LogEvents(t, got, begin)
	available.Finish(t, "replacing a member whose volume was deleted")
	if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(&pvc), &corev1.PersistentVolumeClaim{}); !apierrors.IsNotFound(err) {
		t.Errorf("volume %s of the removed member: %v, want it gone", pvc.Name, err)
	}
	for _, m := range got.Status.Members {
		if m.Name == victim || m.ID == victimID {
			t.Errorf("member %+v after the replacement", m)
		}
		if id, ok := original[m.Name]; ok && id != m.ID {
			t.Errorf("member %s changed ID %s -> %s", m.Name, id, m.ID)
		}
		framework.ReadKeysFromMember(t, got, m.Name)
	}
	framework.CheckStatusMatchesEtcd(t, got)
	framework.RequireNoLostWrites(t, load, "a member replaced after its volume was deleted")
	framework.DeleteAndCheckNothingLeft(t, got)
}
