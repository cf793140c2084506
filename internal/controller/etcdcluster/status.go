package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/metrics"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// podOverdueAfter is how long past its grace period a deleted Pod may take to go before it is reported: the
// kubelet reports a Pod gone within seconds of its container stopping; minutes mean its node is not answering.
const podOverdueAfter = 2 * time.Minute

// degradedWarnings are Degraded reasons that record a Warning Event when they begin (the human waits of the
// planner record theirs when the wait begins).
var degradedWarnings = map[string]bool{etcdv1alpha1.ReasonMemberVolumeDeleting: true, etcdv1alpha1.ReasonPodStuckTerminating: true,
	etcdv1alpha1.ReasonNoSpaceAlarm: true, etcdv1alpha1.ReasonCorruptAlarm: true, etcdv1alpha1.ReasonMemberDataMismatch: true,
	etcdv1alpha1.ReasonMemoryLimitTooLow: true, etcdv1alpha1.ReasonMemberMemoryExceedsNodes: true}

// reportedWait: the kubelet's waiting reasons reported as a failing member Pod: those of a container that
// cannot start because of its spec, and a crash loop.
func reportedWait(reason string) bool {
	return specStuckReasons[reason] || reason == "CrashLoopBackOff"
}

// maxProblemsMessage bounds the problems a condition message lists (the kubelet's messages can be long).
const maxProblemsMessage = 1024

// podProblems says, per member Pod, why it cannot run: the scheduler's or the kubelet's reason and message.
func podProblems(pods map[string]*corev1.Pod) string {
	names := make([]string, 0, len(pods))
	for n := range pods {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	for _, name := range names {
		p := pods[name]
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				out = append(out, fmt.Sprintf("%s: %s: %s", name, c.Reason, c.Message))
			}
		}
		for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil && reportedWait(w.Reason) {
				out = append(out, fmt.Sprintf("%s: %s: %s", name, w.Reason, w.Message))
			}
		}
	}
	msg := strings.Join(out, "; ")
	if len(msg) > maxProblemsMessage {
		msg = strings.ToValidUTF8(msg[:maxProblemsMessage], "") + "..."
	}
	return msg
}

// writeStatus computes status from the observation and the planned step and writes it once per pass: what the
// members are, what etcd reports of the cluster, the settings Steward applied, and the conditions.
func (r *Reconciler) writeStatus(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action, passErr error) error {
	before := cluster.DeepCopy()
	st := &cluster.Status
	r.statusMembers(cluster, obs)
	metrics.ObserveLeader(cluster.Namespace, cluster.Name, before.Status.Leader, st.Leader)
	statusEtcd(st, obs)
	r.statusSettings(cluster, obs, passErr)
	r.setConditions(cluster, obs, action, passErr)
	r.statusHibernation(cluster, obs, action)
	r.statusWindow(cluster, obs, action)
	r.statusAdoption(cluster, obs, action)
	r.statusStandby(cluster, obs)
	if passErr == nil {
		st.ObservedGeneration = cluster.Generation
	}
	if equality.Semantic.DeepEqual(before.Status, cluster.Status) {
		// A steady cluster's pass changes nothing: no request at all, rather than an empty patch every pass.
		return nil
	}
	if err := r.Client.Status().Patch(ctx, cluster, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	r.awaitCachedStatus(ctx, before)
	return nil
}

// statusMembers writes the members, their counts, the leader and the lowest version they run.
func (r *Reconciler) statusMembers(cluster *etcdv1alpha1.EtcdCluster, obs *observation) {
	st := &cluster.Status
	st.Members = memberStatuses(cluster, obs, r.Options)
	st.Replicas = 0
	for range obs.pods {
		st.Replicas++
	}
	_, ready := plan.HealthyVoters(obs.plan.Members)
	st.ReadyReplicas, st.Leader, st.CurrentVersion = int32(ready), "", "" //nolint:gosec // at most a few members
	if obs.plan.EtcdReachable {
		st.Voters, st.Learners = etcdCounts(obs.plan.Members)
		if obs.view.AlarmErr == nil {
			st.Alarms = memberAlarms(obs.view.Alarms, obs.nameOf)
		}
	}
	versions := map[string]bool{}
	for _, m := range st.Members {
		if m.Role == etcdv1alpha1.RoleLeader {
			st.Leader = m.Name
		}
		if m.Version != "" {
			versions[m.Version] = true
		}
	}
	st.CurrentVersion = lowestVersion(versions)
	for _, m := range obs.plan.Members {
		if m.External && m.InEtcd && m.ID != 0 && m.ID == obs.plan.LeaderID && st.Leader == "" {
			st.Leader = m.Name // a member of an adopted source leads
		}
	}
}

// statusEtcd writes what etcd reports of the cluster as a whole: its versions, identity, revision, and since
// when it has lost quorum.
func statusEtcd(st *etcdv1alpha1.EtcdClusterStatus, obs *observation) {
	if obs.plan.EtcdReachable {
		st.ClusterVersion, st.DowngradeTarget = obs.view.ClusterVersion, obs.view.DowngradeTarget
	}
	if obs.versionMark != nil {
		st.ClusterVersionSince = obs.versionMark
	}
	if obs.view.ClusterID != 0 {
		id := etcd.FormatID(obs.view.ClusterID)
		if st.ClusterID != "" && st.ClusterID != id && !slices.Contains(st.FormerClusterIDs, st.ClusterID) {
			// Re-seeded from a backup: backups taken under the old ID remain backups of this cluster.
			st.FormerClusterIDs = append(st.FormerClusterIDs, st.ClusterID)
		}
		st.ClusterID = id
	}
	// The highest a member reports (a follower may lag, never lead), as the observation computed it; kept while
	// no member answers.
	st.Revision = max(st.Revision, obs.plan.Revision)
	st.QuorumLostSince = nil
	if obs.quorumLostSince != nil {
		t := metav1.NewTime(*obs.quorumLostSince)
		st.QuorumLostSince = &t
	}
	st.HashCheck = obs.hashCheck
	st.Bootstrapped = obs.plan.Bootstrapped
}

// statusSettings writes how Steward serves the cluster: its endpoint, quota, auth, users and TLS.
func (r *Reconciler) statusSettings(cluster *etcdv1alpha1.EtcdCluster, obs *observation, passErr error) {
	st := &cluster.Status
	st.ClientEndpoint = resources.ClientEndpoint(cluster, r.Options)
	if obs.serviceObserved {
		st.ExternalAccess = obs.externalAccess
	}
	st.QuotaBackendBytes = resources.QuotaBackendBytes(cluster)
	if st.RaisedQuotaBackendBytes > 0 && st.RaisedQuotaBackendBytes <= resources.SpecQuotaBackendBytes(cluster) {
		st.RaisedQuotaBackendBytes = 0 // the spec asks for as much now: the raise has served its time
	}
	st.OperatorCredentialsSecret = obs.operatorSecret
	if obs.plan.AuthEnabled != nil {
		st.AuthEnabled = obs.plan.AuthEnabled
		if !*st.AuthEnabled {
			st.UndeclaredUsers, st.UsersCheckedTime = nil, nil
		}
	}
	if obs.users != nil {
		st.UsersCheckedTime, st.UndeclaredUsers = &obs.users.checked, obs.users.undeclared
	}
	switch {
	case obs.tls != nil:
		st.TLS = obs.tls.status
	case !resources.TLSEnabled(cluster) && passErr == nil:
		// Cleared only by a pass without error: its start deleted the certificates of a switch to plaintext
		// (dropTLS), which a failed pass retries.
		st.TLS = nil
	}
}

// setConditions writes the pass's conditions and the start of the step under way, with an Event when the
// cluster becomes available or stops being available (not for the not-yet-formed states of a bootstrap), and a
// Warning when a Degraded reason that records one begins.
func (r *Reconciler) setConditions(cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action, passErr error) {
	st := &cluster.Status
	now := metav1.NewTime(r.Now())
	wasAvailable := meta.IsStatusConditionTrue(st.Conditions, etcdv1alpha1.ConditionAvailable)
	wasDegradedReason := ""
	if d := meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionDegraded); d != nil && d.Status == metav1.ConditionTrue {
		wasDegradedReason = d.Reason
	}
	conds := conditions(obs, action, passErr)
	st.StepSince = stepSince(meta.FindStatusCondition(st.Conditions, etcdv1alpha1.ConditionProgressing), conds[1], st.StepSince, now)
	for _, c := range conds {
		c.ObservedGeneration, c.LastTransitionTime = cluster.Generation, now
		meta.SetStatusCondition(&st.Conditions, c)
		if c.Type == etcdv1alpha1.ConditionDegraded && degradedWarnings[c.Reason] && c.Reason != wasDegradedReason {
			r.Recorder.Event(cluster, corev1.EventTypeWarning, c.Reason, c.Message)
		}
		if c.Type != etcdv1alpha1.ConditionAvailable {
			continue
		}
		switch isTrue := c.Status == metav1.ConditionTrue; {
		case isTrue && !wasAvailable:
			r.Recorder.Event(cluster, corev1.EventTypeNormal, c.Reason, c.Message)
		case !isTrue && wasAvailable && (c.Reason == etcdv1alpha1.ReasonHibernating || c.Reason == etcdv1alpha1.ReasonHibernated):
			// Stopped as asked: not a warning.
			r.Recorder.Event(cluster, corev1.EventTypeNormal, c.Reason, c.Message)
		case !isTrue && wasAvailable:
			r.Recorder.Event(cluster, corev1.EventTypeWarning, c.Reason, c.Message)
		}
	}
}

// cacheCatchUp bounds awaitCachedStatus: the informer delivers a write within milliseconds; past this the
// next pass reads what it reads, as before.
const cacheCatchUp = 2 * time.Second

// awaitCachedStatus waits until the cache holds a newer object than the one this pass started from (before),
// that is, this pass's status write or a later one. The next pass of the same cluster may already be queued (a
// Pod's event during this one) and starts as soon as this one returns; reading the cached object from before the
// write, it would decide again what this pass decided and recorded (it once ran the hash check a second
// time in the same second and raised the Warning Event of the same Degraded reason twice). The cache is memory,
// not the API server.
func (r *Reconciler) awaitCachedStatus(ctx context.Context, before *etcdv1alpha1.EtcdCluster) {
	deadline := time.Now().Add(cacheCatchUp)
	for {
		cached := &etcdv1alpha1.EtcdCluster{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(before), cached); err != nil ||
			cached.ResourceVersion != before.ResourceVersion || !time.Now().Before(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// etcdCounts counts the voting members and the learners of etcd's member list.
func etcdCounts(members []plan.Member) (voters, learners int32) {
	for _, m := range members {
		switch {
		case !m.InEtcd:
		case m.IsLearner:
			learners++
		default:
			voters++
		}
	}
	return voters, learners
}

// memberAlarms names the members of etcd's alarms (by the pass's ID to name map; plan.StrayMemberName for a member
// it cannot name), in etcd's order (by member ID, then type).
func memberAlarms(alarms []etcd.Alarm, nameOf map[uint64]string) []etcdv1alpha1.MemberAlarm {
	var out []etcdv1alpha1.MemberAlarm
	for _, a := range alarms {
		name, ok := nameOf[a.MemberID]
		if !ok {
			name = plan.StrayMemberName(a.MemberID)
		}
		out = append(out, etcdv1alpha1.MemberAlarm{Member: name, MemberID: etcd.FormatID(a.MemberID), Alarm: a.Type})
	}
	return out
}

// stepSince is when the step under way began, given the Progressing condition the previous pass wrote (nil on
// the first), the one this pass computed, and the start remembered: kept while Progressing stays True with the
// same reason, now when a step begins or changes, nil when nothing is progressing.
func stepSince(prev *metav1.Condition, next metav1.Condition, since *metav1.Time, now metav1.Time) *metav1.Time {
	if next.Status != metav1.ConditionTrue {
		return nil
	}
	if prev != nil && prev.Status == metav1.ConditionTrue && prev.Reason == next.Reason && since != nil {
		return since
	}
	return &now
}

// progressingWaits are the waits that are part of a step under way (Progressing stays True through them), as
// opposed to waits for a human (paused, refused, data lost).
var progressingWaits = map[string]bool{
	etcdv1alpha1.ReasonBootstrapping: true, etcdv1alpha1.ReasonWaitingForMembers: true, etcdv1alpha1.ReasonPodDeleting: true,
	etcdv1alpha1.ReasonWaitingForRestart: true, etcdv1alpha1.ReasonWaitingForCatchUp: true, etcdv1alpha1.ReasonWaitingForStorageVersion: true,
	etcdv1alpha1.ReasonWaitingForClusterVersion: true, etcdv1alpha1.ReasonMovingLeader: true, etcdv1alpha1.ReasonWaitingForSnapshot: true,
	etcdv1alpha1.ReasonWaitingForRestore: true, etcdv1alpha1.ReasonWaitingForCertificates: true,
	etcdv1alpha1.ReasonDefragmenting: true, etcdv1alpha1.ReasonRecoveringFromNoSpace: true, etcdv1alpha1.ReasonWaitingForBackup: true,
	etcdv1alpha1.ReasonExpandingVolume: true, etcdv1alpha1.ReasonHibernating: true,
}

// humanWaits are the waits only a human ends: the cluster is Degraded with the wait's reason, and a Warning is
// recorded when the wait begins.
var humanWaits = map[string]bool{
	etcdv1alpha1.ReasonMemberDataLost: true, etcdv1alpha1.ReasonInconsistentBootstrap: true, etcdv1alpha1.ReasonVersionChangeRefused: true,
	etcdv1alpha1.ReasonRestoreFailed: true, etcdv1alpha1.ReasonRestoreRefused: true, etcdv1alpha1.ReasonBackupNotMountable: true, etcdv1alpha1.ReasonNoBackupToRestore: true, etcdv1alpha1.ReasonAutoRestoreFailed: true,
	etcdv1alpha1.ReasonQuorumUnrecoverable: true, etcdv1alpha1.ReasonTLSProviderMismatch: true, etcdv1alpha1.ReasonTLSSecretInvalid: true, etcdv1alpha1.ReasonCertManagerNotInstalled: true,
	etcdv1alpha1.ReasonVolumeResizeFailed: true, etcdv1alpha1.ReasonNoSpaceQuotaTooSmall: true, etcdv1alpha1.ReasonOperatorPasswordRejected: true, etcdv1alpha1.ReasonClusterCAChanged: true,
	etcdv1alpha1.ReasonMembershipChangeRefused: true,
	// An adoption's refusals: the source, or the spec, must change.
	etcdv1alpha1.ReasonSourceUnreachable: true, etcdv1alpha1.ReasonSourceAccessRejected: true, etcdv1alpha1.ReasonSourceMembershipChanging: true,
	etcdv1alpha1.ReasonSourceUnhealthy: true, etcdv1alpha1.ReasonSourceVersionUnsupported: true, etcdv1alpha1.ReasonSourceTooBig: true,
	etcdv1alpha1.ReasonSourceTLSUnsupported: true, etcdv1alpha1.ReasonSourceAuthUnsupported: true, etcdv1alpha1.ReasonSourceChanged: true,
	etcdv1alpha1.ReasonAdoptionAbortTooLate: true,
}

// conditions are computed from the pass alone; every condition is written on every pass.
func conditions(obs *observation, action plan.Action, passErr error) []metav1.Condition {
	available := availableCondition(obs, action)
	return []metav1.Condition{available, progressingCondition(obs, action), degradedCondition(obs, action, passErr, available)}
}

// availableCondition: whether a quorum of the voters etcd lists is healthy.
func availableCondition(obs *observation, action plan.Action) metav1.Condition {
	voters, healthyVoters := plan.HealthyVoters(obs.plan.Members)
	quorum := plan.Quorum(voters)
	available := metav1.Condition{Type: etcdv1alpha1.ConditionAvailable}
	switch {
	case action.Reason == etcdv1alpha1.ReasonOperatorPasswordRejected:
		// Without an identity etcd answers no status: the members' health is not known, not bad.
		available.Status, available.Reason = metav1.ConditionUnknown, etcdv1alpha1.ReasonOperatorPasswordRejected
		available.Message = "etcd refuses Steward's password, so it answers Steward no member's status: whether the cluster serves is unknown"
	case obs.plan.EtcdReachable && voters > 0 && healthyVoters >= quorum:
		available.Status, available.Reason = metav1.ConditionTrue, etcdv1alpha1.ReasonQuorumAvailable
		available.Message = fmt.Sprintf("%d of %d voting members healthy (quorum %d)", healthyVoters, voters, quorum)
	case hibernationStep(action) && obs.plan.Bootstrapped:
		// Stopped by request: the reason says so, not a loss of quorum.
		available.Status, available.Reason, available.Message = metav1.ConditionFalse, action.Reason, action.Message
	case !obs.plan.Bootstrapped:
		available.Status, available.Reason = metav1.ConditionFalse, etcdv1alpha1.ReasonBootstrapping
		available.Message = "the cluster has not formed yet"
	case !obs.plan.EtcdReachable:
		// Without a member list etcd's counts are unknown: say what Kubernetes shows instead.
		available.Status, available.Reason = metav1.ConditionFalse, etcdv1alpha1.ReasonQuorumLost
		available.Message = fmt.Sprintf("no member list from etcd (%v); %s", obs.view.ListErr, plan.TakeCensus(obs.plan.Members))
	default:
		available.Status, available.Reason = metav1.ConditionFalse, etcdv1alpha1.ReasonQuorumLost
		available.Message = fmt.Sprintf("%d of %d voting members healthy, quorum is %d", healthyVoters, voters, quorum)
	}
	return available
}

// progressingCondition: whether a step is under way (a step, or a wait that is part of one), with the step's
// reason and message; while new Pods wait for their certificates, that.
func progressingCondition(obs *observation, action plan.Action) metav1.Condition {
	progressing := metav1.Condition{Type: etcdv1alpha1.ConditionProgressing, Reason: action.Reason, Message: action.Message}
	switch {
	case action.Kind != plan.Wait && action.Kind != plan.None:
		progressing.Status = metav1.ConditionTrue
	case action.Kind == plan.Wait && progressingWaits[action.Reason]:
		progressing.Status = metav1.ConditionTrue
	default:
		progressing.Status = metav1.ConditionFalse
	}
	if obs.tls != nil && obs.tls.waiting != "" {
		progressing.Reason, progressing.Message = etcdv1alpha1.ReasonWaitingForCertificates, obs.tls.waiting
	}
	return progressing
}

// memberProblems are the members Degraded names, by problem, each sorted.
type memberProblems struct {
	unhealthy, volumesDeleting, overdue, replacedOverdue []string
}

func memberProblemsOf(obs *observation) memberProblems {
	var p memberProblems
	for _, m := range obs.plan.Members {
		if (m.HasPod || m.InEtcd) && !m.Healthy {
			p.unhealthy = append(p.unhealthy, m.Name)
		}
		if m.VolumeDeleting && m.HasPod {
			p.volumesDeleting = append(p.volumesDeleting, m.Name)
		}
		switch {
		case m.PodOverdue < podOverdueAfter:
		case obs.plan.EtcdReachable && !m.InEtcd:
			p.replacedOverdue = append(p.replacedOverdue, fmt.Sprintf("%s (%s past its grace period)", m.Name, m.PodOverdue.Round(time.Second)))
		default:
			p.overdue = append(p.overdue, fmt.Sprintf("%s (%s past its grace period)", m.Name, m.PodOverdue.Round(time.Second)))
		}
	}
	sort.Strings(p.replacedOverdue)
	sort.Strings(p.unhealthy)
	sort.Strings(p.volumesDeleting)
	sort.Strings(p.overdue)
	return p
}

// degradedCondition: the first problem a human may have to act on, in order of urgency; the pass's error first.
// A switch of cases in that order, each a message a human acts on: one function keeps the order in one place
// (its length is the messages').
func degradedCondition(obs *observation, action plan.Action, passErr error, available metav1.Condition) metav1.Condition {
	degraded := metav1.Condition{Type: etcdv1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: etcdv1alpha1.ReasonAsExpected, Message: "no problem found"}
	mp := memberProblemsOf(obs)
	problems := podProblems(obs.pods)
	noSpace, corrupt := alarmedMembers(obs)
	mismatched, _ := mismatchedMembers(obs)
	set := func(reason, message string) {
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, reason, message
	}
	switch {
	case passErr != nil:
		set(etcdv1alpha1.ReasonReconcileError, passErr.Error())
	case humanWaits[action.Reason]:
		set(action.Reason, action.Message)
	case len(mp.overdue) > 0:
		msg := fmt.Sprintf("deleted member Pods do not go: %s; their node is probably not answering. Steward cannot re-create "+
			"these members on their volumes until the Pods are gone: if the node is down for good, force-delete them "+
			"(kubectl delete pod --grace-period=0 --force)", strings.Join(mp.overdue, ", "))
		if available.Status != metav1.ConditionTrue {
			msg += "; " + available.Message
		}
		set(etcdv1alpha1.ReasonPodStuckTerminating, msg)
	case len(mp.replacedOverdue) > 0:
		// Removed from etcd and replaced (or being replaced): nothing waits for these Pods, but their volumes
		// stay until they go, and a human may want to know the node is gone.
		set(etcdv1alpha1.ReasonPodStuckTerminating, fmt.Sprintf("Pods of removed members do not go: %s; their node is probably not answering. Steward replaces "+
			"these members without waiting; their Pods and volumes go when the node answers again, or force-delete the Pods if it is "+
			"down for good (kubectl delete pod --grace-period=0 --force)", strings.Join(mp.replacedOverdue, ", ")))
	case hibernationStep(action):
		// Members stop by request: neither their quorum nor their health is a problem.
		degraded.Reason, degraded.Message = action.Reason, "no problem found; "+action.Message
	case obs.plan.Bootstrapped && available.Status != metav1.ConditionTrue:
		msg := available.Message
		if problems != "" {
			msg += "; " + problems
		}
		set(etcdv1alpha1.ReasonQuorumLost, msg)
	case len(corrupt) > 0:
		set(etcdv1alpha1.ReasonCorruptAlarm, fmt.Sprintf("etcd raised a CORRUPT alarm for members %v: their data differs from the others'. Steward does not "+
			"disarm it; find the member whose hash differs (etcdctl endpoint hashkv --cluster), replace it (delete its PVC), then "+
			"disarm the alarm (etcdctl alarm disarm)", corrupt))
	case len(mismatched) > 0:
		set(etcdv1alpha1.ReasonMemberDataMismatch, mismatchMessage(obs))
	case len(noSpace) > 0:
		set(etcdv1alpha1.ReasonNoSpaceAlarm, fmt.Sprintf("etcd raised its NOSPACE alarm for members %v: their database reached its quota (status.quotaBackendBytes); the cluster "+
			"refuses writes until space is reclaimed (compact, defragment every member) and the alarm is disarmed (etcdctl alarm disarm), "+
			"or the quota is raised (spec.etcd.quotaBackendBytes, within what storage.size allows)", noSpace))
	case len(mp.volumesDeleting) > 0:
		set(etcdv1alpha1.ReasonMemberVolumeDeleting, fmt.Sprintf("the volumes of members %v are being deleted while their Pods run: their data goes when the Pods stop; "+
			"Steward replaces them (a successor joins first, then they are removed)", mp.volumesDeleting))
	case problems != "":
		set(etcdv1alpha1.ReasonMemberPodsFailing, problems)
	case obs.plan.Bootstrapped && len(mp.unhealthy) > 0:
		set(etcdv1alpha1.ReasonMembersUnhealthy, fmt.Sprintf("unhealthy members: %v", mp.unhealthy))
	case obs.window != nil && obs.window.Error != "":
		set(etcdv1alpha1.ReasonInvalidMaintenanceWindow, fmt.Sprintf("spec.maintenance.window cannot be read (%s): optional disruptive work "+
			"(defragmentation, rebalancing, restarts for a changed quota or authentication) waits until it can; what keeps data safe does not", obs.window.Error))
	case obs.serviceRefused != "":
		set(etcdv1alpha1.ReasonClientServiceRefused, obs.serviceRefused)
	case obs.memory.reason != "":
		// Nothing has run out yet: what may, under a burst of large writes.
		set(obs.memory.reason, obs.memory.message)
	case obs.tls != nil && obs.tls.sharedIssuer != "":
		// Last: nothing is broken, but whoever else the issuer serves can be root on this cluster.
		set(etcdv1alpha1.ReasonSharedIssuerTrusted, obs.tls.sharedIssuer)
	}
	return degraded
}

// mismatchMessage is Degraded's message for members whose data differs from the majority's: the hash check's,
// and what to do about it.
func mismatchMessage(obs *observation) string {
	mismatched, hashResult := mismatchedMembers(obs)
	msg := obs.hashCheck.Message
	switch {
	case hashResult == plan.HashNoMajority:
	case obs.replaceMismatched:
		msg += "; Steward replaces them one at a time (spec.maintenance.corruptionCheck.replaceMismatchedMembers)"
	default:
		msg += fmt.Sprintf("; they serve that data to clients that read from them. Replace them: set spec.maintenance.corruptionCheck."+
			"replaceMismatchedMembers, or delete their volumes (PVCs %s) one at a time and Steward replaces each with a member that copies the majority's data",
			strings.Join(pvcNames(mismatched), ", "))
	}
	return msg
}

// alarmedMembers are the members etcd keeps a NOSPACE and a CORRUPT alarm raised for, as this pass read them
// (none when the alarm list could not be read: status keeps the last list, conditions say only what is known).
func alarmedMembers(obs *observation) (noSpace, corrupt []string) {
	if obs.view.AlarmErr != nil {
		return nil, nil
	}
	for _, a := range memberAlarms(obs.view.Alarms, obs.nameOf) {
		switch a.Alarm {
		case etcdAlarmNoSpace:
			noSpace = append(noSpace, a.Member)
		case etcdAlarmCorrupt:
			corrupt = append(corrupt, a.Member)
		}
	}
	return noSpace, corrupt
}

// etcd's names of its alarms (etcdserverpb.AlarmType).
const (
	etcdAlarmNoSpace = "NOSPACE"
	etcdAlarmCorrupt = "CORRUPT"
)

func memberStatuses(cluster *etcdv1alpha1.EtcdCluster, obs *observation, o resources.Options) []etcdv1alpha1.MemberStatus {
	leaderID := uint64(0)
	for _, s := range obs.statusOf {
		if s.Healthy() {
			leaderID = s.LeaderID
			break
		}
	}
	var out []etcdv1alpha1.MemberStatus
	for _, m := range obs.plan.Members {
		if m.External {
			continue // an adopted source's: status.adoption.externalMembers
		}
		ms := etcdv1alpha1.MemberStatus{Name: m.Name, Healthy: m.Healthy, Role: etcdv1alpha1.RoleUnknown}
		if t, ok := obs.unhealthySince[m.Name]; ok {
			since := metav1.NewTime(t)
			ms.UnhealthySince = &since
		}
		if m.HasPod || m.HasPVC {
			mode := m.PodTLS
			if !m.HasPod {
				mode = resources.MemberTLSOf(cluster, resources.Member{})
			}
			ms.ClientURL = resources.ClientURL(cluster, m.Name, mode, o)
		}
		ms.TLS = m.PodTLS
		if pod, ok := obs.pods[m.Name]; ok {
			ms.Node = pod.Spec.NodeName
		}
		if m.ID != 0 {
			ms.ID = etcd.FormatID(m.ID)
		}
		if s, ok := obs.statusOf[m.Name]; ok && s.Err == nil {
			ms.Version, ms.DBSizeBytes, ms.DBSizeInUseBytes, ms.StorageVersion = s.Version, s.DBSizeBytes, s.DBSizeInUseBytes, s.StorageVersion
			if ms.ID == "" {
				ms.ID = etcd.FormatID(s.MemberID)
			}
		}
		ms.LastDefragmentation = obs.defragmented[m.Name]
		switch {
		case m.IsLearner:
			ms.Role = etcdv1alpha1.RoleLearner
		case m.ID != 0 && m.ID == leaderID:
			ms.Role = etcdv1alpha1.RoleLeader
		case m.InEtcd && leaderID != 0:
			ms.Role = etcdv1alpha1.RoleFollower
		}
		out = append(out, ms)
	}
	return out
}

// lowestVersion is the oldest server version among members: the version every member can at least speak.
// A version etcd reports that does not parse sorts first, as the one Steward knows least about.
func lowestVersion(versions map[string]bool) string {
	lowest, found := "", false
	var lowestV plan.Version
	for s := range versions {
		v, _ := plan.ParseVersion(s)
		if !found || v.Less(lowestV) || (v == lowestV && s < lowest) {
			lowest, lowestV, found = s, v, true
		}
	}
	return lowest
}

func pvcNames(members []string) []string {
	out := make([]string, len(members))
	for i, m := range members {
		out[i] = resources.PVCName(m)
	}
	return out
}
