package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/version"
	"steward.dev/steward/test/e2e/framework"
)

// TestHelmInstallUpgradeUninstall installs the chart the way docs/operations/install.md shows for one namespace
// (watchNamespaces: a Role, nothing cluster-wide but the metrics endpoint's authentication, so it shares the test bed with other tests) with the previous
// Steward's image, runs a cluster with it, upgrades the release to this Steward with changed values (no member
// restarted), is refused a bad value by the chart's schema with nothing
// changed, and uninstalls: the operator's objects go, the CRDs, the cluster and its volume stay.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	// The release starts on the previous Steward (TestOperatorUpgrade builds it first), so the first upgrade is
	// also an operator upgrade through Helm.
	previous, _ := framework.BuildPreviousSteward(t, framework.PreviousSteward)
	repository, tag, _ := strings.Cut(previous, ":")
	ns := framework.NewNamespace(t, "helm")
	out := framework.MustHelm(t, "install", "steward", "charts/steward", "--namespace", ns, "--set", "watchNamespaces={"+ns+"}",
		"--set", "image.repository="+repository, "--set", "image.tag="+tag, "--set", "agentImage="+previous, "--wait", "--timeout", "3m")
	if !strings.Contains(out, "STATUS: deployed") {
		t.Errorf("helm install printed no deployed status:\n%s", out)
	}
	deployment := client.ObjectKey{Namespace: ns, Name: "steward"}
	var d appsv1.Deployment
	if err := framework.K8s.Get(ctx, deployment, &d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != previous || ptr.Deref(d.Spec.Replicas, 0) != 2 {
		t.Errorf("Deployment runs %s x%d, want %s x2", img, ptr.Deref(d.Spec.Replicas, 0), previous)
	}
	var roles rbacv1.RoleList
	if err := framework.K8s.List(ctx, &roles, client.InNamespace(ns)); err != nil || len(roles.Items) == 0 {
		t.Errorf("no Role in %s (%v): a namespaced install manages it through a Role", ns, err)
	}
	// Cluster-wide only the metrics endpoint's right to ask the API server about scrapers (TokenReviews and
	// SubjectAccessReviews are cluster-scoped), which grants access to no object.
	var crb rbacv1.ClusterRoleBindingList
	if err := framework.K8s.List(ctx, &crb, client.MatchingLabels{"app.kubernetes.io/instance": "steward"}); err != nil {
		t.Fatal(err)
	}
	for _, b := range crb.Items {
		if !strings.HasSuffix(b.Name, "-metrics-auth") || b.RoleRef.Name != b.Name {
			t.Errorf("a namespaced release made the cluster-wide binding %s to %s", b.Name, b.RoleRef.Name)
		}
	}

	c := framework.NewCluster(ns, "charted", 1)
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	got := framework.WaitSettled(t, key, 4*time.Minute)
	members := framework.MemberPodsFingerprint(t, got)

	// Upgrade to this release (the chart's default image) with changed values: one replica, more memory, debug
	// logs.
	framework.MustHelm(t, "upgrade", "steward", "charts/steward", "--namespace", ns, "--set", "watchNamespaces={"+ns+"}", "--set", "replicaCount=1",
		"--set", "resources.limits.memory=300Mi", "--set", "extraArgs={--zap-log-level=debug}", "--wait", "--timeout", "3m")
	if err := framework.K8s.Get(ctx, deployment, &d); err != nil {
		t.Fatal(err)
	}
	manager := d.Spec.Template.Spec.Containers[0]
	if ptr.Deref(d.Spec.Replicas, 0) != 1 || manager.Resources.Limits.Memory().String() != "300Mi" || manager.Image != version.Image ||
		!strings.Contains(strings.Join(manager.Args, " "), "--zap-log-level=debug") || !slices.Contains(manager.Args, "--agent-image="+version.Image) {
		t.Errorf("after helm upgrade: %s x%d, memory limit %s, args %v", manager.Image, ptr.Deref(d.Spec.Replicas, 0), manager.Resources.Limits.Memory(), manager.Args)
	}
	generation := d.Generation

	// A bad value is refused by the chart's schema before anything is sent to the cluster.
	out, err := framework.Helm(t, "upgrade", "steward", "charts/steward", "--namespace", ns, "--reuse-values", "--set", "replicaCount=0")
	if err == nil || !strings.Contains(out, "replicaCount") {
		t.Errorf("helm upgrade with replicaCount=0: err %v, output:\n%s", err, out)
	}
	if err := framework.K8s.Get(ctx, deployment, &d); err != nil {
		t.Fatal(err)
	}
	if d.Generation != generation {
		t.Errorf("the refused upgrade changed the Deployment (generation %d -> %d)", generation, d.Generation)
	}
	got = framework.WaitSettled(t, key, 2*time.Minute)
	if now := framework.MemberPodsFingerprint(t, got); now != members {
		t.Errorf("member Pods changed across helm upgrades:\nbefore %s\nafter  %s", members, now)
	}
	framework.WriteAndReadThroughService(t, got)
	var leases coordinationv1.LeaseList
	if err := framework.K8s.List(ctx, &leases, client.InNamespace(ns)); err != nil || len(leases.Items) != 1 {
		t.Errorf("leader election Leases in %s: %d (%v), want 1", ns, len(leases.Items), err)
	}

	framework.MustHelm(t, "uninstall", "steward", "--namespace", ns, "--wait", "--timeout", "3m")
	framework.Poll(t, "the operator's Pods gone after helm uninstall", 2*time.Minute, func() error {
		var pods corev1.PodList
		if err := framework.K8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "steward"}); err != nil {
			return err
		}
		if len(pods.Items) != 0 {
			return fmt.Errorf("%d left", len(pods.Items))
		}
		return nil
	})
	if err := framework.K8s.Get(ctx, deployment, &d); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment after helm uninstall: %v", err)
	}
	crds := apiextensionsclient.NewForConfigOrDie(framework.Bed.RESTConfig).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Get(ctx, "etcdclusters.etcd.steward.dev", metav1.GetOptions{}); err != nil {
		t.Errorf("the EtcdCluster CRD after helm uninstall: %v", err)
	}
	var after etcdv1alpha1.EtcdCluster
	if err := framework.K8s.Get(ctx, key, &after); err != nil {
		t.Fatalf("the cluster after helm uninstall: %v", err)
	}
	if now := framework.MemberPodsFingerprint(t, &after); now != members {
		t.Errorf("member Pods changed by helm uninstall:\nbefore %s\nafter  %s", members, now)
	}
	framework.WriteAndReadThroughService(t, &after)
}
