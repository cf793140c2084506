package etcdcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

func TestVolumeOf(t *testing.T) {
	pvc := func(request, capacity string, conditions ...corev1.PersistentVolumeClaimConditionType) *corev1.PersistentVolumeClaim {
		p := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("fast"),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(request)}}}}
		if capacity != "" {
			p.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)}
		}
		for _, c := range conditions {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PersistentVolumeClaimCondition{Type: c, Status: corev1.ConditionTrue, Message: "m-" + string(c)})
		}
		return p
	}
	tests := map[string]struct {
		pvc  *corev1.PersistentVolumeClaim
		want plan.Volume
	}{
		"bound":   {pvc("1Gi", "1Gi"), plan.Volume{Class: "fast", Request: 1 << 30, Capacity: 1 << 30}},
		"pending": {pvc("1Gi", ""), plan.Volume{Class: "fast", Request: 1 << 30}},
		"file system resize pending": {pvc("2Gi", "1Gi", corev1.PersistentVolumeClaimFileSystemResizePending),
			plan.Volume{Class: "fast", Request: 2 << 30, Capacity: 1 << 30, Resize: "FileSystemResizePending", ResizeMessage: "m-FileSystemResizePending"}},
		"an error wins over resizing": {pvc("2Gi", "1Gi", corev1.PersistentVolumeClaimResizing, corev1.PersistentVolumeClaimControllerResizeError),
			plan.Volume{Class: "fast", Request: 2 << 30, Capacity: 1 << 30, Resize: "ControllerResizeError", ResizeMessage: "m-ControllerResizeError"}},
	}
	now := time.Now()
	since := pvc("2Gi", "1Gi", corev1.PersistentVolumeClaimFileSystemResizePending)
	since.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-4 * time.Minute))
	tests["file system resize pending for 4 minutes"] = struct {
		pvc  *corev1.PersistentVolumeClaim
		want plan.Volume
	}{since, plan.Volume{Class: "fast", Request: 2 << 30, Capacity: 1 << 30, Resize: "FileSystemResizePending", ResizeMessage: "m-FileSystemResizePending",
		ResizePendingFor: 4 * time.Minute}}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := volumeOf(tt.pvc, now); got != tt.want {
				t.Fatalf("volumeOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStorageGoal(t *testing.T) {
	c := &etcdv1alpha1.EtcdCluster{Spec: etcdv1alpha1.EtcdClusterSpec{Storage: etcdv1alpha1.StorageSpec{Size: resource.MustParse("2Gi"), StorageClassName: ptr.To("slow")}}}
	if got := storageGoal(c); got != (plan.StorageGoal{Size: 2 << 30, Class: "slow"}) {
		t.Errorf("storageGoal = %+v", got)
	}
	c.Spec.Storage.Ephemeral = true
	if got := storageGoal(c); got != (plan.StorageGoal{}) {
		t.Errorf("storageGoal of an ephemeral cluster = %+v, want nothing to change", got)
	}
}

// TestObserveExpandable: only volumes that would grow in their own class are looked up; a class that cannot be
// read (forbidden, gone) counts as one that does not expand; other errors fail the pass.
func TestObserveExpandable(t *testing.T) {
	classes := []client.Object{
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "grows"}, AllowVolumeExpansion: ptr.To(true)},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fixed"}},
	}
	members := func() []plan.Member {
		return []plan.Member{
			{Name: "a", HasPVC: true, Volume: plan.Volume{Class: "grows", Request: 1 << 30}},
			{Name: "b", HasPVC: true, Volume: plan.Volume{Class: "fixed", Request: 1 << 30}},
			{Name: "c", HasPVC: true, Volume: plan.Volume{Class: "secret", Request: 1 << 30}},
			{Name: "d", HasPVC: true, Volume: plan.Volume{Class: "grows", Request: 2 << 30}},
		}
	}
	var gets []string
	forbidden := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		gets = append(gets, key.Name)
		if key.Name == "secret" {
			return apierrors.NewForbidden(schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}, key.Name, nil)
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(classes...).WithInterceptorFuncs(forbidden).Build()
	r := &Reconciler{Client: cl, APIReader: cl, Recorder: record.NewFakeRecorder(10)}
	obs := &observation{plan: plan.Observation{Members: members()}}
	if err := r.observeExpandable(context.Background(), obs, plan.StorageGoal{Size: 2 << 30}); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"a": true, "b": false, "c": false, "d": false}
	for _, m := range obs.plan.Members {
		if m.Volume.Expandable != want[m.Name] {
			t.Errorf("member %s: expandable %v, want %v", m.Name, m.Volume.Expandable, want[m.Name])
		}
	}
	if len(gets) != 3 {
		t.Errorf("StorageClasses read %v, want each class once, none for a volume already at the size", gets)
	}
	// Moving to another class: nothing grows in its own class, nothing is read.
	gets = nil
	obs = &observation{plan: plan.Observation{Members: members()}}
	if err := r.observeExpandable(context.Background(), obs, plan.StorageGoal{Size: 2 << 30, Class: "other"}); err != nil || len(gets) != 0 {
		t.Errorf("class change: read %v, err %v; want nothing read", gets, err)
	}
}

// TestExpandVolumeRaisesTheRequest: the step patches the member's PVC to the spec's size and records an Event;
// a PVC already at the size (the cache was behind) is left alone.
func TestExpandVolumeRaisesTheRequest(t *testing.T) {
	cluster := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Storage: etcdv1alpha1.StorageSpec{Size: resource.MustParse("2Gi")}}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: resources.PVCName("c-a"), Namespace: "ns"},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(cluster, pvc).Build()
	rec := record.NewFakeRecorder(10)
	r := &Reconciler{Client: cl, Recorder: rec}
	action := plan.Action{Kind: plan.ExpandVolume, Members: []string{"c-a"}}
	for i := 0; i < 2; i++ {
		if err := r.expandVolume(context.Background(), cluster, action); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "2Gi" {
		t.Errorf("request %s, want 2Gi", got.String())
	}
	if len(rec.Events) != 1 {
		t.Errorf("%d events, want one VolumeExpanding for one expansion", len(rec.Events))
	}
}

// TestRefreshResizedVolumes replays passes over a member whose volume grows: nothing while the claim is not
// pending, one annotation (and one Event) when its file system resize is pending, nothing more on the passes that
// see the same claim, and again for a later expansion to another capacity. Only the annotation moves: the Pod's
// spec stays as created.
func TestRefreshResizedVolumes(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cluster := testCluster()
	pod := newMemberPod(cluster, "db-aaaaa")
	r, c := tlsReconciler(t, &now, cluster, pod)
	rec := r.Recorder.(*record.FakeRecorder)
	pass := func(v plan.Volume) (annotation string, events int) {
		t.Helper()
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
			t.Fatal(err)
		}
		obs := &observation{pods: map[string]*corev1.Pod{p.Name: &p},
			plan: plan.Observation{Members: []plan.Member{{Name: "db-aaaaa", HasPod: true, HasPVC: true, InEtcd: true, Volume: v}}}}
		if err := r.refreshResizedVolumes(ctx, cluster, obs); err != nil {
			t.Fatal(err)
		}
		var after corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &after); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(after.Spec, p.Spec) {
			t.Fatal("the Pod's spec changed")
		}
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.Contains(e, "VolumeFileSystemResizeRequested") {
				events++
			}
		}
		return after.Annotations[resources.AnnotationVolumeCapacity], events
	}
	const gi1, gi2 = 1 << 30, 2 << 30
	steps := []struct {
		name       string
		volume     plan.Volume
		annotation string
		events     int
	}{
		{"as created", plan.Volume{Request: gi1, Capacity: gi1}, "", 0},
		{"the claim asks for more", plan.Volume{Request: gi2, Capacity: gi1, Resize: "Resizing"}, "", 0},
		{"the volume has grown, its file system not yet", plan.Volume{Request: gi2, Capacity: gi2, Resize: "FileSystemResizePending"}, "2147483648", 1},
		{"the same claim again", plan.Volume{Request: gi2, Capacity: gi2, Resize: "FileSystemResizePending"}, "2147483648", 0},
		{"the file system has grown", plan.Volume{Request: gi2, Capacity: gi2}, "2147483648", 0},
		{"a later expansion", plan.Volume{Request: 2 * gi2, Capacity: 2 * gi2, Resize: "FileSystemResizePending"}, "4294967296", 1},
	}
	for _, s := range steps {
		if annotation, events := pass(s.volume); annotation != s.annotation || events != s.events {
			t.Errorf("%s: annotation %q with %d Events, want %q with %d", s.name, annotation, events, s.annotation, s.events)
		}
	}
}
