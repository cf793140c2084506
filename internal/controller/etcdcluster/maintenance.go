package etcdcluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// Defaults of spec.maintenance (also the CRD's defaults, for objects written before the fields existed).
var (
	defaultDefragMinFree        = resource.MustParse("64Mi")
	defaultDefragMinFreePercent = int32(50)
	defaultRevisionMargin       = int64(1000)
)

// maintenanceOf is what spec.maintenance asks of the planner, with the quota members run with.
func maintenanceOf(c *etcdv1alpha1.EtcdCluster) plan.Maintenance {
	m := plan.Maintenance{Quota: resources.QuotaBackendBytes(c), MaxQuota: resources.MaxQuotaBackendBytes(c)}
	spec := c.Spec.Maintenance
	if spec == nil {
		return m
	}
	m.ReplaceMismatched = spec.CorruptionCheck != nil && spec.CorruptionCheck.ReplaceMismatchedMembers
	if d := spec.Defragmentation; d != nil {
		m.DefragMinFreeBytes, m.DefragMinFreePercent = defaultDefragMinFree.Value(), int64(defaultDefragMinFreePercent)
		if d.MinFreeBytes != nil {
			m.DefragMinFreeBytes = d.MinFreeBytes.Value()
		}
		if d.MinFreePercent != nil {
			m.DefragMinFreePercent = int64(*d.MinFreePercent)
		}
	}
	if n := spec.RecoverFromNoSpace; n != nil {
		m.RecoverFromNoSpace, m.RevisionMargin = true, defaultRevisionMargin
		if n.RevisionMargin != nil {
			m.RevisionMargin = *n.RevisionMargin
		}
	}
	return m
}

// observeNoSpace notes a raised NOSPACE alarm, and, when Steward is to recover from it, the revision the cluster
// is compacted to (a HashKV of one member: read only then). A failed read leaves it unknown; the planner waits.
func (r *Reconciler) observeNoSpace(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) {
	if obs.view.AlarmErr != nil {
		return
	}
	for _, a := range obs.view.Alarms {
		obs.plan.NoSpaceAlarm = obs.plan.NoSpaceAlarm || a.Type == etcdAlarmNoSpace
	}
	if !obs.plan.NoSpaceAlarm || cluster.Spec.Maintenance == nil || cluster.Spec.Maintenance.RecoverFromNoSpace == nil {
		return
	}
	for _, s := range obs.statusOf {
		if !s.Healthy() {
			continue
		}
		rev, err := r.Etcd.CompactRevision(ctx, client.ObjectKeyFromObject(cluster).String(), obs.endpoints, s.Endpoint)
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("Could not read the compacted revision", "endpoint", s.Endpoint, "error", err.Error())
			continue
		}
		obs.plan.CompactRevision, obs.plan.CompactRevisionKnown = rev, true
		return
	}
}

// backupRunning reports whether a backup of the cluster has not ended (or not yet started): its Job may be
// streaming a snapshot, which a defragmentation of the member it reads from would stall.
func backupRunning(cluster *etcdv1alpha1.EtcdCluster, backups []etcdv1alpha1.EtcdBackup) bool {
	for i := range backups {
		b := &backups[i]
		if b.Spec.ClusterName == cluster.Name && b.DeletionTimestamp == nil && !etcdv1alpha1.Finished(b.Status.Conditions) {
			return true
		}
	}
	return false
}

// parseDefragmented reads AnnotationLastDefragmentation: when, how many bytes it gave back, and the revision
// the cluster was compacted to then (absent from marks written before it was recorded: 0). Nil when absent or
// malformed.
func parseDefragmented(s string) (*etcdv1alpha1.Defragmented, int64) {
	fields := strings.Fields(s)
	if len(fields) < 2 || len(fields) > 3 {
		return nil, 0
	}
	t, err := time.Parse(time.RFC3339, fields[0])
	n, err2 := strconv.ParseInt(fields[1], 10, 64)
	if err != nil || err2 != nil {
		return nil, 0
	}
	var compacted int64
	if len(fields) == 3 {
		if compacted, err = strconv.ParseInt(fields[2], 10, 64); err != nil {
			return nil, 0
		}
	}
	return &etcdv1alpha1.Defragmented{Time: metav1.NewTime(t), ReclaimedBytes: n}, compacted
}

func formatDefragmented(t time.Time, reclaimed, compacted int64) string {
	if compacted > 0 {
		return fmt.Sprintf("%s %d %d", t.UTC().Format(time.RFC3339), reclaimed, compacted)
	}
	return fmt.Sprintf("%s %d", t.UTC().Format(time.RFC3339), reclaimed)
}

// maintain takes a maintenance step: a member's defragmentation (recorded on its volume), the compaction out of
// a NOSPACE alarm, or disarming it.
func (r *Reconciler) maintain(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	key := client.ObjectKeyFromObject(cluster).String()
	switch action.Kind {
	case plan.Defragment:
		name := action.Members[0]
		endpoint := obs.statusOf[name].Endpoint
		if endpoint == "" {
			return fmt.Errorf("defragment member %s: it has no address", name)
		}
		begin := time.Now()
		before, after, err := r.Etcd.Defragment(ctx, key, endpoint)
		if err != nil {
			return fmt.Errorf("defragment member %s: %w", name, err)
		}
		took := time.Since(begin)
		if err := r.markVolume(ctx, cluster, name, resources.AnnotationLastDefragmentation, formatDefragmented(r.Now(), before-after, action.Revision)); err != nil {
			return err
		}
		r.tookStep(ctx, cluster, action, "Defragmented member", corev1.EventTypeNormal, "MemberDefragmented",
			fmt.Sprintf("Defragmented member %s in %s: its database file went from %d to %d bytes", name, took.Round(time.Millisecond), before, after),
			"beforeBytes", before, "afterBytes", after, "took", took.String())
	case plan.CompactForSpace:
		if err := r.Etcd.Compact(ctx, key, obs.endpoints, action.Revision); err != nil {
			return err
		}
		r.tookStep(ctx, cluster, action, "Compacted for space", corev1.EventTypeNormal, "NoSpaceCompacted",
			fmt.Sprintf("NOSPACE: compacted the key space up to revision %d", action.Revision), "revision", action.Revision)
	case plan.RaiseQuota:
		// Recorded before any member restarts with it: the next passes read the quota in force from status.
		patch := client.MergeFromWithOptions(cluster.DeepCopy(), client.MergeFromWithOptimisticLock{})
		from := resources.QuotaBackendBytes(cluster)
		cluster.Status.RaisedQuotaBackendBytes = action.Quota
		if err := r.Client.Status().Patch(ctx, cluster, patch); err != nil {
			return fmt.Errorf("record raised quota %d: %w", action.Quota, err)
		}
		r.tookStep(ctx, cluster, action, "Raised quota", corev1.EventTypeNormal, "QuotaRaised",
			fmt.Sprintf("NOSPACE: raised the database quota from %d to %d bytes; members restart with it one at a time", from, action.Quota),
			"fromBytes", from, "toBytes", action.Quota)
	case plan.DisarmNoSpace:
		n, err := r.Etcd.DisarmNoSpace(ctx, key, obs.endpoints)
		if err != nil {
			return err
		}
		r.tookStep(ctx, cluster, action, "Disarmed NOSPACE", corev1.EventTypeNormal, "NoSpaceRecovered",
			fmt.Sprintf("NOSPACE: disarmed %d alarm(s) after compaction and defragmentation; the cluster takes writes again", n), "alarms", n)
	}
	return nil
}
