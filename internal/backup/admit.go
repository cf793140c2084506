package backup

import (
	"fmt"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Member is a cluster member as the EtcdCluster's status reports it.
type Member struct {
	Name, ClientURL          string
	Healthy, Leader, Learner bool
}

// AdmitInput is what admission of a backup looks at.
type AdmitInput struct {
	ClusterFound bool
	// Hibernated names the cluster when it hibernates (or is on its way in or out): no member runs to take a
	// snapshot from, and none will until a human resumes it, which may be much later than any grace.
	Hibernated string
	Members    []Member
	// DestinationProblem is why the destination cannot be used (PVC or credentials Secret missing), empty if
	// it can.
	DestinationProblem string
	// KeyProblem is why spec.encryption's key cannot be used, empty if it can (or none is asked for).
	KeyProblem string
	// Age of the EtcdBackup: a cluster that is not available yet gets UnavailableGrace to become so (a backup
	// created together with its cluster, or during a member restart).
	Age time.Duration
}

// Verdict of admission.
type Verdict int

// Admission verdicts.
const (
	Admit Verdict = iota
	Wait
	Refuse
)

// UnavailableGrace is how long a backup waits for its cluster to have a healthy member before it fails.
const UnavailableGrace = time.Minute

// Decision is the verdict, why, and for Admit the members to try, as name=clientURL in order of preference.
type Decision struct {
	Verdict         Verdict
	Reason, Message string
	Members         []string
}

// Decide admits a backup when its cluster exists with a healthy voting member and its destination exists.
// Members are tried followers first and the leader last: streaming a snapshot costs the sender disk reads and
// bandwidth, which the leader needs for replication. Learners are never used: they may lag behind.
func Decide(in AdmitInput) Decision {
	if !in.ClusterFound {
		return Decision{Verdict: Refuse, Reason: etcdv1alpha1.ReasonClusterNotFound, Message: "the EtcdCluster does not exist"}
	}
	if in.Hibernated != "" {
		return Decision{Verdict: Refuse, Reason: etcdv1alpha1.ReasonHibernated, Message: fmt.Sprintf("EtcdCluster %s is hibernated: no member runs to take a snapshot from; "+
			"resume it (spec.hibernation.enabled: false) and create the backup again", in.Hibernated)}
	}
	if in.DestinationProblem != "" {
		return Decision{Verdict: Refuse, Reason: etcdv1alpha1.ReasonDestinationNotFound, Message: in.DestinationProblem}
	}
	if in.KeyProblem != "" {
		return Decision{Verdict: Refuse, Reason: etcdv1alpha1.ReasonEncryptionKeyNotFound, Message: in.KeyProblem + "; nothing was written"}
	}
	var followers, leaders []string
	for _, m := range in.Members {
		if !m.Healthy || m.Learner || m.ClientURL == "" {
			continue
		}
		if m.Leader {
			leaders = append(leaders, m.Name+"="+m.ClientURL)
		} else {
			followers = append(followers, m.Name+"="+m.ClientURL)
		}
	}
	members := append(followers, leaders...)
	if len(members) == 0 {
		msg := fmt.Sprintf("no healthy voting member among %d members", len(in.Members))
		if in.Age < UnavailableGrace {
			return Decision{Verdict: Wait, Reason: etcdv1alpha1.ReasonClusterUnavailable, Message: msg + "; waiting for one"}
		}
		return Decision{Verdict: Refuse, Reason: etcdv1alpha1.ReasonClusterUnavailable, Message: fmt.Sprintf("%s for %s", msg, UnavailableGrace)}
	}
	return Decision{Verdict: Admit, Members: members}
}
