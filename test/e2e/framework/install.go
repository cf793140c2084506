package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/ociimage"
	"steward.dev/steward/internal/resources"
)

// Kubectl runs the test bed's kubectl as its administrator, from the repository root (so -k config/... works),
// and returns its output.
func Kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(Bed.KubectlPath(), args...)
	cmd.Dir = RepoRoot(t)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+Bed.Kubeconfig)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// RepoRoot is the absolute path of the repository, two directories above the tests' working directory.
func RepoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// GetMetrics asks an operator Pod for its metrics over HTTPS (its certificate is self-signed) with token as the
// bearer token ("" for none): the status code and the body.
func GetMetrics(pod *corev1.Pod, token string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(pod.Status.PodIP, "8443")+"/metrics", nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the operator's self-signed serving certificate
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// ServiceAccountToken is a token of the ServiceAccount namespace/name, for ten minutes.
func ServiceAccountToken(t *testing.T, namespace, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if err := K8s.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatalf("token of %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// The release and namespace of Steward installed in the cluster from config/default (or the chart), as a user
// installs it.
const (
	// InstallName is the name of the release, its Deployment and its Pods' app.kubernetes.io/name.
	InstallName = "steward"
	// InstallNamespace is the namespace it is installed in.
	InstallNamespace = "steward-system"
)

// OperatorLeader waits until the operator's Lease has a holder other than not ("<pod>_<uuid>": a container the
// kubelet restarted in the same Pod is a new holder) and returns the holder, its Pod, and when the test saw it.
func OperatorLeader(t *testing.T, not string, timeout time.Duration) (holder, pod string, seen time.Time) {
	t.Helper()
	Poll(t, "a leader other than "+not, timeout, func() error {
		var l coordinationv1.Lease
		if err := K8s.Get(context.Background(), client.ObjectKey{Namespace: InstallNamespace, Name: LeaseName}, &l); err != nil {
			return err
		}
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
		if holder == "" || holder == not {
			return fmt.Errorf("Lease held by %q", holder)
		}
		return nil
	})
	pod, _, _ = strings.Cut(holder, "_")
	return holder, pod, time.Now()
}

// OperatorPods lists the Pods of the installed operator.
func OperatorPods(t *testing.T) []corev1.Pod {
	t.Helper()
	return OperatorPodsIn(t, InstallNamespace)
}

// OperatorPodsIn lists the Pods of a Steward installed in namespace ns (by kustomize or by Helm as release
// InstallName).
func OperatorPodsIn(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := K8s.List(context.Background(), &pods, client.InNamespace(ns),
		client.MatchingLabels{"app.kubernetes.io/name": InstallName}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// OperatorPodsState describes the installed operator's Pods (phase, readiness, restarts, why a container waits),
// for failure messages.
func OperatorPodsState(t *testing.T) string {
	var out []string
	for _, p := range OperatorPods(t) {
		s := p.Name + " " + string(p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			s += fmt.Sprintf(" ready=%t restarts=%d", cs.Ready, cs.RestartCount)
			if w := cs.State.Waiting; w != nil {
				s += " waiting: " + w.Reason + " " + w.Message
			}
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// UninstallOperator deletes what config/default installed except the CRDs, as docs/operations/install.md says, and waits
// until the operator's Pods are gone, so no test after this one meets them.
func UninstallOperator(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "steward-manager"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "steward-manager"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "steward-metrics-auth"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "steward-metrics-auth"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "steward-metrics-reader"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: InstallNamespace}},
	} {
		if err := K8s.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("uninstall: delete %T %s: %v", obj, obj.GetName(), err)
		}
	}
	Poll(t, "namespace "+InstallNamespace+" gone", 3*time.Minute, func() error {
		var n corev1.Namespace
		if err := K8s.Get(ctx, client.ObjectKey{Name: InstallNamespace}, &n); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w); Pods: %s", err, OperatorPodsState(t))
		}
		return nil
	})
}

// WaitOperatorRolledOut waits until the Deployment's 2 replicas run image and are ready, and returns the Pod
// that leads.
func WaitOperatorRolledOut(t *testing.T, image string, timeout time.Duration) (leader string) {
	t.Helper()
	Poll(t, "the operator's 2 replicas ready on "+image, timeout, func() error {
		var d appsv1.Deployment
		if err := K8s.Get(context.Background(), client.ObjectKey{Namespace: InstallNamespace, Name: InstallName}, &d); err != nil {
			return err
		}
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != 2 || d.Status.ReadyReplicas != 2 || d.Status.Replicas != 2 {
			return fmt.Errorf("replicas %d, updated %d, ready %d; Pods: %s", d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, OperatorPodsState(t))
		}
		for _, p := range OperatorPods(t) {
			if p.DeletionTimestamp == nil && p.Spec.Containers[0].Image != image {
				return fmt.Errorf("Pod %s runs %s", p.Name, p.Spec.Containers[0].Image)
			}
		}
		return nil
	})
	_, leader, _ = OperatorLeader(t, "", time.Minute)
	return leader
}

// BuildPreviousSteward builds the operator and steward-agent of commit into one image (as the release image is
// built) tagged steward.local/steward:<commit>, imports it into the node, and returns its reference and the
// commit's source tree (for its CRDs and manifests).
func BuildPreviousSteward(t *testing.T, commit string) (image, tree string) {
	t.Helper()
	previousMu.Lock()
	defer previousMu.Unlock()
	if p, ok := previousBuilds[commit]; ok {
		return p.image, p.tree
	}
	ctx := context.Background()
	// Kept for the whole run (other tests install the same previous release), removed by the OS's tmp cleanup.
	tree, err := os.MkdirTemp("", "steward-"+commit+"-")
	if err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive --format=tar %s | tar -x -C %q", RepoRoot(t), commit, tree))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("check out Steward %s (a clone with history is needed): %v\n%s", commit, err, out)
	}
	bins := t.TempDir()
	for _, cmd := range []string{"steward", "steward-agent"} {
		build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(bins, cmd), "./cmd/"+cmd)
		build.Dir = tree
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build %s of Steward %s: %v\n%s", cmd, commit, err, out)
		}
	}
	image = "steward.local/steward:" + commit
	tarball := filepath.Join(t.TempDir(), "previous.tar")
	if err := ociimage.Steward(tarball, filepath.Join(bins, "steward"), filepath.Join(bins, "steward-agent"), image); err != nil {
		t.Fatal(err)
	}
	if err := Bed.ImportImage(ctx, tarball); err != nil {
		t.Fatal(err)
	}
	previousBuilds[commit] = previousBuild{image: image, tree: tree}
	return image, tree
}

// PreviousSteward is the Steward users ran before this tree's release: the last one that landed (stop 53,
// 2026-11-29). Its image is built from that commit of this repository (git history is part of a clone). Move it
// to the newest landed commit when a release changes what an upgrade from it must do.
const PreviousSteward = "66f4dbe"

// MemberPodsFingerprint is what an operator upgrade must not change: each member Pod's UID and its etcd
// container's restart count.
func MemberPodsFingerprint(t *testing.T, c *etcdv1alpha1.EtcdCluster) string {
	t.Helper()
	pods := MemberPodsOf(t, c)
	var out []string
	for _, p := range pods.Items {
		restarts := int32(-1)
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == resources.EtcdContainer {
				restarts = cs.RestartCount
			}
		}
		out = append(out, fmt.Sprintf("%s uid=%s restarts=%d", p.Name, p.UID, restarts))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// LeaseName is the operator's leader election Lease (--leader-elect; cmd/steward).
const LeaseName = "steward.etcd.steward.dev"

var (
	previousMu     sync.Mutex
	previousBuilds = map[string]previousBuild{}
)

type previousBuild struct{ image, tree string }
