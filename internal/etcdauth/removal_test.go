package etcdauth

import (
	"strings"
	"testing"
	"time"
)

func TestDecideRemoval(t *testing.T) {
	base := RemovalInput{UserName: "app", Cluster: "db", ClusterPresent: true, Endpoints: true, SinceDeletion: time.Second}
	with := func(mod func(*RemovalInput)) RemovalInput {
		in := base
		mod(&in)
		return in
	}
	tests := []struct {
		name       string
		in         RemovalInput
		want       RemovalAction
		leftBehind bool
		reason     string
	}{
		{"reachable cluster: delete", base, RemoveUser, false, ""},
		{"deleted", with(func(in *RemovalInput) { in.Attempted = true }), ReleaseUser, false, ""},
		{"cluster gone or being deleted (a namespace's deletion)", with(func(in *RemovalInput) { in.ClusterPresent, in.Endpoints = false, false }),
			ReleaseUser, false, ""},
		{"deletion failed: wait", with(func(in *RemovalInput) { in.Attempted, in.Error = true, "context deadline exceeded" }), WaitForCluster, false, ""},
		{"no healthy member: wait", with(func(in *RemovalInput) { in.Endpoints = false }), WaitForCluster, false, ""},
		{"no healthy member past the bound", with(func(in *RemovalInput) { in.Endpoints, in.SinceDeletion = false, RemovalGiveUpAfter }),
			ReleaseUser, true, "EtcdCluster db could not be reached within 10m0s"},
		{"failing past the bound", with(func(in *RemovalInput) {
			in.Attempted, in.Error, in.SinceDeletion = true, "permission denied", RemovalGiveUpAfter+time.Minute
		}), ReleaseUser, true, "permission denied"},
		{"reachable past the bound: still deleted first", with(func(in *RemovalInput) { in.SinceDeletion = time.Hour }), RemoveUser, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecideRemoval(tt.in)
			if got.Action != tt.want || got.LeftBehind != tt.leftBehind || !strings.Contains(got.Reason, tt.reason) {
				t.Fatalf("%+v, want action %d, left behind %v, reason with %q", got, tt.want, tt.leftBehind, tt.reason)
			}
			if got.Action == WaitForCluster && (got.RequeueAfter <= 0 || tt.in.SinceDeletion+got.RequeueAfter > RemovalGiveUpAfter) {
				t.Fatalf("wait %s from %s: not within the bound", got.RequeueAfter, tt.in.SinceDeletion)
			}
		})
	}
}
