// Package metrics is Steward's own Prometheus metrics, on controller-runtime's registry (served on the
// operator's --metrics-bind-address). Two kinds, as docs/reference/metrics.md lists them:
//
//   - Gauges computed at scrape time from the status of EtcdClusters, EtcdBackups and EtcdBackupSchedules in the
//     manager's cache (Collector): a deleted object's series go with it, and a new leader after a failover shows
//     the same values at once. A scrape lists each kind once from the cache; it never calls the API server or
//     etcd. The status to samples mapping is pure (samples.go).
//   - Counters the controllers increment when a thing happens (StepTaken, ObserveLeader, BackupEnded,
//     RestoreEnded). They reset when the operator restarts, as any Prometheus counter may; Forget deletes the
//     series of a deleted cluster.
//
// Every label value comes from an object's name, spec or status fields that name kinds, versions, reasons or
// members: never a timestamp, UID, message or anything read from a Secret, so cardinality stays bounded by the
// number of clusters and their members. This package decides nothing about clusters and changes no object.
package metrics

import (
	"strings"
	"sync"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

// Results of a backup or restore that ended (the result label).
const (
	ResultComplete = "complete"
	ResultFailed   = "failed"
)

var (
	stepsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "steward_cluster_steps_total",
		Help: "Steps Steward took on the cluster, by kind (the plan's action kind in snake_case).",
	}, []string{"namespace", "cluster", "kind"})
	membersReplacedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "steward_cluster_members_replaced_total",
		Help: "Members Steward removed from etcd to replace them, by the plan's reason.",
	}, []string{"namespace", "cluster", "reason"})
	leaderChangesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "steward_cluster_leader_changes_total",
		Help: "Changes of the cluster's leader Steward observed (between two of its passes).",
	}, []string{"namespace", "cluster"})
	backupsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "steward_backups_total",
		Help: "EtcdBackups that ended, by result (complete, failed) and the Failed condition's reason (empty when complete).",
	}, []string{"namespace", "cluster", "result", "reason"})
	restoresTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "steward_restores_total",
		Help: "EtcdRestores that ended, by result (complete, failed) and the Failed condition's reason (empty when complete).",
	}, []string{"namespace", "cluster", "result", "reason"})
)

// counters are every counter vector, for registration and Forget.
var counters = []*prometheus.CounterVec{stepsTotal, membersReplacedTotal, leaderChangesTotal, backupsTotal, restoresTotal}

// replacementReasons are the reasons of the plan's RemoveMember steps that remove a member to replace it (a
// successor joins in its place), as opposed to a scale-down or a leftover's removal.
var replacementReasons = map[string]bool{etcdv1alpha1.ReasonReplacingMember: true, etcdv1alpha1.ReasonReplacingLearner: true}

// StepTaken counts one step the EtcdCluster controller took (call it once the step's change is made), and a
// member replaced when the step is the removal of a member to replace it.
func StepTaken(namespace, cluster string, action plan.Action) {
	stepsTotal.WithLabelValues(namespace, cluster, StepKind(action.Kind)).Inc()
	if action.Kind == plan.RemoveMember && replacementReasons[action.Reason] {
		membersReplacedTotal.WithLabelValues(namespace, cluster, action.Reason).Inc()
	}
}

// StepKind is the kind label of a plan action kind: snake_case ("AddLearner" -> "add_learner", "DeleteMemberPVC"
// -> "delete_member_pvc").
func StepKind(kind plan.ActionKind) string {
	rs := []rune(string(kind))
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) {
			// A word starts at an upper-case letter after a lower-case one or a digit, or at the last capital of
			// an acronym followed by a lower-case letter ("PVCSize" -> "pvc_size").
			if i > 0 && (!unicode.IsUpper(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// leaders remembers the leader each cluster had when Steward last saw one, so that a change is counted once even
// when the next pass reads a status the cache has not updated yet.
var leaders = struct {
	sync.Mutex
	of map[string]string
}{of: map[string]string{}}

// ObserveLeader counts a leader change when a pass observes a leader (observed) other than the one last seen:
// remembered in this process, else recorded in status (recorded), so that a change during an operator restart
// counts too. No leader observed (an election under way, no quorum) is not a change; the next leader seen is
// compared with the last one. The cluster's series starts at 0, so that increase() sees its first change.
func ObserveLeader(namespace, cluster, recorded, observed string) {
	key := namespace + "/" + cluster
	leaders.Lock()
	defer leaders.Unlock()
	c := leaderChangesTotal.WithLabelValues(namespace, cluster)
	prev, ok := leaders.of[key]
	if !ok {
		prev = recorded
	}
	if LeaderChanged(prev, observed) {
		c.Inc()
	}
	if observed != "" {
		leaders.of[key] = observed
	} else if !ok && prev != "" {
		leaders.of[key] = prev
	}
}

// LeaderChanged reports whether observing leader observed after prev is a change: both known and different.
func LeaderChanged(prev, observed string) bool {
	return prev != "" && observed != "" && prev != observed
}

// BackupEnded counts an EtcdBackup of cluster that ended: result ResultComplete or ResultFailed, reason the
// Failed condition's reason ("" for a complete backup). Call it once, on the status write that ends it.
func BackupEnded(namespace, cluster, result, reason string) {
	backupsTotal.WithLabelValues(namespace, cluster, result, reason).Inc()
}

// RestoreEnded counts an EtcdRestore of cluster that ended, as BackupEnded does.
func RestoreEnded(namespace, cluster, result, reason string) {
	restoresTotal.WithLabelValues(namespace, cluster, result, reason).Inc()
}

// Forget deletes every counter series of a cluster that was deleted (and the leader remembered for it), so that
// its series do not stay exported for the life of the process.
func Forget(namespace, cluster string) {
	for _, c := range counters {
		c.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "cluster": cluster})
	}
	leaders.Lock()
	delete(leaders.of, namespace+"/"+cluster)
	leaders.Unlock()
}
