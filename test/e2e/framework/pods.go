package framework

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
)

// MemberPodsOf lists the cluster's member Pods (by its label), failing t when the list cannot be read.
func MemberPodsOf(t *testing.T, c *etcdv1alpha1.EtcdCluster) corev1.PodList {
	t.Helper()
	var pods corev1.PodList
	if err := K8s.List(context.Background(), &pods, client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
		t.Fatal(err)
	}
	return pods
}

// MemberPodsState is what must not move when a change is refused: each member Pod's UID and a digest of what
// Steward writes on a Pod (labels, annotations, owners, finalizers, spec). The kubelet's status writes (a probe's
// result, a condition's time) move the resourceVersion but are not Steward's, so they are left out.
func MemberPodsState(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	pods := MemberPodsOf(t, c)
	out := map[string]string{}
	for _, p := range pods.Items {
		written, err := json.Marshal([]any{p.Labels, p.Annotations, p.OwnerReferences, p.Finalizers, p.DeletionTimestamp, p.Spec})
		if err != nil {
			t.Fatal(err)
		}
		out[p.Name] = fmt.Sprintf("%s@%x", p.UID, sha256.Sum256(written))
	}
	return out
}

// PodChanges says, for each Pod of after whose resourceVersion differs from its namesake in before, what moved:
// its generation (a spec change), annotations, labels, each container's restarts and readiness, and the Pod's
// conditions, for a failed "nothing changed" check.
func PodChanges(before, after corev1.PodList) string {
	was := map[string]*corev1.Pod{}
	for i := range before.Items {
		was[before.Items[i].Name] = &before.Items[i]
	}
	describe := func(p *corev1.Pod) string {
		var containers, conditions []string
		for _, cs := range p.Status.ContainerStatuses {
			containers = append(containers, fmt.Sprintf("%s ready=%t restarts=%d", cs.Name, cs.Ready, cs.RestartCount))
		}
		for _, c := range p.Status.Conditions {
			conditions = append(conditions, fmt.Sprintf("%s=%s@%s", c.Type, c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339)))
		}
		return fmt.Sprintf("uid %s rv %s generation %d annotations %v labels %v containers %v conditions %v",
			p.UID, p.ResourceVersion, p.Generation, p.Annotations, p.Labels, containers, conditions)
	}
	var out []string
	for i := range after.Items {
		p := &after.Items[i]
		if old := was[p.Name]; old == nil || old.ResourceVersion != p.ResourceVersion {
			prev := "none"
			if old != nil {
				prev = describe(old)
			}
			out = append(out, fmt.Sprintf("%s: before: %s; after: %s", p.Name, prev, describe(p)))
		}
	}
	return strings.Join(out, "\n")
}

// PodStates says where each member Pod of a cluster is (phase, scheduling, each container's state) and the
// last Events recorded for it: a failed wait on a status condition shows what the kubelet and scheduler did.
func PodStates(c *etcdv1alpha1.EtcdCluster) string {
	ctx := context.Background()
	var pods corev1.PodList
	if err := K8s.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
		return "pods: " + err.Error()
	}
	var events corev1.EventList
	if err := K8s.List(ctx, &events, client.InNamespace(c.Namespace)); err != nil {
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

// PodIsReady is whether p's Ready condition is True.
func PodIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodAndVolumeUIDs maps the cluster's member Pods to their UIDs, and its PVCs to theirs.
func PodAndVolumeUIDs(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	out := map[string]string{}
	pods := MemberPodsOf(t, c)
	for _, p := range pods.Items {
		out["pod/"+p.Name] = string(p.UID)
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := K8s.List(context.Background(), &pvcs, client.InNamespace(c.Namespace), client.MatchingLabels{resources.LabelCluster: c.Name}); err != nil {
		t.Fatal(err)
	}
	for _, v := range pvcs.Items {
		out["pvc/"+v.Name] = string(v.UID)
	}
	return out
}

// PodUIDs names the cluster's member Pods with their UIDs: a restarted member has a new Pod.
func PodUIDs(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, state := range MemberPodsState(t, c) {
		out[name], _, _ = strings.Cut(state, "@")
	}
	return out
}

// MemberIn is whether status lists member name of c.
func MemberIn(c *etcdv1alpha1.EtcdCluster, name string) bool {
	for _, m := range c.Status.Members {
		if m.Name == name {
			return true
		}
	}
	return false
}

// ContainerRestarts counts the container restarts of each member Pod of the cluster key.
func ContainerRestarts(t *testing.T, key client.ObjectKey) map[string]int32 {
	t.Helper()
	var pods corev1.PodList
	if err := K8s.List(context.Background(), &pods, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for i := range pods.Items {
		out[pods.Items[i].Name] = PodRestarts(&pods.Items[i])
	}
	return out
}

// PodRestarts is how often the containers of p restarted, together.
func PodRestarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// RequireNoRestarts fails if a member Pod of key restarted or was replaced since before was counted.
func RequireNoRestarts(t *testing.T, key client.ObjectKey, before map[string]int32, during string) {
	t.Helper()
	for name, n := range ContainerRestarts(t, key) {
		if was, ok := before[name]; !ok || n != was {
			t.Errorf("member %s restarted (or was replaced) during %s: restarts %d, before %d", name, during, n, was)
		}
	}
}

// OwnedState maps each member Pod and PVC of a cluster to its UID.
func OwnedState(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	out := map[string]string{}
	sel := client.MatchingLabels{resources.LabelCluster: c.Name}
	var pods corev1.PodList
	var pvcs corev1.PersistentVolumeClaimList
	if err := K8s.List(context.Background(), &pods, client.InNamespace(c.Namespace), sel); err != nil {
		t.Fatal(err)
	}
	if err := K8s.List(context.Background(), &pvcs, client.InNamespace(c.Namespace), sel); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out["pod/"+p.Name] = string(p.UID)
	}
	for _, p := range pvcs.Items {
		out["pvc/"+p.Name] = string(p.UID)
	}
	return out
}

// RequireOwnedStateFor fails t if the cluster's member Pods and PVCs differ from before (OwnedState) at any check,
// once a second, for d.
func RequireOwnedStateFor(t *testing.T, c *etcdv1alpha1.EtcdCluster, before map[string]string, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Second) {
		if now := OwnedState(t, c); fmt.Sprint(now) != fmt.Sprint(before) {
			t.Fatalf("member Pods or volumes changed: %v -> %v", before, now)
		}
	}
}

// LogMemberOutputOnFailure registers a clean-up that, when t has failed, logs the last lines of each of the
// cluster's member Pods' etcd output (what etcd said about its peers: refused streams, removed members), which is
// gone with the namespace afterwards. Register it after the cluster exists.
func LogMemberOutputOnFailure(t *testing.T, c *etcdv1alpha1.EtcdCluster, lines int64) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pods := MemberPodsOf(t, c)
		for _, p := range pods.Items {
			out, err := Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: resources.EtcdContainer, TailLines: &lines}).DoRaw(ctx)
			if err != nil {
				t.Logf("etcd output of %s: %v", p.Name, err)
				continue
			}
			t.Logf("last %d lines of the etcd output of %s:\n%s", lines, p.Name, out)
		}
	})
}
