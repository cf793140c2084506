package etcdauth

import (
	"fmt"
	"time"
)

// RemovalGiveUpAfter bounds the finalizer of an EtcdUser: once the EtcdUser has been deleting this long while its
// cluster exists but cannot be reached, Steward reports the etcd user it leaves behind and lets the object go.
const RemovalGiveUpAfter = 10 * time.Minute

// removalRetry is how soon a removal that could not reach the cluster looks again.
const removalRetry = 15 * time.Second

// RemovalInput is what the finalizer of an EtcdUser decides on.
type RemovalInput struct {
	// UserName is the etcd user (and role) the EtcdUser stands for; Cluster the EtcdCluster's name.
	UserName, Cluster string
	// ClusterPresent: the EtcdCluster exists and is not being deleted. A cluster being deleted takes its data, and
	// with it the user, along (so does every cluster in a namespace being deleted).
	ClusterPresent bool
	// Endpoints: the cluster has a healthy voting member to delete the user through.
	Endpoints bool
	// Attempted: the user was deleted this pass, and Error is what went wrong ("" for done).
	Attempted bool
	Error     string
	// SinceDeletion is how long the EtcdUser has been deleting (since its deletionTimestamp).
	SinceDeletion time.Duration
}

// RemovalAction is the finalizer's next step.
type RemovalAction int

// Finalizer steps.
const (
	// RemoveUser deletes the etcd user and its role, then decides again with the outcome.
	RemoveUser RemovalAction = iota
	// WaitForCluster looks again after RequeueAfter.
	WaitForCluster
	// ReleaseUser removes the finalizer; LeftBehind says an etcd user stays in etcd, and Reason why.
	ReleaseUser
)

// RemovalStep is the finalizer's next step.
type RemovalStep struct {
	Action       RemovalAction
	LeftBehind   bool
	Deleted      bool
	Reason       string
	RequeueAfter time.Duration
}

// DecideRemoval decides the next step of the finalizer of an EtcdUser: delete the etcd user and its role while
// the cluster can be reached; let the EtcdUser go at once when the cluster is gone or being deleted (the user
// goes with its data); and wait for an unreachable cluster no longer than RemovalGiveUpAfter, then report the user
// left behind and let the EtcdUser go.
func DecideRemoval(in RemovalInput) RemovalStep {
	if !in.ClusterPresent {
		return RemovalStep{Action: ReleaseUser}
	}
	if in.Attempted && in.Error == "" {
		return RemovalStep{Action: ReleaseUser, Deleted: true}
	}
	if in.Endpoints && !in.Attempted {
		// Even past the bound: a Steward started again long after still deletes a user it can reach.
		return RemovalStep{Action: RemoveUser}
	}
	if in.SinceDeletion >= RemovalGiveUpAfter {
		why := fmt.Sprintf("EtcdCluster %s could not be reached within %s", in.Cluster, RemovalGiveUpAfter)
		if in.Error != "" {
			why += ": " + in.Error
		}
		return RemovalStep{Action: ReleaseUser, LeftBehind: true, Reason: why}
	}
	return RemovalStep{Action: WaitForCluster, RequeueAfter: min(removalRetry, RemovalGiveUpAfter-in.SinceDeletion)}
}
