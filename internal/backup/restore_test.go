package backup

import (
	"strings"
	"testing"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

func TestDecideRestore(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	good := BackupRecord{Name: "b1", Found: true, Complete: true, ClusterName: "c", ClusterID: "id1", EtcdVersion: "3.6.16",
		Location: "s3://bkt/k", SHA256: sha, SizeBytes: 4096}
	formed := RestoreInput{ClusterName: "c", ClusterFound: true, Bootstrapped: true, ClusterIDs: []string{"id1"}, Version: "3.6.16", Backup: good}
	fresh := RestoreInput{ClusterName: "c", ClusterFound: true, FromBackup: "b1", Version: "3.6.16", Backup: good}
	with := func(in RestoreInput, f func(*RestoreInput)) RestoreInput { f(&in); return in }
	tests := map[string]struct {
		in     RestoreInput
		step   RestoreStep
		reason string
		mode   string
		// message is a part the decision's message must hold.
		message string
	}{
		"missing cluster":  {in: with(formed, func(in *RestoreInput) { in.ClusterFound = false }), step: RestoreRefuse, reason: etcdv1alpha1.ReasonClusterNotFound},
		"missing backup":   {in: with(formed, func(in *RestoreInput) { in.Backup = BackupRecord{Name: "b1"} }), step: RestoreRefuse, reason: etcdv1alpha1.ReasonBackupNotFound},
		"failed backup":    {in: with(formed, func(in *RestoreInput) { in.Backup.Complete, in.Backup.Failed = false, true }), step: RestoreRefuse, reason: etcdv1alpha1.ReasonBackupNotComplete},
		"running backup":   {in: with(formed, func(in *RestoreInput) { in.Backup.Complete = false }), step: RestoreWait, reason: etcdv1alpha1.ReasonRestorePending},
		"no sha in record": {in: with(formed, func(in *RestoreInput) { in.Backup.SHA256 = "" }), step: RestoreRefuse, reason: etcdv1alpha1.ReasonBackupNotComplete},
		"another restore first": {
			in: with(formed, func(in *RestoreInput) { in.OtherActive = "r0" }), step: RestoreRefuse, reason: etcdv1alpha1.ReasonRestoreInProgress,
		},
		"not formed, not its fromBackup": {
			in: with(fresh, func(in *RestoreInput) { in.FromBackup = "" }), step: RestoreRefuse, reason: etcdv1alpha1.ReasonClusterNotFormed,
		},
		"new cluster: verify without confirmation": {in: fresh, step: RestoreVerify, reason: etcdv1alpha1.ReasonVerifying, mode: ModeNewCluster},
		"encrypted backup without a usable key: refused, no verify Job": {
			in: with(fresh, func(in *RestoreInput) { in.KeyProblem = "encryption key Secret k has no key age.key" }), step: RestoreRefuse,
			reason: etcdv1alpha1.ReasonEncryptionKeyNotFound, mode: ModeNewCluster,
		},
		"re-seed without a usable key: the confirmation is asked first, then refused": {
			in: with(formed, func(in *RestoreInput) { in.KeyProblem = "encryption key Secret k does not exist"; in.Confirm = "c" }), step: RestoreRefuse,
			reason: etcdv1alpha1.ReasonEncryptionKeyNotFound, mode: ModeReseed,
		},
		"a verify that already ran is not refused for a key deleted since": {
			in: with(fresh, func(in *RestoreInput) { in.KeyProblem = "gone"; in.Verify = &Result{Succeeded: true} }), step: RestoreHandOver, mode: ModeNewCluster,
		},
		"new cluster: any cluster's backup": {
			in: with(fresh, func(in *RestoreInput) { in.Backup.ClusterName, in.Backup.ClusterID = "other", "id9" }), step: RestoreVerify, mode: ModeNewCluster,
		},
		"reseed: another cluster's backup by name": {
			in: with(formed, func(in *RestoreInput) { in.Backup.ClusterName = "other"; in.Confirm = "c" }), step: RestoreRefuse, reason: etcdv1alpha1.ReasonWrongCluster,
		},
		"reseed: a same-named cluster's backup of another identity": {
			in: with(formed, func(in *RestoreInput) { in.Backup.ClusterID = "id9"; in.Confirm = "c" }), step: RestoreRefuse, reason: etcdv1alpha1.ReasonWrongCluster,
		},
		"reseed: a backup from before an earlier re-seed": {
			in: with(formed, func(in *RestoreInput) { in.ClusterIDs = []string{"id2", "id1"}; in.Confirm = "c" }), step: RestoreVerify, mode: ModeReseed,
		},
		"reseed: newer minor refused": {
			in: with(formed, func(in *RestoreInput) { in.Version = "3.5.35"; in.Confirm = "c" }), step: RestoreRefuse, reason: etcdv1alpha1.ReasonIncompatibleVersion,
		},
		"reseed: two minors older refused": {
			in: with(formed, func(in *RestoreInput) { in.Backup.EtcdVersion = "3.5.35"; in.Version = "3.7.3"; in.Confirm = "c" }), step: RestoreRefuse, reason: etcdv1alpha1.ReasonIncompatibleVersion,
		},
		"reseed: one minor older accepted": {
			in: with(formed, func(in *RestoreInput) { in.Backup.EtcdVersion = "3.5.35"; in.Confirm = "c" }), step: RestoreVerify, mode: ModeReseed,
		},
		"reseed: unconfirmed waits and verifies nothing": {in: formed, step: RestoreWait, reason: etcdv1alpha1.ReasonConfirmationRequired, mode: ModeReseed},
		"reseed: confirmation must name the cluster": {
			in: with(formed, func(in *RestoreInput) { in.Confirm = "yes" }), step: RestoreWait, reason: etcdv1alpha1.ReasonConfirmationRequired,
		},
		"reseed: a cluster with quorum is refused": {
			in: with(formed, func(in *RestoreInput) { in.Confirm = "c"; in.ClusterAvailable = true }), step: RestoreRefuse, reason: etcdv1alpha1.ReasonClusterHasQuorum,
		},
		"reseed: a cluster with quorum is refused, saying what a rollback would lose": {
			in: with(formed, func(in *RestoreInput) {
				in.Confirm, in.ClusterAvailable, in.Rollback = "c", true, Rollback{BackupRevision: 10, ClusterRevision: 20}
			}), step: RestoreRefuse, reason: etcdv1alpha1.ReasonClusterHasQuorum, message: "would discard the writes of revisions 11..20",
		},
		"rollback: allowed, with quorum: a safety backup first, nothing verified": {
			in: with(formed, func(in *RestoreInput) {
				in.Confirm, in.ClusterAvailable, in.Rollback = "c", true, Rollback{Allowed: true, BackupRevision: 10, ClusterRevision: 20}
			}), step: RestoreSafetyBackup, reason: etcdv1alpha1.ReasonTakingSafetyBackup, mode: ModeReseed,
		},
		"rollback: allowed but unconfirmed waits for the confirmation": {
			in: with(formed, func(in *RestoreInput) { in.ClusterAvailable, in.Rollback = true, Rollback{Allowed: true} }), step: RestoreWait, reason: etcdv1alpha1.ReasonConfirmationRequired,
		},
		"rollback: a failed safety backup refuses the restore": {
			in: with(formed, func(in *RestoreInput) {
				in.Confirm, in.ClusterAvailable, in.Rollback = "c", true, Rollback{Allowed: true, SafetyBackup: "r-safety", SafetyFailed: true}
			}), step: RestoreRefuse, reason: etcdv1alpha1.ReasonSafetyBackupFailed,
		},
		"rollback: safety backup complete: verify": {
			in: with(formed, func(in *RestoreInput) {
				in.Confirm, in.ClusterAvailable, in.Rollback = "c", true, Rollback{Allowed: true, SafetyBackup: "r-safety", SafetyComplete: true}
			}), step: RestoreVerify, reason: etcdv1alpha1.ReasonVerifying,
		},
		"rollback: verified, the old cluster still Available: hand over (not refused, not done)": {
			in: with(formed, func(in *RestoreInput) {
				in.Mode, in.Verified, in.ClusterAvailable, in.PreviousClusterID = ModeReseed, true, true, "id1"
				in.Rollback = Rollback{Allowed: true, SafetyBackup: "r-safety", SafetyComplete: true}
			}), step: RestoreHandOver,
		},
		"rollback allowed, without a safety backup (admitted without quorum), quorum regained: refused": {
			in: with(formed, func(in *RestoreInput) {
				in.Mode, in.Verified, in.ClusterAvailable, in.Rollback = ModeReseed, true, true, Rollback{Allowed: true}
			}), step: RestoreRefuse, reason: etcdv1alpha1.ReasonClusterHasQuorum,
		},
		"rollback: new members with a stale Available of the old identity: not done yet": {
			in: with(formed, func(in *RestoreInput) {
				in.Mode, in.Verified, in.ClusterAvailable, in.PreviousClusterID, in.FreshMembers = ModeReseed, true, true, "id1", 3
			}), step: RestoreHandOver,
		},
		"rollback: new members under a new identity: done": {
			in: with(formed, func(in *RestoreInput) {
				in.Mode, in.Verified, in.ClusterAvailable, in.PreviousClusterID, in.FreshMembers = ModeReseed, true, true, "id1", 3
				in.ClusterIDs = []string{"id2", "id1"}
			}), step: RestoreDone, reason: etcdv1alpha1.ReasonRestoreSucceeded,
		},
		"reseed: unreachable but a quorum of member Pods Ready: refused, nothing verified or stopped": {
			in:   with(formed, func(in *RestoreInput) { in.Confirm, in.ReadyMembers, in.Members = "c", 2, 3 }),
			step: RestoreRefuse, reason: etcdv1alpha1.ReasonMembersServing, message: "2 of 3 member Pods are Ready",
		},
		"reseed: unreachable, one member Pod of three Ready: no quorum, verify": {
			in: with(formed, func(in *RestoreInput) { in.Confirm, in.ReadyMembers, in.Members = "c", 1, 3 }), step: RestoreVerify, mode: ModeReseed,
		},
		"reseed: verified, then a quorum of member Pods Ready before any was stopped: refused": {
			in: with(formed, func(in *RestoreInput) {
				in.Mode, in.Verified, in.OtherMembers, in.ReadyMembers, in.Members = ModeReseed, true, 3, 3, 3
			}), step: RestoreRefuse, reason: etcdv1alpha1.ReasonMembersServing,
		},
		"rollback allowed, unreachable but serving: a safety backup first, as of a cluster with quorum": {
			in: with(formed, func(in *RestoreInput) {
				in.Confirm, in.ReadyMembers, in.Members, in.Rollback = "c", 3, 3, Rollback{Allowed: true}
			}), step: RestoreSafetyBackup, reason: etcdv1alpha1.ReasonTakingSafetyBackup, mode: ModeReseed,
		},
		"reseed: confirmed, without quorum: verify": {
			in: with(formed, func(in *RestoreInput) { in.Confirm = "c" }), step: RestoreVerify, reason: etcdv1alpha1.ReasonVerifying, mode: ModeReseed,
		},
		"corrupt snapshot refused": {
			in: with(formed, func(in *RestoreInput) {
				in.Confirm, in.Mode = "c", ModeReseed
				in.Verify = &Result{Reason: etcdv1alpha1.ReasonSnapshotCorrupt, Message: "sha256 differs"}
			}), step: RestoreRefuse, reason: etcdv1alpha1.ReasonSnapshotCorrupt,
		},
		"verified: hand over": {
			in: with(formed, func(in *RestoreInput) {
				in.Confirm, in.Mode = "c", ModeReseed
				in.Verify = &Result{Succeeded: true}
			}), step: RestoreHandOver, reason: etcdv1alpha1.ReasonRestoring,
		},
		"restoring: old members still there": {
			in: with(formed, func(in *RestoreInput) {
				in.Mode, in.Verified, in.FreshMembers, in.OtherMembers = ModeReseed, true, 3, 1
			}), step: RestoreHandOver,
		},
		"restoring: a member failed to restore": {
			in: with(formed, func(in *RestoreInput) {
				in.Mode, in.Verified, in.FreshMembers, in.MemberFailure = ModeReseed, true, 3, "etcdutl failed"
			}),
			step: RestoreRefuse, reason: etcdv1alpha1.ReasonRestoreFailed,
		},
		"restoring: regained quorum before any new member": {
			in: with(formed, func(in *RestoreInput) { in.Mode, in.Verified, in.ClusterAvailable = ModeReseed, true, true }), step: RestoreRefuse, reason: etcdv1alpha1.ReasonClusterHasQuorum,
		},
		"done: only new members, available": {
			in: with(formed, func(in *RestoreInput) {
				in.Mode, in.Verified, in.FreshMembers, in.ClusterAvailable = ModeReseed, true, 3, true
			}), step: RestoreDone, reason: etcdv1alpha1.ReasonRestoreSucceeded,
		},
		"confirmation withdrawn after verification does not stop the hand-over": {
			in: with(formed, func(in *RestoreInput) { in.Mode, in.Verified, in.Confirm = ModeReseed, true, "" }), step: RestoreHandOver,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			d := DecideRestore(tt.in)
			if d.Step != tt.step || (tt.reason != "" && d.Reason != tt.reason) || (tt.mode != "" && d.Mode != tt.mode) {
				t.Fatalf("DecideRestore = step %d %s/%s (%s), want step %d %s/%s", d.Step, d.Mode, d.Reason, d.Message, tt.step, tt.mode, tt.reason)
			}
			if !strings.Contains(d.Message, tt.message) {
				t.Errorf("message %q does not hold %q", d.Message, tt.message)
			}
			if d.Message == "" {
				t.Error("no message")
			}
		})
	}
}

func TestDecideRollback(t *testing.T) {
	at := time.Date(2026, 11, 24, 16, 0, 0, 0, time.UTC)
	base := Rollback{ClusterName: "c", Allowed: true, BackupName: "b1", BackupRevision: 100, BackupTime: at, ClusterRevision: 250}
	tests := map[string]struct {
		in      Rollback
		phase   string
		reason  string
		message string
	}{
		"not allowed: refused, saying which writes would go": {
			in: func() Rollback { r := base; r.Allowed = false; return r }(), phase: RollbackRefused, reason: etcdv1alpha1.ReasonClusterHasQuorum,
			message: "would discard the writes of revisions 101..250 made since 2026-11-24T16:00:00Z",
		},
		"not allowed, revision not known yet: still refused": {
			in: func() Rollback { r := base; r.Allowed, r.ClusterRevision = false, 0; return r }(), phase: RollbackRefused, reason: etcdv1alpha1.ReasonClusterHasQuorum,
			message: "would discard every write made since 2026-11-24T16:00:00Z",
		},
		"not allowed, unreachable but its member Pods serve: refused as serving, saying so": {
			in: func() Rollback {
				r := base
				r.Allowed, r.Serving = false, plan.ServingMessage(3, 3, false)
				return r
			}(), phase: RollbackRefused, reason: etcdv1alpha1.ReasonMembersServing, message: "3 of 3 member Pods are Ready",
		},
		"allowed: first the safety backup": {in: base, phase: RollbackTakeSafetyBackup, reason: etcdv1alpha1.ReasonTakingSafetyBackup, message: "revisions 101..250"},
		"allowed: safety backup running": {
			in: func() Rollback { r := base; r.SafetyBackup = "r-safety"; return r }(), phase: RollbackTakeSafetyBackup, reason: etcdv1alpha1.ReasonTakingSafetyBackup,
		},
		"allowed: safety backup failed stops everything": {
			in: func() Rollback {
				r := base
				r.SafetyBackup, r.SafetyFailed, r.SafetyMessage = "r-safety", true, "NoSpace: disk full"
				return r
			}(),
			phase: RollbackSafetyBackupFailed, reason: etcdv1alpha1.ReasonSafetyBackupFailed, message: "NoSpace: disk full",
		},
		"allowed: safety backup complete, proceed": {
			in: func() Rollback { r := base; r.SafetyBackup, r.SafetyComplete = "r-safety", true; return r }(), phase: RollbackProceed,
		},
		"no write since the backup still replaces the members": {
			in: func() Rollback { r := base; r.Allowed, r.ClusterRevision = false, 100; return r }(), phase: RollbackRefused, message: "discards no write",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			phase, reason, msg := decideRollback(tt.in)
			if phase != tt.phase || (tt.reason != "" && reason != tt.reason) || !strings.Contains(msg, tt.message) || msg == "" {
				t.Fatalf("decideRollback = %s/%s %q, want %s/%s containing %q", phase, reason, msg, tt.phase, tt.reason, tt.message)
			}
		})
	}
}
