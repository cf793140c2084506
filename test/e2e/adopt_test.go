package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
	"steward.dev/steward/test/linearizability"
)

// TestAdoptRunningEtcd adopts three etcd processes the test started on the test bed's host (not Steward), with
// etcd's authentication on, into a 3-member Steward cluster under client load (docs/user/adoption.md): the
// preflight refuses a wrong password and a user without the root role, touching nothing, then admits the source;
// Steward adds its own user and acts as it, its members join one learner at a time, the source's members are
// listed as external members and stay until handover Retire, then leave one at a time, the leader last. The
// cluster keeps its ID, revisions, users and roles, a watch opened on the source before the adoption still
// delivers afterwards, the application's user kept writing throughout, and no acknowledged write is lost.
func TestAdoptRunningEtcd(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns, src, srcCli, before := adoptionSource(t, "adopt", true)
	clusterID := before.Header.ClusterId
	put, err := srcCli.Put(ctx, "adopt/before", "source")
	if err != nil {
		t.Fatal(err)
	}
	// A watch opened on the source before the adoption, by a client of its own that will list Steward's client
	// Service too (srcCli stays on the source's members, for the checks of their member list).
	watchCli := src.Client(t)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watch := watchCli.Watch(wctx, "adopt/watched", clientv3.WithRev(put.Header.Revision))

	// The credentials Secret first holds a wrong password, then a user without the root role: both refused, the
	// source as it was.
	c, creds, key := authAdoption(t, ns, "adopted", src, "wrong")
	for _, refusal := range []struct{ user, password, says string }{
		{"root", "wrong", "refuses the password of etcd user root"},
		{framework.SourceAppUser, framework.SourceAppPassword, "lacks the root role"},
	} {
		setCredentials(t, creds, refusal.user, refusal.password)
		waitRefused(t, key, etcdv1alpha1.ReasonSourceAccessRejected, refusal.says, src)
		requireSourceUnchanged(t, srcCli, before, "refused: "+refusal.says)
	}
	setCredentials(t, creds, "root", framework.SourceRootPassword)
	// Clients of the source, which move on to Steward's client Service once the source's endpoints fail (they
	// stop serving when their members are retired): what an application that lists both does.
	svcIP, svcURL := clientServiceAddress(t, ns, c.Name)
	watchCli.SetEndpoints(append(append([]string(nil), src.ClientURLs...), svcURL)...)
	// The load is an application of the source's, as its own user all along.
	load, err := linearizability.Start(linearizability.Config{Endpoints: src.ClientURLs,
		Username: framework.SourceAppUser, Password: framework.SourceAppPassword,
		Alternates: []linearizability.Target{{Endpoints: []string{svcURL}, Username: framework.SourceAppUser, Password: framework.SourceAppPassword}}})
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
		if a.OperatorUser != "steward:operator" {
			return fmt.Errorf("status.adoption.operatorUser %q, want Steward's own user", a.OperatorUser)
		}
		return nil
	}, src)
	joined := time.Since(begin)
	// Steward's members serve now: the clients' way to the client Service must be programmed before the source's
	// members leave (docs/development/flakes.md, 2026-11-26: until kube-proxy has, the egress proxy answers).
	framework.WaitServiceRouted(t, got, fmt.Sprintf("%s:%d", svcIP, resources.ClientPort))
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
	stw, err := clientv3.New(clientv3.Config{Endpoints: []string{svc}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: "root", Password: framework.SourceRootPassword})
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
	requireUsersKept(t, stw)
	old, err := stw.Get(ctx, "adopt/before")
	if err != nil || len(old.Kvs) != 1 || old.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("key written to the source: %v %v (want mod revision %d)", old, err, put.Header.Revision)
	}
	removed := framework.EventsOf(t, got, "MemberRemoved", begin)
	for _, name := range src.Names {
		if !anyContains(removed, plan.ExternalMemberName(name, 0)) {
			t.Errorf("no MemberRemoved Event for source member %s: %v", name, removed)
		}
	}
	// The source's leader led throughout (nothing else moved leadership): it left last, after handing over.
	if moved := framework.EventsOf(t, got, "LeaderMoved", retireFrom); !anyContains(moved, "from source:") {
		t.Errorf("leadership never moved off the source's leader before it left: %v", moved)
	}
	t.Logf("retirement: %v", removed)
	// The watch opened on the source before the adoption delivers a write made through Steward's Service.
	if _, err := stw.Put(ctx, "adopt/watched", "after"); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-watch:
		if resp.Canceled && errors.Is(resp.Err(), rpctypes.ErrInvalidAuthToken) {
			// etcd's simple tokens live in each member's memory: one Steward's members do not know halts the
			// stream once it moves to them (clientv3 re-authenticates unary calls only). What a client does then:
			// watch again from the revision it had, which the adopted cluster still serves.
			t.Logf("the watch moved to a member that does not know its token (%v): watching again from revision %d", resp.Err(), put.Header.Revision)
			select {
			case resp = <-watchCli.Watch(wctx, "adopt/watched", clientv3.WithRev(put.Header.Revision)):
			case <-time.After(30 * time.Second):
				t.Fatal("watching again from the revision before the adoption delivered nothing")
			}
		}
		if len(resp.Events) == 0 || string(resp.Events[0].Kv.Value) != "after" {
			t.Errorf("watch: %+v (err %v)", resp, resp.Err())
		}
	case <-time.After(30 * time.Second):
		t.Error("the watch opened before the adoption delivered nothing after it")
	}
	framework.RequireNoLostWrites(t, load, "adopting a running etcd")
}

// authAdoption creates the credentials Secret source-admin (user root, password) and EtcdCluster ns/name
// adopting src, which has etcd's authentication on, with it and spec.auth.enabled.
func authAdoption(t *testing.T, ns, name string, src *framework.HostEtcd, password string) (*etcdv1alpha1.EtcdCluster, *corev1.Secret, client.ObjectKey) {
	t.Helper()
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "source-admin"},
		Data: map[string][]byte{"username": []byte("root"), "password": []byte(password)}}
	if err := framework.K8s.Create(context.Background(), creds); err != nil {
		t.Fatal(err)
	}
	c := framework.AdoptingCluster(ns, name, src.ClientURLs)
	c.Spec.Auth = &etcdv1alpha1.AuthSpec{Enabled: true}
	c.Spec.Bootstrap.FromExisting.CredentialsSecret = creds.Name
	return c, creds, create(t, c)
}

// setCredentials writes user and password into the credentials Secret creds.
func setCredentials(t *testing.T, creds *corev1.Secret, user, password string) {
	t.Helper()
	creds.Data = map[string][]byte{"username": []byte(user), "password": []byte(password)}
	if err := framework.K8s.Update(context.Background(), creds); err != nil {
		t.Fatal(err)
	}
}

// requireUsersKept checks that the adopted cluster holds the source's users and roles as EnableAuth made them,
// and Steward's own user with the root role beside them.
func requireUsersKept(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	ctx := context.Background()
	for user, role := range map[string]string{"root": "root", framework.SourceAppUser: framework.SourceAppUser, "steward:operator": "root"} {
		u, err := cli.UserGet(ctx, user)
		if err != nil || !slices.Contains(u.Roles, role) {
			t.Errorf("user %s after the adoption: %v (%v), want role %s", user, u, err, role)
		}
	}
	r, err := cli.RoleGet(ctx, framework.SourceAppUser)
	if err != nil || len(r.Perm) != 1 {
		t.Errorf("role %s after the adoption: %v (%v), want its one permission", framework.SourceAppUser, r, err)
	}
}

// waitRefused waits until the preflight refuses the source with reason (Degraded, its message containing says),
// the adoption still Checking.
func waitRefused(t *testing.T, key client.ObjectKey, reason, says string, src *framework.HostEtcd) {
	t.Helper()
	waitAdoption(t, key, "the source refused: "+reason, 2*time.Minute, func(c *etcdv1alpha1.EtcdCluster) error {
		d := meta.FindStatusCondition(c.Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if d == nil || d.Reason != reason || !strings.Contains(d.Message, says) || c.Status.Adoption == nil ||
			c.Status.Adoption.Phase != etcdv1alpha1.AdoptionChecking {
			return fmt.Errorf("degraded %+v, adoption %+v", d, c.Status.Adoption)
		}
		return nil
	}, src)
}

// requireSourceUnchanged checks that the source has the members and cluster ID it had before (none a learner).
func requireSourceUnchanged(t *testing.T, srcCli *clientv3.Client, before *clientv3.MemberListResponse, when string) {
	t.Helper()
	list, err := srcCli.MemberList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if list.Header.ClusterId != before.Header.ClusterId || len(list.Members) != len(before.Members) {
		t.Fatalf("%s: the source has %d members in cluster %x, had %d in %x", when, len(list.Members), list.Header.ClusterId,
			len(before.Members), before.Header.ClusterId)
	}
	for i, m := range list.Members {
		if m.ID != before.Members[i].ID || m.IsLearner {
			t.Fatalf("%s: member %s (%x), was %x", when, m.Name, m.ID, before.Members[i].ID)
		}
	}
}

// adoptionSource starts the test's namespace and operator and a 3-member source of etcd processes on the host
// (with etcd's authentication on, if auth; started with opts), and returns them with a client of the source and
// its member list as it was before the adoption.
func adoptionSource(t *testing.T, base string, auth bool, opts ...framework.HostEtcdOption) (string, *framework.HostEtcd, *clientv3.Client, *clientv3.MemberListResponse) {
	t.Helper()
	ns := framework.NewNamespace(t, base)
	framework.StartOperator(t, ns)
	src := framework.StartHostEtcd(t, "src", 3, testbed.EtcdVersions[0], opts...)
	if auth {
		src.EnableAuth(t)
	}
	srcCli := src.Client(t)
	before, err := srcCli.MemberList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ns, src, srcCli, before
}

// clientServiceAddress waits until cluster ns/name's client Service has its ClusterIP, and returns it and the
// plaintext client URL there: what an adopted source's clients add to their endpoints.
func clientServiceAddress(t *testing.T, ns, name string) (string, string) {
	t.Helper()
	var ip string
	framework.Poll(t, "client Service", time.Minute, func() error {
		var svc corev1.Service
		key := client.ObjectKey{Namespace: ns, Name: resources.ClientServiceName(&etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: name}})}
		if err := framework.K8s.Get(context.Background(), key, &svc); err != nil {
			return err
		}
		ip = svc.Spec.ClusterIP
		return nil
	})
	return ip, fmt.Sprintf("http://%s:%d", ip, resources.ClientPort)
}

// create creates cluster c and returns its key.
func create(t *testing.T, c *etcdv1alpha1.EtcdCluster) client.ObjectKey {
	t.Helper()
	if err := framework.K8s.Create(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return client.ObjectKeyFromObject(c)
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

// TestAdoptionRefusedThenAborted: a source serving TLS with client certificates on both ports (as kubeadm's etcd
// does) is adopted with certificates of its CA (provider Secrets). The preflight's refusals come first, each with
// nothing changed on the source: an endpoint nothing listens on (SourceUnreachable; that cluster is then deleted
// before admission), a source whose minor is not spec.version's (SourceVersionUnsupported), peerAuth
// MemberIdentity, which the source's peer certificates cannot pass (SourceTLSUnsupported), a database larger than
// the quota (SourceTooBig). With the spec fixed Steward's members join over TLS, and handover Abort removes them
// again, the leader's role handed back to the source: the source ends with its own members and cluster ID,
// Steward's Pods and volumes are gone, and no acknowledged write is lost. The source's members advertise client
// URLs nothing listens on: Steward reads them through the spec's endpoints alone, before and after admission.
func TestAdoptionRefusedThenAborted(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ca, err := pki.NewCA("source-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ns, src, srcCli, before := adoptionSource(t, "adopt-abort", false, framework.UnreachableClientURLs(), framework.SourceTLS(ca))
	for _, m := range before.Members {
		if slices.ContainsFunc(m.ClientURLs, func(u string) bool { return slices.Contains(src.ClientURLs, u) }) {
			t.Fatalf("source member %s advertises %v, where it listens", m.Name, m.ClientURLs)
		}
	}
	// The cluster adopting nothing is created with the plugin, which waits for the preflight's verdict and fails
	// with Steward's reason.
	out, code := plugin(t, ns, "adopt", "nowhere", "--endpoints", "http://"+framework.FreeAddress(t), "--version", testbed.EtcdVersions[0],
		"--storage-size", "1Gi", "--wait", "--timeout", "3m")
	if code != 1 || !strings.Contains(out, "the source was refused by Steward (SourceUnreachable)") {
		t.Errorf("kubectl steward adopt of an unreachable source: exit %d, want 1 with Steward's reason:\n%s", code, out)
	}
	t.Logf("kubectl steward adopt of an unreachable source (exit %d):\n%s", code, out)
	nowhereKey := client.ObjectKey{Namespace: ns, Name: "nowhere"}
	nowhere := &etcdv1alpha1.EtcdCluster{}
	if err := framework.K8s.Get(ctx, nowhereKey, nowhere); err != nil {
		t.Fatal(err)
	}
	c := framework.AdoptingCluster(ns, "aborted", src.ClientURLs)
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderSecrets, PeerAuth: etcdv1alpha1.PeerAuthMemberIdentity,
		Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "aborted-members", ClientSecretName: "aborted-steward"}}
	user := &userPKI{ca: ca}
	putUserSecret(t, ns, "aborted-members", ca.CertPEM, user.member(t, c, 24*time.Hour, time.Now()))
	putUserSecret(t, ns, "aborted-steward", ca.CertPEM, user.client(t, 24*time.Hour))
	c.Spec.Version = "3.7.3" // the source runs 3.6
	tiny := resource.MustParse("1Ki")
	c.Spec.Etcd.QuotaBackendBytes = &tiny // below any etcd database
	key := create(t, c)
	waitRefused(t, nowhereKey, etcdv1alpha1.ReasonSourceUnreachable, "no endpoint of the source gave a member list", src)
	if err := framework.K8s.Delete(ctx, nowhere); err != nil {
		t.Fatal(err)
	}
	waitRefused(t, key, etcdv1alpha1.ReasonSourceVersionUnsupported, "set spec.version to a 3.6 release", src)
	requireSourceUnchanged(t, srcCli, before, "refused: version")
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = testbed.EtcdVersions[0] })
	waitRefused(t, key, etcdv1alpha1.ReasonSourceTLSUnsupported, "set peerAuth AnyCertificate", src)
	requireSourceUnchanged(t, srcCli, before, "refused: peerAuth")
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.PeerAuth = etcdv1alpha1.PeerAuthAnyCertificate })
	waitRefused(t, key, etcdv1alpha1.ReasonSourceTooBig, "more than the quota of 1024 bytes", src)
	requireSourceUnchanged(t, srcCli, before, "refused: too big")
	framework.Poll(t, "the unreachable source's EtcdCluster deleted before admission", time.Minute, func() error {
		var gone etcdv1alpha1.EtcdCluster
		if err := framework.K8s.Get(ctx, nowhereKey, &gone); err == nil {
			return fmt.Errorf("still there: %s", framework.Describe(&gone))
		} else if client.IgnoreNotFound(err) != nil {
			return err
		}
		return nil
	})

	load, err := linearizability.Start(linearizability.Config{Endpoints: src.ClientURLs, TLS: src.TLS})
	if err != nil {
		t.Fatal(err)
	}
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.QuotaBackendBytes = nil })
	waitAdoption(t, key, "Steward's members joined", 6*time.Minute, func(c *etcdv1alpha1.EtcdCluster) error {
		if p := progressing(c); p.Reason != etcdv1alpha1.ReasonAdoptionWaitingForHandover {
			return fmt.Errorf("progressing %s: %s", p.Reason, p.Message)
		}
		return nil
	}, src)
	// Leadership on one of Steward's members, so that the abort has to hand it back.
	list, err := srcCli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var target uint64
	for _, m := range list.Members {
		if !m.IsLearner && !slices.Contains(src.Names, m.Name) {
			target = m.ID
			break
		}
	}
	framework.Poll(t, "leadership on one of Steward's members", time.Minute, func() error {
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		for _, ep := range src.ClientURLs {
			st, err := srcCli.Status(mctx, ep)
			if err != nil || st.Leader == target {
				return err
			}
			if st.Leader != st.Header.MemberId {
				continue
			}
			// etcd takes a leadership transfer only from the leader itself.
			leader, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: src.TLS})
			if err != nil {
				return err
			}
			defer func() { _ = leader.Close() }()
			if _, err := leader.MoveLeader(mctx, target); err != nil {
				return fmt.Errorf("move leadership to %x: %w", target, err)
			}
			return errors.New("leadership transfer asked for; looking again")
		}
		return errors.New("no source member leads")
	})
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Bootstrap.FromExisting.Handover = etcdv1alpha1.HandoverAbort })
	got := waitAdoption(t, key, "the adoption aborted", 4*time.Minute, func(c *etcdv1alpha1.EtcdCluster) error {
		if a := c.Status.Adoption; a == nil || a.Phase != etcdv1alpha1.AdoptionAborted {
			return fmt.Errorf("adoption %+v", a)
		}
		return nil
	}, src)
	requireSourceUnchanged(t, srcCli, before, "aborted")
	var pods corev1.PodList
	if err := framework.K8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{resources.LabelCluster: got.Name}); err != nil || len(pods.Items) != 0 {
		t.Errorf("Pods left after the abort: %d (%v)", len(pods.Items), err)
	}
	if moved := framework.EventsOf(t, got, "LeaderMoved", time.Time{}); !anyContains(moved, "to source:") {
		t.Errorf("leadership not handed back to the source: %v", moved)
	}
	framework.RequireNoLostWrites(t, load, "an adoption aborted")
}

// TestAdoptionDeletedMidway: deleting an EtcdCluster whose members vote beside a source's aborts the adoption
// first (the finalizer etcd.steward.dev/abort-adoption): Steward's members leave the source's cluster before their
// Pods go, so the source keeps its quorum and ends with its own members, and no acknowledged write is lost. The
// source has etcd's authentication on: the user Steward added to it is deleted again, and the source's users stay.
func TestAdoptionDeletedMidway(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns, src, srcCli, before := adoptionSource(t, "adopt-delete", true)
	_, _, key := authAdoption(t, ns, "deleted", src, framework.SourceRootPassword)
	load, err := linearizability.Start(linearizability.Config{Endpoints: src.ClientURLs,
		Username: framework.SourceAppUser, Password: framework.SourceAppPassword})
	if err != nil {
		t.Fatal(err)
	}
	got := waitAdoption(t, key, "Steward's members joined", 6*time.Minute, func(c *etcdv1alpha1.EtcdCluster) error {
		if p := progressing(c); p.Reason != etcdv1alpha1.ReasonAdoptionWaitingForHandover {
			return fmt.Errorf("progressing %s: %s", p.Reason, p.Message)
		}
		if !slices.Contains(c.Finalizers, "etcd.steward.dev/abort-adoption") {
			return fmt.Errorf("finalizers %v", c.Finalizers)
		}
		return nil
	}, src)
	if err := framework.K8s.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	framework.Poll(t, "EtcdCluster gone", 4*time.Minute, func() error {
		var c etcdv1alpha1.EtcdCluster
		if err := framework.K8s.Get(ctx, key, &c); err == nil {
			return fmt.Errorf("still there: %s", framework.Describe(&c))
		} else if client.IgnoreNotFound(err) != nil {
			return err
		}
		return nil
	})
	framework.Poll(t, "the source with its own members alone", 2*time.Minute, func() error {
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		list, err := srcCli.MemberList(mctx)
		if err != nil {
			return err
		}
		if list.Header.ClusterId != before.Header.ClusterId || len(list.Members) != len(before.Members) {
			return fmt.Errorf("%d members in cluster %x, had %d in %x", len(list.Members), list.Header.ClusterId, len(before.Members), before.Header.ClusterId)
		}
		return nil
	})
	users, err := srcCli.UserList(ctx)
	if err != nil || !slices.Equal(users.Users, []string{framework.SourceAppUser, "root"}) {
		t.Errorf("the source's users after the abort: %v (%v), want its own alone", users, err)
	}
	framework.RequireNoLostWrites(t, load, "an adopting cluster deleted")
}
