package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/internal/version"
)

// The test bed every test runs on and clients of its API server, set up once by the suite's TestMain.
var (
	// Bed is the running test bed; nil without one (under -short or without root), when tests skip.
	Bed *testbed.Cluster
	// K8s is a client of the test bed's API server with the cluster administrator's credentials.
	K8s client.Client
	// Clientset is the same administrator's client-go Clientset.
	Clientset kubernetes.Interface
	// Scheme knows client-go's and Steward's kinds.
	Scheme = runtime.NewScheme()
	// OperatorOptions are the options the in-process operator runs with, also used to build expected objects.
	OperatorOptions = resources.Options{ImageRepository: testbed.EtcdRepository, ClusterDomain: testbed.ClusterDomain, AgentImage: testbed.AgentImage, AgentCurrent: version.IsRelease(testbed.AgentImage),
		UpgradeVia: func() []string {
			releases, err := plan.ParseUpgradeVia(resources.DefaultUpgradeVia) // the operator's default flag
			if err != nil {
				panic(err)
			}
			return releases
		}()}
)

// Poll calls check every half second until it returns nil, and fails t with what and check's last error if it
// has not by timeout.
func Poll(t *testing.T, what string, timeout time.Duration, check func() error) {
	t.Helper()
	if err := testbed.Eventually(context.Background(), timeout, 500*time.Millisecond, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// RequireBed skips t when no test bed runs (under -short, or without root).
func RequireBed(t *testing.T) {
	t.Helper()
	if Bed == nil {
		t.Skip("end-to-end test: needs the test bed (root, not -short)")
	}
}

// NewCluster is an EtcdCluster ns/name of replicas members on the test bed's first etcd release, with 1Gi volumes;
// the caller creates it.
func NewCluster(ns, name string, replicas int32) *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: replicas, Version: testbed.EtcdVersions[0],
			Storage: etcdv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")}},
	}
}

// NewClusterAt is a 3-member NewCluster on etcd version.
func NewClusterAt(ns, name, version string) *etcdv1alpha1.EtcdCluster {
	c := NewCluster(ns, name, 3)
	c.Spec.Version = version
	return c
}

// PatchSpec changes a cluster's spec with a merge patch. An Update of the object just read would conflict
// whenever the operator writes status between the read and the write, which load on the node makes likely.
func PatchSpec(t *testing.T, key client.ObjectKey, change func(*etcdv1alpha1.EtcdCluster)) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	if err := K8s.Get(context.Background(), key, &c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	change(&c)
	if err := K8s.Patch(context.Background(), &c, patch); err != nil {
		t.Fatalf("change the spec of %s: %v", key, err)
	}
	return &c
}

// CreateSettled creates a 3-member cluster in namespace, with spec.replaceUnhealthyAfter unless 0, and
// waits until it has settled.
func CreateSettled(t *testing.T, namespace, name string, replaceUnhealthyAfter time.Duration) (client.ObjectKey, *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	c := NewCluster(namespace, name, 3)
	if replaceUnhealthyAfter != 0 {
		c.Spec.ReplaceUnhealthyAfter = &metav1.Duration{Duration: replaceUnhealthyAfter}
	}
	return Settle(t, c)
}

// Settle creates cluster c and waits until it has settled.
func Settle(t *testing.T, c *etcdv1alpha1.EtcdCluster) (client.ObjectKey, *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	if err := K8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	return key, WaitSettled(t, key, 4*time.Minute)
}

// CreateUnstructured creates obj as it is, for specs the typed client could not express (fields of the wrong type,
// unknown fields).
func CreateUnstructured(ctx context.Context, obj map[string]any) error {
	u := &unstructured.Unstructured{Object: obj}
	return K8s.Create(ctx, u)
}

// SetVersion changes spec.version.
func SetVersion(t *testing.T, key client.ObjectKey, version string) {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	if err := K8s.Get(context.Background(), key, &c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.Version = version
	if err := K8s.Patch(context.Background(), &c, patch); err != nil {
		t.Fatalf("set version %s: %v", version, err)
	}
}

// DeleteAndCheckNothingLeft deletes the cluster and waits until none of its objects (and no volume) remain.
func DeleteAndCheckNothingLeft(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	ctx := context.Background()
	var pvcs corev1.PersistentVolumeClaimList
	if err := K8s.List(ctx, &pvcs, client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
		t.Fatal(err)
	}
	var volumes []string
	for _, p := range pvcs.Items {
		volumes = append(volumes, p.Spec.VolumeName)
	}
	if err := K8s.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	sel := []client.ListOption{client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelCluster: c.Name}}
	Poll(t, "everything of "+c.Name+" deleted", 3*time.Minute, func() error {
		var pods corev1.PodList
		var pvcs corev1.PersistentVolumeClaimList
		var svcs corev1.ServiceList
		var pdbs policyv1.PodDisruptionBudgetList
		for _, l := range []client.ObjectList{&pods, &pvcs, &svcs, &pdbs} {
			if err := K8s.List(ctx, l, sel...); err != nil {
				return err
			}
		}
		if n := len(pods.Items) + len(pvcs.Items) + len(svcs.Items) + len(pdbs.Items); n > 0 {
			return fmt.Errorf("%d pods, %d pvcs, %d services, %d budgets left", len(pods.Items), len(pvcs.Items), len(svcs.Items), len(pdbs.Items))
		}
		for _, v := range volumes {
			var pv corev1.PersistentVolume
			if err := K8s.Get(ctx, client.ObjectKey{Name: v}, &pv); err == nil {
				return fmt.Errorf("volume %s left (%s)", v, pv.Status.Phase)
			}
		}
		return nil
	})
}
