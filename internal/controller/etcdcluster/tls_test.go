package etcdcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// testScheme knows Kubernetes' types and Steward's.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := etcdv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func tlsReconciler(t *testing.T, now *time.Time, objs ...client.Object) (*Reconciler, client.Client) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
	return &Reconciler{Client: c, Recorder: record.NewFakeRecorder(100), Etcd: etcd.NewPool(), Options: testOpts,
		Now: func() time.Time { return *now }}, c
}

// newMemberPod is the Pod of a new member name of cluster, as the first member of a bootstrap gets it.
func newMemberPod(cluster *etcdv1alpha1.EtcdCluster, name string) *corev1.Pod {
	return resources.MemberPod(cluster, resources.Member{Name: name, State: "new",
		InitialCluster: map[string]string{name: resources.PeerURL(cluster, name, testOpts)}}, testOpts)
}

func secretCert(t *testing.T, c client.Client, name string) (*corev1.Secret, string) {
	t.Helper()
	var s corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &s); err != nil {
		t.Fatalf("Secret %s: %v", name, err)
	}
	cert, err := pki.ParseCertificate(s.Data[resources.SecretCertKey])
	if err != nil {
		t.Fatalf("Secret %s: %v", name, err)
	}
	return &s, cert.SerialNumber.String()
}

// TestEnsureTLSLifecycle replays passes over time: the first creates the CA and the client certificate, later
// ones leave them alone until two thirds of the lifetime have passed, then renew the client certificate in place
// under the same CA; a changed lifetime re-issues at once.
func TestEnsureTLSLifecycle(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cluster := testCluster()
	r, c := tlsReconciler(t, &now, cluster)

	ts, err := r.ensureTLS(ctx, cluster, "Steward", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ts.status.CASecret != "db-ca" || ts.status.ClientSecret != "db-client" || ts.status.NotAfter == nil ||
		!ts.status.NotAfter.Time.Equal(now.Add(resources.DefaultCertificateLifetime)) {
		t.Fatalf("status %+v", ts.status)
	}
	ca, caSerial := secretCert(t, c, "db-ca")
	if !metav1.IsControlledBy(ca, cluster) || ca.Type != corev1.SecretTypeTLS {
		t.Fatalf("CA Secret %+v", ca.ObjectMeta)
	}
	_, first := secretCert(t, c, "db-client")

	steps := []struct {
		after       time.Duration
		mutate      func(*etcdv1alpha1.EtcdCluster)
		wantRenewed bool
	}{
		{after: time.Hour},
		{after: 59 * 24 * time.Hour},
		{after: 60*24*time.Hour + time.Minute, wantRenewed: true},
		{after: 61 * 24 * time.Hour},
		{after: 61 * 24 * time.Hour, mutate: func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "Steward", CertificateLifetime: &metav1.Duration{Duration: time.Hour}}
		}, wantRenewed: true},
		{after: 61*24*time.Hour + time.Minute},
	}
	start, prev := now, first
	for i, s := range steps {
		now = start.Add(s.after)
		if s.mutate != nil {
			s.mutate(cluster)
		}
		if _, err := r.ensureTLS(ctx, cluster, "Steward", false, nil); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		_, serial := secretCert(t, c, "db-client")
		if renewed := serial != prev; renewed != s.wantRenewed {
			t.Fatalf("step %d (+%s): renewed %v, want %v", i, s.after, renewed, s.wantRenewed)
		}
		prev = serial
		if _, again := secretCert(t, c, "db-ca"); again != caSerial {
			t.Fatalf("step %d: the CA changed", i)
		}
	}
}

func TestEnsureTLSRefusals(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t.Run("members hold certificates, their CA is gone: no new CA", func(t *testing.T) {
		cluster := testCluster()
		cluster.Status.Bootstrapped = true
		r, c := tlsReconciler(t, &now, cluster)
		_, err := r.ensureTLS(ctx, cluster, "Steward", true, nil)
		if err == nil || !strings.Contains(err.Error(), "restore the Secret") {
			t.Fatalf("error %v", err)
		}
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "db-ca"}, &s); err == nil {
			t.Fatal("a new CA was created for a running cluster")
		}
	})
	t.Run("Secret Steward does not own: not taken over", func(t *testing.T) {
		cluster := testCluster()
		foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db-ca"}, Data: map[string][]byte{"x": []byte("y")}}
		r, _ := tlsReconciler(t, &now, cluster, foreign)
		if _, err := r.ensureTLS(ctx, cluster, "Steward", false, nil); err == nil || !strings.Contains(err.Error(), "not owned") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("bootstrap interrupted, Pods hold certificates, no CA yet: a CA", func(t *testing.T) {
		cluster := testCluster()
		r, c := tlsReconciler(t, &now, cluster)
		if _, err := r.ensureTLS(ctx, cluster, "Steward", true, nil); err != nil {
			t.Fatal(err)
		}
		secretCert(t, c, "db-ca")
	})
	t.Run("formed plaintext cluster switching to TLS: a new CA", func(t *testing.T) {
		cluster := testCluster()
		cluster.Status.Bootstrapped = true
		r, c := tlsReconciler(t, &now, cluster)
		if _, err := r.ensureTLS(ctx, cluster, "Steward", false, nil); err != nil {
			t.Fatal(err)
		}
		secretCert(t, c, "db-ca")
	})
	t.Run("plaintext cluster: nothing", func(t *testing.T) {
		cluster := testCluster()
		cluster.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "None"}
		r, c := tlsReconciler(t, &now, cluster)
		ts, err := r.ensureTLS(ctx, cluster, "", false, nil)
		var list corev1.SecretList
		if err != nil || ts != nil || c.List(ctx, &list) != nil || len(list.Items) != 0 {
			t.Fatalf("state %v, error %v, %d Secrets", ts, err, len(list.Items))
		}
	})
}

// TestEnsureMemberCerts: members with a Pod get their certificate; the Secret of a member that is gone is
// deleted once it is older than the grace period, and a young one (its member's objects not in the cache yet)
// is kept.
func TestEnsureMemberCerts(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cluster := testCluster()
	gone := func(name string, age time.Duration) *corev1.Secret {
		s := resources.TLSSecret(cluster, resources.MemberSecretName(name), resources.MemberLabels(cluster, name), nil, nil, nil)
		s.CreationTimestamp = metav1.NewTime(now.Add(-age))
		return s
	}
	r, c := tlsReconciler(t, &now, cluster, gone("db-old", time.Hour), gone("db-new", time.Second))
	ts, err := r.ensureTLS(ctx, cluster, "Steward", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	obs := &observation{plan: plan.Observation{Members: []plan.Member{
		{Name: "db-aaaaa", HasPod: true, HasPVC: true, InEtcd: true},
		{Name: "db-bbbbb", HasPVC: true}, // no Pod: its certificate comes with the Pod
	}}}
	if err := r.ensureMemberCerts(ctx, cluster, ts, obs); err != nil {
		t.Fatal(err)
	}
	s, _ := secretCert(t, c, "db-aaaaa-tls")
	cert, _ := pki.ParseCertificate(s.Data[resources.SecretCertKey])
	if cert.Subject.CommonName != "db-aaaaa" || cert.DNSNames[0] != "db-aaaaa.db-peer.ns.svc.cluster.local" {
		t.Errorf("member certificate %s %v", cert.Subject.CommonName, cert.DNSNames)
	}
	for name, want := range map[string]bool{"db-bbbbb-tls": false, "db-old-tls": false, "db-new-tls": true} {
		var s corev1.Secret
		err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &s)
		if exists := err == nil; exists != want {
			t.Errorf("Secret %s exists %v, want %v", name, exists, want)
		}
	}
}

// TestLegacyPlaintext: only Pods created by a Steward without TLS stop a cluster whose spec asks for TLS; a
// switch between plaintext and TLS in either direction is not a mismatch any more.
func TestLegacyPlaintext(t *testing.T) {
	plainSpec := func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: "None"} }
	legacy := func(p *corev1.Pod) { delete(p.Annotations, resources.AnnotationTLS) }
	tests := map[string]struct {
		spec    func(*etcdv1alpha1.EtcdCluster)
		podSpec func(*etcdv1alpha1.EtcdCluster)
		pod     func(*corev1.Pod)
		want    bool
	}{
		"TLS cluster, TLS Pods":                          {},
		"plaintext cluster, plaintext Pods":              {spec: plainSpec, podSpec: plainSpec},
		"Pod of a Steward without TLS, spec defaulted":   {pod: legacy, want: true},
		"Pod of a Steward without TLS, spec set to None": {spec: plainSpec, pod: legacy},
		"switching TLS members to plaintext":             {spec: plainSpec},
		"switching plaintext members to TLS":             {podSpec: plainSpec},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c, podCluster := testCluster(), testCluster()
			for _, f := range []struct {
				mutate func(*etcdv1alpha1.EtcdCluster)
				c      *etcdv1alpha1.EtcdCluster
			}{{tt.spec, c}, {tt.podSpec, podCluster}} {
				if f.mutate != nil {
					f.mutate(f.c)
				}
			}
			pods, _ := fixture(podCluster, []string{"db-aaaaa", "db-bbbbb"}, 2)
			for i := range pods {
				if tt.pod != nil {
					tt.pod(&pods[i])
				}
			}
			wait, got := tlsWait(c, pods)
			if got != tt.want || got && (wait.Kind != plan.Wait || wait.Reason != etcdv1alpha1.ReasonTLSProviderMismatch || !strings.Contains(wait.Message, "db-")) {
				t.Fatalf("mismatch %v (%+v), want %v", got, wait, tt.want)
			}
		})
	}
}

// TestMixedProviders: a TLS provider in the spec while members still hold another provider's certificates (a
// switch to plaintext not finished) stops everything; plaintext members, or members of the same provider, do not.
func TestMixedProviders(t *testing.T) {
	withProvider := func(provider string) func(*etcdv1alpha1.EtcdCluster) {
		return func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: provider}
			if provider == etcdv1alpha1.TLSProviderSecrets {
				c.Spec.TLS.Secrets = &etcdv1alpha1.TLSSecrets{MemberSecretName: "m", ClientSecretName: "c"}
			}
		}
	}
	bridge := func(p *corev1.Pod) { p.Annotations[resources.AnnotationTLSListeners] = "plaintext" }
	tests := map[string]struct {
		spec, pods string
		pod        func(*corev1.Pod)
		want       bool
	}{
		"same provider":                           {spec: "Steward", pods: "Steward"},
		"plaintext members, any provider":         {spec: "Secrets", pods: "None"},
		"spec None while members switch back":     {spec: "None", pods: "Steward"},
		"another provider while members hold TLS": {spec: "Secrets", pods: "Steward", want: true},
		"another provider while members Bridge":   {spec: "Secrets", pods: "Steward", pod: bridge, want: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c, podCluster := testCluster(), testCluster()
			withProvider(tt.spec)(c)
			withProvider(tt.pods)(podCluster)
			pods, _ := fixture(podCluster, []string{"db-aaaaa", "db-bbbbb"}, 2)
			for i := range pods {
				if tt.pod != nil {
					tt.pod(&pods[i])
				}
			}
			wait, got := tlsWait(c, pods)
			if got != tt.want || got && (wait.Kind != plan.Wait || wait.Reason != etcdv1alpha1.ReasonTLSProviderMismatch || !strings.Contains(wait.Message, "db-")) {
				t.Fatalf("mixed %v (%+v), want %v", got, wait, tt.want)
			}
		})
	}
}

// TestTLSSecretOf: what dropTLS deletes after a switch to plaintext: the cluster's own TLS Secrets and those
// cert-manager wrote for its Certificates; never a Secret it does not recognise by name, label and origin.
func TestTLSSecretOf(t *testing.T) {
	cluster := testCluster()
	owned := func(name string, labels map[string]string) *corev1.Secret {
		return resources.TLSSecret(cluster, name, labels, nil, nil, nil)
	}
	byCertManager := func(name string, labels map[string]string) *corev1.Secret {
		s := owned(name, labels)
		s.OwnerReferences = nil
		s.Annotations = map[string]string{"cert-manager.io/certificate-name": name}
		return s
	}
	users := func(name string) *corev1.Secret {
		s := owned(name, resources.ClusterLabels(cluster))
		s.OwnerReferences = nil
		return s
	}
	member := resources.MemberLabels(cluster, "db-aaaaa")
	tests := map[string]struct {
		secret *corev1.Secret
		want   bool
	}{
		"CA":                                {owned("db-ca", resources.ClusterLabels(cluster)), true},
		"client":                            {owned("db-client", resources.ClusterLabels(cluster)), true},
		"member":                            {owned("db-aaaaa-tls", member), true},
		"cert-manager's member Secret":      {byCertManager("db-aaaaa-tls", member), true},
		"cert-manager's client Secret":      {byCertManager("db-client", resources.ClusterLabels(cluster)), true},
		"a Secret of that name nobody owns": {users("db-client"), false},
		"another name":                      {owned("db-backup-creds", resources.ClusterLabels(cluster)), false},
		"member Secret of another member":   {owned("db-bbbbb-tls", member), false},
		"another cluster's label":           {owned("db-ca", map[string]string{resources.LabelCluster: "other"}), false},
		"cert-manager Secret of another one": {func() *corev1.Secret {
			s := byCertManager("db-client", resources.ClusterLabels(cluster))
			s.Annotations["cert-manager.io/certificate-name"] = "x"
			return s
		}(), false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tlsSecretOf(cluster, tt.secret); got != tt.want {
				t.Fatalf("tlsSecretOf = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRefreshCertificates replays passes over a member whose Pod predates the annotation: the pass that issues
// its certificate leaves the Pod alone (the Secret's own watch event brings the next pass), the next pass
// annotates it, passes that see the same Secret write nothing, and a re-issue (a new lifetime) is annotated the
// pass after; nothing is annotated while the TLS material waits (tlsState.wait) or the cluster is paused. Only
// the annotation moves: the Pod's spec stays as created.
func TestRefreshCertificates(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cluster := testCluster()
	pod := newMemberPod(cluster, "db-aaaaa")
	r, c := tlsReconciler(t, &now, cluster, pod)
	rec := r.Recorder.(*record.FakeRecorder)
	var created corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &created); err != nil {
		t.Fatal(err)
	}

	pass := func() corev1.Pod {
		t.Helper()
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
			t.Fatal(err)
		}
		ts, err := r.ensureTLS(ctx, cluster, "Steward", true, nil)
		if err != nil {
			t.Fatal(err)
		}
		obs := &observation{pods: map[string]*corev1.Pod{p.Name: &p},
			plan: plan.Observation{Members: []plan.Member{{Name: "db-aaaaa", HasPod: true, HasPVC: true, InEtcd: true}}}}
		if err := r.ensureMemberCerts(ctx, cluster, ts, obs); err != nil {
			t.Fatal(err)
		}
		if err := r.refreshCertificates(ctx, cluster, ts, obs); err != nil {
			t.Fatal(err)
		}
		var after corev1.Pod
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &after); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(after.Spec, created.Spec) {
			t.Fatal("the Pod's spec changed")
		}
		return after
	}
	refreshed := func() int {
		n := 0
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.Contains(e, "CertificateVolumesRefreshed") {
				n++
			}
		}
		return n
	}
	certificates := func(p corev1.Pod) string { return p.Annotations[resources.AnnotationCertificates] }

	if p := pass(); certificates(p) != "" || p.ResourceVersion != created.ResourceVersion {
		t.Fatalf("the pass that issued the certificate annotated the Pod: %q", certificates(p))
	}
	first := pass()
	if certificates(first) == "" || refreshed() != 1 {
		t.Fatal("the pass that saw the issued Secret did not annotate the Pod once")
	}
	for range 3 {
		if p := pass(); p.ResourceVersion != first.ResourceVersion || refreshed() != 0 {
			t.Fatalf("a pass that saw the same Secret wrote the Pod again: %q", certificates(p))
		}
	}

	cluster.Spec.TLS = &etcdv1alpha1.TLSSpec{CertificateLifetime: &metav1.Duration{Duration: 24 * time.Hour}}
	if p := pass(); certificates(p) != certificates(first) {
		t.Fatalf("the pass that re-issued the certificate annotated the Pod: %q", certificates(p))
	}
	second := pass()
	if certificates(second) == "" || certificates(second) == certificates(first) || refreshed() != 1 {
		t.Fatalf("the re-issued certificate was not annotated once: %q after %q", certificates(second), certificates(first))
	}
	if p := pass(); p.ResourceVersion != second.ResourceVersion {
		t.Fatal("a pass after the refresh wrote the Pod again")
	}

	// While the provider's material is unusable (a Wait), Steward annotates nothing.
	cluster.Spec.TLS.CertificateLifetime = &metav1.Duration{Duration: 48 * time.Hour}
	pass() // re-issues
	ts, err := r.ensureTLS(ctx, cluster, "Steward", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var waiting corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &waiting); err != nil {
		t.Fatal(err)
	}
	obsWait := &observation{pods: map[string]*corev1.Pod{waiting.Name: &waiting},
		plan: plan.Observation{Members: []plan.Member{{Name: "db-aaaaa", HasPod: true, HasPVC: true, InEtcd: true}}}}
	if err := r.ensureMemberCerts(ctx, cluster, ts, obsWait); err != nil {
		t.Fatal(err)
	}
	ts.wait = &plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonTLSSecretInvalid}
	if err := r.refreshCertificates(ctx, cluster, ts, obsWait); err != nil || refreshed() != 0 {
		t.Fatalf("annotated while the TLS material waits (%v)", err)
	}
	ts.wait = nil
	if err := r.refreshCertificates(ctx, cluster, ts, obsWait); err != nil || refreshed() != 1 {
		t.Fatalf("not annotated once the wait is gone (%v)", err)
	}

	cluster.Spec.Paused = true
	var p corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &p); err != nil {
		t.Fatal(err)
	}
	delete(p.Annotations, resources.AnnotationCertificates)
	if err := c.Update(ctx, &p); err != nil {
		t.Fatal(err)
	}
	if ts, err = r.ensureTLS(ctx, cluster, "Steward", true, nil); err != nil {
		t.Fatal(err)
	}
	obs := &observation{pods: map[string]*corev1.Pod{p.Name: &p},
		plan: plan.Observation{Members: []plan.Member{{Name: "db-aaaaa", HasPod: true, HasPVC: true, InEtcd: true}}}}
	if err := r.keepInStep(ctx, cluster, ts, obs, plan.Decision{}); err != nil {
		t.Fatal(err)
	}
	if len(ts.readOnly()) == 0 || refreshed() != 0 {
		t.Error("a paused cluster's Pod was annotated")
	}
}
