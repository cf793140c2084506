package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Snapshot is an open snapshot stream from one member. The caller reads Data to the end and closes it; the
// stream ends with etcd's sha256 of everything before it (32 bytes), which the caller verifies.
type Snapshot struct {
	// Data is the database followed by etcd's sha256 of it.
	Data io.ReadCloser
	// MemberID and ClusterID of the member that sends the snapshot.
	MemberID, ClusterID uint64
	// Revision the member had applied just before the snapshot began: the snapshot holds at least every write up
	// to it.
	Revision int64
	// Version is the member's server version; StorageVersion the snapshot's data format version (3.6+).
	Version, StorageVersion string
}

// connect is a client of an agent (backup, follower) with the cluster's TLS and password. A refused password is
// an error unless a client certificate can act instead.
func connect(ctx context.Context, endpoints []string, t *TLS, pw Password, extra ...func(*clientv3.Config)) (*clientv3.Client, error) {
	tlsCfg, err := t.Config()
	if err != nil {
		return nil, err
	}
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: DialTimeout, Logger: zap.NewNop(), Context: ctx, TLS: tlsCfg}
	for _, f := range extra {
		f(&cfg)
	}
	c, rejected, err := dial(cfg, pw)
	if err != nil {
		return nil, fmt.Errorf("connect to %v: %w", endpoints, err)
	}
	if rejected && t == nil {
		_ = c.Close()
		return nil, fmt.Errorf("connect to %v as %s: %w (the store may come from another cluster's backup, or the user was not made yet)",
			endpoints, pw.User, ErrPasswordRejected)
	}
	return c, nil
}

// OpenSnapshot checks that the member at endpoint is healthy (answers, knows a leader, reports no alarm), then
// opens a snapshot stream from it. The snapshot is read from that member only: the client has no other
// endpoint to fail over to, so status and data describe one member. ctx bounds the whole stream; Close of Data
// releases the connection. t is the cluster's TLS, nil for a plaintext cluster; pw the password user to
// authenticate as (a snapshot needs the root role while auth is on), or none.
func OpenSnapshot(ctx context.Context, endpoint string, t *TLS, pw Password) (*Snapshot, error) {
	c, err := connect(ctx, []string{endpoint}, t, pw)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	st, err := c.Status(sctx, endpoint)
	cancel()
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("status of %s: %w", endpoint, err)
	}
	if len(st.Errors) > 0 || st.Leader == 0 {
		_ = c.Close()
		return nil, fmt.Errorf("member %s is not healthy (leader %x, errors %v)", endpoint, st.Leader, st.Errors)
	}
	// A serializable read answers from this member's own applied state: the revision its snapshot starts from.
	gctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	get, err := c.Get(gctx, "\x00", clientv3.WithSerializable(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("read revision of %s: %w", endpoint, err)
	}
	resp, err := c.SnapshotWithVersion(ctx)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("open snapshot stream from %s: %w", endpoint, err)
	}
	return &Snapshot{
		Data:     &closeBoth{ReadCloser: resp.Snapshot, client: c},
		MemberID: st.Header.MemberId, ClusterID: st.Header.ClusterId, Revision: get.Header.Revision,
		Version: st.Version, StorageVersion: resp.Version,
	}, nil
}

// closeBoth closes the snapshot stream and then the client it came from.
type closeBoth struct {
	io.ReadCloser
	client *clientv3.Client
}

func (c *closeBoth) Close() error {
	return errors.Join(c.ReadCloser.Close(), c.client.Close())
}
