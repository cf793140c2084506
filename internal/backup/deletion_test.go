package backup

import (
	"strings"
	"testing"
	"time"
)

func TestDecideDeletion(t *testing.T) {
	const loc = "s3://bkt/etcd/a.db"
	s3 := func(mod func(*DeletionInput)) DeletionInput {
		in := DeletionInput{Location: loc, Bucket: true, DestinationName: "creds", DestinationPresent: true, SinceDeletion: time.Second}
		if mod != nil {
			mod(&in)
		}
		return in
	}
	pvc := func(mod func(*DeletionInput)) DeletionInput {
		in := DeletionInput{Location: "pvc://backups/a.db", DestinationName: "backups", DestinationPresent: true, SinceDeletion: time.Second}
		if mod != nil {
			mod(&in)
		}
		return in
	}
	tests := []struct {
		name    string
		in      DeletionInput
		want    DeletionAction
		outcome DeletionOutcome
		reason  string // a part of the reason a snapshot is left behind
	}{
		{"nothing stored", s3(func(in *DeletionInput) { in.Location = "" }), Release, NothingStored, ""},
		{"running snapshot is stopped first", s3(func(in *DeletionInput) { in.Location, in.SnapshotJob = "", JobRunning }), StopSnapshotJob, 0, ""},
		{"running snapshot in a terminating namespace is waited for briefly", s3(func(in *DeletionInput) {
			in.Location, in.SnapshotJob, in.NamespaceTerminating, in.SinceDeletion = "", JobRunning, true, 10*time.Second
		}), StopSnapshotJob, 0, ""},
		{"a snapshot Job that does not stop in a terminating namespace is not waited for", s3(func(in *DeletionInput) {
			in.Location, in.SnapshotJob, in.NamespaceTerminating, in.SinceDeletion = "", JobRunning, true, SnapshotStopWait
		}), Release, NothingStored, ""},
		{"a snapshot Job that does not stop is not waited for past the bound", s3(func(in *DeletionInput) {
			in.Location, in.SnapshotJob, in.SinceDeletion = "", JobRunning, DeletionGiveUpAfter
		}), Release, NothingStored, ""},
		{"no delete Job yet", s3(nil), CreateDeleteJob, 0, ""},
		{"delete Job running", s3(func(in *DeletionInput) { in.DeleteJob = JobRunning }), WaitDeleteJob, 0, ""},
		{"delete Job succeeded", s3(func(in *DeletionInput) { in.DeleteJob = JobSucceeded }), Release, SnapshotDeleted, ""},
		{"delete Job failed is retried", s3(func(in *DeletionInput) { in.DeleteJob, in.DeleteJobMessage = JobFailed, "AccessDenied" }), RetryDeleteJob, 0, ""},
		{"failing past the bound gives up", s3(func(in *DeletionInput) {
			in.DeleteJob, in.DeleteJobMessage, in.SinceDeletion = JobFailed, "AccessDenied", DeletionGiveUpAfter
		}), Release, SnapshotLeftBehind, "not deleted within 10m0s: AccessDenied"},
		{"a delete Job that never ends is not waited for past the bound", pvc(func(in *DeletionInput) {
			in.DeleteJob, in.SinceDeletion = JobRunning, DeletionGiveUpAfter+time.Second
		}), Release, SnapshotLeftBehind, "not deleted within"},
		{"a delete Job that succeeded late still counts", pvc(func(in *DeletionInput) {
			in.DeleteJob, in.SinceDeletion = JobSucceeded, time.Hour
		}), Release, SnapshotDeleted, ""},
		{"terminating namespace: S3 object deleted directly", s3(func(in *DeletionInput) { in.NamespaceTerminating = true }), DeleteDirect, 0, ""},
		{"terminating namespace: a running delete Job is not waited for", s3(func(in *DeletionInput) {
			in.NamespaceTerminating, in.DeleteJob = true, JobRunning
		}), DeleteDirect, 0, ""},
		{"direct deletion succeeded", s3(func(in *DeletionInput) { in.NamespaceTerminating, in.Direct = true, DirectSucceeded }), Release, SnapshotDeleted, ""},
		{"direct deletion failed (unreachable)", s3(func(in *DeletionInput) {
			in.NamespaceTerminating, in.Direct, in.DirectError = true, DirectFailed, "dial tcp: connection refused"
		}), Release, SnapshotLeftBehind, "connection refused"},
		{"terminating namespace, Secret gone", s3(func(in *DeletionInput) { in.NamespaceTerminating, in.DestinationPresent = true, false }),
			Release, SnapshotLeftBehind, "credentials Secret creds is gone"},
		{"terminating namespace, PVC", pvc(func(in *DeletionInput) { in.NamespaceTerminating = true }), Release, SnapshotLeftBehind, "no delete Job can mount claim backups"},
		{"claim gone", pvc(func(in *DeletionInput) { in.DestinationPresent = false }), Release, SnapshotLeftBehind, "claim backups is gone"},
		{"Secret gone", s3(func(in *DeletionInput) { in.DestinationPresent = false }), Release, SnapshotLeftBehind, "Secret creds is gone"},
		{"Workload Identity: a delete Job", s3(func(in *DeletionInput) { in.Ambient = true }), CreateDeleteJob, 0, ""},
		{"Workload Identity, terminating namespace: no direct deletion", s3(func(in *DeletionInput) { in.Ambient, in.NamespaceTerminating = true, true }),
			Release, SnapshotLeftBehind, "(Workload Identity or IAM roles), which the operator does not hold"},
		{"Steward back long after: the bound has passed, the namespace is terminating", pvc(func(in *DeletionInput) {
			in.NamespaceTerminating, in.SinceDeletion = true, time.Hour
		}), Release, SnapshotLeftBehind, "namespace is being deleted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecideDeletion(tt.in)
			if got.Action != tt.want {
				t.Fatalf("action %d, want %d (%+v)", got.Action, tt.want, got)
			}
			if got.Action == Release && got.Outcome != tt.outcome {
				t.Fatalf("outcome %d, want %d (%+v)", got.Outcome, tt.outcome, got)
			}
			if !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("reason %q, want it to contain %q", got.Reason, tt.reason)
			}
			if got.Action != Release && got.Action != DeleteDirect && got.RequeueAfter <= 0 {
				t.Fatalf("a wait without a requeue: %+v", got)
			}
		})
	}
}

// TestDecideDeletionIsBounded: whatever the Jobs, the destination and the namespace do, a finalizer past
// DeletionGiveUpAfter releases (a direct deletion, tried once, decides at once too), and no wait looks again later
// than the bound.
func TestDecideDeletionIsBounded(t *testing.T) {
	states := []JobState{JobAbsent, JobRunning, JobSucceeded, JobFailed}
	for _, snap := range states {
		for _, del := range states {
			for _, s3 := range []bool{false, true} {
				for _, present := range []bool{false, true} {
					for _, term := range []bool{false, true} {
						for _, loc := range []string{"", "x"} {
							for _, since := range []time.Duration{0, time.Minute, DeletionGiveUpAfter - time.Second, DeletionGiveUpAfter} {
								in := DeletionInput{Location: loc, Bucket: s3, Ambient: s3 && !present, DestinationName: "d", DestinationPresent: present,
									NamespaceTerminating: term, SnapshotJob: snap, DeleteJob: del, SinceDeletion: since}
								step := DecideDeletion(in)
								if step.Action == DeleteDirect {
									in.Direct = DirectFailed
									step = DecideDeletion(in)
								}
								if step.Action != Release && since+step.RequeueAfter > DeletionGiveUpAfter {
									t.Errorf("%+v: %+v looks again past the bound", in, step)
								}
								if since >= DeletionGiveUpAfter && step.Action != Release {
									t.Errorf("%+v: %+v past the bound", in, step)
								}
							}
						}
					}
				}
			}
		}
	}
}
