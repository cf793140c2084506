package backup

import (
	"fmt"
	"slices"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

// RestoreInput is what a restore's next step is decided on: its cluster, its backup, the verify Job's result
// and, once restoring, the cluster's members.
type RestoreInput struct {
	ClusterName  string
	ClusterFound bool
	// Bootstrapped: the cluster has formed (its status' memory). FromBackup is its bootstrap.fromBackup.
	Bootstrapped bool
	FromBackup   string
	// ClusterAvailable: the cluster's Available condition is True (it has quorum).
	ClusterAvailable bool
	// ReadyMembers counts the Pods of the cluster's members (not this restore's, not being deleted) that are
	// Ready; Members is how many members the cluster has (the larger of spec.replicas and its last member list).
	// A quorum of Ready Pods means the cluster serves even when Steward cannot reach it (plan.PodsServeQuorum).
	ReadyMembers, Members int
	// ClusterIDs are the etcd cluster IDs the cluster has had (the current one and those before re-seeds).
	ClusterIDs []string
	// Version is the cluster's spec.version.
	Version string

	Backup BackupRecord
	// Confirm is the restore's spec.confirm.
	Confirm string
	// Mode is the mode decided at admission (status), empty before.
	Mode string
	// OtherActive names an older unfinished restore of the same cluster, empty when none.
	OtherActive string

	// Verify is the verify Job's result, nil while there is none (not started, or running).
	Verify *Result
	// KeyProblem is why the backup's encryption key Secret cannot decrypt it, empty if it can (or the backup
	// is not encrypted): the verify Job is not started without a key.
	KeyProblem string
	// Verified: the Verified condition is already True.
	Verified bool

	// FreshMembers and OtherMembers count the cluster's member Pods started from this restore and the others;
	// MemberFailure is a restore init container's failure, empty when none.
	FreshMembers, OtherMembers int
	MemberFailure              string

	// Rollback is what a restore of a cluster that has quorum is decided on (decideRollback); the caller
	// fills its allowance, revisions and safety backup, DecideRestore the rest.
	Rollback Rollback
	// PreviousClusterID is the cluster's etcd cluster ID when the re-seed was admitted (status), empty before.
	PreviousClusterID string
}

// BackupRecord is the part of an EtcdBackup a restore checks.
type BackupRecord struct {
	Name             string
	Found            bool
	Complete, Failed bool
	ClusterName      string
	ClusterID        string
	EtcdVersion      string
	Location, SHA256 string
	SizeBytes        int64
}

// Restore modes (they match the EtcdRestore status' mode).
const (
	ModeNewCluster = "NewCluster"
	ModeReseed     = "Reseed"
)

// RestoreStep is what the restore controller does next.
type RestoreStep int

// Restore steps.
const (
	// RestoreWait: nothing yet (Reason says why: waiting for confirmation, for the backup, for the cluster).
	RestoreWait RestoreStep = iota
	// RestoreRefuse: the restore fails with Reason; nothing of the cluster was or will be touched (unless it
	// failed while restoring, which Message says).
	RestoreRefuse
	// RestoreVerify: start (or keep waiting for) the verify Job.
	RestoreVerify
	// RestoreHandOver: the snapshot is verified; the cluster's controller replaces members. Wait for it.
	RestoreHandOver
	// RestoreSafetyBackup: create (or keep waiting for) the safety backup of a cluster rolled back while it has
	// quorum. Nothing of the cluster is touched.
	RestoreSafetyBackup
	// RestoreDone: every member of the cluster started from the snapshot and the cluster has quorum.
	RestoreDone
)

// RestoreDecision is the step, the mode, and why.
type RestoreDecision struct {
	Step            RestoreStep
	Mode            string
	Reason, Message string
}

// DecideRestore chooses a restore's next step. Every check that can refuse happens before the snapshot is
// verified, and the verification before anything of the cluster is touched: a refused restore changes nothing.
func DecideRestore(in RestoreInput) RestoreDecision {
	if !in.ClusterFound {
		return refused(in.Mode, etcdv1alpha1.ReasonClusterNotFound, "EtcdCluster %s does not exist", in.ClusterName)
	}
	if in.Mode == "" && in.Verify == nil && !in.Verified {
		mode, d := admit(in)
		if d != nil {
			return *d
		}
		in.Mode = mode
	}
	serving, hasQuorum := quorumOf(in)
	mode := in.Mode
	if mode == "" {
		// Admitted on an earlier pass whose status write was lost; decided again the same way.
		mode = ModeNewCluster
		if in.Bootstrapped {
			mode = ModeReseed
		}
	}
	if !in.Verified {
		if d := beforeVerified(in, mode, serving, hasQuorum); d != nil {
			return *d
		}
	}
	return afterVerified(in, mode, serving, hasQuorum)
}

// refused is the decision to refuse, in the mode the restore was admitted in (empty before admission).
func refused(mode, reason, format string, args ...any) RestoreDecision {
	return RestoreDecision{Step: RestoreRefuse, Mode: mode, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// admit checks a restore not yet admitted against its backup and its cluster, and returns the mode it is
// admitted in; a non-nil decision (a refusal, or a wait for the backup) when it is not admitted yet.
func admit(in RestoreInput) (string, *RestoreDecision) {
	refuse := func(reason, format string, args ...any) (string, *RestoreDecision) {
		d := refused(in.Mode, reason, format, args...)
		return "", &d
	}
	b := in.Backup
	switch {
	case !b.Found:
		return refuse(etcdv1alpha1.ReasonBackupNotFound, "EtcdBackup %s does not exist", b.Name)
	case b.Failed:
		return refuse(etcdv1alpha1.ReasonBackupNotComplete, "EtcdBackup %s failed; restore from a Complete backup", b.Name)
	case !b.Complete:
		return "", &RestoreDecision{Step: RestoreWait, Reason: etcdv1alpha1.ReasonRestorePending, Message: fmt.Sprintf("waiting for EtcdBackup %s to complete", b.Name)}
	case b.Location == "" || b.SizeBytes <= 0 || !isHex(b.SHA256, 64):
		return refuse(etcdv1alpha1.ReasonBackupNotComplete, "EtcdBackup %s has no complete record (location, size, sha256) to check the snapshot against", b.Name)
	}
	if in.OtherActive != "" {
		return refuse(etcdv1alpha1.ReasonRestoreInProgress, "restore %s of cluster %s is under way; one restore at a time", in.OtherActive, in.ClusterName)
	}
	switch {
	case in.Bootstrapped:
		in.Mode = ModeReseed
	case in.FromBackup == b.Name:
		in.Mode = ModeNewCluster
	default:
		return refuse(etcdv1alpha1.ReasonClusterNotFormed, "cluster %s has not formed and does not name backup %s in spec.bootstrap.fromBackup; to create a cluster from a backup, set that field on a new EtcdCluster", in.ClusterName, b.Name)
	}
	if in.Mode == ModeReseed && (b.ClusterName != in.ClusterName || !slices.Contains(in.ClusterIDs, b.ClusterID)) {
		return refuse(etcdv1alpha1.ReasonWrongCluster, "EtcdBackup %s was taken of cluster %s (etcd cluster ID %s), not of %s (IDs %v); a re-seed only restores the cluster's own backups (create a new cluster with bootstrap.fromBackup to clone another)",
			b.Name, b.ClusterName, b.ClusterID, in.ClusterName, in.ClusterIDs)
	}
	if why := versionProblem(b.EtcdVersion, in.Version); why != "" {
		return refuse(etcdv1alpha1.ReasonIncompatibleVersion, "EtcdBackup %s: %s", b.Name, why)
	}
	return in.Mode, nil
}

// quorumOf says whether the cluster has quorum: when it says so, or when Steward cannot see it but the kubelet
// can: its member Pods pass etcd's /readyz (serving then says so). Either refuses a re-seed (or makes it a
// rollback, with its safety backup).
func quorumOf(in RestoreInput) (serving string, hasQuorum bool) {
	if !in.ClusterAvailable && plan.PodsServeQuorum(in.ReadyMembers, in.Members) {
		serving = plan.ServingMessage(in.ReadyMembers, in.Members, false)
	}
	return serving, in.ClusterAvailable || serving != ""
}

// beforeVerified is the step of an admitted restore whose snapshot is not verified yet: a re-seed's
// confirmation and rollback checks, then the verification; nil once the verify Job succeeded.
func beforeVerified(in RestoreInput, mode, serving string, hasQuorum bool) *RestoreDecision {
	if mode == ModeReseed {
		if in.Confirm != in.ClusterName {
			return &RestoreDecision{Step: RestoreWait, Mode: mode, Reason: etcdv1alpha1.ReasonConfirmationRequired,
				Message: fmt.Sprintf("re-seeding cluster %s replaces its members and loses every write made after the backup; set spec.confirm to %q to go ahead", in.ClusterName, in.ClusterName)}
		}
		if hasQuorum {
			rb := in.Rollback
			rb.ClusterName, rb.BackupName, rb.Serving = in.ClusterName, in.Backup.Name, serving
			switch phase, reason, msg := decideRollback(rb); phase {
			case RollbackRefused, RollbackSafetyBackupFailed:
				d := refused(in.Mode, reason, "%s", msg)
				return &d
			case RollbackTakeSafetyBackup:
				return &RestoreDecision{Step: RestoreSafetyBackup, Mode: mode, Reason: reason, Message: msg}
			}
		}
	}
	switch {
	case in.Verify == nil && in.KeyProblem != "":
		d := refused(mode, etcdv1alpha1.ReasonEncryptionKeyNotFound, "EtcdBackup %s is encrypted and its key cannot be read: %s; nothing of the cluster was touched", in.Backup.Name, in.KeyProblem)
		return &d
	case in.Verify == nil:
		return &RestoreDecision{Step: RestoreVerify, Mode: mode, Reason: etcdv1alpha1.ReasonVerifying, Message: fmt.Sprintf("verifying the snapshot of EtcdBackup %s", in.Backup.Name)}
	case !in.Verify.Succeeded:
		return &RestoreDecision{Step: RestoreRefuse, Mode: mode, Reason: in.Verify.Reason, Message: in.Verify.Message + "; nothing of the cluster was touched"}
	}
	return nil
}

// afterVerified is the step of a restore whose snapshot is verified: the cluster's controller replaces the
// members, and the restore ends when only members started from the snapshot remain and have quorum.
func afterVerified(in RestoreInput, mode, serving string, hasQuorum bool) RestoreDecision {
	switch {
	case in.MemberFailure != "":
		return RestoreDecision{Step: RestoreRefuse, Mode: mode, Reason: etcdv1alpha1.ReasonRestoreFailed, Message: in.MemberFailure}
	case in.FreshMembers > 0 && in.OtherMembers == 0 && in.ClusterAvailable &&
		// A rolled-back cluster was Available before its members went: only the new identity's counts.
		(mode != ModeReseed || in.PreviousClusterID == "" || len(in.ClusterIDs) == 0 || in.ClusterIDs[0] != in.PreviousClusterID):
		return RestoreDecision{Step: RestoreDone, Mode: mode, Reason: etcdv1alpha1.ReasonRestoreSucceeded,
			Message: fmt.Sprintf("%d members started from the snapshot of EtcdBackup %s; the cluster has quorum", in.FreshMembers, in.Backup.Name)}
	case mode == ModeReseed && in.FreshMembers == 0 && hasQuorum && (!in.Rollback.Allowed || !in.Rollback.SafetyComplete):
		// (A rollback goes on: its safety backup was taken of the cluster with quorum.)
		// The old members regained quorum before the cluster's controller began: it re-seeds nothing then.
		if serving != "" {
			return refused(in.Mode, etcdv1alpha1.ReasonMembersServing, "cluster %s is not re-seeded: %s. Nothing was changed", in.ClusterName, serving)
		}
		return refused(in.Mode, etcdv1alpha1.ReasonClusterHasQuorum, "cluster %s regained quorum before it was re-seeded; nothing was changed", in.ClusterName)
	}
	return RestoreDecision{Step: RestoreHandOver, Mode: mode, Reason: etcdv1alpha1.ReasonRestoring,
		Message: fmt.Sprintf("snapshot verified; members restored from it: %d, others still present: %d", in.FreshMembers, in.OtherMembers)}
}

// versionProblem says why a snapshot taken by etcd version from cannot seed members of version to: etcd reads
// data of its own minor and the one before (the upgrade path), never of a newer minor.
func versionProblem(from, to string) string {
	if from == "" {
		return ""
	}
	f, err := plan.ParseVersion(from)
	if err != nil {
		return fmt.Sprintf("its etcd version %q does not parse", from)
	}
	t, err := plan.ParseVersion(to)
	if err != nil {
		return fmt.Sprintf("the cluster's version %q does not parse", to)
	}
	switch {
	case f.Major != t.Major || f.Minor > t.Minor:
		return fmt.Sprintf("the snapshot was taken by etcd %s, newer than the cluster's %s; etcd cannot read data of a newer minor version", from, to)
	case t.Minor-f.Minor > 1:
		return fmt.Sprintf("the snapshot was taken by etcd %s, more than one minor version before the cluster's %s; restore it into a cluster of %d.%d first", from, to, f.Major, f.Minor+1)
	}
	return ""
}
