package metrics

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
)

// family is one gauge: its name, help and label names, and the Desc the collector exports it with.
type family struct {
	name   string
	labels []string
	desc   *prometheus.Desc
}

func newFamily(name, help string, labels ...string) *family {
	return &family{name: name, labels: labels, desc: prometheus.NewDesc(name, help, labels, nil)}
}

// The gauges, as docs/reference/metrics.md lists them.
var (
	desiredMembers = newFamily("steward_cluster_desired_members", "Voting members the spec asks for (spec.replicas).", "namespace", "cluster")
	readyMembers   = newFamily("steward_cluster_ready_members", "Healthy voting members (status.readyReplicas).", "namespace", "cluster")
	voters         = newFamily("steward_cluster_voters", "Voting members in etcd's member list (status.voters).", "namespace", "cluster")
	learners       = newFamily("steward_cluster_learners", "Learners in etcd's member list (status.learners).", "namespace", "cluster")
	healthyVoters  = newFamily("steward_cluster_healthy_voters", "Voting members whose status endpoint answered healthy.", "namespace", "cluster")
	quorumNeeded   = newFamily("steward_cluster_quorum_needed", "Voting members needed for quorum: floor(voters/2)+1.", "namespace", "cluster")
	hasQuorum      = newFamily("steward_cluster_has_quorum", "1 while a quorum of voting members is healthy (condition Available), else 0.", "namespace", "cluster")
	hibernated     = newFamily("steward_cluster_hibernated",
		"1 while the cluster hibernates or its members stop to (status.hibernation.phase Hibernating or Hibernated), else 0; alerts meant for running clusters skip it.",
		"namespace", "cluster")
	adoptionPhase = newFamily("steward_cluster_adoption_phase",
		"1, with status.adoption.phase, for a cluster that adopts a running etcd (spec.bootstrap.fromExisting); no series for one that adopts nothing.",
		"namespace", "cluster", "phase")
	externalMembers = newFamily("steward_cluster_external_members",
		"The adopted source's members still in etcd (recorded at admission and not retired); no series for a cluster that adopts nothing.",
		"namespace", "cluster")
	windowOpen = newFamily("steward_cluster_maintenance_window_open",
		"1 while the cluster's maintenance window (spec.maintenance.window) is open, else 0; no series without a window.", "namespace", "cluster")
	windowDeferred = newFamily("steward_cluster_maintenance_deferred",
		"Kinds of optional disruptive work waiting for the maintenance window (status.maintenanceWindow.deferred); no series without a window.",
		"namespace", "cluster")
	leaderInfo  = newFamily("steward_cluster_leader_info", "1 for the member that leads the cluster; no series without a leader.", "namespace", "cluster", "member")
	versionInfo = newFamily("steward_cluster_version_info", "1, with the spec's etcd version, the oldest version a member runs and etcd's cluster version.",
		"namespace", "cluster", "desired_version", "current_version", "cluster_version")
	stepInfo     = newFamily("steward_cluster_step_info", "1 while Progressing is True, with the step's reason (the Progressing reason).", "namespace", "cluster", "reason")
	stepDuration = newFamily("steward_cluster_step_duration_seconds", "How long the step under way (the Progressing reason) has lasted; 0 when not progressing.",
		"namespace", "cluster")
	condition     = newFamily("steward_cluster_condition", "1 per condition of the cluster (Available, Progressing, Degraded) with its status and reason.", "namespace", "cluster", "type", "status", "reason")
	memberInfo    = newFamily("steward_member_info", "1 per member, with its raft role (leader, follower, learner, unknown) and etcd version.", "namespace", "cluster", "member", "role", "version")
	memberHealthy = newFamily("steward_member_healthy", "1 when the member answered its status request healthy, else 0.", "namespace", "cluster", "member")
	memberDBSize  = newFamily("steward_member_db_size_bytes", "Size of the member's backend database, as etcd last reported it.", "namespace", "cluster", "member")
	memberDBInUse = newFamily("steward_member_db_size_in_use_bytes", "Bytes of the member's backend database in use, as etcd last reported it.", "namespace", "cluster", "member")
	dbQuota       = newFamily("steward_cluster_db_quota_bytes", "The backend quota members are started with (status.quotaBackendBytes), else spec.etcd.quotaBackendBytes, else etcd's default of 2 GiB.", "namespace", "cluster")
	alarms        = newFamily("steward_cluster_alarms", "Members with the etcd alarm active (NOSPACE, CORRUPT; 0 when none).", "namespace", "cluster", "alarm")
	hashMismatch  = newFamily("steward_cluster_hash_mismatched_members",
		"Members whose key-space hash differed from the majority's (or every member compared, when no majority agreed) in Steward's last hash check; 0 when none.",
		"namespace", "cluster")
	hashCheckTime = newFamily("steward_cluster_hash_check_timestamp_seconds", "When Steward last compared members' key-space hashes, unix time; absent before the first.",
		"namespace", "cluster")
	certExpiry     = newFamily("steward_certificate_expiry_timestamp_seconds", "When the first certificate of the kind (ca, member, client) expires, unix time.", "namespace", "cluster", "certificate")
	backupLastTime = newFamily("steward_backup_last_success_timestamp_seconds", "Completion time of the newest Complete EtcdBackup of the cluster, unix time.", "namespace", "cluster")
	backupLastSize = newFamily("steward_backup_last_size_bytes", "Size of the newest Complete EtcdBackup of the cluster.", "namespace", "cluster")
	backupLastDur  = newFamily("steward_backup_last_duration_seconds", "Completion less start time of the newest Complete EtcdBackup of the cluster.", "namespace", "cluster")
	scheduleNext   = newFamily("steward_backup_schedule_next_run_timestamp_seconds", "When the schedule creates its next backup, unix time; no series while suspended.", "namespace", "schedule", "cluster")
	scheduleEvery  = newFamily("steward_backup_schedule_interval_seconds", "The schedule's period: its next run less the run before it; no series while suspended.", "namespace", "schedule", "cluster")
	scheduleLast   = newFamily("steward_backup_schedule_last_success_timestamp_seconds", "Completion time of the schedule's newest Complete backup, unix time; absent before the first.",
		"namespace", "schedule", "cluster")
	scheduleClaim = newFamily("steward_backup_schedule_claim_info",
		"1 for a schedule that stores its backups on a PersistentVolumeClaim, with the claim's name (the backup claim alert joins the claim's space on it).",
		"namespace", "schedule", "cluster", "persistentvolumeclaim")
	claimAvailable = newFamily("steward_backup_claim_available_bytes",
		"Space left on a backup claim when the newest backup that ended on it (stored or not) was written, as its Job measured it.",
		"namespace", "persistentvolumeclaim")
	claimCapacity = newFamily("steward_backup_claim_capacity_bytes",
		"Size of a backup claim's file system, as the newest backup that ended on it measured it.", "namespace", "persistentvolumeclaim")
	continuousFollowing = newFamily("steward_continuous_backup_following",
		"1 while the schedule's continuous backup follows the cluster and a snapshot starts its window (ContinuousBackup True), else 0; no series when it is off.",
		"namespace", "schedule", "cluster")
	continuousTo = newFamily("steward_continuous_backup_recoverable_to_timestamp_seconds",
		"The latest time a point-in-time backup can restore to (the end of the newest stored segment), unix time; absent before the first.",
		"namespace", "schedule", "cluster")
	continuousFrom = newFamily("steward_continuous_backup_recoverable_from_timestamp_seconds",
		"The earliest time of the recoverable window (when its first snapshot began), unix time; absent without a window.",
		"namespace", "schedule", "cluster")
	continuousPending = newFamily("steward_continuous_backup_pending_revisions",
		"Revisions the follower has received but not stored yet (the lag), as last reported.", "namespace", "schedule", "cluster")
	standbyFollowing = newFamily("steward_standby_following",
		"1 while the standby's applier replays its source without a problem (condition Standby True), else 0; no series before its applier runs or after promotion.",
		"namespace", "cluster")
	standbyLagRevisions = newFamily("steward_standby_lag_revisions",
		"Revisions the standby is behind the newest segment its source has stored (status.standby.lagRevisions); series as for steward_standby_following.",
		"namespace", "cluster")
	standbyLagSeconds = newFamily("steward_standby_lag_seconds",
		"How much older, on the primary follower's clock, the standby's state is than the newest stored segment (status.standby.lagSeconds); series as for steward_standby_following.",
		"namespace", "cluster")
)

// families are every gauge, for Describe.
var families = []*family{desiredMembers, readyMembers, voters, learners, healthyVoters, quorumNeeded, hasQuorum, hibernated, adoptionPhase, externalMembers, windowOpen, windowDeferred, leaderInfo, versionInfo,
	stepInfo, stepDuration, condition, memberInfo, memberHealthy, memberDBSize, memberDBInUse, dbQuota, alarms, hashMismatch, hashCheckTime, certExpiry,
	backupLastTime, backupLastSize, backupLastDur, claimAvailable, claimCapacity, scheduleNext, scheduleEvery, scheduleLast, scheduleClaim,
	continuousFollowing, continuousTo, continuousFrom, continuousPending, standbyFollowing, standbyLagRevisions, standbyLagSeconds}

// defaultQuotaBytes is etcd's backend quota when --quota-backend-bytes is not set (2 GiB).
const defaultQuotaBytes = 2 << 30

// alwaysReported are the etcd alarms a cluster always has a series for (0 when no member has it), so that an
// alert on them never depends on a series appearing.
var alwaysReported = []string{"NOSPACE", "CORRUPT"}

// ownedConditions are the cluster conditions exported: those Steward writes (a foreign condition would add
// series without bound).
var ownedConditions = map[string]bool{etcdv1alpha1.ConditionAvailable: true, etcdv1alpha1.ConditionProgressing: true, etcdv1alpha1.ConditionDegraded: true}

// sample is one gauge value with its label values, in the family's label order.
type sample struct {
	f      *family
	value  float64
	labels []string
}

// String renders a sample the way the exposition format does (labels in family order), for tests and errors.
func (s sample) String() string {
	parts := make([]string, len(s.labels))
	for i, v := range s.labels {
		parts[i] = fmt.Sprintf("%s=%q", s.f.labels[i], v)
	}
	return fmt.Sprintf("%s{%s} %g", s.f.name, strings.Join(parts, ","), s.value)
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// clusterSamples are the gauges of one EtcdCluster, from its spec and status at time now, one group after the
// other in a fixed order (tests compare the list as it is).
func clusterSamples(c *etcdv1alpha1.EtcdCluster, now time.Time) []sample {
	s := &clusterSampler{c: c}
	s.addMembership()
	s.addStep(now)
	s.addMembers()
	s.addStorage()
	s.addChecks()
	s.addStandby()
	return s.out
}

// addStandby: a following (or stopped) standby's lag. Bootstrapping it has nothing to lag behind yet, and once
// promoted (or promoting) it follows nothing.
func (s *clusterSampler) addStandby() {
	sb := s.c.Status.Standby
	if sb == nil || sb.Phase != etcdv1alpha1.StandbyFollowing && sb.Phase != etcdv1alpha1.StandbyStopped {
		return
	}
	s.add(standbyFollowing, boolValue(meta.IsStatusConditionTrue(s.c.Status.Conditions, etcdv1alpha1.ConditionStandby)))
	s.add(standbyLagRevisions, float64(sb.LagRevisions))
	s.add(standbyLagSeconds, float64(sb.LagSeconds))
}

// clusterSampler collects one cluster's samples, each labelled with the cluster's namespace and name first.
type clusterSampler struct {
	c   *etcdv1alpha1.EtcdCluster
	out []sample
}

func (s *clusterSampler) add(f *family, v float64, extra ...string) {
	s.out = append(s.out, sample{f: f, value: v, labels: append([]string{s.c.Namespace, s.c.Name}, extra...)})
}

// addMembership: how many members are wanted, ready, voting; quorum; the leader and the versions.
func (s *clusterSampler) addMembership() {
	c, st := s.c, &s.c.Status
	s.add(desiredMembers, float64(c.Spec.Replicas))
	s.add(readyMembers, float64(st.ReadyReplicas))
	s.add(voters, float64(st.Voters))
	s.add(learners, float64(st.Learners))
	// status.readyReplicas is the healthy voting members (internal/plan.HealthyVoters): the same count.
	s.add(healthyVoters, float64(st.ReadyReplicas))
	s.add(quorumNeeded, float64(st.Voters/2+1))
	s.add(hasQuorum, boolValue(meta.IsStatusConditionTrue(st.Conditions, etcdv1alpha1.ConditionAvailable)))
	// Not while resuming: a resume that does not bring the cluster back is for the alerts to report.
	s.add(hibernated, boolValue(st.Hibernation != nil && st.Hibernation.Phase != etcdv1alpha1.HibernationResuming))
	if a := st.Adoption; a != nil && a.Phase != "" {
		s.add(adoptionPhase, 1, string(a.Phase))
		s.add(externalMembers, float64(externalLeft(a)))
	}
	if w := st.MaintenanceWindow; w != nil {
		s.add(windowOpen, boolValue(w.Open))
		s.add(windowDeferred, float64(len(w.Deferred)))
	}
	if st.Leader != "" {
		s.add(leaderInfo, 1, st.Leader)
	}
	s.add(versionInfo, 1, c.Spec.Version, st.CurrentVersion, st.ClusterVersion)
}

// externalLeft is how many of the source's recorded members have not been retired (an aborted adoption leaves
// them all).
func externalLeft(a *etcdv1alpha1.AdoptionStatus) int {
	retired := map[string]bool{}
	for _, m := range a.Retired {
		retired[m.ID] = true
	}
	n := 0
	for _, m := range a.ExternalMembers {
		if !retired[m.ID] {
			n++
		}
	}
	return n
}

// addStep: the step under way and for how long, and the conditions Steward owns.
func (s *clusterSampler) addStep(now time.Time) {
	st := &s.c.Status
	progressing := meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionProgressing)
	duration := 0.0
	if progressing != nil && progressing.Status == metav1.ConditionTrue {
		s.add(stepInfo, 1, progressing.Reason)
		// A status written before stepSince existed: Progressing's transition is the closest start known.
		since := progressing.LastTransitionTime
		if st.StepSince != nil {
			since = *st.StepSince
		}
		if d := now.Sub(since.Time); !since.IsZero() && d > 0 {
			duration = d.Seconds()
		}
	}
	s.add(stepDuration, duration)
	for _, cond := range st.Conditions {
		if ownedConditions[cond.Type] {
			s.add(condition, 1, cond.Type, string(cond.Status), cond.Reason)
		}
	}
}

// addMembers: each member's role, version, health and database sizes.
func (s *clusterSampler) addMembers() {
	for _, m := range s.c.Status.Members {
		s.add(memberInfo, 1, m.Name, strings.ToLower(string(roleOf(m.Role))), m.Version)
		s.add(memberHealthy, boolValue(m.Healthy), m.Name)
		// Sizes only from a member that answered: 0 would read as an emptied database.
		if m.DBSizeBytes > 0 {
			s.add(memberDBSize, float64(m.DBSizeBytes), m.Name)
		}
		if m.DBSizeInUseBytes > 0 {
			s.add(memberDBInUse, float64(m.DBSizeInUseBytes), m.Name)
		}
	}
}

// addStorage: the database quota and the alarms raised.
func (s *clusterSampler) addStorage() {
	c, st := s.c, &s.c.Status
	quota := float64(defaultQuotaBytes)
	switch q := c.Spec.Etcd.QuotaBackendBytes; {
	case st.QuotaBackendBytes > 0:
		quota = float64(st.QuotaBackendBytes) // what members run with, derived from storage.size when the spec sets none
	case q != nil:
		quota = float64(q.Value())
	}
	s.add(dbQuota, quota)
	for _, a := range alarmCounts(st.Alarms) {
		s.add(alarms, float64(a.members), a.alarm)
	}
}

// addChecks: the last hash check and its mismatches, and when the certificates expire.
func (s *clusterSampler) addChecks() {
	st := &s.c.Status
	mismatched := 0
	if h := st.HashCheck; h != nil {
		s.add(hashCheckTime, unix(h.Time.Time))
		if h.Result == "Mismatch" || h.Result == "NoMajority" {
			mismatched = len(h.MismatchedMembers)
		}
	}
	s.add(hashMismatch, float64(mismatched))
	if t := st.TLS; t != nil {
		for _, cert := range []struct {
			kind string
			at   *metav1.Time
		}{{"ca", t.CANotAfter}, {"member", t.MemberNotAfter}, {"client", t.ClientNotAfter}} {
			if cert.at != nil {
				s.add(certExpiry, unix(cert.at.Time), cert.kind)
			}
		}
	}
}

func roleOf(r etcdv1alpha1.MemberRole) etcdv1alpha1.MemberRole {
	if r == "" {
		return etcdv1alpha1.RoleUnknown
	}
	return r
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

type alarmCount struct {
	alarm   string
	members int
}

// alarmCounts counts the distinct members per alarm type: NOSPACE and CORRUPT always, others as raised, sorted.
func alarmCounts(list []etcdv1alpha1.MemberAlarm) []alarmCount {
	members := map[string]map[string]bool{}
	for _, a := range alwaysReported {
		members[a] = map[string]bool{}
	}
	for _, a := range list {
		if members[a.Alarm] == nil {
			members[a.Alarm] = map[string]bool{}
		}
		members[a.Alarm][a.MemberID+"/"+a.Member] = true
	}
	out := make([]alarmCount, 0, len(members))
	for alarm, m := range members {
		out = append(out, alarmCount{alarm: alarm, members: len(m)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].alarm < out[j].alarm })
	return out
}

// backupSamples are the last-backup gauges of each cluster in clusters (namespace/name): from its newest
// Complete EtcdBackup. Backups of clusters that do not exist export nothing: a deleted cluster's series go.
func backupSamples(clusters map[string]bool, backups []etcdv1alpha1.EtcdBackup) []sample {
	newest := map[string]*etcdv1alpha1.EtcdBackup{}
	for i := range backups {
		b := &backups[i]
		key := b.Namespace + "/" + b.Spec.ClusterName
		if !clusters[key] || b.Status.CompletionTime == nil || !meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) {
			continue
		}
		if n := newest[key]; n == nil || endedAfter(b, n) {
			newest[key] = b
		}
	}
	keys := make([]string, 0, len(newest))
	for k := range newest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []sample
	for _, k := range keys {
		b := newest[k]
		labels := []string{b.Namespace, b.Spec.ClusterName}
		out = append(out, sample{f: backupLastTime, value: unix(b.Status.CompletionTime.Time), labels: labels},
			sample{f: backupLastSize, value: float64(b.Status.SizeBytes), labels: labels})
		if b.Status.StartTime != nil {
			out = append(out, sample{f: backupLastDur, value: b.Status.CompletionTime.Sub(b.Status.StartTime.Time).Seconds(), labels: labels})
		}
	}
	return out
}

// endedAfter reports whether backup b ended after other (both with a completion time), the later name first on
// a tie: which of two is the newest, the same on every scrape.
func endedAfter(b, other *etcdv1alpha1.EtcdBackup) bool {
	return other.Status.CompletionTime.Before(b.Status.CompletionTime) ||
		other.Status.CompletionTime.Equal(b.Status.CompletionTime) && other.Name < b.Name
}

// claimSamples are the space gauges of each claim backups were written to: from the newest backup that ended on
// it with a measurement (a failed one too: a full claim is measured by the backup that did not fit). They follow
// the backups, not a cluster: one claim may hold the backups of several.
func claimSamples(backups []etcdv1alpha1.EtcdBackup) []sample {
	newest := map[[2]string]*etcdv1alpha1.EtcdBackup{}
	for i := range backups {
		b := &backups[i]
		pvc := b.Spec.Destination.PVC
		if pvc == nil || b.Status.ClaimSpace == nil || b.Status.CompletionTime == nil {
			continue
		}
		key := [2]string{b.Namespace, pvc.ClaimName}
		if n := newest[key]; n == nil || endedAfter(b, n) {
			newest[key] = b
		}
	}
	keys := make([][2]string, 0, len(newest))
	for k := range newest {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	var out []sample
	for _, k := range keys {
		sp := newest[k].Status.ClaimSpace
		labels := []string{k[0], k[1]}
		out = append(out, sample{f: claimAvailable, value: float64(sp.AvailableBytes), labels: labels},
			sample{f: claimCapacity, value: float64(sp.CapacityBytes), labels: labels})
	}
	return out
}

// scheduleSamples are the gauges of one EtcdBackupSchedule. They follow the schedule object, not its cluster: a
// schedule left behind by a deleted cluster still fails its backups, and its series say so until it is deleted.
func scheduleSamples(s *etcdv1alpha1.EtcdBackupSchedule) []sample {
	labels := []string{s.Namespace, s.Name, s.Spec.ClusterName}
	var out []sample
	if next := s.Status.NextScheduleTime; next != nil && !s.Spec.Suspend {
		out = append(out, sample{f: scheduleNext, value: unix(next.Time), labels: labels})
		if every, ok := scheduleInterval(s.Spec.Schedule, s.Status.LastScheduleTime, next.Time); ok {
			out = append(out, sample{f: scheduleEvery, value: every.Seconds(), labels: labels})
		}
	}
	if lb := s.Status.LastSuccessfulBackup; lb != nil && lb.Time != nil {
		out = append(out, sample{f: scheduleLast, value: unix(lb.Time.Time), labels: labels})
	}
	if pvc := s.Spec.Destination.PVC; pvc != nil {
		out = append(out, sample{f: scheduleClaim, value: 1, labels: []string{s.Namespace, s.Name, s.Spec.ClusterName, pvc.ClaimName}})
	}
	if c := s.Spec.Continuous; c != nil && c.Enabled {
		following := 0.0
		if meta.IsStatusConditionTrue(s.Status.Conditions, etcdv1alpha1.ConditionContinuousBackup) {
			following = 1
		}
		out = append(out, sample{f: continuousFollowing, value: following, labels: labels})
		if cs := s.Status.Continuous; cs != nil {
			if to := cs.RecoverableTo; to != nil && to.Time != nil {
				out = append(out, sample{f: continuousTo, value: unix(to.Time.Time), labels: labels})
			}
			if from := cs.RecoverableFrom; from != nil && from.Time != nil {
				out = append(out, sample{f: continuousFrom, value: unix(from.Time.Time), labels: labels})
			}
			out = append(out, sample{f: continuousPending, value: float64(cs.PendingRevisions), labels: labels})
		}
	}
	return out
}

// scheduleInterval is the cron's period ending at next: next less the run before it. That run is the last
// scheduled time when the schedule leads from it to next; otherwise (the first run, or runs missed in between)
// the period after next stands in, which for a regular schedule is the same.
func scheduleInterval(expr string, last *metav1.Time, next time.Time) (time.Duration, bool) {
	sched, err := backup.ParseSchedule(expr)
	if err != nil {
		return 0, false
	}
	if last != nil && sched.Next(last.Time).Equal(next) {
		return next.Sub(last.Time), true
	}
	after := sched.Next(next)
	if after.IsZero() {
		return 0, false
	}
	return after.Sub(next), true
}
