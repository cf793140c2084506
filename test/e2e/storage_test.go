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
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/etcdcluster"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
)

// storageWatch samples a cluster's members and volumes while its storage changes: how many members etcd lists at
// once, how many PVCs are mid-expansion at once, and the resize conditions seen.
type storageWatch struct {
	mu         sync.Mutex
	maxMembers int
	maxGrowing int
	conditions map[string]bool
	stop, done chan struct{}
}

func watchStorage(t *testing.T, key client.ObjectKey) *storageWatch {
	t.Helper()
	w := &storageWatch{conditions: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			var c etcdv1alpha1.EtcdCluster
			var pvcs corev1.PersistentVolumeClaimList
			errC := framework.K8s.Get(ctx, key, &c)
			errP := framework.K8s.List(ctx, &pvcs, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name})
			cancel()
			if errC != nil || errP != nil {
				continue
			}
			growing := 0
			w.mu.Lock()
			for _, p := range pvcs.Items {
				req, capacity := p.Spec.Resources.Requests[corev1.ResourceStorage], p.Status.Capacity[corev1.ResourceStorage]
				if !capacity.IsZero() && capacity.Cmp(req) < 0 {
					growing++
				}
				for _, cond := range p.Status.Conditions {
					w.conditions[string(cond.Type)] = true
				}
			}
			w.maxGrowing = max(w.maxGrowing, growing)
			// Members etcd lists: a removed member stays in status while its volume's deletion finishes, which
			// Steward need not wait for before the next step (docs/development/flakes.md).
			inEtcd := 0
			for _, m := range c.Status.Members {
				if m.ID != "" {
					inEtcd++
				}
			}
			w.maxMembers = max(w.maxMembers, inEtcd)
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *storageWatch) finish() (maxMembers, maxGrowing int, conditions []string) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.conditions {
		conditions = append(conditions, c)
	}
	sort.Strings(conditions)
	return w.maxMembers, w.maxGrowing, conditions
}

// memberVolumes maps each member PVC's name to its UID, class, requested size and capacity.
func memberVolumes(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	var pvcs corev1.PersistentVolumeClaimList
	if err := framework.K8s.List(context.Background(), &pvcs, client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pvcs.Items {
		req, capacity := p.Spec.Resources.Requests[corev1.ResourceStorage], p.Status.Capacity[corev1.ResourceStorage]
		out[p.Name] = fmt.Sprintf("uid=%s class=%s request=%s capacity=%s", p.UID, ptr.Deref(p.Spec.StorageClassName, ""), req.String(), capacity.String())
	}
	return out
}

// resizing reports whether a claim has a condition of a resize not finished (or failed), whatever its status.
// Other conditions do not count: from Kubernetes 1.37 every claim has `Unused` (False while a Pod uses it).
func resizing(p corev1.PersistentVolumeClaim) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool {
		return slices.Contains(etcdcluster.ResizeConditions, c.Type)
	})
}

// TestStorageExpansionInPlace grows spec.storage.size of a 3-member cluster whose StorageClass allows expansion,
// under client load: every member's PVC grows in place, one at a time (the test bed's provisioner grows the
// volume, the kubelet finishes the file system resize when Steward's annotation of the member Pod makes it sync
// the Pod), no member is replaced, the cluster stays Available, and no acknowledged write is lost.
func TestStorageExpansionInPlace(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "storage-grow")
	framework.StartOperator(t, ns)
	key, got, _ := framework.CreatePodLossCluster(t, framework.NewCluster(ns, "grow", 3))
	ids := framework.MemberIDs(got)
	before := memberVolumes(t, got)
	load := framework.StartLoad(t, got)
	available := framework.WatchSwitch(t, key)
	watch := watchStorage(t, key)
	begin := time.Now()
	size := resource.MustParse("2Gi")
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Size = size })
	framework.Poll(t, "every member volume grown to "+size.String(), 8*time.Minute, func() error {
		var pvcs corev1.PersistentVolumeClaimList
		if err := framework.K8s.List(context.Background(), &pvcs, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
			return err
		}
		for _, p := range pvcs.Items {
			capacity := p.Status.Capacity[corev1.ResourceStorage]
			if capacity.Cmp(size) != 0 || resizing(p) {
				return fmt.Errorf("volume %s: capacity %s, conditions %v", p.Name, capacity.String(), p.Status.Conditions)
			}
		}
		return nil
	})
	grown := time.Since(begin)
	got = framework.WaitSettled(t, key, 2*time.Minute)
	settled := time.Since(begin)
	maxMembers, maxGrowing, conditions := watch.finish()
	available.Finish(t, "expanding volumes in place")
	framework.RequireNoLostWrites(t, load, "expanding 3 volumes in place")
	t.Logf("3 volumes grown in place 1Gi -> %s in %s (settled after %s); at most %d growing at once, %d members in etcd at once; PVC conditions seen: %v",
		size.String(), grown.Round(100*time.Millisecond), settled.Round(100*time.Millisecond), maxGrowing, maxMembers, conditions)

	if maxGrowing > 1 {
		t.Errorf("%d volumes were growing at once, want one at a time", maxGrowing)
	}
	if maxMembers != 3 {
		t.Errorf("up to %d members in etcd, want 3: no member is replaced for an expansion", maxMembers)
	}
	if now := framework.MemberIDs(got); fmt.Sprint(now) != fmt.Sprint(ids) {
		t.Errorf("members changed %v -> %v; an expansion in place replaces none", ids, now)
	}
	after := memberVolumes(t, got)
	for name, was := range before {
		uid := strings.Fields(was)[0]
		if !strings.HasPrefix(after[name], uid+" ") {
			t.Errorf("volume %s: %s -> %s, want the same PVC", name, was, after[name])
		}
	}
	var pvs corev1.PersistentVolumeList
	if err := framework.K8s.List(context.Background(), &pvs); err != nil {
		t.Fatal(err)
	}
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == ns {
			if capacity := pv.Spec.Capacity[corev1.ResourceStorage]; capacity.Cmp(size) != 0 {
				t.Errorf("PersistentVolume %s of %s: capacity %s, want %s", pv.Name, ref.Name, capacity.String(), size.String())
			}
		}
	}
	if ev := framework.EventsWithin(t, got, "VolumeExpanding", begin, 3); len(ev) != 3 {
		t.Errorf("VolumeExpanding events %v, want one per member", ev)
	}
	// At least one: the kubelet's own periodic sync of a Pod may grow a file system before Steward's pass sees it
	// pending.
	if ev := framework.EventsWithin(t, got, "VolumeFileSystemResizeRequested", begin, 1); len(ev) == 0 {
		t.Error("no VolumeFileSystemResizeRequested event: Steward did not ask the kubelet to grow a file system")
	} else {
		t.Logf("the kubelet was asked to grow file systems %d times", len(ev))
	}
	for _, m := range got.Status.Members {
		framework.ReadKeysFromMember(t, got, m.Name)
	}
	framework.CheckStatusMatchesEtcd(t, got)
	framework.DeleteAndCheckNothingLeft(t, got)
}

// TestStorageClassMigration moves a 3-member cluster to another StorageClass, then shrinks its volumes, under
// client load: each time every member is replaced, one at a time, by a member on a volume of the spec's class and
// size (a learner joins, is promoted, an old member leaves, its Pod and PVC go; the leader last, after handing
// leadership over). The cluster stays Available, keeps its data, and loses no acknowledged write.
func TestStorageClassMigration(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "storage-move")
	framework.StartOperator(t, ns)
	key, got, _ := framework.CreatePodLossCluster(t, framework.NewCluster(ns, "move", 3))
	load := framework.StartLoad(t, got)
	available := framework.WatchSwitch(t, key)
	migrateStorage(t, key, "moving 3 members to storage class "+testbed.FixedStorageClassName, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Storage.StorageClassName = ptr.To(testbed.FixedStorageClassName)
	}, "class="+testbed.FixedStorageClassName+" request=1Gi", true)
	got = migrateStorage(t, key, "shrinking 3 volumes 1Gi -> 512Mi", func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Storage.Size = resource.MustParse("512Mi")
	}, "class="+testbed.FixedStorageClassName+" request=512Mi", false)
	available.Finish(t, "migrating to another storage class and shrinking")
	framework.RequireNoLostWrites(t, load, "replacing 3 members onto another storage class, then onto smaller volumes")
	for _, m := range got.Status.Members {
		framework.ReadKeysFromMember(t, got, m.Name)
	}
	framework.CheckStatusMatchesEtcd(t, got)
	framework.DeleteAndCheckNothingLeft(t, got)
}

// migrateStorage changes the cluster's storage spec and waits until every member has been replaced by one on a
// volume whose description contains want, checking that it went one member at a time.
//
// With events, it also checks the step's Events (learners added, members removed for MigratingStorage): only for
// the first change of a cluster, as the recorder drops most of a second round's (see below).
func migrateStorage(t *testing.T, key client.ObjectKey, what string, change func(*etcdv1alpha1.EtcdCluster), want string, events bool) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var got etcdv1alpha1.EtcdCluster
	if err := framework.K8s.Get(context.Background(), key, &got); err != nil {
		t.Fatal(err)
	}
	original := framework.MemberIDs(&got)
	watch := watchStorage(t, key)
	begin := time.Now()
	framework.PatchSpec(t, key, change)
	framework.Poll(t, what, 10*time.Minute, func() error {
		var c etcdv1alpha1.EtcdCluster
		if err := framework.K8s.Get(context.Background(), key, &c); err != nil {
			return err
		}
		for _, m := range c.Status.Members {
			if _, old := original[m.Name]; old {
				return fmt.Errorf("member %s not replaced yet: %s", m.Name, framework.Describe(&c))
			}
		}
		for name, v := range memberVolumes(t, &c) {
			if !strings.Contains(v, want) {
				return fmt.Errorf("volume %s: %s", name, v)
			}
		}
		return nil
	})
	settled := framework.WaitSettled(t, key, 3*time.Minute)
	took := time.Since(begin)
	maxMembers, _, _ := watch.finish()
	t.Logf("%s: every member replaced in %s; at most %d members in etcd at once", what, took.Round(100*time.Millisecond), maxMembers)
	if maxMembers > 4 {
		t.Errorf("%s: up to %d members in etcd at once, want at most 4: one replacement at a time", what, maxMembers)
	}
	for name, v := range memberVolumes(t, settled) {
		if !strings.Contains(v, want) {
			t.Errorf("%s: volume %s: %s", what, name, v)
		}
	}
	if !events {
		return settled
	}
	// Not all three of each: client-go's recorder drops an object's Events beyond a burst of 25 (one more every
	// 5 minutes), and a cluster's bootstrap and three replacements record about 40. One at a time is checked above.
	added, removed := framework.EventsWithin(t, settled, "MemberAdded", begin, 3), framework.EventsWithin(t, settled, "MemberRemoved", begin, 3)
	t.Logf("%s: %d MemberAdded and %d MemberRemoved Events recorded", what, len(added), len(removed))
	if len(added) == 0 || len(removed) == 0 {
		t.Errorf("%s: MemberAdded events %v, MemberRemoved events %v; want some of each", what, added, removed)
	}
	for _, e := range removed {
		if !strings.Contains(e, "MigratingStorage") {
			t.Errorf("%s: removal %q is not a storage migration", what, e)
		}
	}
	// The leader at the start is on the old storage: it leaves last, after handing leadership over (unless an
	// election moved leadership to a new member by itself).
	t.Logf("%s: leadership handed over: %v", what, framework.EventsWithin(t, settled, "LeaderMoved", begin, 1))
	return settled
}
