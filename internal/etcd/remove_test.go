package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestConfirmRemoved: a removal whose request failed counts as done only when the member list no longer has the
// member; otherwise (still listed, or no list to tell) its error stands.
func TestConfirmRemoved(t *testing.T) {
	stopped := errors.New("etcdserver: server stopped")
	for name, tc := range map[string]struct {
		removeErr error
		list      []uint64
		listErr   error
		wantErr   bool
	}{
		"removed":                            {nil, nil, nil, false},
		"answered by the removed member":     {stopped, []uint64{1, 3}, nil, false},
		"refused, still a member":            {errors.New("etcdserver: re-configuration failed due to not enough started members"), []uint64{1, 2, 3}, nil, true},
		"failed, and no list to tell either": {stopped, nil, errors.New("context deadline exceeded"), true},
	} {
		listed := false
		err := confirmRemoved(2, func() error { return tc.removeErr }, func() ([]uint64, error) { listed = true; return tc.list, tc.listErr })
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err %v, want error %t", name, err, tc.wantErr)
		}
		if tc.removeErr == nil && listed {
			t.Errorf("%s: listed members after a removal that succeeded", name)
		}
		if err != nil && !errors.Is(err, tc.removeErr) {
			t.Errorf("%s: %v does not wrap the removal's error", name, err)
		}
	}
}

// TestRefusedUntilSettled: etcd's strict reconfiguration check refusing an add or a voter's removal ("unhealthy
// cluster", as the client returns it and as the server sends it) passes by itself; other refusals and failures do
// not.
func TestRefusedUntilSettled(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"refused, as the client returns it": {rpctypes.ErrUnhealthy, true},
		"refused, as the server sends it":   {rpctypes.ErrGRPCUnhealthy, true},
		"refused, wrapped":                  {fmt.Errorf("remove member 2: %w", rpctypes.ErrUnhealthy), true},
		"not enough started members":        {rpctypes.ErrMemberNotEnoughStarted, false},
		"no leader":                         {rpctypes.ErrNoLeader, false},
		"timed out":                         {context.DeadlineExceeded, false},
		"no error":                          {nil, false},
	} {
		if got := refusedUntilSettled(tc.err); got != tc.want {
			t.Errorf("%s (%v): refused until settled %t, want %t", name, tc.err, got, tc.want)
		}
	}
}
