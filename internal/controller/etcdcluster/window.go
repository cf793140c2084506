package etcdcluster

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

// maintenanceWindow is spec.maintenance.window at now, for the planner (nil without a window) and for status: a
// window that cannot be read is closed for good, and says why.
func maintenanceWindow(c *etcdv1alpha1.EtcdCluster, now time.Time) (*plan.Window, *etcdv1alpha1.MaintenanceWindowStatus) {
	if c.Spec.Maintenance == nil || c.Spec.Maintenance.Window == nil {
		return nil, nil
	}
	spec := c.Spec.Maintenance.Window
	w, err := plan.ParseWindow(spec.Schedule, spec.Duration.Duration, spec.TimeZone)
	if err != nil {
		return &plan.Window{When: "none until spec.maintenance.window can be read: " + err.Error()},
			&etcdv1alpha1.MaintenanceWindowStatus{Error: err.Error()}
	}
	open, closes, next := w.At(now)
	st := &etcdv1alpha1.MaintenanceWindowStatus{Open: open}
	when := "no window is scheduled"
	if !next.IsZero() {
		st.NextOpens = &metav1.Time{Time: next}
		when = "next opens " + next.UTC().Format(time.RFC3339)
	}
	if open {
		st.Closes = &metav1.Time{Time: closes}
	}
	return &plan.Window{Open: open, When: when}, st
}

// statusWindow writes status.maintenanceWindow: the window as this pass computed it and the work the plan
// deferred to it, with an Event when work begins to wait or what waits changes.
func (r *Reconciler) statusWindow(cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) {
	st := &cluster.Status
	var before []string
	if st.MaintenanceWindow != nil {
		before = st.MaintenanceWindow.Deferred
	}
	if obs.window == nil {
		st.MaintenanceWindow = nil
		return
	}
	next := *obs.window.DeepCopy()
	next.Deferred = action.Deferred
	st.MaintenanceWindow = &next
	// Once per change of what waits, not of the sizes and names its messages carry.
	if len(next.Deferred) > 0 && !slices.Equal(workKinds(before), workKinds(next.Deferred)) {
		r.Recorder.Event(cluster, corev1.EventTypeNormal, etcdv1alpha1.ReasonMaintenanceDeferred,
			fmt.Sprintf("waiting for the maintenance window (%s): %v", obs.plan.Window.When, next.Deferred))
	}
}

// untilWindow is how long until the next window opens when this pass deferred work to it, and 0 otherwise: the
// pass after is due then.
func untilWindow(obs *observation, action plan.Action, now time.Time) time.Duration {
	if len(action.Deferred) == 0 || obs.window == nil || obs.window.Open || obs.window.NextOpens == nil {
		return 0
	}
	return max(obs.window.NextOpens.Sub(now), time.Second)
}

// workKinds are the kinds of deferred work ("maintenance", "rebalancing"), each entry's text before its colon.
func workKinds(deferred []string) []string {
	out := make([]string, len(deferred))
	for i, d := range deferred {
		out[i], _, _ = strings.Cut(d, ":")
	}
	return out
}
