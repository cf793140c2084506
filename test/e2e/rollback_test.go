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
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/etcdrestore"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
	"steward.dev/steward/test/linearizability"
)

// putKeys writes n keys under prefix through the client Service and returns them.
func putKeys(t *testing.T, c *etcdv1alpha1.EtcdCluster, prefix string, n int) map[string]string {
	t.Helper()
	keys := map[string]string{}
	for i := 0; i < n; i++ {
		keys[fmt.Sprintf("%s%03d", prefix, i)] = fmt.Sprintf("%s-value-%d", prefix, i)
	}
	framework.PutAll(t, c, keys)
	return keys
}

// TestRollbackHealthyCluster rolls a healthy 3-member cluster back to a backup. Keys A are written, a backup is
// taken, keys B are written. A confirmed EtcdRestore without spec.allowRollbackOfHealthyCluster is refused with
// a message naming the revisions it would discard, and nothing changes (B readable, same Pods, volumes and
// cluster ID). With the field, Steward takes a safety backup (which holds B), then re-seeds: the cluster comes
// back Available with A and without B, at a revision above the one before, under a new cluster ID, with the old
// volumes kept.
//
// What the client load asserts: porcupine cannot model a rollback (discarding acknowledged writes is its very
// purpose), so the history is checked in two phases, each on its own: load 1 runs from before the backup through
// the refused restore and is verified (linearizable, every acknowledged write read back) before the rollback
// starts; load 2, on a key prefix of its own, runs on the rolled-back cluster and is verified the same way. The
// writes lost by the rollback are exactly keys B and load 1's writes after the backup, which the test asserts
// are in the safety backup's revision range instead.
func TestRollbackHealthyCluster(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "rollback")
	framework.StartOperator(t, ns)
	pvc := framework.CreateBackupClaim(t, ns, "256Mi")
	c := framework.NewCluster(ns, "rb", 3)
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	c = framework.WaitSettled(t, client.ObjectKeyFromObject(c), 3*time.Minute)
	original := c.Status.ClusterID

	load := framework.StartLoad(t, c)
	keysA := putKeys(t, c, "rollback/a/", 100)
	b := framework.NewBackup(ns, "before-b", c.Name, etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: pvc.Name, Path: "rb/before-b.db"}})
	if err := framework.K8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 2*time.Minute)
	framework.RequireComplete(t, b, c)
	keysB := putKeys(t, c, "rollback/b/", 100)

	// Without the field: refused, saying what would be lost; nothing changes.
	framework.Poll(t, "the cluster's status revision past keys B", time.Minute, func() error {
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			return err
		}
		if c.Status.Revision <= b.Status.Revision+int64(len(keysB)) {
			return fmt.Errorf("status revision %d, backup's %d", c.Status.Revision, b.Status.Revision)
		}
		return nil
	})
	before := framework.PodAndVolumeUIDs(t, c)
	refused := framework.NewRestore(ns, "without-field", c.Name, b.Name)
	refused.Spec.Confirm = c.Name
	if err := framework.K8s.Create(ctx, refused); err != nil {
		t.Fatal(err)
	}
	refused = framework.WaitRestoreFinished(t, client.ObjectKeyFromObject(refused), time.Minute)
	framework.RequireRestoreReason(t, refused, etcdv1alpha1.ConditionFailed, etcdv1alpha1.ReasonClusterHasQuorum)
	msg := meta.FindStatusCondition(refused.Status.Conditions, etcdv1alpha1.ConditionFailed).Message
	want := fmt.Sprintf("would discard the writes of revisions %d..", b.Status.Revision+1)
	if !strings.Contains(msg, want) || !strings.Contains(msg, fmt.Sprintf("(revision %d)", b.Status.Revision)) || !strings.Contains(msg, "made since ") {
		t.Fatalf("refusal %q does not say %q", msg, want)
	}
	framework.Poll(t, "the refusal's Event", 30*time.Second, func() error {
		var events corev1.EventList
		if err := framework.K8s.List(ctx, &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == refused.Name && e.Reason == etcdv1alpha1.ReasonClusterHasQuorum && strings.Contains(e.Message, want) {
				return nil
			}
		}
		return fmt.Errorf("no %s Event among %d", etcdv1alpha1.ReasonClusterHasQuorum, len(events.Items))
	})
	if refused.Status.SafetyBackup != "" {
		t.Fatalf("a refused rollback took a safety backup %s", refused.Status.SafetyBackup)
	}
	time.Sleep(5 * time.Second)
	framework.RequireUnchanged(t, "a refused rollback", before, framework.PodAndVolumeUIDs(t, c))
	readB, _ := framework.ReadKeys(t, c, "rollback/b/")
	framework.RequireSameKeys(t, "keys B after the refused rollback", readB, keysB)
	if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
		t.Fatal(err)
	}
	if c.Status.ClusterID != original {
		t.Fatalf("cluster ID %s after a refused rollback, was %s", c.Status.ClusterID, original)
	}
	framework.RequireNoLostWrites(t, load, "keys A, the backup, keys B and the refused rollback")

	// With the field: safety backup, then the re-seed.
	_, revBefore := framework.ReadKeys(t, c, "rollback/")
	start := time.Now()
	rb := framework.NewRestore(ns, "rollback", c.Name, b.Name)
	rb.Spec.Confirm, rb.Spec.AllowRollbackOfHealthyCluster = c.Name, true
	if err := framework.K8s.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	rb = framework.WaitRestoreFinished(t, client.ObjectKeyFromObject(rb), 5*time.Minute)
	framework.RequireRestoreReason(t, rb, etcdv1alpha1.ConditionComplete, etcdv1alpha1.ReasonRestoreSucceeded)
	got := framework.WaitSettled(t, client.ObjectKeyFromObject(c), 2*time.Minute)
	took := time.Since(start)

	if rb.Status.SafetyBackup != etcdrestore.SafetyBackupName(rb) {
		t.Fatalf("status.safetyBackup %q, want %q", rb.Status.SafetyBackup, etcdrestore.SafetyBackupName(rb))
	}
	var safety etcdv1alpha1.EtcdBackup
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: rb.Status.SafetyBackup}, &safety); err != nil {
		t.Fatal(err)
	}
	framework.RequireComplete(t, &safety, c)
	if !metav1.IsControlledBy(&safety, rb) || safety.Spec.Destination.PVC == nil || safety.Spec.Destination.PVC.ClaimName != pvc.Name {
		t.Fatalf("safety backup %s: owners %v, destination %+v", safety.Name, safety.OwnerReferences, safety.Spec.Destination)
	}
	if safety.Status.Revision < revBefore {
		t.Fatalf("safety backup at revision %d, below the %d read before the rollback: it would not hold every discarded write", safety.Status.Revision, revBefore)
	}

	readA, rev := framework.ReadKeys(t, got, "rollback/a/")
	framework.RequireSameKeys(t, "keys A after the rollback", readA, keysA)
	if readB, _ := framework.ReadKeys(t, got, "rollback/b/"); len(readB) != 0 {
		t.Fatalf("%d keys B after the rollback, want none", len(readB))
	}
	if rev <= revBefore || rev < b.Status.Revision+resources.ReseedBumpRevision {
		t.Fatalf("revision %d after the rollback; want above %d (before it) and the backup's %d + %d", rev, revBefore, b.Status.Revision, resources.ReseedBumpRevision)
	}
	if got.Status.ClusterID == original || rb.Status.PreviousClusterID != original || rb.Status.ClusterID != got.Status.ClusterID {
		t.Fatalf("cluster ID %s (was %s), restore status %+v", got.Status.ClusterID, original, rb.Status)
	}
	var retired corev1.PersistentVolumeClaimList
	if err := framework.K8s.List(ctx, &retired, client.InNamespace(ns), client.MatchingLabels{resources.LabelRetiredFrom: c.Name}); err != nil {
		t.Fatal(err)
	}
	if len(retired.Items) != 3 || len(rb.Status.RetiredVolumes) != 3 {
		t.Fatalf("%d retired volumes (status %v), want the 3 old members'", len(retired.Items), rb.Status.RetiredVolumes)
	}
	for name := range before {
		if strings.HasPrefix(name, "pod/") && framework.MemberIn(got, strings.TrimPrefix(name, "pod/")) {
			t.Fatalf("old member %s still in the rolled-back cluster", name)
		}
	}
	t.Logf("rolled back to %s (revision %d, %d bytes) in %s from restore creation to Available; safety backup %s: revision %d, %d bytes; revision %d -> %d",
		b.Name, b.Status.Revision, b.Status.SizeBytes, took.Round(100*time.Millisecond), safety.Name, safety.Status.Revision, safety.Status.SizeBytes, revBefore, rev)
	framework.CheckStatusMatchesEtcd(t, got)

	after, err := linearizability.Start(linearizability.Config{Endpoints: []string{framework.ClientServiceURL(t, got)}, TLS: framework.ClusterTLS(t, got), Prefix: "after-rollback/"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	framework.RequireNoLostWrites(t, after, "the rolled-back cluster")
}
