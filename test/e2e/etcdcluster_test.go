package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
)

func newCluster(ns, name string, replicas int32) *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: etcdv1alpha1.EtcdClusterSpec{Replicas: replicas, Version: testbed.EtcdVersions[0],
			Storage: etcdv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")}},
	}
}

// patchSpec changes a cluster's spec with a merge patch. An Update of the object just read would conflict
// whenever the operator writes status between the read and the write, which load on the node makes likely.
func patchSpec(t *testing.T, key client.ObjectKey, change func(*etcdv1alpha1.EtcdCluster)) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	if err := framework.K8s.Get(context.Background(), key, &c); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(c.DeepCopy())
	change(&c)
	if err := framework.K8s.Patch(context.Background(), &c, patch); err != nil {
		t.Fatalf("change the spec of %s: %v", key, err)
	}
	return &c
}

// waitAvailable waits for the Available condition at the current generation and returns the cluster.
func waitAvailable(t *testing.T, key client.ObjectKey, timeout time.Duration) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	framework.Poll(t, "EtcdCluster "+key.String()+" Available", timeout, func() error {
		if err := framework.K8s.Get(context.Background(), key, &c); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable)
		if cond == nil || cond.Status != metav1.ConditionTrue || c.Status.ObservedGeneration != c.Generation ||
			int(c.Status.ReadyReplicas) != int(c.Spec.Replicas) {
			return fmt.Errorf("status: %s", describe(&c))
		}
		return nil
	})
	return &c
}

func describe(c *etcdv1alpha1.EtcdCluster) string {
	var parts []string
	for _, cond := range c.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s(%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message))
	}
	return fmt.Sprintf("ready %d/%d, %s", c.Status.ReadyReplicas, c.Spec.Replicas, strings.Join(parts, "; "))
}

// podStates says where each member Pod of a cluster is (phase, scheduling, each container's state) and the
// last Events recorded for it: a failed wait on a status condition shows what the kubelet and scheduler did.
func podStates(c *etcdv1alpha1.EtcdCluster) string {
	ctx := context.Background()
	var pods corev1.PodList
	if err := framework.K8s.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
		return "pods: " + err.Error()
	}
	var events corev1.EventList
	if err := framework.K8s.List(ctx, &events, client.InNamespace(c.Namespace)); err != nil {
		return "events: " + err.Error()
	}
	sort.Slice(events.Items, func(i, j int) bool { return events.Items[i].LastTimestamp.Before(&events.Items[j].LastTimestamp) })
	var out []string
	for _, p := range pods.Items {
		state := []string{string(p.Status.Phase)}
		for _, cond := range p.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				state = append(state, fmt.Sprintf("%s=%s(%s)", cond.Type, cond.Status, cond.Reason))
			}
		}
		for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			switch {
			case cs.State.Waiting != nil:
				state = append(state, fmt.Sprintf("%s waiting %s", cs.Name, cs.State.Waiting.Reason))
			case cs.State.Terminated != nil:
				state = append(state, fmt.Sprintf("%s terminated %s", cs.Name, cs.State.Terminated.Reason))
			case cs.State.Running != nil:
				state = append(state, cs.Name+" running")
			}
		}
		var last []string
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == p.Name {
				last = append(last, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
			}
		}
		last = last[max(0, len(last)-4):]
		out = append(out, fmt.Sprintf("pod %s: %s; events: [%s]", p.Name, strings.Join(state, ", "), strings.Join(last, "; ")))
	}
	if len(out) == 0 {
		return "no member Pods"
	}
	return strings.Join(out, " | ")
}

// memberEndpoints are the client URLs of a cluster's member Pods, by pod IP (the host does not use cluster DNS).
func memberEndpoints(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	pods := memberPodsOf(t, c)
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = fmt.Sprintf("%s://%s:%d", resources.Scheme(c), p.Status.PodIP, resources.ClientPort)
	}
	return out
}

// checkDefaultPlacement checks that the member Pods of a cluster whose spec sets no placement and no resources
// carry Steward's defaults (spread across nodes and zones, requests: Burstable, not BestEffort), and that status
// names the node of each.
func checkDefaultPlacement(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	pods := memberPodsOf(t, c)
	nodeOf := map[string]string{}
	for _, m := range c.Status.Members {
		nodeOf[m.Name] = m.Node
	}
	for _, p := range pods.Items {
		if !reflect.DeepEqual(p.Spec.TopologySpreadConstraints, resources.MemberSpread(c)) {
			t.Errorf("Pod %s spread %+v, want the default %+v", p.Name, p.Spec.TopologySpreadConstraints, resources.MemberSpread(c))
		}
		if got := p.Spec.Containers[0].Resources.Requests; len(got) != len(resources.DefaultMemberRequests) ||
			got.Cpu().Cmp(*resources.DefaultMemberRequests.Cpu()) != 0 || got.Memory().Cmp(*resources.DefaultMemberRequests.Memory()) != 0 {
			t.Errorf("Pod %s requests %v, want the default %v", p.Name, got, resources.DefaultMemberRequests)
		}
		if p.Status.QOSClass != corev1.PodQOSBurstable {
			t.Errorf("Pod %s QoS class %s, want Burstable", p.Name, p.Status.QOSClass)
		}
		if p.Spec.NodeName == "" || nodeOf[p.Name] != p.Spec.NodeName {
			t.Errorf("status says member %s is on node %q, its Pod is on %q", p.Name, nodeOf[p.Name], p.Spec.NodeName)
		}
	}
	if len(pods.Items) != int(c.Spec.Replicas) {
		t.Errorf("%d member Pods, want %d", len(pods.Items), c.Spec.Replicas)
	}
}

// checkQuota checks that every member runs with the database quota want, as etcd reports it (3.6 and later), and
// that status says so.
func checkQuota(t *testing.T, c *etcdv1alpha1.EtcdCluster, want int64) {
	t.Helper()
	if c.Status.QuotaBackendBytes != want {
		t.Errorf("status.quotaBackendBytes %d, want %d", c.Status.QuotaBackendBytes, want)
	}
	cli, eps := memberClient(t, c)
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, ep := range eps {
		s, err := cli.Status(ctx, ep)
		if err != nil {
			t.Fatalf("status of %s: %v", name, err)
		}
		if s.DbSizeQuota != want {
			t.Errorf("member %s runs with a quota of %d bytes, want %d", name, s.DbSizeQuota, want)
		}
	}
}

// checkStatusMatchesEtcd compares status.members with etcd's own member list and each member's cluster ID.
func checkStatusMatchesEtcd(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	cli, eps := memberClient(t, c)
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, m := range resp.Members {
		want[m.Name] = etcd.FormatID(m.ID)
	}
	got := map[string]string{}
	for _, m := range c.Status.Members {
		got[m.Name] = m.ID
	}
	if fmt.Sprint(sorted(want)) != fmt.Sprint(sorted(got)) {
		t.Errorf("status members %v, etcd member list %v", got, want)
	}
	if c.Status.ClusterID != etcd.FormatID(resp.Header.ClusterId) {
		t.Errorf("status cluster ID %s, etcd says %s", c.Status.ClusterID, etcd.FormatID(resp.Header.ClusterId))
	}
	// One cluster identity: every member reports the same cluster ID.
	for name, ep := range eps {
		s, err := cli.Status(ctx, ep)
		if err != nil {
			t.Fatalf("status of %s: %v", name, err)
		}
		if s.Header.ClusterId != resp.Header.ClusterId {
			t.Errorf("member %s is in cluster %x, others in %x", name, s.Header.ClusterId, resp.Header.ClusterId)
		}
	}
	leaders := 0
	for _, m := range c.Status.Members {
		if m.Role == etcdv1alpha1.RoleLeader {
			leaders++
			if c.Status.Leader != m.Name {
				t.Errorf("status.leader %s but member %s has role Leader", c.Status.Leader, m.Name)
			}
		}
		if !m.Healthy || m.Version != c.Spec.Version || m.DBSizeBytes == 0 {
			t.Errorf("member status %+v", m)
		}
	}
	if leaders != 1 {
		t.Errorf("%d members with role Leader", leaders)
	}
}

func sorted(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// clientServiceURL is the client Service's address by ClusterIP (the test process does not use cluster DNS).
func clientServiceURL(t *testing.T, c *etcdv1alpha1.EtcdCluster) string {
	t.Helper()
	var svc corev1.Service
	if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: c.Namespace, Name: resources.ClientServiceName(c)}, &svc); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, resources.ClientPort)
	waitServiceRouted(t, c, addr)
	return fmt.Sprintf("%s://%s", resources.Scheme(c), addr)
}

// waitServiceRouted waits until a connection to addr, the client Service's ClusterIP and port, reaches etcd.
// kube-proxy programs a new Service on the node a moment after the API server has it, later on a loaded machine;
// until then a connection to the ClusterIP leaves by the default route, and on the machines the tests run on an
// egress proxy answers it: an HTTP/2 404, which a gRPC client reports as Unimplemented ("unexpected HTTP status
// code received from server: 404"). Steward cannot see kube-proxy's progress, so its status does not cover this.
func waitServiceRouted(t *testing.T, c *etcdv1alpha1.EtcdCluster, addr string) {
	t.Helper()
	if err := testbed.Eventually(context.Background(), 2*time.Minute, 500*time.Millisecond, func() error { return reachesEtcd(c, addr) }); err != nil {
		t.Fatalf("the client Service's ClusterIP %s routed to etcd: %v; %s", addr, err, serviceRouting(c, addr))
	}
}

// serviceRouting says what stands between addr and etcd, for a failure message: the client Service's ClusterIP
// now, its endpoints, and how many of this node's nat rules name addr's IP (none: kube-proxy has not programmed
// the Service, and a connection leaves by the default route).
func serviceRouting(c *etcdv1alpha1.EtcdCluster, addr string) string {
	ctx := context.Background()
	name := resources.ClientServiceName(c)
	var parts []string
	var svc corev1.Service
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, &svc); err != nil {
		parts = append(parts, "Service: "+err.Error())
	} else {
		parts = append(parts, "Service ClusterIP now "+svc.Spec.ClusterIP)
	}
	var eps discoveryv1.EndpointSliceList
	if err := framework.K8s.List(ctx, &eps, client.InNamespace(c.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		parts = append(parts, "EndpointSlices: "+err.Error())
	} else {
		var ready, notReady []string
		for _, s := range eps.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					ready = append(ready, e.Addresses...)
				} else {
					notReady = append(notReady, e.Addresses...)
				}
			}
		}
		parts = append(parts, fmt.Sprintf("endpoints ready %v, not ready %v", ready, notReady))
	}
	ip, _, _ := net.SplitHostPort(addr)
	if out, err := exec.Command("iptables-save", "-t", "nat").Output(); err != nil {
		parts = append(parts, "iptables-save: "+err.Error())
	} else {
		parts = append(parts, fmt.Sprintf("nat rules naming %s on this node: %d", ip, strings.Count(string(out), " "+ip+"/32 ")))
	}
	return strings.Join(parts, "; ")
}

// reachesEtcd checks that addr is served by etcd: in plaintext, etcd's /version answer; with TLS, a handshake in
// which the server proves a certificate of the cluster's CA.
func reachesEtcd(c *etcdv1alpha1.EtcdCluster, addr string) error {
	if !resources.TLSEnabled(c) {
		hc := &http.Client{Timeout: 3 * time.Second}
		resp, err := hc.Get("http://" + addr + "/version")
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"etcdserver"`)) {
			return fmt.Errorf("GET /version: %s, server %q, body %q: not etcd", resp.Status, resp.Header.Get("Server"), body)
		}
		return nil
	}
	cfg, err := clusterTLSConfig(c)
	if err != nil {
		return err
	}
	_, err = servedCertificate(cfg, addr)
	return err
}

// writeAndReadThroughService writes and reads keys through the client Service's ClusterIP.
func writeAndReadThroughService(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientServiceURL(t, c)}, DialTimeout: 5 * time.Second, TLS: clusterTLS(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	for i := 0; i < 20; i++ {
		key, val := fmt.Sprintf("e2e/%d", i), fmt.Sprintf("value-%d", i)
		framework.Poll(t, "write "+key+" through the client Service", 30*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := cli.Put(ctx, key, val)
			return err
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "e2e/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 20 {
		t.Fatalf("read back %d keys through the client Service, want 20", len(resp.Kvs))
	}
}

// deleteAndCheckNothingLeft deletes the cluster and waits until none of its objects (and no volume) remain.
func deleteAndCheckNothingLeft(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	ctx := context.Background()
	var pvcs corev1.PersistentVolumeClaimList
	if err := framework.K8s.List(ctx, &pvcs, client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
		t.Fatal(err)
	}
	var volumes []string
	for _, p := range pvcs.Items {
		volumes = append(volumes, p.Spec.VolumeName)
	}
	if err := framework.K8s.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	sel := []client.ListOption{client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelCluster: c.Name}}
	framework.Poll(t, "everything of "+c.Name+" deleted", 3*time.Minute, func() error {
		var pods corev1.PodList
		var pvcs corev1.PersistentVolumeClaimList
		var svcs corev1.ServiceList
		var pdbs policyv1.PodDisruptionBudgetList
		for _, l := range []client.ObjectList{&pods, &pvcs, &svcs, &pdbs} {
			if err := framework.K8s.List(ctx, l, sel...); err != nil {
				return err
			}
		}
		if n := len(pods.Items) + len(pvcs.Items) + len(svcs.Items) + len(pdbs.Items); n > 0 {
			return fmt.Errorf("%d pods, %d pvcs, %d services, %d budgets left", len(pods.Items), len(pvcs.Items), len(svcs.Items), len(pdbs.Items))
		}
		for _, v := range volumes {
			var pv corev1.PersistentVolume
			if err := framework.K8s.Get(ctx, client.ObjectKey{Name: v}, &pv); err == nil {
				return fmt.Errorf("volume %s left (%s)", v, pv.Status.Phase)
			}
		}
		return nil
	})
}

// readKeysFromMember reads the keys writeAndReadThroughService wrote from one member, serializably (its own
// data, not the leader's).
func readKeysFromMember(t *testing.T, c *etcdv1alpha1.EtcdCluster, member string) {
	t.Helper()
	ep := memberEndpoints(t, c)[member]
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, TLS: clusterTLS(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	framework.Poll(t, "member "+member+" serves the keys written before", time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, "e2e/", clientv3.WithPrefix(), clientv3.WithSerializable())
		if err != nil {
			return err
		}
		if len(resp.Kvs) != 20 {
			return fmt.Errorf("%d keys, want 20", len(resp.Kvs))
		}
		return nil
	})
}

func TestOneMemberCluster(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "one")
	framework.StartOperator(t, ns)
	c := newCluster(ns, "solo", 1)
	if err := framework.K8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	got := waitAvailable(t, client.ObjectKeyFromObject(c), 3*time.Minute)
	checkStatusMatchesEtcd(t, got)
	writeAndReadThroughService(t, got)
	deleteAndCheckNothingLeft(t, got)
}

func TestThreeMemberCluster(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "three")
	framework.StartOperator(t, ns)
	c := newCluster(ns, "trio", 3)
	if err := framework.K8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	got := waitAvailable(t, client.ObjectKeyFromObject(c), 4*time.Minute)
	checkStatusMatchesEtcd(t, got)
	writeAndReadThroughService(t, got)
	checkQuota(t, got, (1024-448)/2<<20) // derived from the 1Gi volume: room for the WAL and a second database
	var pdb policyv1.PodDisruptionBudget
	if err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "trio"}, &pdb); err != nil {
		t.Fatal(err)
	}
	if pdb.Spec.MinAvailable.IntValue() != 2 {
		t.Errorf("PodDisruptionBudget minAvailable %s, want 2 (quorum of 3)", pdb.Spec.MinAvailable.String())
	}
	// Available comes with quorum; Progressing and Degraded settle once every member's Pod is Ready too.
	framework.Poll(t, "Progressing and Degraded False", time.Minute, func() error {
		if err := framework.K8s.Get(context.Background(), client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		for _, cond := range []string{etcdv1alpha1.ConditionProgressing, etcdv1alpha1.ConditionDegraded} {
			if c := meta.FindStatusCondition(got.Status.Conditions, cond); c == nil || c.Status != metav1.ConditionFalse {
				return fmt.Errorf("%s = %+v, want False", cond, c)
			}
		}
		return nil
	})

	checkDefaultPlacement(t, got)

	// A member Pod deleted with its volume intact comes back under the same name, with its data, while clients
	// keep reading and writing through the client Service: no acknowledged write lost, history linearizable.
	victim := got.Status.Members[0]
	ctx := context.Background()
	load := startLoad(t, got)
	var pod corev1.Pod
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim.Name}, &pod); err != nil {
		t.Fatal(err)
	}
	if err := framework.K8s.Delete(ctx, &pod); err != nil {
		t.Fatal(err)
	}
	framework.Poll(t, "member "+victim.Name+" re-created", 2*time.Minute, func() error {
		var again corev1.Pod
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(&pod), &again); err != nil {
			return err
		}
		if again.UID == pod.UID {
			return fmt.Errorf("still the old Pod")
		}
		return nil
	})
	got = waitAvailable(t, client.ObjectKeyFromObject(c), 3*time.Minute)
	requireNoLostWrites(t, load, "member Pod re-creation")
	checkStatusMatchesEtcd(t, got)
	for _, m := range got.Status.Members {
		if m.Name == victim.Name && m.ID != victim.ID {
			t.Errorf("member %s came back with ID %s, was %s", m.Name, m.ID, victim.ID)
		}
	}
	readKeysFromMember(t, got, victim.Name)
	deleteAndCheckNothingLeft(t, got)
}

// TestBootstrapResumesAfterOperatorCrash recreates the states an operator leaves when it dies in the middle of a
// bootstrap — every PVC created and none, one or two of the Pods — and checks that the next operator finishes
// that bootstrap with the same members and one cluster identity. A last case stops the real operator as soon as
// the first member Pod exists and starts a new one.
func TestBootstrapResumesAfterOperatorCrash(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "crash")
	for podsBeforeCrash := 0; podsBeforeCrash <= 2; podsBeforeCrash++ {
		t.Run(fmt.Sprintf("crash after %d of 3 Pods", podsBeforeCrash), func(t *testing.T) {
			name := fmt.Sprintf("phoenix%d", podsBeforeCrash)
			c := newCluster(ns, name, 3)
			if err := framework.K8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			names := []string{name + "-bbbbb", name + "-ccccc", name + "-ddddd"}
			initial := map[string]string{}
			for _, n := range names {
				initial[n] = resources.PeerURL(c, n, framework.OperatorOptions)
			}
			for _, n := range names {
				m := resources.Member{Name: n, InitialCluster: initial, State: "new"}
				if err := framework.K8s.Create(ctx, resources.MemberPVC(c, m, framework.OperatorOptions)); err != nil {
					t.Fatal(err)
				}
			}
			// The Pods as Steward creates a new TLS cluster's (spec.tls.peerAuth MemberIdentity): checking the peer
			// identity from their first start. Pods without the check would be restarted into it once the cluster is
			// Available, racing the checks below.
			for _, n := range names[:podsBeforeCrash] {
				if err := framework.K8s.Create(ctx, resources.MemberPod(c, resources.Member{Name: n, InitialCluster: initial, State: "new", PeerCheck: true}, framework.OperatorOptions)); err != nil {
					t.Fatal(err)
				}
			}
			stop := framework.StartOperator(t, ns)
			got := waitAvailable(t, client.ObjectKeyFromObject(c), 4*time.Minute)
			stop()
			if members := memberNames(got); fmt.Sprint(members) != fmt.Sprint(names) {
				t.Fatalf("members after resumed bootstrap %v, want the interrupted bootstrap's %v", members, names)
			}
			checkStatusMatchesEtcd(t, got)
			deleteAndCheckNothingLeft(t, got)
		})
	}

	t.Run("operator stopped when the first Pod appears", func(t *testing.T) {
		c := newCluster(ns, "phoenix-real", 3)
		stop := framework.StartOperator(t, ns)
		if err := framework.K8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		framework.Poll(t, "first member Pod", time.Minute, func() error {
			var pods corev1.PodList
			if err := framework.K8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
				return err
			}
			if len(pods.Items) == 0 {
				return fmt.Errorf("no Pod yet")
			}
			return nil
		})
		stop()
		var pvcs corev1.PersistentVolumeClaimList
		if err := framework.K8s.List(ctx, &pvcs, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
			t.Fatal(err)
		}
		before := map[string]bool{}
		for _, p := range pvcs.Items {
			before[p.Labels[resources.LabelMember]] = true
		}
		framework.StartOperator(t, ns)
		got := waitAvailable(t, client.ObjectKeyFromObject(c), 4*time.Minute)
		for _, n := range memberNames(got) {
			if !before[n] {
				t.Errorf("member %s was not part of the bootstrap the first operator started (%v)", n, before)
			}
		}
		checkStatusMatchesEtcd(t, got)
		deleteAndCheckNothingLeft(t, got)
	})
}

func memberNames(c *etcdv1alpha1.EtcdCluster) []string {
	var names []string
	for _, m := range c.Status.Members {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return names
}

func TestBadSpecsAreRefusedAtAdmission(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "bad")
	tests := map[string]struct {
		mutate func(*etcdv1alpha1.EtcdCluster)
		want   string
	}{
		"even replicas":     {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 2 }, "replicas must be odd"},
		"negative replicas": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = -1 }, "should be greater than or equal to 1"},
		"too many replicas": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 11 }, "should be less than or equal to 9"},
		"unknown version":   {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.9.1" }, "version must be an etcd release Steward supports"},
		"old version":       {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.4.30" }, "version must be an etcd release Steward supports"},
		"not a version":     {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "latest" }, "version must be an etcd release Steward supports"},
		"pre-release":       {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.7.0-rc.0" }, "version must be an etcd release Steward supports"},
		"zero size":         {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("0") }, "size must be greater than zero"},
		"TLS Secrets without names": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Secrets"} },
			"tls.secrets (memberSecretName and clientSecretName) is required when tls.provider is Secrets"},
		"TLS CertManager without issuer": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "CertManager"} },
			"tls.certManager (issuerRef) is required when tls.provider is CertManager"},
		"TLS secrets with provider Steward": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Steward", Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "m", ClientSecretName: "c"}}
		}, "is required when tls.provider is Secrets, and refused with another TLS provider"},
		"TLS certManager with provider Secrets": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Secrets", Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "m", ClientSecretName: "c"},
				CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: "ca"}}}
		}, "is required when tls.provider is CertManager, and refused with another TLS provider"},
		"TLS member Secret not a name": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Secrets", Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "../Certs", ClientSecretName: "c"}}
		}, "memberSecretName"},
		"TLS issuer kind": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "CertManager", CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: "ca", Kind: "Vault"}}}
		}, "Unsupported value"},
		"certificate lifetime too short": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Steward", CertificateLifetime: &metav1.Duration{Duration: time.Minute}}
		}, "certificateLifetime must be between 1h and 87600h"},
		"quorum-loss recovery too eager": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.QuorumLossRecovery = &etcdv1alpha1.QuorumLossRecovery{Policy: etcdv1alpha1.QuorumLossRestoreLatestBackup, After: &metav1.Duration{Duration: 10 * time.Second}}
		}, "after must be at least 30s"},
		"unknown quorum-loss policy": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.QuorumLossRecovery = &etcdv1alpha1.QuorumLossRecovery{Policy: "Always"}
		}, "Unsupported value"},
		"election too short": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Etcd.HeartbeatIntervalMillis, c.Spec.Etcd.ElectionTimeoutMillis = ptr.To[int32](100), ptr.To[int32](200)
		}, "at least 5 times"},
		"bad compaction mode": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.AutoCompactionMode = "sometimes" }, "Unsupported value"},
		"a maximum quota the volume cannot hold": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Maintenance = &etcdv1alpha1.Maintenance{RecoverFromNoSpace: &etcdv1alpha1.NoSpaceRecovery{MaxQuotaBackendBytes: ptr.To(resource.MustParse("512Mi"))}}
		}, "maxQuotaBackendBytes does not fit storage.size"},
		"a maximum quota below the quota": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Etcd.QuotaBackendBytes = ptr.To(resource.MustParse("200Mi"))
			c.Spec.Maintenance = &etcdv1alpha1.Maintenance{RecoverFromNoSpace: &etcdv1alpha1.NoSpaceRecovery{MaxQuotaBackendBytes: ptr.To(resource.MustParse("100Mi"))}}
		}, "maxQuotaBackendBytes is below etcd.quotaBackendBytes"},
		"a hash check too often": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Maintenance = &etcdv1alpha1.Maintenance{CorruptionCheck: &etcdv1alpha1.CorruptionCheck{Interval: &metav1.Duration{Duration: 5 * time.Second}}}
		}, "interval must be 0s (off) or at least 10s"},
		"a defragmentation threshold out of range": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Maintenance = &etcdv1alpha1.Maintenance{Defragmentation: &etcdv1alpha1.Defragmentation{MinFreePercent: ptr.To[int32](100)}}
		}, "should be less than or equal to 99"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(ns, "refused", 3)
			tt.mutate(c)
			err := framework.K8s.Create(ctx, c)
			if err == nil {
				_ = framework.K8s.Delete(ctx, c)
				t.Fatalf("accepted")
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q, want Invalid containing %q", err, tt.want)
			}
		})
	}

	t.Run("zero replicas", func(t *testing.T) {
		// The typed client drops a zero (omitempty); kubectl and YAML send it.
		err := createUnstructured(ctx, map[string]any{
			"apiVersion": "etcd.steward.dev/v1alpha1", "kind": "EtcdCluster",
			"metadata": map[string]any{"name": "zero", "namespace": ns},
			"spec":     map[string]any{"replicas": 0, "version": "3.6.16"},
		})
		if err == nil || !strings.Contains(err.Error(), "should be greater than or equal to 1") {
			t.Fatalf("error %v, want a refusal of replicas 0", err)
		}
	})

	t.Run("malformed quantity", func(t *testing.T) {
		u := map[string]any{
			"apiVersion": "etcd.steward.dev/v1alpha1", "kind": "EtcdCluster",
			"metadata": map[string]any{"name": "badsize", "namespace": ns},
			"spec":     map[string]any{"replicas": 1, "version": "3.6.16", "storage": map[string]any{"size": "12XB"}},
		}
		err := createUnstructured(ctx, u)
		if err == nil || !strings.Contains(err.Error(), "size") {
			t.Fatalf("error %v, want a refusal naming size", err)
		}
	})

	// Immutable fields: accepted at creation, refused on change. No operator runs, so nothing else changes.
	c := newCluster(ns, "fixed", 1)
	c.Spec.Storage.StorageClassName = ptr.To(testbed.StorageClassName)
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = framework.K8s.Delete(ctx, c) }()
	for name, tt := range map[string]struct {
		mutate func(*etcdv1alpha1.EtcdCluster)
		want   string
	}{
		"ephemeral": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Ephemeral = true }, "ephemeral is immutable"},
		"TLS provider to another TLS provider": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Secrets", Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "m", ClientSecretName: "c"}}
		}, "not from one TLS provider to another"},
	} {
		t.Run("change "+name, func(t *testing.T) {
			var cur etcdv1alpha1.EtcdCluster
			if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(c), &cur); err != nil {
				t.Fatal(err)
			}
			tt.mutate(&cur)
			err := framework.K8s.Update(ctx, &cur)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestTLSProviderFieldsAreImmutable: the member Secret of provider Secrets and the issuer of provider CertManager
// cannot change (running members mount the one and trust the other's CA); the client Secret can. No operator
// runs, so nothing else changes.
func TestTLSProviderFieldsAreImmutable(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "bad")
	byo := newCluster(ns, "byo", 1)
	byo.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Secrets", Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "m", ClientSecretName: "c"}}
	cm := newCluster(ns, "cm", 1)
	cm.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "CertManager", CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: "ca"}}}
	for _, c := range []*etcdv1alpha1.EtcdCluster{byo, cm} {
		if err := framework.K8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = framework.K8s.Delete(ctx, c) })
	}
	if cm.Spec.TLS.CertManager.IssuerRef.Kind != "Issuer" || cm.Spec.TLS.CertManager.IssuerRef.Group != "cert-manager.io" {
		t.Errorf("issuerRef defaulted to %+v", cm.Spec.TLS.CertManager.IssuerRef)
	}
	for name, tt := range map[string]struct {
		c      *etcdv1alpha1.EtcdCluster
		mutate func(*etcdv1alpha1.EtcdCluster)
		want   string // "": accepted
	}{
		"member Secret": {byo, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.Secrets.MemberSecretName = "m2" }, "tls.secrets.memberSecretName cannot change"},
		"client Secret": {byo, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.Secrets.ClientSecretName = "c2" }, ""},
		"issuer":        {cm, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.CertManager.IssuerRef.Name = "other" }, "tls.certManager.issuerRef cannot change"},
		"issuer kind":   {cm, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.CertManager.IssuerRef.Kind = "ClusterIssuer" }, "tls.certManager.issuerRef cannot change"},
		"lifetime": {cm, func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS.CertificateLifetime = &metav1.Duration{Duration: 24 * time.Hour}
		}, ""},
		"drop the issuer": {cm, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.CertManager = nil }, "tls.certManager (issuerRef) is required"},
	} {
		t.Run(name, func(t *testing.T) {
			var cur etcdv1alpha1.EtcdCluster
			if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(tt.c), &cur); err != nil {
				t.Fatal(err)
			}
			tt.mutate(&cur)
			err := framework.K8s.Update(ctx, &cur)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// TestVersionJumpsRefusedAtAdmission: the version changes etcd cannot make in one go are refused at admission
// with a message saying why, and the spec keeps its version: down two minors (etcd's downgrade API moves one),
// and up two minors with a pinned image (Steward would not know the image of the release in between; without
// one, TestMultiMinorUpgradeUnderLoad passes through it).
func TestVersionJumpsRefusedAtAdmission(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "bad")
	tests := map[string]struct {
		from, to, image string
		want            string
	}{
		"down two minors":               {from: "3.7.3", to: "3.5.35", want: "version may go down by at most one minor version at a time"},
		"down two minors, to a .0":      {from: "3.7.3", to: "3.5.0", want: "version may go down by at most one minor version at a time"},
		"up two minors, pinned image":   {from: "3.5.35", to: "3.7.3", image: testbed.EtcdRepository + ":v3.5.35", want: "with spec.image set, version may go up by at most one minor"},
		"up two minors to a .0, pinned": {from: "3.5.35", to: "3.7.0", image: testbed.EtcdRepository + ":v3.5.35", want: "with spec.image set"},
	}
	i := 0
	for name, tt := range tests {
		i++
		c := newCluster(ns, fmt.Sprintf("jumpy-%d", i), 1)
		c.Spec.Version, c.Spec.Image = tt.from, tt.image
		if err := framework.K8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			var cur etcdv1alpha1.EtcdCluster
			if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(c), &cur); err != nil {
				t.Fatal(err)
			}
			cur.Spec.Version = tt.to
			err := framework.K8s.Update(ctx, &cur)
			if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%s -> %s: error %v, want a refusal saying %q", tt.from, tt.to, err, tt.want)
			}
			var after etcdv1alpha1.EtcdCluster
			if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(c), &after); err != nil {
				t.Fatal(err)
			}
			if after.Spec.Version != tt.from {
				t.Fatalf("version after a refused change: %s, want %s", after.Spec.Version, tt.from)
			}
		})
		_ = framework.K8s.Delete(ctx, c)
	}
}

func createUnstructured(ctx context.Context, obj map[string]any) error {
	u := &unstructured.Unstructured{Object: obj}
	return framework.K8s.Create(ctx, u)
}
