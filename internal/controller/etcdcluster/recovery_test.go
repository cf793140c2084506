package etcdcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/resources"
)

// lostPodsCluster is a formed plaintext 3-member cluster whose status remembers its members, with every volume
// and none of its Pods: etcd cannot answer (no Pod has an address), as after `kubectl delete pod` of all three.
func lostPodsCluster(t *testing.T, now *time.Time, mutatePVC func(*corev1.PersistentVolumeClaim)) (*Reconciler, client.Client, *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	c := testCluster()
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	c.Status.Bootstrapped = true
	names := []string{"db-aaaaa", "db-bbbbb", "db-ccccc"}
	objs := []client.Object{c}
	_, pvcs := fixture(c, names, 0)
	for i := range pvcs {
		pvcs[i].Annotations[resources.AnnotationVersion], pvcs[i].Annotations[resources.AnnotationImage] = "3.6.15", "steward.local/etcd:v3.6.15"
		if mutatePVC != nil {
			mutatePVC(&pvcs[i])
		}
		objs = append(objs, &pvcs[i])
		c.Status.Members = append(c.Status.Members, etcdv1alpha1.MemberStatus{Name: names[i], ID: []string{"a1", "b2", "c3"}[i]})
	}
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(&etcdv1alpha1.EtcdCluster{}).Build()
	return &Reconciler{Client: cl, Recorder: record.NewFakeRecorder(100), Etcd: etcd.NewPool(), Options: testOpts,
		Now: func() time.Time { return *now }}, cl, c
}

func reconcileOnce(t *testing.T, r *Reconciler, c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	var got etcdv1alpha1.EtcdCluster
	if err := r.Client.Get(context.Background(), client.ObjectKeyFromObject(c), &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

func memberPods(t *testing.T, cl client.Client) map[string]*corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := cl.List(context.Background(), &pods, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range pods.Items {
		out[pods.Items[i].Name] = &pods.Items[i]
	}
	return out
}

// TestReconcileBringsLostPodsBack replays passes of the real reconciler over a cluster that lost every Pod: the
// first pass re-creates all three on their volumes, on the release the volumes record, without a member list;
// the next passes create nothing more and say truthfully what they wait for.
func TestReconcileBringsLostPodsBack(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	r, cl, c := lostPodsCluster(t, &now, nil)
	got := reconcileOnce(t, r, c)
	pods := memberPods(t, cl)
	if len(pods) != 3 {
		t.Fatalf("%d Pods re-created, want all 3 in one pass", len(pods))
	}
	for name, p := range pods {
		if p.Annotations[resources.AnnotationVersion] != "3.6.15" || !strings.Contains(p.Annotations[resources.AnnotationInitialCluster], name) {
			t.Errorf("Pod %s: %v, want the release and initial cluster its volume records", name, p.Annotations)
		}
		if mode, _ := resources.PodTLS(p); mode != resources.MemberTLSPlaintext {
			t.Errorf("Pod %s in TLS mode %s, want its volume's Plaintext", name, mode)
		}
	}
	progressing := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionProgressing)
	if progressing == nil || progressing.Reason != etcdv1alpha1.ReasonRecreatingMember {
		t.Fatalf("Progressing %+v, want RecreatingMember", progressing)
	}
	available := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionAvailable)
	if available == nil || available.Reason != etcdv1alpha1.ReasonQuorumLost || strings.Contains(available.Message, "0 of 0") ||
		!strings.Contains(available.Message, "3 members: 0 with a Pod (0 ready), 3 missing their Pod with their volume intact") {
		t.Fatalf("Available %+v", available)
	}
	if ev := events(r); !strings.Contains(ev, "MemberRecreated") {
		t.Errorf("events %q, want MemberRecreated", ev)
	}

	now = now.Add(10 * time.Second)
	got = reconcileOnce(t, r, got)
	if n := len(memberPods(t, cl)); n != 3 {
		t.Fatalf("%d Pods after the second pass", n)
	}
	progressing = meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionProgressing)
	if progressing.Reason != etcdv1alpha1.ReasonWaitingForMembers || !strings.Contains(progressing.Message, "3 with a Pod") {
		t.Fatalf("Progressing %+v, want a wait for the members to form a quorum", progressing)
	}
}

// TestReconcileLeavesRemovedVolumesAlone: a volume whose member Steward removed from etcd is not brought back, and
// is not counted among the members that need a quorum.
func TestReconcileLeavesRemovedVolumesAlone(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	r, cl, c := lostPodsCluster(t, &now, func(p *corev1.PersistentVolumeClaim) {
		if p.Name != resources.PVCName("db-aaaaa") {
			p.Annotations[resources.AnnotationRemovedMember] = "b2"
		}
	})
	got := reconcileOnce(t, r, c)
	pods := memberPods(t, cl)
	if len(pods) != 1 || pods["db-aaaaa"] == nil {
		t.Fatalf("Pods %v, want only db-aaaaa back", pods)
	}
	// One member of one: it is a quorum of itself.
	now = now.Add(time.Second)
	got = reconcileOnce(t, r, got)
	if p := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionProgressing); p.Reason != etcdv1alpha1.ReasonWaitingForMembers {
		t.Fatalf("Progressing %+v", p)
	}
}

// TestReconcileSaysWhenOnlyAHumanCanHelp: with too few members holding data for a quorum, the wait is a human's,
// said in Degraded with the members lost and the way out, and in a Warning Event; status keeps the lost members.
func TestReconcileSaysWhenOnlyAHumanCanHelp(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	r, cl, c := lostPodsCluster(t, &now, nil)
	// Two of the three volumes are gone too; status remembers their members.
	for _, n := range []string{"db-bbbbb", "db-ccccc"} {
		if err := cl.Delete(context.Background(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: resources.PVCName(n)}}); err != nil {
			t.Fatal(err)
		}
	}
	got := reconcileOnce(t, r, c)
	now = now.Add(time.Second)
	got = reconcileOnce(t, r, got)
	degraded := meta.FindStatusCondition(got.Status.Conditions, etcdv1alpha1.ConditionDegraded)
	if degraded == nil || degraded.Reason != etcdv1alpha1.ReasonQuorumUnrecoverable || !strings.Contains(degraded.Message, "2 with no data left [db-bbbbb db-ccccc]") ||
		!strings.Contains(degraded.Message, "EtcdRestore") {
		t.Fatalf("Degraded %+v, want QuorumUnrecoverable naming the lost members and the way out", degraded)
	}
	if ev := events(r); !strings.Contains(ev, etcdv1alpha1.ReasonQuorumUnrecoverable) {
		t.Errorf("events %q, want a warning for the human", ev)
	}
	if len(got.Status.Members) != 3 {
		t.Errorf("status forgot members it has no objects of: %+v", got.Status.Members)
	}
}

// events drains the fake recorder's events into one string.
func events(r *Reconciler) string {
	var out []string
	rec := r.Recorder.(*record.FakeRecorder)
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// TestBootstrapReadsPastALaggingCache replays the pass after a bootstrap's first with a cache that does not show
// the member objects yet (the Pod and PVC watches lag behind the EtcdCluster's): it must not draw new names and
// start a second cluster beside the first. Objects with the cluster's label that are not its members (no member
// label, or another owner) do not hold a bootstrap back.
func TestBootstrapReadsPastALaggingCache(t *testing.T) {
	first := testCluster()
	first.Spec.Replicas = 1
	first.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	pods, pvcs := fixture(first, []string{"db-aaaaa"}, 1)
	stranger := pods[0].DeepCopy()
	stranger.Name, stranger.OwnerReferences = "db-stranger", nil
	unlabelled := pods[0].DeepCopy()
	unlabelled.Name = "db-unlabelled"
	delete(unlabelled.Labels, resources.LabelMember)

	for _, tc := range []struct {
		name     string
		live     []client.Object // what the API server holds beside the cluster
		wantPods int             // Pods the pass creates
	}{
		{"its member's PVC exists", []client.Object{&pvcs[0]}, 0},
		{"its member's Pod exists (ephemeral storage has no PVC)", []client.Object{&pods[0]}, 0},
		{"nothing exists", nil, 1},
		{"only objects not its members", []client.Object{stranger, unlabelled}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := first.DeepCopy()
			now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
			cache := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(c).WithStatusSubresource(&etcdv1alpha1.EtcdCluster{}).Build()
			live := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(append([]client.Object{c.DeepCopy()}, tc.live...)...).Build()
			r := &Reconciler{Client: cache, APIReader: live, Recorder: record.NewFakeRecorder(100), Etcd: etcd.NewPool(), Options: testOpts,
				Now: func() time.Time { return now }}
			reconcileOnce(t, r, c)
			if got := len(memberPods(t, cache)); got != tc.wantPods {
				t.Fatalf("the pass created %d Pods, want %d", got, tc.wantPods)
			}
			var created corev1.PersistentVolumeClaimList
			if err := cache.List(context.Background(), &created); err != nil {
				t.Fatal(err)
			}
			if len(created.Items) != tc.wantPods {
				t.Fatalf("the pass created %d PVCs, want %d", len(created.Items), tc.wantPods)
			}
		})
	}
}
