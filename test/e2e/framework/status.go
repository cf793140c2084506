package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// WaitAvailable waits for the Available condition at the current generation and returns the cluster.
func WaitAvailable(t *testing.T, key client.ObjectKey, timeout time.Duration) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	Poll(t, "EtcdCluster "+key.String()+" Available", timeout, func() error {
		if err := K8s.Get(context.Background(), key, &c); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionAvailable)
		if cond == nil || cond.Status != metav1.ConditionTrue || c.Status.ObservedGeneration != c.Generation ||
			int(c.Status.ReadyReplicas) != int(c.Spec.Replicas) {
			return fmt.Errorf("status: %s", Describe(&c))
		}
		return nil
	})
	return &c
}

// WaitSettled waits until the cluster is Available, not Progressing, and has exactly spec.replicas members,
// Pods and PVCs (removed members' Pods and volumes are gone).
func WaitSettled(t *testing.T, key client.ObjectKey, timeout time.Duration) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var got *etcdv1alpha1.EtcdCluster
	Poll(t, "EtcdCluster "+key.String()+" settled", timeout, func() error {
		c, err := Settled(key)
		got = c
		return err
	})
	return got
}

// Settled returns the cluster, and an error saying why it has not settled: Available, not Progressing, its spec
// observed, as many ready members and PVCs as the spec asks for.
func Settled(key client.ObjectKey) (*etcdv1alpha1.EtcdCluster, error) {
	var c etcdv1alpha1.EtcdCluster
	if err := K8s.Get(context.Background(), key, &c); err != nil {
		return nil, err
	}
	if !meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionAvailable) ||
		!meta.IsStatusConditionFalse(c.Status.Conditions, etcdv1alpha1.ConditionProgressing) ||
		c.Status.ObservedGeneration != c.Generation || int(c.Status.ReadyReplicas) != int(c.Spec.Replicas) ||
		len(c.Status.Members) != int(c.Spec.Replicas) {
		return &c, fmt.Errorf("status: %s, %d members", Describe(&c), len(c.Status.Members))
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := K8s.List(context.Background(), &pvcs, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
		return &c, err
	}
	if len(pvcs.Items) != int(c.Spec.Replicas) {
		return &c, fmt.Errorf("%d PVCs, want %d", len(pvcs.Items), c.Spec.Replicas)
	}
	return &c, nil
}

// MembershipState summarises what a scale-up step changes: etcd's voters and learners and the member Pods.
func MembershipState(t *testing.T, c *etcdv1alpha1.EtcdCluster) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var eps []string
	for _, ep := range MemberEndpoints(t, c) {
		eps = append(eps, ep)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), TLS: ClusterTLS(t, c)})
	if err != nil {
		return "unreachable"
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return "unreachable"
	}
	voters, learners, started := 0, 0, 0
	for _, m := range resp.Members {
		if m.IsLearner {
			learners++
		} else {
			voters++
		}
		if m.Name != "" {
			started++
		}
	}
	return fmt.Sprintf("voters=%d learners=%d started=%d pods=%d", voters, learners, started, len(eps))
}

// WaitMemberGone waits until status.members lists no member named name and none with etcd member ID id.
func WaitMemberGone(t *testing.T, key client.ObjectKey, name, id string, timeout time.Duration) {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	Poll(t, "member "+name+" ("+id+") gone", timeout, func() error {
		if err := K8s.Get(context.Background(), key, &c); err != nil {
			return err
		}
		for _, m := range c.Status.Members {
			if m.Name == name || (id != "" && m.ID == id) {
				return fmt.Errorf("member %s (%s) still listed: %s", name, id, Describe(&c))
			}
		}
		return nil
	})
}

// WaitDegraded waits for Degraded=True with reason and a message containing every part of want.
func WaitDegraded(t *testing.T, key client.ObjectKey, reason string, want ...string) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	Poll(t, fmt.Sprintf("Degraded %s %q", reason, want), 2*time.Minute, func() error {
		if err := K8s.Get(context.Background(), key, &c); err != nil {
			return err
		}
		d := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if d == nil || d.Status != metav1.ConditionTrue || d.Reason != reason || d.ObservedGeneration != c.Generation {
			return fmt.Errorf("Degraded %+v", d)
		}
		for _, w := range want {
			if !strings.Contains(d.Message, w) {
				return fmt.Errorf("Degraded message %q lacks %q", d.Message, w)
			}
		}
		return nil
	})
	return &c
}

// WaitAtVersion waits until the cluster settled with every member running version and etcd's cluster version
// at its minor, and checks that the members kept their names and IDs (restarts in place, not replacements).
func WaitAtVersion(t *testing.T, key client.ObjectKey, version string, before map[string]string, timeout time.Duration) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	v, err := plan.ParseVersion(version)
	if err != nil {
		t.Fatal(err)
	}
	var got *etcdv1alpha1.EtcdCluster
	Poll(t, "members at "+version, timeout, func() error {
		c := &etcdv1alpha1.EtcdCluster{}
		if err := K8s.Get(context.Background(), key, c); err != nil {
			return err
		}
		if c.Status.ClusterVersion != v.MinorString()+".0" || c.Status.CurrentVersion != version || c.Status.DowngradeTarget != "" {
			return fmt.Errorf("cluster version %q, current %q, downgrade %q: %s", c.Status.ClusterVersion, c.Status.CurrentVersion, c.Status.DowngradeTarget, Describe(c))
		}
		for _, m := range c.Status.Members {
			if m.Version != version {
				return fmt.Errorf("member %s runs %s", m.Name, m.Version)
			}
		}
		if !meta.IsStatusConditionFalse(c.Status.Conditions, etcdv1alpha1.ConditionProgressing) {
			return fmt.Errorf("still progressing: %s", Describe(c))
		}
		got = c
		return nil
	})
	got = WaitSettled(t, key, time.Minute)
	CheckStatusMatchesEtcd(t, got)
	if before != nil {
		if now := MemberIDs(got); fmt.Sprint(now) != fmt.Sprint(before) {
			t.Errorf("members changed during the version change: %v, before %v", now, before)
		}
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := K8s.List(context.Background(), &pvcs, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
		t.Fatal(err)
	}
	for _, pvc := range pvcs.Items {
		if pvc.Annotations[resources.AnnotationVersion] != version {
			t.Errorf("volume %s records release %q, want %s", pvc.Name, pvc.Annotations[resources.AnnotationVersion], version)
		}
	}
	return got
}

// RollState summarises what an upgrade step changes: how many Pods are switched to 3.6.16, and the leader.
func RollState(t *testing.T, c *etcdv1alpha1.EtcdCluster) string {
	t.Helper()
	pods := MemberPodsOf(t, c)
	switched := 0
	for _, p := range pods.Items {
		if p.Annotations[resources.AnnotationVersion] == "3.6.16" {
			switched++
		}
	}
	return fmt.Sprintf("%d/%d switched, leader %s", switched, len(pods.Items), CurrentLeader(c, pods.Items))
}

// Describe is c's ready members and conditions in one line, for failure messages.
func Describe(c *etcdv1alpha1.EtcdCluster) string {
	var parts []string
	for _, cond := range c.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s(%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message))
	}
	return fmt.Sprintf("ready %d/%d, %s", c.Status.ReadyReplicas, c.Spec.Replicas, strings.Join(parts, "; "))
}

// MemberNames is the sorted names of c's members in status.
func MemberNames(c *etcdv1alpha1.EtcdCluster) []string {
	var names []string
	for _, m := range c.Status.Members {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return names
}

// MemberIDs maps member name to etcd member ID.
func MemberIDs(c *etcdv1alpha1.EtcdCluster) map[string]string {
	out := map[string]string{}
	for _, m := range c.Status.Members {
		out[m.Name] = m.ID
	}
	return out
}

// MemberEndpoints are the client URLs of a cluster's member Pods, by pod IP (the host does not use cluster DNS).
func MemberEndpoints(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	pods := MemberPodsOf(t, c)
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = fmt.Sprintf("%s://%s:%d", resources.Scheme(c), p.Status.PodIP, resources.ClientPort)
	}
	return out
}

// CurrentLeader asks the members for etcd's leader and returns its name ("" when no member answered).
func CurrentLeader(c *etcdv1alpha1.EtcdCluster, pods []corev1.Pod) string {
	tlsConfig, err := ClusterTLSConfig(c)
	if err != nil {
		return ""
	}
	nameOf := map[string]string{}
	var eps []string
	for _, p := range pods {
		if p.Status.PodIP == "" {
			continue
		}
		ep := fmt.Sprintf("%s://%s:%d", resources.Scheme(c), p.Status.PodIP, resources.ClientPort)
		eps = append(eps, ep)
		nameOf[ep] = p.Name
	}
	if len(eps) == 0 {
		return ""
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: time.Second, Logger: zap.NewNop(), TLS: tlsConfig})
	if err != nil {
		return ""
	}
	defer func() { _ = cli.Close() }()
	ids := map[uint64]string{}
	var leader uint64
	for _, ep := range eps {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s, err := cli.Status(ctx, ep)
		cancel()
		if err != nil {
			continue
		}
		ids[s.Header.MemberId] = nameOf[ep]
		if s.Leader != 0 {
			leader = s.Leader
		}
	}
	return ids[leader]
}
