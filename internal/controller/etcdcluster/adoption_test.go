package etcdcluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// adoptingCluster is cluster db adopting the source at srcEndpoints, with nothing recorded yet.
func adoptingCluster() *etcdv1alpha1.EtcdCluster {
	c := testCluster()
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderNone}
	c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{FromExisting: &etcdv1alpha1.ExistingSource{Endpoints: srcEndpoints,
		Handover: etcdv1alpha1.HandoverKeep}}
	return c
}

var srcEndpoints = []string{"http://10.245.0.1:12379", "http://10.245.0.1:12389"}

// sourceView is etcd's answer for a two-member source (IDs 0xa0, leading, and 0xa1), plus Steward's members.
func sourceView(steward ...etcd.Member) etcd.ClusterView {
	view := etcd.ClusterView{ClusterID: 0xc1, Members: []etcd.Member{
		{ID: 0xa0, Name: "infra0", PeerURLs: []string{"http://10.245.0.1:12380"}, ClientURLs: []string{srcEndpoints[0]}},
		{ID: 0xa1, Name: "infra1", PeerURLs: []string{"http://10.245.0.1:12390"}, ClientURLs: []string{srcEndpoints[1]}},
	}, Statuses: map[string]etcd.Status{
		srcEndpoints[0]: {Endpoint: srcEndpoints[0], MemberID: 0xa0, LeaderID: 0xa0, Version: "3.6.16", DBSizeBytes: 5 << 20},
		srcEndpoints[1]: {Endpoint: srcEndpoints[1], Err: errors.New("connection refused")},
	}}
	view.Members = append(view.Members, steward...)
	return view
}

func TestAssembleAdoption(t *testing.T) {
	t.Run("before admission every member is the source's, and the preflight sees each one's answer", func(t *testing.T) {
		c := adoptingCluster()
		if got := sourceEndpoints(c); !slices.Equal(got, srcEndpoints) {
			t.Errorf("observes %v, want the spec's endpoints", got)
		}
		obs := assemble(c, nil, nil, sourceView(), testOpts, time.Unix(1000, 0), noNames)
		observeAdoption(c, obs)
		for _, m := range obs.plan.Members {
			if !m.External || !plan.IsExternal(m.Name) || m.EtcdName == "" {
				t.Errorf("member %+v not observed as the source's", m)
			}
		}
		if obs.plan.LeaderID != 0xa0 {
			t.Errorf("leader %x, want a0 (from the source's answer)", obs.plan.LeaderID)
		}
		ad := obs.plan.Adoption
		if ad == nil || ad.Admitted || len(ad.Source.Members) != 2 {
			t.Fatalf("adoption %+v", ad)
		}
		m1 := ad.Source.Members[1]
		if m1.Name != "infra1" || m1.Healthy || m1.StatusErr != "connection refused" {
			t.Errorf("infra1 in the preflight: %+v", m1)
		}
		if reason, _ := plan.AdmitSource(specOf(c, testOpts), ad.Source); reason != etcdv1alpha1.ReasonSourceUnhealthy {
			t.Errorf("preflight %s, want SourceUnhealthy for infra1", reason)
		}
	})

	t.Run("after admission recorded IDs are external, Steward's learner is its own, and a retired member counts", func(t *testing.T) {
		c := adoptingCluster()
		c.Status.Adoption = &etcdv1alpha1.AdoptionStatus{Phase: etcdv1alpha1.AdoptionMigrating, ClusterID: "c1",
			ExternalMembers: []etcdv1alpha1.ExternalMember{{ID: "a0", Name: "infra0", ClientURLs: srcEndpoints[:1]},
				{ID: "a1", Name: "infra1", ClientURLs: srcEndpoints[1:]}, {ID: "a2", Name: "infra2"}}}
		learner := etcd.Member{ID: 5, PeerURLs: []string{resources.PeerURL(c, "db-lllll", testOpts)}, IsLearner: true}
		obs := assemble(c, nil, nil, sourceView(learner), testOpts, time.Unix(1000, 0), noNames)
		observeAdoption(c, obs)
		byName := map[string]plan.Member{}
		for _, m := range obs.plan.Members {
			byName[m.Name] = m
		}
		if m := byName["db-lllll"]; m.External || !m.InEtcd || !m.IsLearner {
			t.Errorf("Steward's learner %+v", m)
		}
		if m := byName[plan.ExternalMemberName("infra0", 0xa0)]; !m.External || !m.Healthy || m.PeerURL != "http://10.245.0.1:12380" {
			t.Errorf("source member infra0 %+v", m)
		}
		ad := obs.plan.Adoption
		if ad == nil || !ad.Admitted || ad.ClusterID != 0xc1 || !ad.Retired || !obs.plan.Bootstrapped {
			t.Fatalf("adoption %+v (bootstrapped %v), want admitted c1 with infra2 retired", ad, obs.plan.Bootstrapped)
		}
		listed, retired := observedExternals(obs, c.Status.Adoption)
		if len(listed) != 2 || len(retired) != 1 || retired[0].Name != "infra2" || listed[0].Role != etcdv1alpha1.RoleLeader {
			t.Errorf("listed %+v, retired %+v", listed, retired)
		}
		// The learner etcd lists without a Pod starts, knowing the source's members by their etcd names.
		a := plan.Next(specOf(c, testOpts), obs.plan)
		if a.Kind != plan.CreateMemberPods || a.InitialCluster["infra0"] != "http://10.245.0.1:12380" || a.InitialCluster["infra1"] == "" ||
			a.InitialCluster["db-lllll"] == "" || len(a.InitialCluster) != 3 {
			t.Errorf("got %s %v (%s), want the learner's Pod with the source's members in --initial-cluster", a.Kind, a.InitialCluster, a.Message)
		}
	})

	t.Run("the preflight asks every member the source's list names", func(t *testing.T) {
		c := adoptingCluster()
		view := sourceView()
		view.Members[1].ClientURLs = []string{"http://10.245.0.1:12399", srcEndpoints[1]}
		if got := unaskedSourceURLs(c, view, srcEndpoints[:1]); !slices.Equal(got, []string{"http://10.245.0.1:12399", srcEndpoints[1]}) {
			t.Errorf("asks %v besides", got)
		}
		c.Status.Adoption = &etcdv1alpha1.AdoptionStatus{ClusterID: "c1"}
		if got := unaskedSourceURLs(c, view, nil); got != nil {
			t.Errorf("after admission asks %v besides the recorded members", got)
		}
	})

	t.Run("the spec's endpoints stay after admission, and an answer through one counts for the member that gave it", func(t *testing.T) {
		c := adoptingCluster()
		natted := "http://192.0.2.7:2379" // the spec's way to infra1, whose advertised client URL Steward cannot reach
		c.Spec.Bootstrap.FromExisting.Endpoints = []string{srcEndpoints[0], natted}
		c.Status.Adoption = &etcdv1alpha1.AdoptionStatus{Phase: etcdv1alpha1.AdoptionRetiring, ClusterID: "c1",
			ExternalMembers: []etcdv1alpha1.ExternalMember{{ID: "a1", Name: "infra1", ClientURLs: srcEndpoints[1:]}},
			Retired:         []etcdv1alpha1.ExternalMember{{ID: "a0", Name: "infra0", ClientURLs: srcEndpoints[:1]}}}
		if got := sourceEndpoints(c); !slices.Equal(got, []string{srcEndpoints[1], natted}) {
			t.Errorf("observes %v, want the recorded member's client URL and the spec's endpoint that is no retired member's", got)
		}
		view := sourceView()
		view.Statuses[natted] = etcd.Status{Endpoint: natted, MemberID: 0xa1, LeaderID: 0xa0, Version: "3.6.16"}
		obs := assemble(c, nil, nil, view, testOpts, time.Unix(1000, 0), noNames)
		if m := obs.plan.Members; !slices.ContainsFunc(m, func(m plan.Member) bool { return m.EtcdName == "infra1" && m.External && m.Healthy }) {
			t.Errorf("members %+v, want infra1 healthy through the spec's endpoint", m)
		}
	})

	t.Run("a cluster that adopts nothing sees no external member", func(t *testing.T) {
		c := testCluster()
		obs := assemble(c, nil, nil, sourceView(), testOpts, time.Unix(1000, 0), noNames)
		observeAdoption(c, obs)
		for _, m := range obs.plan.Members {
			if m.External {
				t.Errorf("member %+v external", m)
			}
		}
		if obs.plan.Adoption != nil || sourceEndpoints(c) != nil {
			t.Error("an adoption without spec.bootstrap.fromExisting")
		}
	})
}

// TestAdoptionFinalizer: the finalizer is added while an adoption is under way and no source member left, taken
// away once one has, and a deletion before any of Steward's members joined lets the cluster go after the abort's
// pass (there is nothing of Steward's in the source to remove).
func TestAdoptionFinalizer(t *testing.T) {
	ctx := context.Background()
	newReconciler := func(c *etcdv1alpha1.EtcdCluster) *Reconciler {
		cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(c).WithStatusSubresource(&etcdv1alpha1.EtcdCluster{}).Build()
		return &Reconciler{Client: cl, Recorder: record.NewFakeRecorder(100), Etcd: etcd.NewPool(), Options: testOpts,
			Now: func() time.Time { return time.Unix(1000, 0) }}
	}
	pass := func(r *Reconciler, c *etcdv1alpha1.EtcdCluster) {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	}
	get := func(r *Reconciler, c *etcdv1alpha1.EtcdCluster) (*etcdv1alpha1.EtcdCluster, error) {
		var got etcdv1alpha1.EtcdCluster
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(c), &got)
		return &got, err
	}

	c := adoptingCluster()
	c.Spec.Bootstrap.FromExisting.Endpoints = []string{"http://127.0.0.1:1"} // refused at once
	r := newReconciler(c)
	pass(r, c)
	got, err := get(r, c)
	if err != nil || !controllerutil.ContainsFinalizer(got, AdoptionFinalizer) {
		t.Fatalf("after the first pass: finalizers %v (%v)", got.Finalizers, err)
	}

	// A source member has left: the cluster is Steward's from here on, and is deleted as any other.
	retired := got.DeepCopy()
	retired.Status.Adoption = &etcdv1alpha1.AdoptionStatus{Phase: etcdv1alpha1.AdoptionRetiring, ClusterID: "c1",
		Retired: []etcdv1alpha1.ExternalMember{{ID: "a1", Name: "infra1"}}}
	r2 := newReconciler(retired)
	pass(r2, retired)
	if got, err := get(r2, retired); err != nil || controllerutil.ContainsFinalizer(got, AdoptionFinalizer) {
		t.Fatalf("after a retirement: finalizers %v (%v), want none", got.Finalizers, err)
	}

	// Deleted before admission: the abort has nothing to remove, and the finalizer goes.
	if err := r.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	deleting, err := get(r, c)
	if err != nil || deleting.DeletionTimestamp.IsZero() {
		t.Fatalf("deleting: %+v (%v)", deleting.ObjectMeta, err)
	}
	pass(r, c)
	if _, err := get(r, c); !apierrors.IsNotFound(err) {
		t.Fatalf("after the abort's pass the cluster is still there (%v)", err)
	}
}

// TestSourceCredentials: Steward acts as the credentials Secret's user until status records its own user on the
// source; a Secret that cannot serve is the preflight's reason, not an error of the pass.
func TestSourceCredentials(t *testing.T) {
	withSecret := func(name string) *etcdv1alpha1.EtcdCluster {
		c := adoptingCluster()
		c.Spec.Bootstrap.FromExisting.CredentialsSecret = name
		return c
	}
	secret := func(name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testCluster().Namespace, Name: name}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	admin := secret("src-admin", map[string]string{"username": "admin", "password": "pw"})
	certOnly := secret("src-cert", map[string]string{"tls.crt": "x", "tls.key": "y"})
	tests := map[string]struct {
		cluster *etcdv1alpha1.EtcdCluster
		want    etcd.Password
		problem string
	}{
		"no Secret named":     {adoptingCluster(), etcd.Password{}, ""},
		"the Secret's user":   {withSecret("src-admin"), etcd.Password{User: "admin", Password: "pw"}, ""},
		"a missing Secret":    {withSecret("absent"), etcd.Password{}, "Secret absent (spec.bootstrap.fromExisting.credentialsSecret) does not exist"},
		"a certificate alone": {withSecret("src-cert"), etcd.Password{}, "holds no username and password"},
		"Steward's own user once added": {func() *etcdv1alpha1.EtcdCluster {
			c := withSecret("src-admin")
			c.Status.Adoption = &etcdv1alpha1.AdoptionStatus{Phase: etcdv1alpha1.AdoptionMigrating, ClusterID: "c1", OperatorUser: "steward:operator"}
			return c
		}(), etcd.Password{}, ""},
		"after the adoption": {func() *etcdv1alpha1.EtcdCluster {
			c := withSecret("src-admin")
			c.Status.Adoption = &etcdv1alpha1.AdoptionStatus{Phase: etcdv1alpha1.AdoptionComplete, ClusterID: "c1"}
			return c
		}(), etcd.Password{}, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(admin.DeepCopy(), certOnly.DeepCopy()).Build()
			r := &Reconciler{Client: cl}
			got, err := r.sourceCredentials(context.Background(), tc.cluster)
			if err != nil {
				t.Fatal(err)
			}
			if got.password != tc.want || !strings.Contains(got.problem, tc.problem) || (tc.problem == "" && got.problem != "") {
				t.Errorf("got %+v, want %+v and a problem containing %q", got, tc.want, tc.problem)
			}
		})
	}
}

func TestHandshakeProblem(t *testing.T) {
	tests := map[string]string{
		`create etcd client: context deadline exceeded`: "",
		`rpc error: code = Unavailable desc = connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`: "tls: failed to verify certificate: x509: certificate signed by unknown authority",
		`x509: certificate is valid for 10.0.0.1, not 10.245.0.1`: "x509: certificate is valid for 10.0.0.1, not 10.245.0.1",
	}
	for err, want := range tests {
		if got := handshakeProblem(err); got != want {
			t.Errorf("handshakeProblem(%q) = %q, want %q", err, got, want)
		}
	}
}
