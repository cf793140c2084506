package etcd

import (
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestIsPermissionDenied: etcd's refusal reads the same on the wire (a gRPC status) and as clientv3 returns it,
// also wrapped; other errors, and none, are not it.
func TestIsPermissionDenied(t *testing.T) {
	tests := map[string]struct {
		err  error
		want bool
	}{
		"gRPC status":        {rpctypes.ErrGRPCPermissionDenied, true},
		"client error":       {rpctypes.ErrPermissionDenied, true},
		"wrapped":            {fmt.Errorf("auth status: %w", rpctypes.ErrPermissionDenied), true},
		"a refused password": {rpctypes.ErrGRPCAuthFailed, false},
		"another error":      {errors.New("connection refused"), false},
		"no error":           {nil, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := isPermissionDenied(tc.err); got != tc.want {
				t.Errorf("isPermissionDenied(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
