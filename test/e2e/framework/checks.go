package framework

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/resources"
)

// CheckStatusMatchesEtcd compares status.members with etcd's own member list and each member's cluster ID.
func CheckStatusMatchesEtcd(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	cli, eps := MemberClient(t, c)
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
	if fmt.Sprint(Sorted(want)) != fmt.Sprint(Sorted(got)) {
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

// CheckDefaultPlacement checks that the member Pods of a cluster whose spec sets no placement and no resources
// carry Steward's defaults (spread across nodes and zones, requests: Burstable, not BestEffort), and that status
// names the node of each.
func CheckDefaultPlacement(t *testing.T, c *etcdv1alpha1.EtcdCluster) {
	t.Helper()
	pods := MemberPodsOf(t, c)
	nodeOf := map[string]string{}
	for _, m := range c.Status.Members {
		nodeOf[m.Name] = m.Node
	}
	for _, p := range pods.Items {
		if !reflect.DeepEqual(p.Spec.TopologySpreadConstraints, resources.MemberSpread(c)) {
			t.Errorf("Pod %s spread %+v, want the default %+v", p.Name, p.Spec.TopologySpreadConstraints, resources.MemberSpread(c))
		}
		want := resources.MemberResources(c).Requests
		if got := p.Spec.Containers[0].Resources.Requests; len(got) != len(want) ||
			got.Cpu().Cmp(*want.Cpu()) != 0 || got.Memory().Cmp(*want.Memory()) != 0 {
			t.Errorf("Pod %s requests %v, want the default %v (memory from the quota)", p.Name, got, want)
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

// CheckQuota checks that every member runs with the database quota want, as etcd reports it (3.6 and later), and
// that status says so.
func CheckQuota(t *testing.T, c *etcdv1alpha1.EtcdCluster, want int64) {
	t.Helper()
	if c.Status.QuotaBackendBytes != want {
		t.Errorf("status.quotaBackendBytes %d, want %d", c.Status.QuotaBackendBytes, want)
	}
	cli, eps := MemberClient(t, c)
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

// Refused asserts that err is the API server refusing an object at admission with a message containing want.
func Refused(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want a refusal containing %q", want)
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		t.Fatalf("error %v is not a validation error (want %q)", err, want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}

// Sorted is m as key=value pairs in order, for comparing and printing.
func Sorted(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
