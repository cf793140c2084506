package metrics

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

const secretValue = "s3cr3t-Value-0f-a-Secret"

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	return benchScheme()
}

func benchScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(etcdv1alpha1.AddToScheme(s))
	return s
}

// world is one cluster of every kind of state the gauges read, with a Secret whose values must never show.
func world() []client.Object {
	c := healthyCluster()
	c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderSecrets,
		Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "user-tls", ClientSecretName: "user-tls"}}
	c.Status.TLS = &etcdv1alpha1.TLSStatus{MemberSecret: "user-tls", ClientSecret: "user-tls", CANotAfter: ts(now.Add(time.Hour)),
		MemberNotAfter: ts(now.Add(time.Hour)), ClientNotAfter: ts(now.Add(time.Hour))}
	c.Status.Conditions[1] = cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, "ScalingUp", now)
	c.Status.StepSince = ts(now)
	c.Status.HashCheck = &etcdv1alpha1.HashCheck{Time: metav1.NewTime(now), Revision: 7, Result: "Consistent"}
	c.Status.MaintenanceWindow = &etcdv1alpha1.MaintenanceWindowStatus{Open: true}
	c.Status.Adoption = &etcdv1alpha1.AdoptionStatus{Phase: etcdv1alpha1.AdoptionMigrating,
		ExternalMembers: []etcdv1alpha1.ExternalMember{{ID: "a1", Name: "infra1"}}}
	c.Status.Standby = &etcdv1alpha1.StandbyStatus{Phase: etcdv1alpha1.StandbyFollowing, LagRevisions: 3, LagSeconds: 1}
	t0 := now.Add(-time.Hour)
	b := backupOf("c", "b", true, t0, t0.Add(time.Second), 10)
	b.Spec.Destination.PVC = &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "etcd/b.db"}
	b.Status.ClaimSpace = &etcdv1alpha1.ClaimSpace{AvailableBytes: 90, CapacityBytes: 100}
	s3 := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "to-s3"}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "c",
		Destination: etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Bucket: "b", Key: "k", Endpoint: "e",
			CredentialsSecret: &etcdv1alpha1.SecretReference{Name: "creds"}}}}}
	sched := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "c", Schedule: "@hourly", Continuous: &etcdv1alpha1.ContinuousBackup{Enabled: true},
			Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "etcd"}}}}
	sched.Status.NextScheduleTime, sched.Status.LastSuccessfulBackup = ts(now.Add(time.Hour)), &etcdv1alpha1.BackupRef{Name: "b", Time: ts(t0)}
	sched.Status.Conditions = []metav1.Condition{{Type: etcdv1alpha1.ConditionContinuousBackup, Status: metav1.ConditionTrue, Reason: etcdv1alpha1.ReasonFollowing}}
	sched.Status.Continuous = &etcdv1alpha1.ContinuousBackupStatus{Follower: "s-follower", PendingRevisions: 12,
		RecoverableFrom: &etcdv1alpha1.RecoveryPoint{Revision: 10, Time: ts(t0), Backup: "b"}, RecoverableTo: &etcdv1alpha1.RecoveryPoint{Revision: 99, Time: ts(now)}}
	secrets := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"},
			Data: map[string][]byte{etcdv1alpha1.S3AccessKeyIDKey: []byte(secretValue), etcdv1alpha1.S3SecretAccessKeyKey: []byte(secretValue)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "user-tls"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.key": []byte(secretValue), "tls.crt": []byte(secretValue), "ca.crt": []byte(secretValue)}},
	}
	return append([]client.Object{c, &b, s3, sched}, secrets...)
}

// countingReader records what a scrape reads, and refuses anything but the lists of the three kinds.
type countingReader struct {
	client.Reader
	mu    sync.Mutex
	lists map[string]int
	other []string
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.mu.Lock()
	kind := fmt.Sprintf("%T", list)
	switch list.(type) {
	case *etcdv1alpha1.EtcdClusterList, *etcdv1alpha1.EtcdBackupList, *etcdv1alpha1.EtcdBackupScheduleList:
		r.lists[kind]++
	default:
		r.other = append(r.other, "list "+kind)
	}
	r.mu.Unlock()
	return r.Reader.List(ctx, list, opts...)
}

func (r *countingReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.other = append(r.other, fmt.Sprintf("get %T %s", obj, key))
	return fmt.Errorf("the collector reads nothing but lists")
}

// TestScrape scrapes a registry holding the collector and the counters, as the operator's endpoint serves them:
// every metric of the contract is there with exactly its labels, no label value is read from a Secret, and a
// scrape lists each kind once.
func TestScrape(t *testing.T) {
	reader := &countingReader{Reader: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(world()...).Build(), lists: map[string]int{}}
	c := NewCollector()
	c.Now = func() time.Time { return now.Add(time.Minute) }
	remove := c.AddReader(reader)
	defer remove()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	for _, cv := range counters {
		reg.MustRegister(cv)
	}
	// One of each counter, for cluster c.
	defer Forget("ns", "c")
	StepTaken("ns", "c", plan.Action{Kind: plan.RemoveMember, Reason: etcdv1alpha1.ReasonReplacingMember})
	ObserveLeader("ns", "c", "c-a", "c-b")
	BackupEnded("ns", "c", ResultFailed, "UploadFailed")
	RestoreEnded("ns", "c", ResultComplete, "")

	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	got := map[string][]string{}
	for _, mf := range families {
		if !strings.HasPrefix(mf.GetName(), "steward_") {
			continue
		}
		if _, ok := contract[mf.GetName()]; !ok {
			t.Errorf("%s is exported but not in the contract", mf.GetName())
		}
		for _, m := range mf.GetMetric() {
			var names []string
			for _, lp := range m.GetLabel() {
				names = append(names, lp.GetName())
				if strings.Contains(lp.GetValue(), secretValue) || strings.Contains(secretValue, lp.GetValue()) && len(lp.GetValue()) > 3 {
					t.Errorf("%s label %s carries a Secret's value: %q", mf.GetName(), lp.GetName(), lp.GetValue())
				}
			}
			got[mf.GetName()] = names
		}
	}
	for name, labels := range contract {
		have, ok := got[name]
		if !ok {
			t.Errorf("%s is not exported", name)
			continue
		}
		want := slices.Clone(labels)
		sort.Strings(want) // the exposition sorts labels by name
		if !slices.Equal(have, want) {
			t.Errorf("%s has labels %v, want %v", name, have, want)
		}
	}
	reader.mu.Lock()
	defer reader.mu.Unlock()
	if len(reader.other) > 0 {
		t.Errorf("a scrape read more than the three lists: %v", reader.other)
	}
	for kind, n := range reader.lists {
		if n != 1 {
			t.Errorf("a scrape listed %s %d times, want once", kind, n)
		}
	}
	if len(reader.lists) != 3 {
		t.Errorf("a scrape listed %v, want each of the three kinds", reader.lists)
	}
}

// TestCollectorSources: with no source (no manager leads in the process) the collector exports nothing; two
// sources holding the same objects (two managers watching one namespace) export each series once; a removed
// source's objects go.
func TestCollectorSources(t *testing.T) {
	scheme := testScheme(t)
	c := NewCollector()
	c.Now = func() time.Time { return now }
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("%d series without a source, want 0", n)
	}
	shared := healthyCluster()
	other := healthyCluster()
	other.Namespace = "other"
	one := fake.NewClientBuilder().WithScheme(scheme).WithObjects(shared.DeepCopy()).Build()
	two := fake.NewClientBuilder().WithScheme(scheme).WithObjects(shared.DeepCopy(), other).Build()
	perCluster := len(clusterSamples(shared, now))
	removeOne := c.AddReader(one)
	if n := testutil.CollectAndCount(c); n != perCluster {
		t.Errorf("one source: %d series, want %d", n, perCluster)
	}
	removeTwo := c.AddReader(two)
	defer removeTwo()
	// CollectAndCount fails the gather (and the test) on a series collected twice.
	if n := testutil.CollectAndCount(c); n != 2*perCluster {
		t.Errorf("two sources sharing a cluster: %d series, want %d", n, 2*perCluster)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	removeOne()
	if n := testutil.CollectAndCount(c, "steward_cluster_desired_members"); n != 2 {
		t.Errorf("after removing a source: %d clusters, want 2 (the other source holds both)", n)
	}
}

// TestDeletedClusterLeavesNoSeries: once the cache no longer holds a cluster, a scrape exports nothing of it.
func TestDeletedClusterLeavesNoSeries(t *testing.T) {
	ctx := context.Background()
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(world()...).Build()
	c := NewCollector()
	c.Now = func() time.Time { return now }
	defer c.AddReader(cl)()
	if n := testutil.CollectAndCount(c, "steward_cluster_desired_members", "steward_backup_last_size_bytes"); n != 2 {
		t.Fatalf("%d series before the deletion, want 2", n)
	}
	if err := cl.Delete(ctx, &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}); err != nil {
		t.Fatal(err)
	}
	// The schedule's series follow the schedule, and the claim's the backups kept on it, not the cluster.
	for _, s := range c.samples(ctx) {
		if s.labels[0] == "ns" && s.f != scheduleNext && s.f != scheduleEvery && s.f != scheduleLast && s.f != scheduleClaim &&
			s.f != claimAvailable && s.f != claimCapacity && s.f != continuousFollowing && s.f != continuousTo && s.f != continuousFrom && s.f != continuousPending {
			t.Errorf("deleted cluster still exports %s", s)
		}
	}
}

// TestSetupWithManagerTwice: several managers in one process (the e2e tests start one per test) each set up
// the metrics; registration happens once and never panics.
func TestSetupWithManagerTwice(t *testing.T) {
	for range 2 {
		mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{Scheme: testScheme(t),
			Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
		if err != nil {
			t.Fatal(err)
		}
		if err := SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	Register()
}
