package etcdcluster

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

// TestMaintenanceWindowStatus: the window as the planner and status see it (none, closed, open, unreadable), the
// work deferred to it in status, and one Event per change of what kind of work waits.
func TestMaintenanceWindowStatus(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 30, 0, 0, time.UTC)
	cluster := &etcdv1alpha1.EtcdCluster{}
	if w, st := maintenanceWindow(cluster, now); w != nil || st != nil {
		t.Fatalf("without a window: %+v %+v", w, st)
	}
	window := func(schedule, zone string) {
		cluster.Spec.Maintenance = &etcdv1alpha1.Maintenance{Window: &etcdv1alpha1.MaintenanceWindow{Schedule: schedule, TimeZone: zone,
			Duration: metav1.Duration{Duration: time.Hour}}}
	}
	window("0 2 * * *", "")
	w, st := maintenanceWindow(cluster, now)
	if w.Open || st.Open || !st.NextOpens.Time.Equal(time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC)) || st.Closes != nil || !strings.Contains(w.When, "2026-11-29T02:00:00Z") {
		t.Fatalf("closed: %+v %+v", w, st)
	}
	window("0 12 * * *", "")
	if w, st = maintenanceWindow(cluster, now); !w.Open || !st.Open || !st.Closes.Time.Equal(time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC)) {
		t.Fatalf("open: %+v %+v", w, st)
	}
	window("0 2 * * *", "Nowhere/Atlantis")
	if w, st = maintenanceWindow(cluster, now); w.Open || !strings.Contains(st.Error, "Nowhere/Atlantis") || !strings.Contains(w.When, "can be read") {
		t.Fatalf("unreadable: %+v %+v", w, st)
	}
	obs := obsOf(true, true, "a", "b", "c")
	obs.window = st
	if d := degradedCondition(obs, plan.Action{Kind: plan.None}, nil, metav1.Condition{Status: metav1.ConditionTrue}); d.Reason != etcdv1alpha1.ReasonInvalidMaintenanceWindow {
		t.Errorf("Degraded %+v with an unreadable window", d)
	}

	window("0 2 * * *", "")
	recorder := record.NewFakeRecorder(10)
	r := &Reconciler{Recorder: recorder}
	obs.plan.Window, obs.window = maintenanceWindow(cluster, now)
	for _, deferred := range [][]string{
		{"maintenance: defragmenting member a: 280 MiB free"},
		{"maintenance: defragmenting member a: 281 MiB free"}, // the same kind of work: no second Event
		{"maintenance: defragmenting member b: 1 MiB free", "rebalancing: adding a learner"},
		nil,
	} {
		r.statusWindow(cluster, obs, plan.Action{Kind: plan.Wait, Deferred: deferred})
		if got := cluster.Status.MaintenanceWindow; got == nil || strings.Join(got.Deferred, ";") != strings.Join(deferred, ";") || got.NextOpens == nil {
			t.Fatalf("status.maintenanceWindow %+v, want deferred %v", got, deferred)
		}
	}
	if len(recorder.Events) != 2 {
		t.Errorf("%d MaintenanceDeferred Events, want 2 (one per change of the kinds of work waiting)", len(recorder.Events))
	}
	cluster.Spec.Maintenance.Window = nil
	obs.plan.Window, obs.window = maintenanceWindow(cluster, now)
	if r.statusWindow(cluster, obs, plan.Action{}); cluster.Status.MaintenanceWindow != nil {
		t.Errorf("window removed: status %+v", cluster.Status.MaintenanceWindow)
	}
}
