package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/internal/version"
	"steward.dev/steward/test/chaos"
	"steward.dev/steward/test/e2e/framework"
)

// What config/default installs, as the tests below address it.
const (
	// managerContainer is the operator's container in the Deployment.
	managerContainer = "manager"
)

// installDefault installs Steward the way docs/operations/install.md tells users to, `kubectl apply --server-side -k
// config/default`, with nothing changed: the test bed holds the release's image (and etcd's under the
// operator's default repository). It waits until both replicas are ready and one leads, and uninstalls when the
// test ends: everything but the CRDs, which every other test needs (and whose deletion would delete every
// EtcdCluster with its volumes, docs/operations/install.md#uninstalling).
func installDefault(t *testing.T) {
	t.Helper()
	framework.Kubectl(t, "", "apply", "--server-side", "--force-conflicts", "-k", "config/default")
	t.Cleanup(func() { framework.UninstallOperator(t) })
	leader := framework.WaitOperatorRolledOut(t, version.Image, 3*time.Minute)
	t.Logf("Steward %s installed from config/default; %s leads", version.Image, leader)
}

func operatorPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: framework.InstallNamespace, Name: name}, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

// scrapeMetrics reads an operator Pod's Prometheus endpoint as the metrics Service's scraper would: over HTTPS,
// with the token of the test bed Prometheus's ServiceAccount (allowed to get /metrics).
func scrapeMetrics(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	code, body, err := framework.GetMetrics(pod, framework.ServiceAccountToken(t, "kube-system", testbed.PrometheusServiceAccount))
	if err != nil || code != http.StatusOK {
		t.Fatalf("scrape %s: %d, %v\n%s", pod.Name, code, err, body)
	}
	return body
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
	holder, leader, _ := framework.OperatorLeader(t, "", time.Minute)
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
	_, newLeader, took := framework.OperatorLeader(t, holder, time.Minute)
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
	_, leader, _ := framework.OperatorLeader(t, "", time.Minute)
	for _, p := range framework.OperatorPods(t) {
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
	requireAutoAgentDelivery(t, got)
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
	for _, p := range framework.OperatorPods(t) {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Image != version.Image {
				t.Errorf("operator Pod %s runs %s, want %s", p.Name, cs.Image, version.Image)
			}
		}
	}
	framework.DeleteAndCheckNothingLeft(t, got)
}

// requireAutoAgentDelivery: an operator installed with the default --agent-delivery (auto) and the right to read
// Nodes mounts the agent image into member Pods where every node's runtime can (containerd 2 on the test bed),
// and copies it in with an init container where one cannot (the machine's containerd 1.6).
func requireAutoAgentDelivery(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	want := resources.AgentDeliveryInitContainer
	if framework.Bed.Containerd() != testbed.SystemContainerd {
		want = resources.AgentDeliveryImageVolume
	}
	pods := framework.MemberPodsOf(t, c)
	for _, p := range pods.Items {
		if got := agentDeliveryOf(&p); got != want {
			t.Errorf("member Pod %s gets the agent by %s on containerd %s, want %s", p.Name, got, framework.Bed.Containerd(), want)
		}
	}
}

// agentDeliveryOf says how a member Pod gets steward-agent: by an image volume, by an init container copying it
// (install-agent, or in a bootstrap member's Pod await-dns with --install-to), both (a restored member's Pod), or
// neither.
func agentDeliveryOf(p *corev1.Pod) string {
	image, initContainer := false, false
	for _, v := range p.Spec.Volumes {
		image = image || v.Image != nil
	}
	for _, c := range p.Spec.InitContainers {
		initContainer = initContainer || c.Name == resources.InstallContainer ||
			slices.ContainsFunc(c.Command, func(arg string) bool { return strings.HasPrefix(arg, "--install-to=") })
	}
	switch {
	case image && initContainer:
		return "both"
	case image:
		return resources.AgentDeliveryImageVolume
	case initContainer:
		return resources.AgentDeliveryInitContainer
	}
	return "neither"
}
