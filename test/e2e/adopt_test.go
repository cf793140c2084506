package e2e

import (
	"context"
	"fmt"
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
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
	"steward.dev/steward/test/linearizability"
)

// TestAdoptRunningEtcd adopts three etcd processes the test started on the test bed's host (not Steward) into a
// 3-member Steward cluster under client load (docs/user/adoption.md): the preflight admits the source, Steward's
// members join one learner at a time, the source's members are listed as external members and stay until
// handover Retire, then leave one at a time, the leader last. The cluster keeps its ID and revisions, a watch
// opened on the source before the adoption still delivers afterwards, and no acknowledged write is lost.
func TestAdoptRunningEtcd(t *testing.T) {
	parallel(t)
	ns := framework.NewNamespace(t, "adopt")
	framework.StartOperator(t, ns)
	ctx := context.Background()
	src := framework.StartHostEtcd(t, "src", 3, testbed.EtcdVersions[0])
	srcCli := src.Client(t)
	before, err := srcCli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clusterID := before.Header.ClusterId
	put, err := srcCli.Put(ctx, "adopt/before", "source")
	if err != nil {
		t.Fatal(err)
	}
	// A watch opened on the source before the adoption, through every endpoint the client will have.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watch := srcCli.Watch(wctx, "adopt/watched", clientv3.WithRev(put.Header.Revision))

	c := framework.NewCluster(ns, "adopted", 3)
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{FromExisting: &etcdv1alpha1.ExistingSource{Endpoints: src.ClientURLs}}
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(c)
	// Clients of the source, which move on to Steward's client Service once the source's endpoints fail (they
	// stop serving when their members are retired): what an application that lists both does.
	var svcIP string
	framework.Poll(t, "client Service", time.Minute, func() error {
		var svc corev1.Service
		if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: resources.ClientServiceName(c)}, &svc); err != nil {
			return err
		}
		svcIP = svc.Spec.ClusterIP
		return nil
	})
	svcURL := fmt.Sprintf("http://%s:%d", svcIP, resources.ClientPort)
	srcCli.SetEndpoints(append(append([]string(nil), src.ClientURLs...), svcURL)...) // the watch's client too
	load, err := linearizability.Start(linearizability.Config{Endpoints: src.ClientURLs,
		Alternates: []linearizability.Target{{Endpoints: []string{svcURL}}}})
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	got := waitAdoption(t, key, "Steward's members are voters beside the source's", 6*time.Minute, func(c *etcdv1alpha1.EtcdCluster) error {
		a := c.Status.Adoption
		if a == nil || a.Phase != etcdv1alpha1.AdoptionMigrating || len(a.ExternalMembers) != 3 {
			return fmt.Errorf("adoption %+v", a)
		}
		if p := progressing(c); p.Reason != etcdv1alpha1.ReasonAdoptionWaitingForHandover {
			return fmt.Errorf("progressing %s: %s", p.Reason, p.Message)
		}
		return nil
	}, src)
	joined := time.Since(begin)
	list, err := srcCli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Members) != 6 || list.Header.ClusterId != clusterID {
		t.Fatalf("after joining: %d members, cluster %x (want 6 in %x)", len(list.Members), list.Header.ClusterId, clusterID)
	}
	// Steward's last member stays a learner until the handover: 5 voters, so that the source's side keeps a
	// quorum if the two networks are cut apart.
	learners := 0
	for _, m := range list.Members {
		if m.IsLearner {
			learners++
		}
	}
	if learners != 1 {
		t.Errorf("%d learners beside the source, want Steward's last member alone", learners)
	}
	if len(got.Status.Members) != 3 {
		t.Errorf("status.members %v, want Steward's 3 (the source's are external members)", got.Status.Members)
	}
	t.Logf("3 members joined the source in %s", joined.Round(time.Second))

	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Bootstrap.FromExisting.Handover = etcdv1alpha1.HandoverRetire
	})
	retireFrom := time.Now()
	waitAdoption(t, key, "the source's members retired", 4*time.Minute, func(c *etcdv1alpha1.EtcdCluster) error {
		if a := c.Status.Adoption; a == nil || a.Phase != etcdv1alpha1.AdoptionComplete || len(a.Retired) != 3 {
			return fmt.Errorf("adoption %+v", a)
		}
		return nil
	}, src)
	t.Logf("the source's 3 members retired in %s", time.Since(retireFrom).Round(time.Second))
	got = framework.WaitSettled(t, key, 2*time.Minute)
	svc := framework.ClientServiceURL(t, got)
	stw, err := clientv3.New(clientv3.Config{Endpoints: []string{svc}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stw.Close() }()
	after, err := stw.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Header.ClusterId != clusterID || len(after.Members) != 3 {
		t.Fatalf("after the adoption: cluster %x with %d members, want %x with 3", after.Header.ClusterId, len(after.Members), clusterID)
	}
	old, err := stw.Get(ctx, "adopt/before")
	if err != nil || len(old.Kvs) != 1 || old.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("key written to the source: %v %v (want mod revision %d)", old, err, put.Header.Revision)
	}
	for _, name := range src.Names {
		if msgs := framework.EventsOf(t, got, "MemberRemoved", begin); !anyContains(msgs, plan.ExternalMemberName(name, 0)) {
			t.Errorf("no MemberRemoved Event for source member %s: %v", name, msgs)
		}
	}
	// The watch opened on the source before the adoption delivers a write made through Steward's Service.
	if _, err := stw.Put(ctx, "adopt/watched", "after"); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-watch:
		if len(resp.Events) == 0 || string(resp.Events[0].Kv.Value) != "after" {
			t.Errorf("watch: %+v (err %v)", resp, resp.Err())
		}
	case <-time.After(30 * time.Second):
		t.Error("the watch opened before the adoption delivered nothing after it")
	}
	framework.RequireNoLostWrites(t, load, "adopting a running etcd")
}

// waitAdoption polls the cluster until check passes, logging the source's logs if it does not.
func waitAdoption(t *testing.T, key client.ObjectKey, what string, timeout time.Duration, check func(*etcdv1alpha1.EtcdCluster) error,
	src *framework.HostEtcd) *etcdv1alpha1.EtcdCluster {
	t.Helper()
	var c etcdv1alpha1.EtcdCluster
	err := testbed.Eventually(context.Background(), timeout, time.Second, func() error {
		if err := framework.K8s.Get(context.Background(), key, &c); err != nil {
			return err
		}
		return check(&c)
	})
	if err != nil {
		for i := range src.Names {
			t.Logf("source member %s log:\n%s", src.Names[i], src.Log(i))
		}
		p := progressing(&c)
		t.Fatalf("%s: %v (Progressing %s: %s)", what, err, p.Reason, p.Message)
	}
	return &c
}

// progressing is the cluster's Progressing condition (empty before the first pass).
func progressing(c *etcdv1alpha1.EtcdCluster) metav1.Condition {
	if p := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionProgressing); p != nil {
		return *p
	}
	return metav1.Condition{}
}

func anyContains(msgs []string, part string) bool {
	for _, m := range msgs {
		if strings.Contains(m, part) {
			return true
		}
	}
	return false
}
