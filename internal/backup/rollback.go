package backup

import (
	"fmt"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Rollback phases: a restore of a cluster that has quorum (a rollback to the backup) goes through them in order
// before its snapshot is verified; only RollbackProceed lets it go on.
const (
	// RollbackRefused: spec.allowRollbackOfHealthyCluster is not set; nothing is touched.
	RollbackRefused = "Refused"
	// RollbackTakeSafetyBackup: create (or keep waiting for) the safety backup of the cluster as it is.
	RollbackTakeSafetyBackup = "TakeSafetyBackup"
	// RollbackSafetyBackupFailed: the safety backup failed; the restore stops and nothing is touched.
	RollbackSafetyBackupFailed = "SafetyBackupFailed"
	// RollbackProceed: the safety backup is Complete; the restore verifies its snapshot and re-seeds.
	RollbackProceed = "Proceed"
)

// Rollback is what the rollback of a cluster that has quorum is decided on.
type Rollback struct {
	ClusterName string
	// Allowed is spec.allowRollbackOfHealthyCluster.
	Allowed bool
	// BackupName, BackupRevision and BackupTime are the restored backup's: its writes up to BackupRevision,
	// taken at BackupTime, are what the cluster goes back to.
	BackupName     string
	BackupRevision int64
	BackupTime     time.Time
	// ClusterRevision is the cluster's current revision (0: not known yet).
	ClusterRevision int64
	// SafetyBackup is the safety backup's name, empty before it was created; SafetyComplete/SafetyFailed its
	// outcome, SafetyMessage why it failed.
	SafetyBackup                 string
	SafetyComplete, SafetyFailed bool
	SafetyMessage                string
	// Serving, when set, is why the cluster is taken to have quorum though its Available condition says it has
	// not: its member Pods serve (plan.ServingMessage).
	Serving string
}

// LossMessage says which writes a rollback to the backup discards.
func (r Rollback) LossMessage() string {
	when := "the backup"
	if !r.BackupTime.IsZero() {
		when = r.BackupTime.UTC().Format(time.RFC3339)
	}
	switch {
	case r.ClusterRevision > r.BackupRevision:
		return fmt.Sprintf("rolling cluster %s back to backup %s (revision %d) would discard the writes of revisions %d..%d made since %s",
			r.ClusterName, r.BackupName, r.BackupRevision, r.BackupRevision+1, r.ClusterRevision, when)
	case r.ClusterRevision > 0:
		return fmt.Sprintf("rolling cluster %s back to backup %s (revision %d, %s) discards no write (the cluster is at revision %d) but replaces its members and its cluster ID",
			r.ClusterName, r.BackupName, r.BackupRevision, when, r.ClusterRevision)
	}
	return fmt.Sprintf("rolling cluster %s back to backup %s (revision %d) would discard every write made since %s (the cluster's current revision is not known yet)",
		r.ClusterName, r.BackupName, r.BackupRevision, when)
}

// decideRollback is the phase of a restore of a cluster that has quorum: refused unless explicitly allowed, and
// then only after a safety backup of the cluster as it is has succeeded, so that the rollback itself can be
// undone. Every phase before RollbackProceed leaves the cluster untouched. Only DecideRestore asks it: a
// rollback is one way a restore goes, decided in the same pass.
func decideRollback(r Rollback) (phase, reason, message string) {
	switch {
	case !r.Allowed && r.Serving != "":
		return RollbackRefused, etcdv1alpha1.ReasonMembersServing, fmt.Sprintf("cluster %s is not re-seeded: %s. Nothing was changed. Let Steward reach the members (check NetworkPolicies and the operator's network); "+
			"if the members really lost quorum their Pods turn not Ready within a minute, and a new EtcdRestore goes ahead. To roll the serving cluster back instead, set spec.allowRollbackOfHealthyCluster (%s)",
			r.ClusterName, r.Serving, r.LossMessage())
	case !r.Allowed:
		return RollbackRefused, etcdv1alpha1.ReasonClusterHasQuorum, fmt.Sprintf("cluster %s has quorum; %s; set spec.allowRollbackOfHealthyCluster to true (with spec.confirm) to roll it back, or restore into a new cluster with bootstrap.fromBackup",
			r.ClusterName, r.LossMessage())
	case r.SafetyFailed:
		return RollbackSafetyBackupFailed, etcdv1alpha1.ReasonSafetyBackupFailed, fmt.Sprintf("safety backup %s of cluster %s failed (%s); the cluster was not rolled back and nothing was changed",
			r.SafetyBackup, r.ClusterName, r.SafetyMessage)
	case r.SafetyBackup == "" || !r.SafetyComplete:
		return RollbackTakeSafetyBackup, etcdv1alpha1.ReasonTakingSafetyBackup, fmt.Sprintf("taking a safety backup of cluster %s before %s",
			r.ClusterName, r.LossMessage())
	}
	return RollbackProceed, etcdv1alpha1.ReasonReseeding, fmt.Sprintf("safety backup %s is Complete; %s", r.SafetyBackup, r.LossMessage())
}
