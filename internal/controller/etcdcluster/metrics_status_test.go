package etcdcluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/metrics"
	"steward.dev/steward/internal/plan"
)

func TestStepSince(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(t0.Add(time.Minute))
	progressing := func(status metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Type: etcdv1alpha1.ConditionProgressing, Status: status, Reason: reason}
	}
	tests := map[string]struct {
		prev  *metav1.Condition
		next  *metav1.Condition
		since *metav1.Time
		want  *metav1.Time
	}{
		"first pass, a step begins":           {nil, progressing(metav1.ConditionTrue, "ScalingUp"), nil, &now},
		"the same step goes on":               {progressing(metav1.ConditionTrue, "ScalingUp"), progressing(metav1.ConditionTrue, "ScalingUp"), &t0, &t0},
		"the step changes":                    {progressing(metav1.ConditionTrue, "ScalingUp"), progressing(metav1.ConditionTrue, "WaitingForMembers"), &t0, &now},
		"a step begins after rest":            {progressing(metav1.ConditionFalse, "Reconciled"), progressing(metav1.ConditionTrue, "Upgrading"), nil, &now},
		"done: nothing progressing":           {progressing(metav1.ConditionTrue, "Upgrading"), progressing(metav1.ConditionFalse, "Reconciled"), &t0, nil},
		"a status without stepSince restarts": {progressing(metav1.ConditionTrue, "Upgrading"), progressing(metav1.ConditionTrue, "Upgrading"), nil, &now},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := stepSince(tc.prev, *tc.next, tc.since, now)
			if (got == nil) != (tc.want == nil) || got != nil && !got.Equal(tc.want) {
				t.Errorf("stepSince = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMemberAlarms(t *testing.T) {
	got := memberAlarms([]etcd.Alarm{{MemberID: 1, Type: "NOSPACE"}, {MemberID: 0xbeef, Type: "CORRUPT"}}, map[uint64]string{1: "db-a"})
	want := []etcdv1alpha1.MemberAlarm{{Member: "db-a", MemberID: "1", Alarm: "NOSPACE"}, {Member: plan.StrayMemberName(0xbeef), MemberID: "beef", Alarm: "CORRUPT"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("memberAlarms = %+v, want %+v", got, want)
	}
	if memberAlarms(nil, nil) != nil {
		t.Error("no alarm must clear status.alarms")
	}
}

// TestWriteStatusMetricFields replays passes through writeStatus: voters and learners follow etcd's list and stay
// while there is none, alarms follow etcd's alarm list and stay while it cannot be read, and stepSince marks when
// the Progressing reason began.
func TestWriteStatusMetricFields(t *testing.T) {
	ctx := context.Background()
	cluster := testCluster()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(cluster).WithStatusSubresource(cluster).Build()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &Reconciler{Client: c, Recorder: record.NewFakeRecorder(100), Etcd: etcd.NewPool(), Options: testOpts, Now: func() time.Time { return now }}
	scaling := plan.Action{Kind: plan.AddLearner, Reason: etcdv1alpha1.ReasonScalingUp, Message: "adding"}
	type pass struct {
		obs          func() *observation
		action       plan.Action
		wantVoters   int32
		wantLearners int32
		wantAlarms   int
		wantSince    *time.Time
	}
	t0 := now
	t2 := now.Add(2 * time.Minute)
	passes := []pass{
		{func() *observation {
			o := obsOf(true, true, "a", "b", "c")
			o.plan.Members[2].IsLearner = true
			o.view.Alarms = []etcd.Alarm{{MemberID: 1, Type: "NOSPACE"}}
			return o
		}, scaling, 2, 1, 1, &t0},
		// No member list: the counts and the alarms of the last one stay; the step goes on.
		{func() *observation { return obsOf(true, false, "a") }, scaling, 2, 1, 1, &t0},
		// An alarm list that could not be read says nothing either.
		{func() *observation {
			o := obsOf(true, true, "a", "b", "c")
			o.view.AlarmErr = errors.New("timeout")
			return o
		}, plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForMembers, Message: "w"}, 3, 0, 1, &t2},
		{func() *observation { return obsOf(true, true, "a", "b", "c") }, plan.Action{Kind: plan.None, Reason: etcdv1alpha1.ReasonReconciled, Message: "ok"}, 3, 0, 0, nil},
	}
	for i, p := range passes {
		var current etcdv1alpha1.EtcdCluster
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), &current); err != nil {
			t.Fatal(err)
		}
		if err := r.writeStatus(ctx, &current, p.obs(), p.action, nil); err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), &current); err != nil {
			t.Fatal(err)
		}
		st := current.Status
		if st.Voters != p.wantVoters || st.Learners != p.wantLearners || len(st.Alarms) != p.wantAlarms {
			t.Errorf("pass %d: voters %d learners %d alarms %v, want %d %d %d", i, st.Voters, st.Learners, st.Alarms, p.wantVoters, p.wantLearners, p.wantAlarms)
		}
		switch {
		case p.wantSince == nil && st.StepSince != nil, p.wantSince != nil && (st.StepSince == nil || !st.StepSince.Time.Equal(*p.wantSince)):
			t.Errorf("pass %d: stepSince %v, want %v", i, st.StepSince, p.wantSince)
		}
		now = now.Add(time.Minute)
	}
}

// TestCertificateExpiryKinds: status tells the member certificates' expiry from the client certificate's, and
// notAfter stays the first of both.
func TestCertificateExpiryKinds(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cluster := testCluster()
	r, _ := tlsReconciler(t, &now, cluster)
	ts, err := r.ensureTLS(ctx, cluster, "Steward", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour) // the member's certificate is issued later, and so expires later
	obs := &observation{plan: plan.Observation{Members: []plan.Member{{Name: "db-aaaaa", HasPod: true, HasPVC: true, InEtcd: true}}}}
	if err := r.ensureMemberCerts(ctx, cluster, ts, obs); err != nil {
		t.Fatal(err)
	}
	st := ts.status
	if st.ClientNotAfter == nil || st.MemberNotAfter == nil || st.NotAfter == nil {
		t.Fatalf("expiries missing: %+v", st)
	}
	if got := st.MemberNotAfter.Sub(st.ClientNotAfter.Time); got != time.Hour {
		t.Errorf("member certificate expires %s after the client's, want 1h", got)
	}
	if !st.NotAfter.Equal(st.ClientNotAfter) {
		t.Errorf("notAfter %s, want the first expiry %s", st.NotAfter, st.ClientNotAfter)
	}
}

// TestStepRecorded: a step taken is one Event on the cluster and one count of its kind; a step not taken (the
// Pod to delete is already gone) is neither.
func TestStepRecorded(t *testing.T) {
	ctx := context.Background()
	cluster := testCluster()
	cluster.Name = "step-recorded"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "step-recorded-aaaaa", UID: "pod-uid"}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(cluster, pod).Build()
	rec := record.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Recorder: rec, Etcd: etcd.NewPool(), Options: testOpts, Now: time.Now}
	metrics.Register()
	defer metrics.Forget("ns", cluster.Name)
	action := plan.Action{Kind: plan.DeleteMemberPod, Members: []string{pod.Name}, Reason: etcdv1alpha1.ReasonRemovingLeftoverMember}
	if err := r.act(ctx, cluster, &observation{pods: map[string]*corev1.Pod{pod.Name: pod}}, action); err != nil {
		t.Fatal(err)
	}
	if err := r.act(ctx, cluster, &observation{pods: map[string]*corev1.Pod{}}, action); err != nil {
		t.Fatal(err)
	}
	if len(rec.Events) != 1 {
		t.Fatalf("%d Events, want 1", len(rec.Events))
	}
	if e := <-rec.Events; !strings.HasPrefix(e, "Normal MemberPodDeleted ") {
		t.Errorf("Event %q, want MemberPodDeleted", e)
	}
	want := `
# HELP steward_cluster_steps_total Steps Steward took on the cluster, by kind (the plan's action kind in snake_case).
# TYPE steward_cluster_steps_total counter
steward_cluster_steps_total{cluster="step-recorded",kind="delete_member_pod",namespace="ns"} 1
`
	if err := testutil.GatherAndCompare(&onlyCluster{ctrlmetrics.Registry, cluster.Name}, strings.NewReader(want), "steward_cluster_steps_total"); err != nil {
		t.Error(err)
	}
}

// onlyCluster gathers the series of one cluster: other tests of the package count steps of their own.
type onlyCluster struct {
	prometheus.Gatherer
	cluster string
}

func (o *onlyCluster) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := o.Gatherer.Gather()
	for _, mf := range mfs {
		var kept []*dto.Metric
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "cluster" && l.GetValue() == o.cluster {
					kept = append(kept, m)
				}
			}
		}
		mf.Metric = kept
	}
	return mfs, err
}

// TestSteadyPassWritesNothing: a pass that finds the cluster as the last one left it sends no status request at
// all (an operator of hundreds of steady clusters would otherwise patch each of them every pass), and a pass
// that finds a change writes it.
func TestSteadyPassWritesNothing(t *testing.T) {
	ctx := context.Background()
	cluster := testCluster()
	var patches int
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(cluster).WithStatusSubresource(cluster).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &Reconciler{Client: c, Recorder: record.NewFakeRecorder(100), Etcd: etcd.NewPool(), Options: testOpts, Now: func() time.Time { return now }}
	steady := plan.Action{Kind: plan.None, Reason: etcdv1alpha1.ReasonReconciled, Message: "ok"}
	pass := func(o *observation) {
		t.Helper()
		var current etcdv1alpha1.EtcdCluster
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), &current); err != nil {
			t.Fatal(err)
		}
		if err := r.writeStatus(ctx, &current, o, steady, nil); err != nil {
			t.Fatal(err)
		}
		now = now.Add(30 * time.Second)
	}
	pass(obsOf(true, true, "a", "b", "c"))
	if patches != 1 {
		t.Fatalf("first pass: %d status patches, want 1", patches)
	}
	for i := 0; i < 3; i++ {
		pass(obsOf(true, true, "a", "b", "c"))
	}
	if patches != 1 {
		t.Fatalf("three steady passes sent %d more status patches, want none", patches-1)
	}
	changed := obsOf(true, true, "a", "b", "c")
	changed.plan.Members[2].Healthy = false
	pass(changed)
	if patches != 2 {
		t.Fatalf("a pass that found a member unhealthy sent %d status patches, want 1", patches-1)
	}
}
