package testbed

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
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

// TestClusterRunsEtcdPodWithDNSAndVolume is the test bed's acceptance test: a Pod from the locally built etcd
// image runs with an IP and a bound PVC, its headless Service name resolves through cluster DNS, etcd answers,
// a released volume is deleted, and Stop leaves no process behind.
func TestClusterRunsEtcdPodWithDNSAndVolume(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts the test bed")
	}
	if os.Geteuid() != 0 {
		t.Skip("integration test: the test bed needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{})
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
		_, err := cs.CoreV1().Pods(ns).Create(ctx, etcdCheckPod(labels), metav1.CreateOptions{})
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
	if _, err := os.Stat(c.state("volumes", pvc.Spec.VolumeName)); !os.IsNotExist(err) {
		t.Errorf("volume dir of %s still exists (%v)", pvc.Spec.VolumeName, err)
	}

	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if left := processesMatching([]string{c.opts.RunDir + "/", c.opts.StateDir + "/"}, []string{podCgroupNeedle}); len(left) > 0 {
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
	for _, link := range []string{hostBridge, podBridge} {
		if _, err := net.InterfaceByName(link); err == nil {
			t.Errorf("link %s left after Stop", link)
		}
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(save).Output()
		if err != nil {
			t.Fatalf("%s: %v", save, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "KUBE-") || strings.Contains(line, "CNI-") || strings.Contains(line, "10.244.0.") {
				t.Errorf("%s: rule left after Stop: %s", save, line)
			}
		}
	}
}

func etcdCheckPod(labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-0", Labels: labels},
		Spec: corev1.PodSpec{
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
