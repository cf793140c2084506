package e2e

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
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/internal/version"
	"steward.dev/steward/test/chaos"
	"steward.dev/steward/test/e2e/framework"
)

// What config/default installs, as the tests below address it.
const (
	installNamespace = "steward-system"
	installName      = "steward"
	// leaseName is the operator's leader election Lease (--leader-elect; cmd/steward).
	leaseName = "steward.etcd.steward.dev"
	// managerContainer is the operator's container in the Deployment.
	managerContainer = "manager"
)

// kubectl runs the test bed's kubectl as its administrator, from the repository root (so -k config/... works),
// and returns its output.
func kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(framework.Bed.KubectlPath(), args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+framework.Bed.Kubeconfig)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// installDefault installs Steward the way docs/operations/install.md tells users to, `kubectl apply --server-side -k
// config/default`, with nothing changed: the test bed holds the release's image (and etcd's under the
// operator's default repository). It waits until both replicas are ready and one leads, and uninstalls when the
// test ends: everything but the CRDs, which every other test needs (and whose deletion would delete every
// EtcdCluster with its volumes, docs/operations/install.md#uninstalling).
func installDefault(t *testing.T) {
	t.Helper()
	kubectl(t, "", "apply", "--server-side", "--force-conflicts", "-k", "config/default")
	t.Cleanup(func() { uninstallOperator(t) })
	leader := waitOperatorRolledOut(t, version.Image, 3*time.Minute)
	t.Logf("Steward %s installed from config/default; %s leads", version.Image, leader)
}

// uninstallOperator deletes what config/default installed except the CRDs, as docs/operations/install.md says, and waits
// until the operator's Pods are gone, so no test after this one meets them.
func uninstallOperator(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "steward-manager"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "steward-manager"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "steward-metrics-auth"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "steward-metrics-auth"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "steward-metrics-reader"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: installNamespace}},
	} {
		if err := framework.K8s.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("uninstall: delete %T %s: %v", obj, obj.GetName(), err)
		}
	}
	framework.Poll(t, "namespace "+installNamespace+" gone", 3*time.Minute, func() error {
		var n corev1.Namespace
		if err := framework.K8s.Get(ctx, client.ObjectKey{Name: installNamespace}, &n); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w); Pods: %s", err, operatorPodsState(t))
		}
		return nil
	})
}

func operatorPods(t *testing.T) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := framework.K8s.List(context.Background(), &pods, client.InNamespace(installNamespace),
		client.MatchingLabels{"app.kubernetes.io/name": installName}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func operatorPodsState(t *testing.T) string {
	var out []string
	for _, p := range operatorPods(t) {
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

// operatorLeader waits until the operator's Lease has a holder other than not ("<pod>_<uuid>": a container the
// kubelet restarted in the same Pod is a new holder) and returns the holder, its Pod, and when the test saw it.
func operatorLeader(t *testing.T, not string, timeout time.Duration) (holder, pod string, seen time.Time) {
	t.Helper()
	framework.Poll(t, "a leader other than "+not, timeout, func() error {
		var l coordinationv1.Lease
		if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: installNamespace, Name: leaseName}, &l); err != nil {
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

func operatorPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: installNamespace, Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// scrapeMetrics reads an operator Pod's Prometheus endpoint as the metrics Service's scraper would: over HTTPS,
// with the token of the test bed Prometheus's ServiceAccount (allowed to get /metrics).
func scrapeMetrics(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	code, body, err := getMetrics(pod, serviceAccountToken(t, "kube-system", testbed.PrometheusServiceAccount))
	if err != nil || code != http.StatusOK {
		t.Fatalf("scrape %s: %d, %v\n%s", pod.Name, code, err, body)
	}
	return body
}

// getMetrics asks an operator Pod for its metrics over HTTPS (its certificate is self-signed) with token as the
// bearer token ("" for none): the status code and the body.
func getMetrics(pod *corev1.Pod, token string) (int, string, error) {
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

// serviceAccountToken is a token of the ServiceAccount namespace/name, for ten minutes.
func serviceAccountToken(t *testing.T, namespace, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	if err := framework.K8s.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatalf("token of %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

// takeover is one leader change the test caused, and how long it took: until a standby held the Lease, and until
// the cluster's state moved on under the new leader.
type takeover struct {
	how              string
	old, new         string
	toLease, toStep  time.Duration
	before, nextStep string
}

func (k takeover) String() string {
	return fmt.Sprintf("%s %s: %s took the Lease after %s, next step after %s (%q -> %q)", k.how, k.old, k.new,
		k.toLease.Round(100*time.Millisecond), k.toStep.Round(100*time.Millisecond), k.before, k.nextStep)
}

// killLeader stops the leading operator (crash: its process killed, the container restarts; or its Pod deleted
// at once) and waits until a standby leads and then until state() changes, i.e. the new leader took a step.
func killLeader(t *testing.T, crash bool, state func() string) takeover {
	t.Helper()
	holder, leader, _ := operatorLeader(t, "", time.Minute)
	k := takeover{old: leader}
	pod := operatorPod(t, leader)
	killed := time.Now()
	if crash {
		k.how = "crashed"
		if err := chaos.KillContainer(pod, managerContainer); err != nil {
			t.Fatal(err)
		}
	} else {
		k.how = "deleted the Pod of"
		if err := framework.K8s.Delete(context.Background(), pod, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	// After a crash, the standby or the restarted container, whichever gets the Lease first.
	_, newLeader, took := operatorLeader(t, holder, time.Minute)
	k.new = newLeader
	k.toLease = took.Sub(killed)
	k.before = state()
	framework.Poll(t, "a step after the takeover", 3*time.Minute, func() error {
		if now := state(); now != k.before {
			k.nextStep = now
			return nil
		}
		return fmt.Errorf("still %s", k.before)
	})
	k.toStep = time.Since(killed)
	t.Log(k)
	return k
}

// TestInClusterOperatorHA installs Steward from config/default (two replicas, leader election) and runs a
// cluster through a scale-up, a rolling upgrade and a backup with the in-cluster operator, killing its leader in
// the middle of the first two: by a crash during 3 -> 5 and by deleting its Pod during 3.6.15 -> 3.6.16. The
// standby takes over and finishes each step, nothing is done twice (exactly 5 voters, members keep their IDs
// through the upgrade), and clients lose no acknowledged write.
func TestInClusterOperatorHA(t *testing.T) {
	serial(t, "installs a cluster-wide operator, which would manage every other test's clusters too")
	ctx := context.Background()
	installDefault(t)
	// Every replica serves metrics; only the leader runs controllers, so only it has reconcile counts.
	_, leader, _ := operatorLeader(t, "", time.Minute)
	for _, p := range operatorPods(t) {
		want := "go_goroutines"
		if p.Name == leader {
			// The leader starts its controllers just after it takes the Lease.
			want = `controller_runtime_reconcile_total{controller="etcdcluster"`
		}
		framework.Poll(t, "metrics of "+p.Name+" with "+want, 30*time.Second, func() error {
			if !strings.Contains(scrapeMetrics(t, &p), want) {
				return fmt.Errorf("not there (leader %s)", leader)
			}
			return nil
		})
	}
	ns := framework.NewNamespace(t, "incluster")
	framework.CreateS3Secret(t, ns)
	c := framework.NewClusterAt(ns, "tenant", "3.6.15")
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	got := framework.WaitSettled(t, key, 4*time.Minute)
	load := framework.StartLoad(t, got)

	// 3 -> 5: the leader crashes once the first step (a learner added) is taken.
	first := framework.MembershipState(t, got)
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 5 })
	framework.Poll(t, "the scale-up's first step", 2*time.Minute, func() error {
		if now := framework.MembershipState(t, got); now == first {
			return fmt.Errorf("still %s", now)
		}
		return nil
	})
	scale := killLeader(t, true, func() string { return framework.MembershipState(t, got) })
	got = framework.WaitSettled(t, key, 5*time.Minute)
	framework.CheckStatusMatchesEtcd(t, got)
	if s := framework.MembershipState(t, got); s != "voters=5 learners=0 started=5 pods=5" {
		t.Errorf("after 3 -> 5 with the leader crashed: %s", s)
	}

	// 3.6.15 -> 3.6.16: the leader's Pod is deleted once the first member runs the new release.
	before := framework.MemberIDs(got)
	framework.SetVersion(t, key, "3.6.16")
	framework.Poll(t, "the upgrade's first member switched", 3*time.Minute, func() error {
		if s := framework.RollState(t, got); !strings.HasPrefix(s, "1/") {
			return fmt.Errorf("%s", s)
		}
		return nil
	})
	upgrade := killLeader(t, false, func() string { s, _, _ := strings.Cut(framework.RollState(t, got), ","); return s })
	got = framework.WaitAtVersion(t, key, "3.6.16", before, 6*time.Minute)

	// A backup Job runs the release's own image (steward-agent beside the operator).
	b := framework.NewBackup(ns, "in-cluster", key.Name, framework.S3Destination(ns+"/in-cluster.db"))
	if err := framework.K8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	framework.RequireComplete(t, framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 3*time.Minute), got)

	framework.RequireNoLostWrites(t, load, "3 -> 5 and 3.6.15 -> 3.6.16, the leading operator killed in each")
	t.Logf("takeovers: %s; %s", scale, upgrade)
	for _, p := range operatorPods(t) {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Image != version.Image {
				t.Errorf("operator Pod %s runs %s, want %s", p.Name, cs.Image, version.Image)
			}
		}
	}
	framework.DeleteAndCheckNothingLeft(t, got)
}
