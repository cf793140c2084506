package metrics

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func ts(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }

func cond(typ string, status metav1.ConditionStatus, reason string, since time.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(since)}
}

// healthyCluster is a formed 3-member cluster led by c-a, at rest.
func healthyCluster() *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16"},
		Status: etcdv1alpha1.EtcdClusterStatus{
			ReadyReplicas: 3, Voters: 3, Leader: "c-a", CurrentVersion: "3.6.16", ClusterVersion: "3.6.0",
			Conditions: []metav1.Condition{
				cond(etcdv1alpha1.ConditionAvailable, metav1.ConditionTrue, "QuorumAvailable", now.Add(-time.Hour)),
				cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionFalse, "Reconciled", now.Add(-time.Hour)),
				cond(etcdv1alpha1.ConditionDegraded, metav1.ConditionFalse, "AsExpected", now.Add(-time.Hour)),
			},
			Members: []etcdv1alpha1.MemberStatus{
				{Name: "c-a", Role: etcdv1alpha1.RoleLeader, Version: "3.6.16", Healthy: true, DBSizeBytes: 4096, DBSizeInUseBytes: 2048},
				{Name: "c-b", Role: etcdv1alpha1.RoleFollower, Version: "3.6.16", Healthy: true, DBSizeBytes: 4096, DBSizeInUseBytes: 1024},
				{Name: "c-c", Role: etcdv1alpha1.RoleFollower, Version: "3.6.16", Healthy: true, DBSizeBytes: 8192, DBSizeInUseBytes: 1024},
			},
		},
	}
}

// healthyClusterSamples are the samples of healthyCluster, in clusterSamples' order.
var healthyClusterSamples = []string{
	`steward_cluster_desired_members{namespace="ns",cluster="c"} 3`,
	`steward_cluster_ready_members{namespace="ns",cluster="c"} 3`,
	`steward_cluster_voters{namespace="ns",cluster="c"} 3`,
	`steward_cluster_learners{namespace="ns",cluster="c"} 0`,
	`steward_cluster_healthy_voters{namespace="ns",cluster="c"} 3`,
	`steward_cluster_quorum_needed{namespace="ns",cluster="c"} 2`,
	`steward_cluster_has_quorum{namespace="ns",cluster="c"} 1`,
	`steward_cluster_hibernated{namespace="ns",cluster="c"} 0`,
	`steward_cluster_leader_info{namespace="ns",cluster="c",member="c-a"} 1`,
	`steward_cluster_version_info{namespace="ns",cluster="c",desired_version="3.6.16",current_version="3.6.16",cluster_version="3.6.0"} 1`,
	`steward_cluster_step_duration_seconds{namespace="ns",cluster="c"} 0`,
	`steward_cluster_condition{namespace="ns",cluster="c",type="Available",status="True",reason="QuorumAvailable"} 1`,
	`steward_cluster_condition{namespace="ns",cluster="c",type="Progressing",status="False",reason="Reconciled"} 1`,
	`steward_cluster_condition{namespace="ns",cluster="c",type="Degraded",status="False",reason="AsExpected"} 1`,
	`steward_member_info{namespace="ns",cluster="c",member="c-a",role="leader",version="3.6.16"} 1`,
	`steward_member_healthy{namespace="ns",cluster="c",member="c-a"} 1`,
	`steward_member_db_size_bytes{namespace="ns",cluster="c",member="c-a"} 4096`,
	`steward_member_db_size_in_use_bytes{namespace="ns",cluster="c",member="c-a"} 2048`,
	`steward_member_info{namespace="ns",cluster="c",member="c-b",role="follower",version="3.6.16"} 1`,
	`steward_member_healthy{namespace="ns",cluster="c",member="c-b"} 1`,
	`steward_member_db_size_bytes{namespace="ns",cluster="c",member="c-b"} 4096`,
	`steward_member_db_size_in_use_bytes{namespace="ns",cluster="c",member="c-b"} 1024`,
	`steward_member_info{namespace="ns",cluster="c",member="c-c",role="follower",version="3.6.16"} 1`,
	`steward_member_healthy{namespace="ns",cluster="c",member="c-c"} 1`,
	`steward_member_db_size_bytes{namespace="ns",cluster="c",member="c-c"} 8192`,
	`steward_member_db_size_in_use_bytes{namespace="ns",cluster="c",member="c-c"} 1024`,
	`steward_cluster_db_quota_bytes{namespace="ns",cluster="c"} 2.147483648e+09`,
	`steward_cluster_alarms{namespace="ns",cluster="c",alarm="CORRUPT"} 0`,
	`steward_cluster_alarms{namespace="ns",cluster="c",alarm="NOSPACE"} 0`,
	`steward_cluster_hash_mismatched_members{namespace="ns",cluster="c"} 0`,
}

func strs(samples []sample) []string {
	out := make([]string, len(samples))
	for i, s := range samples {
		out[i] = s.String()
	}
	return out
}

// diff says which lines only want and only got have.
func diff(t *testing.T, got, want []string) {
	t.Helper()
	var missing, extra []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	if len(missing) > 0 || len(extra) > 0 || len(got) != len(want) {
		t.Errorf("samples differ (%d got, %d wanted)\nmissing:\n  %s\nunexpected:\n  %s", len(got), len(want),
			strings.Join(missing, "\n  "), strings.Join(extra, "\n  "))
	}
}

// replace returns base with the lines starting with each key of changes replaced by its value (removed for "").
func replace(base []string, changes map[string]string, extra ...string) []string {
	var out []string
	for _, l := range base {
		kept := true
		for prefix, with := range changes {
			if strings.HasPrefix(l, prefix) {
				kept = false
				if with != "" {
					out = append(out, with)
				}
				delete(changes, prefix)
			}
		}
		if kept {
			out = append(out, l)
		}
	}
	return append(out, extra...)
}

func TestClusterSamples(t *testing.T) {
	tests := map[string]struct {
		cluster func(c *etcdv1alpha1.EtcdCluster)
		want    func() []string
	}{
		"a healthy cluster at rest": {func(*etcdv1alpha1.EtcdCluster) {}, func() []string { return healthyClusterSamples }},
		"no leader: no leader series, one fewer ready voter, quorum lost": {
			func(c *etcdv1alpha1.EtcdCluster) {
				c.Status.Leader, c.Status.ReadyReplicas = "", 1
				c.Status.Members[0].Role, c.Status.Members[0].Healthy, c.Status.Members[0].DBSizeBytes, c.Status.Members[0].DBSizeInUseBytes = etcdv1alpha1.RoleUnknown, false, 0, 0
				c.Status.Conditions[0] = cond(etcdv1alpha1.ConditionAvailable, metav1.ConditionFalse, "QuorumLost", now)
			},
			func() []string {
				return replace(healthyClusterSamples, map[string]string{
					`steward_cluster_leader_info{`:                                                 "",
					`steward_cluster_ready_members{`:                                               `steward_cluster_ready_members{namespace="ns",cluster="c"} 1`,
					`steward_cluster_healthy_voters{`:                                              `steward_cluster_healthy_voters{namespace="ns",cluster="c"} 1`,
					`steward_cluster_has_quorum{`:                                                  `steward_cluster_has_quorum{namespace="ns",cluster="c"} 0`,
					`steward_cluster_condition{namespace="ns",cluster="c",type="Available"`:        `steward_cluster_condition{namespace="ns",cluster="c",type="Available",status="False",reason="QuorumLost"} 1`,
					`steward_member_info{namespace="ns",cluster="c",member="c-a"`:                  `steward_member_info{namespace="ns",cluster="c",member="c-a",role="unknown",version="3.6.16"} 1`,
					`steward_member_healthy{namespace="ns",cluster="c",member="c-a"}`:              `steward_member_healthy{namespace="ns",cluster="c",member="c-a"} 0`,
					`steward_member_db_size_bytes{namespace="ns",cluster="c",member="c-a"}`:        "",
					`steward_member_db_size_in_use_bytes{namespace="ns",cluster="c",member="c-a"}`: "",
				})
			},
		},
		"a step under way: its reason and how long it has lasted, from stepSince": {
			func(c *etcdv1alpha1.EtcdCluster) {
				c.Status.Conditions[1] = cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, "ScalingUp", now.Add(-time.Hour))
				c.Status.StepSince = ts(now.Add(-90 * time.Second))
			},
			func() []string {
				return replace(healthyClusterSamples, map[string]string{
					`steward_cluster_step_duration_seconds{`:                                  `steward_cluster_step_duration_seconds{namespace="ns",cluster="c"} 90`,
					`steward_cluster_condition{namespace="ns",cluster="c",type="Progressing"`: `steward_cluster_condition{namespace="ns",cluster="c",type="Progressing",status="True",reason="ScalingUp"} 1`,
				}, `steward_cluster_step_info{namespace="ns",cluster="c",reason="ScalingUp"} 1`)
			},
		},
		"a step under way in a status without stepSince: measured from Progressing's transition": {
			func(c *etcdv1alpha1.EtcdCluster) {
				c.Status.Conditions[1] = cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, "Upgrading", now.Add(-time.Minute))
			},
			func() []string {
				return replace(healthyClusterSamples, map[string]string{
					`steward_cluster_step_duration_seconds{`:                                  `steward_cluster_step_duration_seconds{namespace="ns",cluster="c"} 60`,
					`steward_cluster_condition{namespace="ns",cluster="c",type="Progressing"`: `steward_cluster_condition{namespace="ns",cluster="c",type="Progressing",status="True",reason="Upgrading"} 1`,
				}, `steward_cluster_step_info{namespace="ns",cluster="c",reason="Upgrading"} 1`)
			},
		},
		"a learner joining, a quota set, alarms raised, certificates, a foreign condition": {
			func(c *etcdv1alpha1.EtcdCluster) {
				c.Status.Learners = 1
				c.Status.Members = append(c.Status.Members, etcdv1alpha1.MemberStatus{Name: "c-d", Role: etcdv1alpha1.RoleLearner, Version: "3.6.16", Healthy: true, DBSizeBytes: 100})
				q := resource.MustParse("8Gi")
				c.Spec.Etcd.QuotaBackendBytes = &q
				c.Status.Alarms = []etcdv1alpha1.MemberAlarm{{Member: "c-a", MemberID: "1", Alarm: "NOSPACE"}, {Member: "c-b", MemberID: "2", Alarm: "NOSPACE"},
					{Member: "c-b", MemberID: "2", Alarm: "NOSPACE"}}
				c.Status.TLS = &etcdv1alpha1.TLSStatus{CASecret: "c-ca", CANotAfter: ts(time.Unix(2000000000, 0)), MemberNotAfter: ts(time.Unix(1900000000, 0)),
					ClientNotAfter: ts(time.Unix(1800000000, 0)), NotAfter: ts(time.Unix(1800000000, 0))}
				c.Status.Conditions = append(c.Status.Conditions, cond("SomeoneElses", metav1.ConditionTrue, "Whatever", now))
			},
			func() []string {
				return replace(healthyClusterSamples, map[string]string{
					`steward_cluster_learners{`:                                          `steward_cluster_learners{namespace="ns",cluster="c"} 1`,
					`steward_cluster_db_quota_bytes{`:                                    `steward_cluster_db_quota_bytes{namespace="ns",cluster="c"} 8.589934592e+09`,
					`steward_cluster_alarms{namespace="ns",cluster="c",alarm="NOSPACE"}`: `steward_cluster_alarms{namespace="ns",cluster="c",alarm="NOSPACE"} 2`,
				},
					`steward_member_info{namespace="ns",cluster="c",member="c-d",role="learner",version="3.6.16"} 1`,
					`steward_member_healthy{namespace="ns",cluster="c",member="c-d"} 1`,
					`steward_member_db_size_bytes{namespace="ns",cluster="c",member="c-d"} 100`,
					`steward_certificate_expiry_timestamp_seconds{namespace="ns",cluster="c",certificate="ca"} 2e+09`,
					`steward_certificate_expiry_timestamp_seconds{namespace="ns",cluster="c",certificate="member"} 1.9e+09`,
					`steward_certificate_expiry_timestamp_seconds{namespace="ns",cluster="c",certificate="client"} 1.8e+09`,
				)
			},
		},
		"an alarm etcd may add later gets its own series": {
			func(c *etcdv1alpha1.EtcdCluster) {
				c.Status.Alarms = []etcdv1alpha1.MemberAlarm{{Member: "c-c", MemberID: "3", Alarm: "CORRUPT"}, {Member: "c-c", MemberID: "3", Alarm: "FUTURE"}}
			},
			func() []string {
				return replace(healthyClusterSamples, map[string]string{
					`steward_cluster_alarms{namespace="ns",cluster="c",alarm="CORRUPT"}`: `steward_cluster_alarms{namespace="ns",cluster="c",alarm="CORRUPT"} 1`,
				}, `steward_cluster_alarms{namespace="ns",cluster="c",alarm="FUTURE"} 1`)
			},
		},
		"a hash check that found one member's data differs": {
			func(c *etcdv1alpha1.EtcdCluster) {
				c.Status.HashCheck = &etcdv1alpha1.HashCheck{Time: metav1.NewTime(time.Unix(1700000000, 0)), Revision: 42, Result: "Mismatch", MismatchedMembers: []string{"c-b"}}
			},
			func() []string {
				return replace(healthyClusterSamples, map[string]string{
					`steward_cluster_hash_mismatched_members{`: `steward_cluster_hash_mismatched_members{namespace="ns",cluster="c"} 1`,
				}, `steward_cluster_hash_check_timestamp_seconds{namespace="ns",cluster="c"} 1.7e+09`)
			},
		},
		"the quota members run with, derived from the volume, is the one exported": {
			func(c *etcdv1alpha1.EtcdCluster) { c.Status.QuotaBackendBytes = 288 << 20 },
			func() []string {
				return replace(healthyClusterSamples, map[string]string{
					`steward_cluster_db_quota_bytes{`: `steward_cluster_db_quota_bytes{namespace="ns",cluster="c"} 3.01989888e+08`,
				})
			},
		},
		"hibernated: 1, and 0 again while resuming (a resume that fails is for the alerts)": {
			func(c *etcdv1alpha1.EtcdCluster) {
				c.Status.Hibernation = &etcdv1alpha1.HibernationStatus{Phase: etcdv1alpha1.HibernationHibernated}
			},
			func() []string {
				return replace(healthyClusterSamples, map[string]string{
					`steward_cluster_hibernated{`: `steward_cluster_hibernated{namespace="ns",cluster="c"} 1`,
				})
			},
		},
		"a maintenance window, closed, with work waiting for it": {
			func(c *etcdv1alpha1.EtcdCluster) {
				c.Status.MaintenanceWindow = &etcdv1alpha1.MaintenanceWindowStatus{Deferred: []string{"maintenance: defragmenting member c-b", "rebalancing: adding a learner"}}
			},
			func() []string {
				out := []string{}
				for _, l := range healthyClusterSamples {
					out = append(out, l)
					if strings.HasPrefix(l, "steward_cluster_hibernated{") {
						out = append(out, `steward_cluster_maintenance_window_open{namespace="ns",cluster="c"} 0`,
							`steward_cluster_maintenance_deferred{namespace="ns",cluster="c"} 2`)
					}
				}
				return out
			},
		},
		"adopting, a source member retired": {
			func(c *etcdv1alpha1.EtcdCluster) {
				c.Status.Adoption = &etcdv1alpha1.AdoptionStatus{Phase: etcdv1alpha1.AdoptionRetiring,
					ExternalMembers: []etcdv1alpha1.ExternalMember{{ID: "a1", Name: "infra1"}, {ID: "a2", Name: "infra2"}, {ID: "a3", Name: "infra3"}},
					Retired:         []etcdv1alpha1.ExternalMember{{ID: "a2", Name: "infra2"}}}
			},
			func() []string {
				out := []string{}
				for _, l := range healthyClusterSamples {
					out = append(out, l)
					if strings.HasPrefix(l, "steward_cluster_hibernated{") {
						out = append(out, `steward_cluster_adoption_phase{namespace="ns",cluster="c",phase="Retiring"} 1`,
							`steward_cluster_external_members{namespace="ns",cluster="c"} 2`)
					}
				}
				return out
			},
		},
		"a standby following: lag, and following while Standby is True": {
			func(c *etcdv1alpha1.EtcdCluster) {
				c.Status.Standby = &etcdv1alpha1.StandbyStatus{Phase: etcdv1alpha1.StandbyFollowing, LagRevisions: 120, LagSeconds: 4}
				c.Status.Conditions = append(c.Status.Conditions, cond(etcdv1alpha1.ConditionStandby, metav1.ConditionTrue, etcdv1alpha1.ReasonFollowing, now))
			},
			func() []string {
				return append(append([]string(nil), healthyClusterSamples...), `steward_standby_following{namespace="ns",cluster="c"} 1`,
					`steward_standby_lag_revisions{namespace="ns",cluster="c"} 120`, `steward_standby_lag_seconds{namespace="ns",cluster="c"} 4`)
			},
		},
		"a standby stopped at a gap: not following": {
			func(c *etcdv1alpha1.EtcdCluster) {
				c.Status.Standby = &etcdv1alpha1.StandbyStatus{Phase: etcdv1alpha1.StandbyStopped, LagRevisions: 7, LagSeconds: 30}
				c.Status.Conditions = append(c.Status.Conditions, cond(etcdv1alpha1.ConditionStandby, metav1.ConditionFalse, etcdv1alpha1.ReasonSegmentGap, now))
			},
			func() []string {
				return append(append([]string(nil), healthyClusterSamples...), `steward_standby_following{namespace="ns",cluster="c"} 0`,
					`steward_standby_lag_revisions{namespace="ns",cluster="c"} 7`, `steward_standby_lag_seconds{namespace="ns",cluster="c"} 30`)
			},
		},
		"a standby bootstrapping, or promoted: no standby series": {
			func(c *etcdv1alpha1.EtcdCluster) {
				c.Status.Standby = &etcdv1alpha1.StandbyStatus{Phase: etcdv1alpha1.StandbyPromoted, PromotedRevision: 900}
			},
			func() []string { return healthyClusterSamples },
		},
		"resuming": {
			func(c *etcdv1alpha1.EtcdCluster) {
				c.Status.Hibernation = &etcdv1alpha1.HibernationStatus{Phase: etcdv1alpha1.HibernationResuming}
			},
			func() []string { return healthyClusterSamples },
		},
		"a new cluster with no status yet": {
			func(c *etcdv1alpha1.EtcdCluster) { c.Status = etcdv1alpha1.EtcdClusterStatus{} },
			func() []string {
				return []string{
					`steward_cluster_desired_members{namespace="ns",cluster="c"} 3`,
					`steward_cluster_ready_members{namespace="ns",cluster="c"} 0`,
					`steward_cluster_voters{namespace="ns",cluster="c"} 0`,
					`steward_cluster_learners{namespace="ns",cluster="c"} 0`,
					`steward_cluster_healthy_voters{namespace="ns",cluster="c"} 0`,
					`steward_cluster_quorum_needed{namespace="ns",cluster="c"} 1`,
					`steward_cluster_has_quorum{namespace="ns",cluster="c"} 0`,
					`steward_cluster_hibernated{namespace="ns",cluster="c"} 0`,
					`steward_cluster_version_info{namespace="ns",cluster="c",desired_version="3.6.16",current_version="",cluster_version=""} 1`,
					`steward_cluster_step_duration_seconds{namespace="ns",cluster="c"} 0`,
					`steward_cluster_db_quota_bytes{namespace="ns",cluster="c"} 2.147483648e+09`,
					`steward_cluster_alarms{namespace="ns",cluster="c",alarm="CORRUPT"} 0`,
					`steward_cluster_alarms{namespace="ns",cluster="c",alarm="NOSPACE"} 0`,
					`steward_cluster_hash_mismatched_members{namespace="ns",cluster="c"} 0`,
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := healthyCluster()
			tc.cluster(c)
			diff(t, strs(clusterSamples(c, now)), tc.want())
		})
	}
}

func backupOf(cluster, name string, complete bool, start, end time.Time, size int64) etcdv1alpha1.EtcdBackup {
	b := etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: cluster}}
	b.Status.StartTime, b.Status.CompletionTime, b.Status.SizeBytes = ts(start), ts(end), size
	typ := etcdv1alpha1.ConditionFailed
	if complete {
		typ = etcdv1alpha1.ConditionComplete
	}
	b.Status.Conditions = []metav1.Condition{cond(typ, metav1.ConditionTrue, "x", end)}
	return b
}

func TestBackupSamples(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	backups := []etcdv1alpha1.EtcdBackup{
		backupOf("c", "older", true, t0, t0.Add(time.Minute), 100),
		backupOf("c", "newest", true, t0.Add(time.Hour), t0.Add(time.Hour+30*time.Second), 200),
		backupOf("c", "failed-later", false, t0.Add(2*time.Hour), t0.Add(2*time.Hour+time.Second), 0),
		backupOf("gone", "of-a-deleted-cluster", true, t0, t0.Add(time.Minute), 300),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "running"}, Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: "c"}},
	}
	got := strs(backupSamples(map[string]bool{"ns/c": true, "ns/no-backups": true}, backups))
	diff(t, got, []string{
		`steward_backup_last_success_timestamp_seconds{namespace="ns",cluster="c"} 1.70000363e+09`,
		`steward_backup_last_size_bytes{namespace="ns",cluster="c"} 200`,
		`steward_backup_last_duration_seconds{namespace="ns",cluster="c"} 30`,
	})
}

func TestScheduleSamples(t *testing.T) {
	next := time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		schedule string
		suspend  bool
		last     *metav1.Time
		success  *etcdv1alpha1.BackupRef
		want     []string
	}{
		"hourly, after a run, with a success": {"@hourly", false, ts(next.Add(-time.Hour)), &etcdv1alpha1.BackupRef{Name: "b", Time: ts(time.Unix(1700000000, 0))}, []string{
			`steward_backup_schedule_next_run_timestamp_seconds{namespace="ns",schedule="s",cluster="c"} 1.7954388e+09`,
			`steward_backup_schedule_interval_seconds{namespace="ns",schedule="s",cluster="c"} 3600`,
			`steward_backup_schedule_last_success_timestamp_seconds{namespace="ns",schedule="s",cluster="c"} 1.7e+09`,
		}},
		"weekdays at 13:00 on a Monday: the run before it was Friday's": {"0 13 * * 1-5", false, ts(time.Date(2026, 11, 20, 13, 0, 0, 0, time.UTC)), nil, []string{
			`steward_backup_schedule_next_run_timestamp_seconds{namespace="ns",schedule="s",cluster="c"} 1.7954388e+09`,
			`steward_backup_schedule_interval_seconds{namespace="ns",schedule="s",cluster="c"} 259200`,
		}},
		"before the first run: the period after the next run stands in, no last success": {"@every 6h", false, nil, nil, []string{
			`steward_backup_schedule_next_run_timestamp_seconds{namespace="ns",schedule="s",cluster="c"} 1.7954388e+09`,
			`steward_backup_schedule_interval_seconds{namespace="ns",schedule="s",cluster="c"} 21600`,
		}},
		"suspended: no next run, no interval, the last success stays": {"@hourly", true, nil, &etcdv1alpha1.BackupRef{Name: "b", Time: ts(time.Unix(1700000000, 0))}, []string{
			`steward_backup_schedule_last_success_timestamp_seconds{namespace="ns",schedule="s",cluster="c"} 1.7e+09`,
		}},
		"an invalid schedule has no interval": {"not a cron", false, nil, nil, []string{
			`steward_backup_schedule_next_run_timestamp_seconds{namespace="ns",schedule="s",cluster="c"} 1.7954388e+09`,
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
				Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "c", Schedule: tc.schedule, Suspend: tc.suspend}}
			s.Status.NextScheduleTime, s.Status.LastScheduleTime, s.Status.LastSuccessfulBackup = ts(next), tc.last, tc.success
			diff(t, strs(scheduleSamples(s)), tc.want)
		})
	}
}

// TestScheduleClaimSample: a schedule to a claim names it (suspended too: the claim still fills), one to S3 has
// no claim series.
func TestScheduleClaimSample(t *testing.T) {
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "c", Schedule: "@hourly", Suspend: true,
			Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "etcd"}}}}
	diff(t, strs(scheduleSamples(s)), []string{
		`steward_backup_schedule_claim_info{namespace="ns",schedule="s",cluster="c",persistentvolumeclaim="backups"} 1`,
	})
	s.Spec.Destination = etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Endpoint: "e", Bucket: "bucket", Key: "k"}}
	diff(t, strs(scheduleSamples(s)), nil)
}

func TestSamplesOf(t *testing.T) {
	deleted := healthyCluster()
	deleted.Name = "deleting"
	deleted.DeletionTimestamp = ts(now)
	t0 := time.Unix(1700000000, 0)
	o := objects{
		clusters: []etcdv1alpha1.EtcdCluster{*healthyCluster(), *deleted},
		backups:  []etcdv1alpha1.EtcdBackup{backupOf("c", "b1", true, t0, t0.Add(time.Second), 1), backupOf("deleting", "b2", true, t0, t0.Add(time.Second), 1)},
	}
	got := strs(samplesOf(o, now))
	for _, s := range got {
		if strings.Contains(s, `cluster="deleting"`) {
			t.Errorf("a cluster being deleted still has series: %s", s)
		}
	}
	if !slices.Contains(got, `steward_backup_last_size_bytes{namespace="ns",cluster="c"} 1`) {
		t.Errorf("the existing cluster's backup is missing: %v", got)
	}
}

// TestCardinalityBounded: a cluster's series grow with its members and conditions only, never with time or
// with how often it is scraped: the same status scraped an hour later has the same series (values aside).
func TestCardinalityBounded(t *testing.T) {
	for _, size := range []int{1, 3, 5, 7, 9} {
		c := healthyCluster()
		c.Status.Members = nil
		for i := range size {
			c.Status.Members = append(c.Status.Members, etcdv1alpha1.MemberStatus{Name: string(rune('a' + i)), Healthy: true, Role: etcdv1alpha1.RoleFollower, DBSizeBytes: 1, DBSizeInUseBytes: 1})
		}
		c.Status.Conditions[1] = cond(etcdv1alpha1.ConditionProgressing, metav1.ConditionTrue, "ScalingUp", now)
		c.Status.StepSince = ts(now)
		a, b := clusterSamples(c, now), clusterSamples(c, now.Add(time.Hour))
		if len(a) != len(b) {
			t.Fatalf("%d members: %d series, an hour later %d", size, len(a), len(b))
		}
		// 19 per cluster (with a leader, a step, three conditions, two alarms and the hash check), 4 per member.
		if want := 19 + 4*size; len(a) != want {
			t.Errorf("%d members: %d series, want %d:\n%s", size, len(a), want, strings.Join(strs(a), "\n"))
		}
		for i := range a {
			if a[i].f != b[i].f || !slices.Equal(a[i].labels, b[i].labels) {
				t.Errorf("series changed with time: %s then %s", a[i], b[i])
			}
		}
	}
}

func TestClaimSamples(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	onClaim := func(b etcdv1alpha1.EtcdBackup, claim string, free, size int64) etcdv1alpha1.EtcdBackup {
		b.Spec.Destination.PVC = &etcdv1alpha1.PVCDestination{ClaimName: claim, Path: b.Name + ".db"}
		if size > 0 {
			b.Status.ClaimSpace = &etcdv1alpha1.ClaimSpace{AvailableBytes: free, CapacityBytes: size}
		}
		return b
	}
	s3 := backupOf("c", "to-a-bucket", true, t0, t0.Add(3*time.Hour), 100)
	s3.Spec.Destination.S3 = &etcdv1alpha1.S3Destination{Bucket: "b", Key: "k"}
	backups := []etcdv1alpha1.EtcdBackup{
		onClaim(backupOf("c", "older", true, t0, t0.Add(time.Minute), 100), "shared", 900, 1000),
		// The newest on a claim counts even when it failed: it is the one that found the claim full.
		onClaim(backupOf("c", "did-not-fit", false, t0.Add(time.Hour), t0.Add(time.Hour+time.Second), 0), "shared", 40, 1000),
		// Another cluster's backup on the same claim, earlier: the claim has one pair of series.
		onClaim(backupOf("other", "of-another-cluster", true, t0, t0.Add(30*time.Minute), 100), "shared", 500, 1000),
		// Of a deleted cluster: its claim still fills.
		onClaim(backupOf("gone", "left-behind", true, t0, t0.Add(time.Minute), 300), "old", 10, 2000),
		// Measured by no Job (before Steward measured claims, or still running): no series from it.
		onClaim(backupOf("c", "unmeasured", true, t0.Add(2*time.Hour), t0.Add(2*time.Hour+time.Second), 100), "shared", 0, 0),
		onClaim(etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "running"}}, "running-only", 1, 2),
		s3,
	}
	backups[len(backups)-2].Status.CompletionTime = nil
	diff(t, strs(claimSamples(backups)), []string{
		`steward_backup_claim_available_bytes{namespace="ns",persistentvolumeclaim="old"} 10`,
		`steward_backup_claim_capacity_bytes{namespace="ns",persistentvolumeclaim="old"} 2000`,
		`steward_backup_claim_available_bytes{namespace="ns",persistentvolumeclaim="shared"} 40`,
		`steward_backup_claim_capacity_bytes{namespace="ns",persistentvolumeclaim="shared"} 1000`,
	})
}
