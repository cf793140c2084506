package backup

import (
	"fmt"
	"time"
)

// DeletionGiveUpAfter bounds the finalizer of a backup with deletionPolicy Delete: once its EtcdBackup has been
// deleting this long, Steward stops trying, reports the snapshot it leaves behind, and lets the object go. A
// finalizer that waits for ever holds its namespace in Terminating for ever, and a human gains nothing from it
// that the report does not give.
const DeletionGiveUpAfter = 10 * time.Minute

// SnapshotStopWait bounds how long the finalizer waits, in a namespace being deleted, for a snapshot Job that was
// running to stop (its agent aborts its upload or removes its temporary file on SIGTERM).
const SnapshotStopWait = 30 * time.Second

// JobState is what the finalizer knows of a Job of the backup.
type JobState int

// Job states.
const (
	JobAbsent JobState = iota
	JobRunning
	JobSucceeded
	JobFailed
)

// DirectState is the outcome of deleting a bucket's object from the operator itself, in this pass.
type DirectState int

// Direct deletion outcomes.
const (
	DirectNotTried DirectState = iota
	DirectSucceeded
	DirectFailed
)

// DeletionInput is what the finalizer of a backup with deletionPolicy Delete decides on.
type DeletionInput struct {
	// Location of the committed snapshot (status.location); empty when the backup never committed one.
	Location string
	// Bucket: the destination is a bucket (S3, GCS) or a container (Azure); otherwise a PVC.
	Bucket bool
	// Ambient: the bucket is reached with the Jobs' own identity (GCS or Azure workload identity, S3 through the AWS
	// default chain), not a credentials Secret, so the operator cannot delete the object itself.
	Ambient bool
	// DestinationName is the claim (PVC) or credentials Secret (bucket) the deletion needs.
	DestinationName string
	// DestinationPresent: the claim exists and is not being deleted, or the Secret exists with its keys (always,
	// for Ambient).
	DestinationPresent bool
	// NamespaceTerminating: the namespace is being deleted, so the API server refuses new Jobs in it (and the
	// namespace's deletion stops those that run).
	NamespaceTerminating bool
	SnapshotJob          JobState
	DeleteJob            JobState
	// DeleteJobMessage is why the delete Job failed, when it did.
	DeleteJobMessage string
	// Direct is the outcome of a direct deletion this pass, and DirectError its error.
	Direct      DirectState
	DirectError string
	// SinceDeletion is how long the EtcdBackup has been deleting (since its deletionTimestamp).
	SinceDeletion time.Duration
}

// DeletionAction is the finalizer's next step.
type DeletionAction int

// Finalizer steps.
const (
	// StopSnapshotJob deletes the running snapshot Job and waits for it to go, so that no snapshot lands after
	// the deletion.
	StopSnapshotJob DeletionAction = iota
	// CreateDeleteJob starts the Job that deletes the snapshot.
	CreateDeleteJob
	// WaitDeleteJob waits for the running delete Job.
	WaitDeleteJob
	// RetryDeleteJob removes the failed delete Job; a later pass starts another.
	RetryDeleteJob
	// DeleteDirect deletes the bucket's object from the operator, with the credentials Secret, then decides again.
	DeleteDirect
	// Release removes the finalizer; Outcome says what became of the snapshot.
	Release
)

// DeletionOutcome is what became of the stored snapshot when the finalizer lets the backup go.
type DeletionOutcome int

// Outcomes.
const (
	// NothingStored: the backup never committed a snapshot.
	NothingStored DeletionOutcome = iota
	// SnapshotDeleted: the snapshot was deleted.
	SnapshotDeleted
	// SnapshotLeftBehind: the snapshot could not be deleted and stays where it is; Reason says why.
	SnapshotLeftBehind
)

// DeletionStep is the finalizer's next step, and for a wait how long until the next look.
type DeletionStep struct {
	Action  DeletionAction
	Outcome DeletionOutcome
	// Reason says why a snapshot is left behind.
	Reason string
	// RequeueAfter is when to look again while waiting; zero when the step's own events bring the next pass.
	RequeueAfter time.Duration
}

// Requeue intervals of the finalizer's waits.
const (
	deletionPoll  = 5 * time.Second
	deletionRetry = time.Minute
	deletionWatch = 30 * time.Second
)

// DecideDeletion decides the next step of the finalizer of a backup with deletionPolicy Delete. It deletes the
// snapshot the way that still works (a delete Job while the namespace takes new Jobs; a bucket's object
// directly from the operator once it does not, while the credentials Secret is still there), never waits on what cannot
// come (a Job in a namespace being deleted, a claim or Secret that is gone), and never waits longer than
// DeletionGiveUpAfter: whatever it could not delete it reports (SnapshotLeftBehind with the reason) and releases.
func DecideDeletion(in DeletionInput) DeletionStep {
	left := func(why string) DeletionStep {
		return DeletionStep{Action: Release, Outcome: SnapshotLeftBehind, Reason: why}
	}
	expired := in.SinceDeletion >= DeletionGiveUpAfter
	if in.SnapshotJob == JobRunning {
		bound := DeletionGiveUpAfter
		if in.NamespaceTerminating {
			bound = SnapshotStopWait
		}
		if in.SinceDeletion < bound {
			return DeletionStep{Action: StopSnapshotJob, RequeueAfter: min(deletionPoll, bound-in.SinceDeletion)}
		}
		if in.Location == "" {
			// A snapshot still being taken is uncommitted: aborted, it leaves nothing under its final name.
			return DeletionStep{Action: Release, Outcome: NothingStored}
		}
	}
	if in.Location == "" {
		return DeletionStep{Action: Release, Outcome: NothingStored}
	}
	switch {
	case in.DeleteJob == JobSucceeded, in.Direct == DirectSucceeded:
		return DeletionStep{Action: Release, Outcome: SnapshotDeleted}
	case in.Direct == DirectFailed:
		return left(fmt.Sprintf("deleting it directly failed: %s", in.DirectError))
	}
	canDirect := in.Bucket && !in.Ambient && in.DestinationPresent
	if in.NamespaceTerminating {
		if canDirect {
			return DeletionStep{Action: DeleteDirect}
		}
		if in.Bucket && in.Ambient {
			return left("the namespace is being deleted, so no delete Job can run, and the bucket is reached with the Jobs' own identity (Workload Identity or IAM roles), which the operator does not hold")
		}
		if in.Bucket {
			return left(fmt.Sprintf("the namespace is being deleted, so no delete Job can run, and the credentials Secret %s is gone", in.DestinationName))
		}
		return left(fmt.Sprintf("the namespace is being deleted, so no delete Job can mount claim %s; the file goes with the claim's volume if its reclaim policy is Delete", in.DestinationName))
	}
	if !in.DestinationPresent {
		if in.Bucket {
			return left(fmt.Sprintf("the credentials Secret %s is gone or lacks a key", in.DestinationName))
		}
		return left(fmt.Sprintf("claim %s is gone or being deleted; the file goes with the claim's volume if its reclaim policy is Delete", in.DestinationName))
	}
	if expired {
		why := fmt.Sprintf("it was not deleted within %s", DeletionGiveUpAfter)
		if in.DeleteJobMessage != "" {
			why += ": " + in.DeleteJobMessage
		}
		return left(why)
	}
	remaining := DeletionGiveUpAfter - in.SinceDeletion
	switch in.DeleteJob {
	case JobRunning:
		return DeletionStep{Action: WaitDeleteJob, RequeueAfter: min(deletionWatch, remaining)}
	case JobFailed:
		return DeletionStep{Action: RetryDeleteJob, Reason: in.DeleteJobMessage, RequeueAfter: min(deletionRetry, remaining)}
	}
	return DeletionStep{Action: CreateDeleteJob, RequeueAfter: min(deletionWatch, remaining)}
}
