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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// emptiedKeys are written before a volume is emptied and must all be there whenever the cluster serves again.
func emptiedKeys(n int) map[string]string {
	keys := map[string]string{}
	for i := 0; i < n; i++ {
		keys[fmt.Sprintf("%s%04d", framework.BackupKeyPrefix, i)] = fmt.Sprintf("value-%d", i)
	}
	return keys
}

// TestEmptiedVolumeOfOneMemberCluster: the only member of a 1-member cluster loses its Pod while the operator is
// stopped, and the directory of its volume is emptied (a re-imaged node, a wiped local disk); the claim carries
// no record that the member has run, as a volume from before Steward wrote one (an upgrade of Steward). Started
// again, Steward must not bring it back as a new, empty cluster: it re-creates the Pod, whose agent refuses the
// empty data dir; the cluster is never Available on the empty store and reports the loss (Degraded
// QuorumUnrecoverable, naming the member and its volume). Its quorum-loss policy then restores it from the newest
// backup, with every key the backup holds, and the new member's volume records that it has run.
func TestEmptiedVolumeOfOneMemberCluster(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "emptied-1")
	op := framework.RunOperator(t, ns)
	framework.CreateS3Secret(t, ns)
	const after = 40 * time.Second
	c := framework.NewCluster(ns, "solo", 1)
	c.Spec.QuorumLossRecovery = &etcdv1alpha1.QuorumLossRecovery{Policy: etcdv1alpha1.QuorumLossRestoreLatestBackup, After: &metav1.Duration{Duration: after}}
	key, got := framework.Settle(t, c)
	keys := emptiedKeys(50)
	framework.PutAll(t, got, keys)
	b := framework.NewBackup(ns, "before-wipe", key.Name, framework.S3Destination(ns+"/solo.db"))
	if err := framework.K8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	framework.RequireComplete(t, framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 2*time.Minute), got)
	member := got.Status.Members[0].Name
	clusterID := got.Status.ClusterID

	op.Halt()
	var pod corev1.Pod
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: member}, &pod); err != nil {
		t.Fatal(err)
	}
	if err := framework.K8s.Delete(ctx, &pod); err != nil {
		t.Fatal(err)
	}
	waitPodsGone(t, ns, map[string]types.UID{member: pod.UID})
	forgetRun(t, ns, member)
	framework.WipeVolume(t, ns, member)
	begin := time.Now()
	served := watchServedEmpty(key, "")
	op.Start()

	d := framework.WaitDegraded(t, key, etcdv1alpha1.ReasonQuorumUnrecoverable, "Data lost on volumes that are still there", member, resources.PVCName(member))
	cond := meta.FindStatusCondition(d.Status.Conditions, etcdv1alpha1.ConditionDegraded)
	t.Logf("loss reported %s after the operator started: %s", time.Since(begin).Round(100*time.Millisecond), cond.Message)

	var restores etcdv1alpha1.EtcdRestoreList
	framework.Poll(t, "the quorum-loss policy's restore", 2*after, func() error {
		if err := framework.K8s.List(ctx, &restores, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(restores.Items) != 1 {
			return fmt.Errorf("%d EtcdRestores", len(restores.Items))
		}
		return nil
	})
	r := framework.WaitRestoreFinished(t, client.ObjectKeyFromObject(&restores.Items[0]), 4*time.Minute)
	if !meta.IsStatusConditionTrue(r.Status.Conditions, etcdv1alpha1.ConditionComplete) {
		t.Fatalf("restore %s: %+v", r.Name, r.Status.Conditions)
	}
	got = framework.WaitSettled(t, key, 4*time.Minute)
	t.Logf("restored by the quorum-loss policy (restore %s of backup %s) and settled %s after the operator started", r.Name, r.Spec.BackupName,
		time.Since(begin).Round(100*time.Millisecond))
	for _, v := range served.finish() {
		t.Errorf("served on the emptied volume: %s", v)
	}
	if got.Status.ClusterID == clusterID || got.Status.Members[0].Name == member {
		t.Errorf("cluster %s, member %s after the restore: want a new cluster ID and member", got.Status.ClusterID, got.Status.Members[0].Name)
	}
	read, _ := framework.ReadKeys(t, got, framework.BackupKeyPrefix)
	framework.RequireSameKeys(t, "after the restore", read, keys)
	requireRunRecorded(t, ns, got.Status.Members[0].Name)
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestEmptiedVolumeOfJoinedMemberAfterPodLoss: a cluster grown from 1 member to 3 under load loses all its Pods,
// and the volume of a member that joined later is emptied: first with the operator stopped (started again once
// the Pods are gone), then with it running (the Pods held Terminating until the volume is emptied). Each time the
// Pods come back on their volumes, the emptied member's refuses its empty data dir (it must never rejoin under its
// old member ID with an empty log: it would vote without the writes it acknowledged), and the two members with
// their data form the quorum; Steward replaces the emptied member (removed, a successor joins as a learner). The
// emptied member never serves under its old ID, every key written before is there, and no acknowledged write is
// lost.
func TestEmptiedVolumeOfJoinedMemberAfterPodLoss(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "emptied-3")
	op := framework.RunOperator(t, ns)
	key, got := framework.Settle(t, framework.NewCluster(ns, "trio", 1))
	keys := emptiedKeys(50)
	framework.PutAll(t, got, keys)
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 3 })
	got = framework.WaitSettled(t, key, 4*time.Minute)
	load := framework.StartLoad(t, got)
	for _, stopped := range []bool{true, false} {
		what := "operator running, Pods held Terminating"
		if stopped {
			what = "operator stopped"
		}
		if !t.Run(what, func(t *testing.T) {
			framework.LogMemberOutputOnFailure(t, got, 40)
			victim, victimID := aJoinedMember(t, got)
			pods := map[string]types.UID{}
			for _, m := range got.Status.Members {
				var p corev1.Pod
				if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: m.Name}, &p); err != nil {
					t.Fatal(err)
				}
				pods[m.Name] = p.UID
			}
			served := watchServedEmpty(key, victimID)
			begin := time.Now()
			if stopped {
				op.Halt()
				deleteMemberPods(t, key)
				waitPodsGone(t, ns, pods)
				framework.WipeVolume(t, ns, victim)
				op.Start()
			} else {
				release := framework.HoldPods(t, ns, framework.MemberNames(got))
				deleteMemberPods(t, key)
				waitEtcdStopped(t, ns, victim)
				framework.WipeVolume(t, ns, victim)
				release()
			}
			t.Logf("all Pods deleted and the volume of %s (%s), which joined later, emptied", victim, victimID)
			framework.WaitMemberGone(t, key, victim, victimID, 4*time.Minute)
			got = framework.WaitSettled(t, key, 4*time.Minute)
			t.Logf("%s replaced and settled %s after the deletion", victim, time.Since(begin).Round(100*time.Millisecond))
			for _, v := range served.finish() {
				t.Errorf("the emptied member served under its old ID: %s", v)
			}
			if msg := framework.RemovalEvent(t, got, victim); !strings.Contains(msg, "lost or corrupt") {
				t.Errorf("%s removed for another reason: %s", victim, msg)
			}
			read, _ := framework.ReadKeys(t, got, framework.BackupKeyPrefix)
			framework.RequireSameKeys(t, "after "+victim+" was emptied and replaced", read, keys)
			framework.CheckStatusMatchesEtcd(t, got)
		}) {
			break
		}
	}
	op.Start() // when a round failed with the operator stopped
	framework.RequireNoLostWrites(t, load, "all Pods deleted and a joined member's volume emptied, twice")
	framework.DeleteAndCheckNothingLeft(t, got)
}

// aJoinedMember returns a member of c that joined the running cluster (its volume records
// --initial-cluster-state=existing), the first by name.
func aJoinedMember(t *testing.T, c *etcdv1alpha1.EtcdCluster) (name, id string) {
	t.Helper()
	members := append([]etcdv1alpha1.MemberStatus(nil), c.Status.Members...)
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	for _, m := range members {
		var pvc corev1.PersistentVolumeClaim
		if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.PVCName(m.Name)}, &pvc); err != nil {
			t.Fatal(err)
		}
		if pvc.Annotations[resources.AnnotationInitialClusterState] == "existing" {
			return m.Name, m.ID
		}
	}
	t.Fatalf("no member of %v joined later", framework.MemberNames(c))
	return "", ""
}

func deleteMemberPods(t *testing.T, key client.ObjectKey) {
	t.Helper()
	if err := framework.K8s.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
		t.Fatal(err)
	}
}

// waitPodsGone waits until no Pod of the given names has the given UID.
func waitPodsGone(t *testing.T, namespace string, pods map[string]types.UID) {
	t.Helper()
	framework.Poll(t, "deleted Pods gone", 2*time.Minute, func() error {
		for name, uid := range pods {
			var p corev1.Pod
			err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &p)
			if err == nil && p.UID == uid {
				return fmt.Errorf("Pod %s still there", name)
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
}

// waitEtcdStopped waits until the kubelet reports the etcd container of the (deleted, held) Pod member stopped.
func waitEtcdStopped(t *testing.T, namespace, member string) {
	t.Helper()
	framework.Poll(t, "etcd of "+member+" stopped", 2*time.Minute, func() error {
		var p corev1.Pod
		if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: member}, &p); err != nil {
			return err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == resources.EtcdContainer && cs.State.Terminated != nil {
				return nil
			}
		}
		return fmt.Errorf("Pod %s: etcd not stopped yet (deleting %v)", member, p.DeletionTimestamp != nil)
	})
}

// forgetRun removes the record that member has run from its volume, as on a volume from before Steward wrote it.
func forgetRun(t *testing.T, namespace, member string) {
	t.Helper()
	var pvc corev1.PersistentVolumeClaim
	if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: resources.PVCName(member)}, &pvc); err != nil {
		t.Fatal(err)
	}
	if _, ok := pvc.Annotations[resources.AnnotationHasRun]; !ok {
		return
	}
	patch := client.MergeFrom(pvc.DeepCopy())
	delete(pvc.Annotations, resources.AnnotationHasRun)
	if err := framework.K8s.Patch(context.Background(), &pvc, patch); err != nil {
		t.Fatal(err)
	}
}

// requireRunRecorded waits until member's volume records that it has run.
func requireRunRecorded(t *testing.T, namespace, member string) {
	t.Helper()
	framework.Poll(t, "volume of "+member+" records that it has run", 30*time.Second, func() error {
		var pvc corev1.PersistentVolumeClaim
		if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: resources.PVCName(member)}, &pvc); err != nil {
			return err
		}
		if pvc.Annotations[resources.AnnotationHasRun] == "" {
			return fmt.Errorf("annotations %v", pvc.Annotations)
		}
		return nil
	})
}

// servedEmptyWatch records what a cluster's status shows, from when it is started, that only a member started on
// an emptied data dir could cause: with victimID, that member healthy under that ID once status showed it down
// (status from before the Pods were deleted still shows it healthy); without, the cluster Available since then
// while no EtcdRestore exists in its namespace (the only member's volume was emptied, so nothing but a restore can
// serve its data).
type servedEmptyWatch struct {
	mu         sync.Mutex
	seen       []string
	stop, done chan struct{}
}

func watchServedEmpty(key client.ObjectKey, victimID string) *servedEmptyWatch {
	w := &servedEmptyWatch{stop: make(chan struct{}), done: make(chan struct{})}
	since := metav1.NewTime(time.Now().Truncate(time.Second))
	down := false
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
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var c etcdv1alpha1.EtcdCluster
			err := framework.K8s.Get(ctx, key, &c)
			var restores etcdv1alpha1.EtcdRestoreList
			if err == nil && victimID == "" {
				err = framework.K8s.List(ctx, &restores, client.InNamespace(key.Namespace))
			}
			cancel()
			if err != nil {
				continue
			}
			var s string
			healthy := false
			for _, m := range c.Status.Members {
				healthy = healthy || (m.ID == victimID && m.Healthy)
			}
			switch a := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable); {
			case victimID != "" && healthy && down:
				s = fmt.Sprintf("member %s healthy again: %s", victimID, framework.Describe(&c))
			case victimID != "":
				down = down || !healthy
			case len(restores.Items) == 0 && a != nil && a.Status == metav1.ConditionTrue && !a.LastTransitionTime.Before(&since):
				s = "Available without a restore: " + framework.Describe(&c)
			}
			w.mu.Lock()
			if s != "" && len(w.seen) < 5 {
				w.seen = append(w.seen, s)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *servedEmptyWatch) finish() []string {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}
