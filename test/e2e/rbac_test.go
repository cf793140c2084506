package e2e

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/manager"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// TestNamespaceScopedInstallWithLeastPrivilege runs the operator as a ServiceAccount that holds only the Role
// `make manifests` generates (config/namespaced/role.yaml, the same rules as the ClusterRole) in one namespace,
// watching only that namespace and electing its leader there: it creates a cluster, backs it up to a PVC,
// deletes the backup and the cluster. Every permission the markers leave out that the code needs would fail
// one of these steps. A cluster in another namespace is left alone.
func TestNamespaceScopedInstallWithLeastPrivilege(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	const sa = "steward"
	ns, other := framework.NewNamespace(t, "scoped"), framework.NewNamespace(t, "scoped-other")

	data, err := os.ReadFile("../../config/namespaced/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.Role
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	role.Namespace = ns
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}
	for _, obj := range []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}, &role, binding} {
		if err := framework.K8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		defer func(obj client.Object) { _ = framework.K8s.Delete(ctx, obj) }(obj)
	}
	cfg := rest.CopyConfig(framework.Bed.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
	stop := framework.StartOperatorAs(t, cfg, manager.Namespaces{ns})

	c := framework.NewCluster(ns, "scoped", 1)
	c.Spec.Storage.Ephemeral = true
	foreign := framework.NewCluster(other, "foreign", 1)
	foreign.Spec.Storage.Ephemeral = true
	for _, obj := range []*etcdv1alpha1.EtcdCluster{c, foreign} {
		if err := framework.K8s.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { _ = framework.K8s.Delete(ctx, foreign) }()
	c = framework.WaitAvailable(t, client.ObjectKeyFromObject(c), 3*time.Minute)

	pvc := framework.CreateBackupClaim(t, ns, "64Mi")
	defer func() { _ = framework.K8s.Delete(ctx, pvc) }()
	b := framework.NewBackup(ns, "scoped", c.Name, etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "scoped.db"}})
	b.Spec.DeletionPolicy = etcdv1alpha1.DeletionPolicyDelete
	if err := framework.K8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 3*time.Minute)
	if !meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) {
		t.Fatalf("backup under the namespaced Role did not complete: %+v", b.Status.Conditions)
	}
	// Deleting it runs the delete Job and removes the finalizer: Job create/delete, EtcdBackup update/patch.
	if err := framework.K8s.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	framework.Poll(t, "EtcdBackup deleted with its snapshot", 2*time.Minute, func() error {
		return notFound(framework.K8s.Get(ctx, client.ObjectKeyFromObject(b), &etcdv1alpha1.EtcdBackup{}))
	})

	var f etcdv1alpha1.EtcdCluster
	if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(foreign), &f); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := framework.K8s.List(ctx, &pods, client.InNamespace(other), client.MatchingLabels{resources.LabelCluster: foreign.Name}); err != nil {
		t.Fatal(err)
	}
	if len(f.Status.Conditions) > 0 || len(pods.Items) > 0 {
		t.Fatalf("the operator scoped to %s touched a cluster in %s: %d conditions, %d Pods", ns, other, len(f.Status.Conditions), len(pods.Items))
	}
	framework.DeleteAndCheckNothingLeft(t, c)
	stop()
}

// notFound is nil when err says the object is gone.
func notFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		return errors.New("still there")
	}
	return err
}
