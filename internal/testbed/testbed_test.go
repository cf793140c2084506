package testbed

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// TestClusterRunsEtcdPodWithDNSAndVolume is the test bed's acceptance test, on three nodes in three zones: a Pod
// from the locally built etcd image runs with an IP and a bound PVC on the node it asked for, its headless
// Service name resolves through cluster DNS, etcd answers, a Pod on another node reaches it by name, a node cut
// off the network goes NotReady and is reached again once reconnected, a stopped node loses its containers and
// gets them back with their data when started, a released volume is deleted, and Stop leaves no process behind.
func TestClusterRunsEtcdPodWithDNSAndVolume(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts the test bed")
	}
	if os.Geteuid() != 0 {
		t.Skip("integration test: the test bed needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Nodes: 3})
	if err != nil {
		t.Fatalf("start test bed: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop()
		}
	}()
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	nodes := c.Nodes()
	checkNodes(ctx, t, cs, nodes)
	// etcd-0 and its volume on the second node, a client Pod on the third.
	dataNode, clientNode := nodes[1], nodes[2]
	const ns = "testbed-check"
	mustCreate(t, func() error {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	labels := map[string]string{"app": "etcd-check"}
	mustCreate(t, func() error {
		_, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "etcd"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels, PublishNotReadyAddresses: true,
				Ports: []corev1.ServicePort{{Name: "client", Port: 2379}}},
		}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}},
		}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, etcdCheckPod(labels, dataNode.Name), metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, clientPod(clientNode.Name), metav1.CreateOptions{})
		return err
	})

	var pod *corev1.Pod
	poll(ctx, t, "pod etcd-0 Running with an IP", 3*time.Minute, func() error {
		pod, err = cs.CoreV1().Pods(ns).Get(ctx, "etcd-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
			return fmt.Errorf("phase %s, IP %q: %s", pod.Status.Phase, pod.Status.PodIP, podProblems(ctx, cs, ns, "app=etcd-check"))
		}
		return nil
	})
	if pod.Spec.NodeName != dataNode.Name || !strings.HasPrefix(pod.Status.PodIP, strings.TrimSuffix(dataNode.PodCIDR, "0/24")) {
		t.Fatalf("etcd-0 runs on node %s with IP %s, want node %s and an IP in %s", pod.Spec.NodeName, pod.Status.PodIP, dataNode.Name, dataNode.PodCIDR)
	}
	poll(ctx, t, "PVC data Bound", time.Minute, func() error {
		pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pvc.Status.Phase != corev1.ClaimBound || ptr.Deref(pvc.Spec.StorageClassName, "") != StorageClassName {
			return fmt.Errorf("phase %s, class %q", pvc.Status.Phase, ptr.Deref(pvc.Spec.StorageClassName, ""))
		}
		return nil
	})

	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, DNSServiceIP+":53")
	}}
	for _, host := range []string{"etcd." + ns + ".svc." + ClusterDomain, "etcd-0.etcd." + ns + ".svc." + ClusterDomain} {
		poll(ctx, t, "cluster DNS resolves "+host, time.Minute, func() error {
			addrs, err := resolver.LookupHost(ctx, host)
			if err != nil {
				return err
			}
			if len(addrs) != 1 || addrs[0] != pod.Status.PodIP {
				return fmt.Errorf("got %v, want [%s]", addrs, pod.Status.PodIP)
			}
			return nil
		})
	}

	// etcd answers on the pod IP and keeps its data on the PVC.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + pod.Status.PodIP + ":2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	poll(ctx, t, "etcd accepts a write", time.Minute, func() error {
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		defer wcancel()
		_, err := cli.Put(wctx, "testbed", "works")
		return err
	})
	resp, err := cli.Get(ctx, "testbed")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "works" {
		t.Fatalf("read back from etcd: %v %v", resp, err)
	}
	_ = cli.Close()

	// A Pod on another node reaches etcd-0 through cluster DNS and the pod network between the nodes.
	readFromClientPod := func() error {
		out, err := exec.CommandContext(ctx, c.KubectlPath(), "--kubeconfig", c.Kubeconfig, "-n", ns, "exec", "client", "--",
			"/usr/local/bin/etcdctl", "--endpoints=http://etcd-0.etcd."+ns+".svc."+ClusterDomain+":2379", "--dial-timeout=3s",
			"--command-timeout=5s", "get", "--print-value-only", "testbed").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "works" {
			return fmt.Errorf("etcdctl get in Pod client: %w: %s", err, out)
		}
		return nil
	}
	poll(ctx, t, "Pod client on node "+clientNode.Name+" reads from etcd-0 on node "+dataNode.Name, 2*time.Minute, readFromClientPod)

	// Cut off the network, the client's node goes NotReady and its Pod cannot be reached; reconnected, both
	// come back.
	client, err := cs.CoreV1().Pods(ns).Get(ctx, "client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.IsolateNode(clientNode.Name); err != nil {
		t.Fatal(err)
	}
	if err := dialOnce(client.Status.PodIP + ":2379"); err == nil {
		t.Errorf("the client Pod (%s) on isolated node %s is still reachable", client.Status.PodIP, clientNode.Name)
	}
	poll(ctx, t, "isolated node "+clientNode.Name+" NotReady", 3*time.Minute, func() error { return nodeReady(ctx, cs, clientNode.Name, false) })
	if err := c.ReconnectNode(clientNode.Name); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "reconnected node "+clientNode.Name+" Ready", 2*time.Minute, func() error { return nodeReady(ctx, cs, clientNode.Name, true) })
	poll(ctx, t, "the client Pod reachable again", time.Minute, func() error { return dialOnce(client.Status.PodIP + ":2379") })

	// A stopped node's containers are gone at once; started again, its Pods come back with their data.
	if err := c.StopNode(dataNode.Name); err != nil {
		t.Fatal(err)
	}
	if err := dialOnce(pod.Status.PodIP + ":2379"); err == nil {
		t.Errorf("etcd-0 (%s) still answers after its node %s stopped", pod.Status.PodIP, dataNode.Name)
	}
	if err := c.StartNode(ctx, dataNode.Name); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "etcd-0 serves its data again after its node's restart", 3*time.Minute, readFromClientPod)

	// Released volumes are deleted, with their directory.
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "etcd-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "released volume "+pvc.Spec.VolumeName+" deleted", 2*time.Minute, func() error {
		_, err := cs.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %w", err)
	})
	if _, err := os.Stat(filepath.Join(c.volumeDir(dataNode), pvc.Spec.VolumeName)); !os.IsNotExist(err) {
		t.Errorf("volume dir of %s still exists (%v)", pvc.Spec.VolumeName, err)
	}

	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if left := processesMatching([]string{c.opts.RunDir + "/", c.opts.StateDir + "/"}, []string{podCgroupNeedle, nodesCgroupNeedle}); len(left) > 0 {
		t.Fatalf("processes left after Stop: %v", left)
	}
	for _, r := range recordedProcesses(c.opts.StateDir) {
		if r.alive() {
			t.Errorf("%s (pid %d) still running after Stop", r.name, r.pid)
		}
	}
	if out, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(out), c.opts.StateDir+"/") {
		t.Errorf("mounts left under %s after Stop", c.opts.StateDir)
	}
	links, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, link := range links {
		if strings.HasPrefix(link.Name, "stw") {
			t.Errorf("link %s left after Stop", link.Name)
		}
	}
	for _, n := range nodes {
		if cgroups, _ := filepath.Glob("/sys/fs/cgroup/*" + n.cgroupRoot() + "/kubepods"); len(cgroups) > 0 {
			t.Errorf("pod cgroups of node %s left after Stop: %v", n.Name, cgroups)
		}
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(save).Output()
		if err != nil {
			t.Fatalf("%s: %v", save, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "KUBE-") || strings.Contains(line, "CNI-") || strings.Contains(line, "10.244.") || strings.Contains(line, iptablesComment) {
				t.Errorf("%s: rule left after Stop: %s", save, line)
			}
		}
	}
}

// checkNodes checks every node is Ready with its zone label, and that Options.Zones spread them as documented.
func checkNodes(ctx context.Context, t *testing.T, cs kubernetes.Interface, nodes []Node) {
	t.Helper()
	if len(nodes) != 3 {
		t.Fatalf("Nodes() = %d nodes, want 3", len(nodes))
	}
	for i, n := range nodes {
		if want := fmt.Sprintf("zone-%c", 'a'+i); n.Zone != want {
			t.Errorf("node %d (%s) is in zone %s, want %s", i, n.Name, n.Zone, want)
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Labels[ZoneLabel] != n.Zone {
			t.Errorf("node %s has zone label %q, want %q", n.Name, node.Labels[ZoneLabel], n.Zone)
		}
		if err := nodeReady(ctx, cs, n.Name, true); err != nil {
			t.Error(err)
		}
	}
}

// nodeReady returns nil when node name's Ready condition is want.
func nodeReady(ctx context.Context, cs kubernetes.Interface, name string, want bool) error {
	node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if (cond.Status == corev1.ConditionTrue) == want {
				return nil
			}
			return fmt.Errorf("node %s Ready=%s (%s: %s)", name, cond.Status, cond.Reason, cond.Message)
		}
	}
	return fmt.Errorf("node %s has no Ready condition", name)
}

// dialOnce opens and closes a TCP connection, with a short timeout.
func dialOnce(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

// clientPod runs etcd on node, only to have etcdctl in a Pod there.
func clientPod(node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			NodeSelector:    map[string]string{"kubernetes.io/hostname": node},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			Containers: []corev1.Container{{
				Name: "etcd", Image: EtcdImage(EtcdVersions[0]), ImagePullPolicy: corev1.PullNever,
				Command: []string{"/usr/local/bin/etcd", "--data-dir=/var/lib/etcd/data", "--listen-client-urls=http://0.0.0.0:2379",
					"--advertise-client-urls=http://127.0.0.1:2379"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

func etcdCheckPod(labels map[string]string, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-0", Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector:    map[string]string{"kubernetes.io/hostname": node},
			Hostname:        "etcd-0",
			Subdomain:       "etcd",
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), FSGroup: ptr.To[int64](65532)},
			Containers: []corev1.Container{{
				Name:            "etcd",
				Image:           EtcdImage(EtcdVersions[0]),
				ImagePullPolicy: corev1.PullNever,
				Command: []string{"/usr/local/bin/etcd", "--name=etcd-0", "--data-dir=/var/lib/etcd/data",
					"--listen-client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://etcd-0.etcd:2379"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	}
}

func mustCreate(t *testing.T, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatal(err)
	}
}

// poll retries check until it succeeds or the timeout passes; the failure names what was awaited.
func poll(ctx context.Context, t *testing.T, what string, timeout time.Duration, check func() error) {
	t.Helper()
	if err := Eventually(ctx, timeout, 500*time.Millisecond, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
