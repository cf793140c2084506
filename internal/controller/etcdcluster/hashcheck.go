package etcdcluster

import (
	"context"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

// Intervals of Steward's comparison of members' key-space hashes.
const (
	// defaultHashCheckInterval: spec.maintenance.corruptionCheck.interval when unset. Each check reads every
	// member's whole database once.
	defaultHashCheckInterval = time.Hour
	// hashCheckRetry is how soon an inconclusive check (a member did not answer, a compaction came in between)
	// is tried again.
	hashCheckRetry = 30 * time.Second
)

// hashCheckInterval is how often members' hashes are compared; 0 when never.
func hashCheckInterval(c *etcdv1alpha1.EtcdCluster) time.Duration {
	if m := c.Spec.Maintenance; m != nil && m.CorruptionCheck != nil && m.CorruptionCheck.Interval != nil {
		return m.CorruptionCheck.Interval.Duration
	}
	return defaultHashCheckInterval
}

// hashCheckDue reports whether members' hashes are to be compared now: the last check is older than the
// interval (or than hashCheckRetry, when it was inconclusive or found members that etcd no longer lists: a
// replacement is confirmed by the next check, not by the last one's word).
func hashCheckDue(last *etcdv1alpha1.HashCheck, interval time.Duration, now time.Time, listed func(string) bool) bool {
	if interval <= 0 {
		return false
	}
	if last == nil {
		return true
	}
	age := now.Sub(last.Time.Time)
	if age >= interval || age < 0 {
		return true
	}
	if age < min(interval, hashCheckRetry) {
		return false
	}
	if last.Result == plan.HashInconclusive {
		return true
	}
	for _, name := range last.MismatchedMembers {
		if !listed(name) {
			return true
		}
	}
	return false
}

// observeHashCheck compares the hash of every voter's key space at one revision when a check is due and every
// member is healthy (a member that is down or catching up would only make it inconclusive), records the verdict
// for status, and marks the members whose data differs from the majority's for the planner. Between checks the
// verdict in status stands, so a restarted operator acts on the same one.
func (r *Reconciler) observeHashCheck(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) {
	obs.hashCheck = cluster.Status.HashCheck
	obs.replaceMismatched = maintenanceOf(cluster).ReplaceMismatched
	defer func() {
		if c := obs.hashCheck; c != nil && c.Result == plan.HashMismatch {
			for i := range obs.plan.Members {
				obs.plan.Members[i].HashMismatch = slices.Contains(c.MismatchedMembers, obs.plan.Members[i].Name)
			}
		}
	}()
	if !obs.plan.EtcdReachable || !obs.plan.Bootstrapped {
		return
	}
	var voters []plan.Member
	for _, m := range obs.plan.Members {
		switch {
		case !m.InEtcd:
		case m.IsLearner || !m.Healthy:
			return
		default:
			voters = append(voters, m)
		}
	}
	listed := func(name string) bool {
		return slices.ContainsFunc(voters, func(m plan.Member) bool { return m.Name == name })
	}
	now := r.Now()
	if len(voters) < 2 || !hashCheckDue(obs.hashCheck, hashCheckInterval(cluster), now, listed) {
		return
	}
	// The lowest revision any voter has applied: every one of them can hash its key space at it.
	var rev int64
	var endpoints []string
	nameOf := map[string]string{}
	for _, m := range voters {
		s := obs.statusOf[m.Name]
		if rev == 0 || s.Revision < rev {
			rev = s.Revision
		}
		endpoints = append(endpoints, s.Endpoint)
		nameOf[s.Endpoint] = m.Name
	}
	log := ctrl.LoggerFrom(ctx)
	answers, err := r.Etcd.HashKVs(ctx, client.ObjectKeyFromObject(cluster).String(), endpoints, rev)
	if err != nil {
		log.Info("Could not compare members' hashes", "error", err.Error())
		return
	}
	var hashes []plan.MemberHash
	for ep, a := range answers {
		h := plan.MemberHash{Name: nameOf[ep], Hash: a.Hash, CompactRevision: a.CompactRevision}
		if a.Err != nil {
			h.Err = a.Err.Error()
		}
		hashes = append(hashes, h)
	}
	verdict := plan.CompareHashes(rev, hashes)
	log.Info("Compared members' hashes", "revision", rev, "result", verdict.Result, "mismatched", verdict.Mismatched, "message", verdict.Message)
	obs.hashCheck = &etcdv1alpha1.HashCheck{Time: metav1.NewTime(now), Revision: rev, Result: verdict.Result,
		MismatchedMembers: verdict.Mismatched, Message: verdict.Message}
}

// mismatchedMembers are the members the last hash check found to differ (from the majority's, or with no
// majority) that etcd still lists, and that check's result; none when it found nothing that still stands.
func mismatchedMembers(obs *observation) (names []string, result string) {
	c := obs.hashCheck
	if c == nil || (c.Result != plan.HashMismatch && c.Result != plan.HashNoMajority) {
		return nil, ""
	}
	for _, n := range c.MismatchedMembers {
		if m, ok := memberNamed(obs.plan.Members, n); ok && m.InEtcd {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, ""
	}
	return names, c.Result
}

func memberNamed(members []plan.Member, name string) (plan.Member, bool) {
	i := slices.IndexFunc(members, func(m plan.Member) bool { return m.Name == name })
	if i < 0 {
		return plan.Member{}, false
	}
	return members[i], true
}
