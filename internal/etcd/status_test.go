package etcd

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// A member that is down for a moment (a removed member's exited process, a learner not listening yet) answers
// a status request with a refused connection, and a pass must learn that at once, not after clientv3 has
// retried it for the whole RequestTimeout: the error is the refusal, never the deadline.
func TestStatusOfADownMemberIsTheRefusal(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	view, err := NewPool().Observe(context.Background(), "ns/down", []string{down})
	if err != nil {
		t.Fatal(err)
	}
	s := view.Statuses[down]
	if s.Err == nil || errors.Is(s.Err, context.DeadlineExceeded) || grpcstatus.Code(s.Err) != codes.Unavailable {
		t.Fatalf("status of a member that refuses connections: %v; want the refusal (Unavailable), not a deadline", s.Err)
	}
	if view.ListErr == nil || len(view.VoterEndpoints) != 0 {
		t.Fatalf("member list %v from voters %v, want none", view.ListErr, view.VoterEndpoints)
	}
}
