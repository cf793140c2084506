package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
)

// agentDeliveryEnv turns on TestAgentDeliveryStartTimes: a measurement, not a check, so the suite skips it.
const agentDeliveryEnv = "STEWARD_MEASURE_AGENT_DELIVERY"

// TestAgentDeliveryStartTimes measures how long a 1-member cluster's member Pod takes from its creation to
// Ready (etcd's /readyz through the agent) with the agent copied in by an init container and mounted from an
// image volume (--agent-delivery init-container and image-volume), side by side: the variants
// alternate (ABBA) so that the machine's load hits both alike. Runs only with STEWARD_MEASURE_AGENT_DELIVERY set
// (the number of runs of each, default 5) on a test bed running containerd 2 (STEWARD_TESTBED_CONTAINERD=2),
// which mounts image volumes; it logs the times and never fails on them.
func TestAgentDeliveryStartTimes(t *testing.T) {
	runs := 0
	if _, err := fmt.Sscan(os.Getenv(agentDeliveryEnv)+" 0", &runs); err != nil || runs <= 0 {
		if os.Getenv(agentDeliveryEnv) == "" {
			t.Skipf("a measurement: set %s=<runs of each variant>", agentDeliveryEnv)
		}
		runs = 5
	}
	framework.RequireBed(t)
	if framework.Bed.Containerd() == testbed.SystemContainerd {
		t.Skipf("image volumes need containerd 2.1 or newer; the test bed runs containerd %s (set %s=2)", framework.Bed.Containerd(), testbed.ContainerdEnv)
	}
	serial(t, "measures member Pod start times on an otherwise idle test bed")
	ns := framework.NewNamespace(t, "agentdelivery")
	cluster := framework.NewCluster(ns, "start", 1)
	cluster.Spec.Storage.Ephemeral = true // the variants differ in the agent only; no provisioner in the way
	cluster.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	ctx := context.Background()
	// The Pods and their Service stand alone: no EtcdCluster owns them, and no operator acts on them.
	peers := resources.PeerService(cluster)
	peers.OwnerReferences = nil
	if err := framework.K8s.Create(ctx, peers); err != nil {
		t.Fatal(err)
	}
	// The Pods Steward builds with --agent-delivery=init-container and =image-volume.
	initContainer, imageVolume := framework.OperatorOptions, framework.OperatorOptions
	initContainer.AgentImageVolume, imageVolume.AgentImageVolume = false, true
	variants := []struct {
		name string
		opts resources.Options
	}{{"init-container", initContainer}, {"image-volume", imageVolume}}
	times := map[string][]time.Duration{}
	for round := 0; round < 2*runs; round++ {
		v := variants[(round+round/2)%2] // ABBA ABBA ...
		name := fmt.Sprintf("%s-%d", strings.Split(v.name, "-")[0], round)
		m := resources.Member{Name: name, InitialCluster: map[string]string{name: resources.PeerURL(cluster, name, framework.OperatorOptions)}, State: "new"}
		pod := resources.MemberPod(cluster, m, v.opts)
		pod.OwnerReferences = nil
		load, _ := os.ReadFile("/proc/loadavg")
		d, err := timePodReady(ctx, pod)
		if err != nil {
			t.Fatalf("%s Pod %s: %v", v.name, name, err)
		}
		times[v.name] = append(times[v.name], d)
		t.Logf("%-14s %s: created -> Ready in %s (load average before: %s)", v.name, name, d.Round(time.Millisecond), strings.Join(strings.Fields(string(load))[:3], " "))
		if err := framework.Clientset.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		framework.Poll(t, "Pod "+name+" gone", time.Minute, func() error {
			_, err := framework.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				return fmt.Errorf("still there")
			}
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}
	for _, v := range variants {
		d := slices.Clone(times[v.name])
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		t.Logf("%-14s median %s, mean %s, min %s, max %s over %d runs", v.name, d[len(d)/2].Round(time.Millisecond),
			(sum / time.Duration(len(d))).Round(time.Millisecond), d[0].Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond), len(d))
	}
}

// timePodReady creates pod and returns how long it took until a watch saw it Ready.
func timePodReady(ctx context.Context, pod *corev1.Pod) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	w, err := framework.Clientset.CoreV1().Pods(pod.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String()})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	start := time.Now()
	if _, err := framework.Clientset.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	var last *corev1.Pod
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok {
			last = p
			if resources.PodReady(p) {
				return time.Since(start), nil
			}
		}
	}
	if last != nil {
		return 0, fmt.Errorf("not Ready in 2 minutes: phase %s, %+v", last.Status.Phase, last.Status.ContainerStatuses)
	}
	return 0, fmt.Errorf("not Ready in 2 minutes: %w", ctx.Err())
}
