package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/chaos"
)

// WipeAndCrash empties the member's volume under its running etcd and kills the etcd process, so that the kubelet
// restarts it on an empty data dir with its old name, flags and member ID.
func WipeAndCrash(t *testing.T, namespace, member string) {
	t.Helper()
	var pod corev1.Pod
	if err := K8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: member}, &pod); err != nil {
		t.Fatal(err)
	}
	WipeVolume(t, namespace, member)
	if err := chaos.KillContainer(&pod, resources.EtcdContainer); err != nil {
		t.Fatal(err)
	}
}

// WipeVolume empties the local volume bound to member's claim, leaving the claim and the volume in place: a disk
// replaced or reformatted, a node re-imaged.
func WipeVolume(t *testing.T, namespace, member string) {
	t.Helper()
	ctx := context.Background()
	var pvc corev1.PersistentVolumeClaim
	if err := K8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: resources.PVCName(member)}, &pvc); err != nil {
		t.Fatal(err)
	}
	var pv corev1.PersistentVolume
	if err := K8s.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
		t.Fatal(err)
	}
	if err := chaos.WipeVolume(&pv); err != nil {
		t.Fatal(err)
	}
}

// HoldPods adds HoldFinalizer to the Pods of members names, and returns a function that removes it from every Pod
// of the namespace; called with no names, it only removes it.
func HoldPods(t *testing.T, namespace string, names []string) (release func()) {
	t.Helper()
	ctx := context.Background()
	for _, name := range names {
		var p corev1.Pod
		if err := K8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
		p.Finalizers = append(p.Finalizers, HoldFinalizer)
		if err := K8s.Patch(ctx, &p, patch); err != nil {
			t.Fatalf("hold Pod %s: %v", name, err)
		}
	}
	release = func() {
		t.Helper()
		Poll(t, "Pods of "+namespace+" released", time.Minute, func() error {
			var pods corev1.PodList
			if err := K8s.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
				return err
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if !slices.Contains(p.Finalizers, HoldFinalizer) {
					continue
				}
				patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
				var keep []string
				for _, f := range p.Finalizers {
					if f != HoldFinalizer {
						keep = append(keep, f)
					}
				}
				p.Finalizers = keep
				if err := K8s.Patch(ctx, p, patch); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if len(names) == 0 {
		release()
	}
	return release
}

// HoldFinalizer keeps a deleted Pod Terminating until the test removes it.
const HoldFinalizer = "e2e.steward.dev/hold"

// BreakQuorum empties the data dirs of the two followers of a 3-member cluster under their running etcd, crashes
// them, and waits until Steward reports the quorum lost; the leader survives. Restarted, neither may come back
// under its old identity (steward-agent run-etcd refuses an emptied data dir once the member has run): etcd alone
// would bring back a member that joined later by a snapshot from the leader.
func BreakQuorum(t *testing.T, c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var victims []string
	for _, m := range c.Status.Members {
		if m.Name != c.Status.Leader {
			victims = append(victims, m.Name)
		}
	}
	if len(victims) != 2 {
		t.Fatalf("want two followers, have %v (leader %s)", victims, c.Status.Leader)
	}
	t.Logf("wiping and crashing followers %v (leader %s)", victims, c.Status.Leader)
	for _, v := range victims {
		WipeAndCrash(t, c.Namespace, v)
	}
	var got etcdv1alpha1.EtcdCluster
	Poll(t, c.Name+" without quorum", 2*time.Minute, func() error {
		if err := K8s.Get(context.Background(), client.ObjectKeyFromObject(c), &got); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionAvailable); cond == nil || cond.Status != metav1.ConditionFalse || got.Status.QuorumLostSince == nil {
			return fmt.Errorf("status: %s", Describe(&got))
		}
		return nil
	})
	return &got
}

// CreatePodLossCluster creates c, waits until it settled, writes the keys every round reads back, and returns
// the members' identities.
func CreatePodLossCluster(t *testing.T, c *etcdv1alpha1.EtcdCluster) (client.ObjectKey, *etcdv1alpha1.EtcdCluster, string) {
	t.Helper()
	key, got := Settle(t, c)
	WriteAndReadThroughService(t, got)
	return key, got, Identities(t, got)
}

// Overwrite writes 256KiB values to eight keys in turn, n times or until etcd answers NOSPACE. Every overwritten
// value stays in the database as an old revision until a compaction.
func Overwrite(t *testing.T, cli *clientv3.Client, n int) Fill {
	t.Helper()
	return WriteValues(t, cli, n, 8)
}

// Fill is what Overwrite wrote: the last value acknowledged for each key, and the write etcd answered with
// NOSPACE, if one did. etcd applies the write that crosses the quota and only then answers NOSPACE (its quota
// applier checks after applying), so that write's outcome is unknown to the client: its key may hold either value.
type Fill struct {
	Acked        map[string][]byte
	NoSpaceKey   string
	noSpaceValue []byte
}

// Check reads back every acknowledged write: each key holds the last value acknowledged for it, or, for the key
// of the write answered NOSPACE, that write's value.
func (f Fill) Check(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	for k, want := range f.Acked {
		resp, err := cli.Get(context.Background(), k)
		if err != nil {
			t.Fatalf("read %s: %v", k, err)
		}
		if len(resp.Kvs) == 1 && k == f.NoSpaceKey && bytes.Equal(resp.Kvs[0].Value, f.noSpaceValue) {
			t.Logf("%s holds the value of the write etcd answered NOSPACE (%q...): applied, then refused", k, f.noSpaceValue[:8])
			continue
		}
		if len(resp.Kvs) != 1 || !bytes.Equal(resp.Kvs[0].Value, want) {
			got := "nothing"
			if len(resp.Kvs) == 1 {
				got = fmt.Sprintf("%q...", resp.Kvs[0].Value[:8])
			}
			t.Fatalf("%s holds %s, not its last acknowledged value %q...", k, got, want[:8])
		}
	}
}

// WriteValues writes 256KiB values to keys keys in turn, n times or until etcd answers NOSPACE: with as many keys
// as writes, every value is live data that no compaction frees.
func WriteValues(t *testing.T, cli *clientv3.Client, n, keys int) Fill {
	t.Helper()
	f := Fill{Acked: map[string][]byte{}}
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("fill-%d", i%keys)
		v := append([]byte(fmt.Sprintf("%08d", i)), bytes.Repeat([]byte{'x'}, 256<<10)...)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cli.Put(ctx, k, string(v))
		cancel()
		if errors.Is(err, rpctypes.ErrNoSpace) {
			f.NoSpaceKey, f.noSpaceValue = k, v
			return f
		}
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		f.Acked[k] = v
	}
	return f
}
