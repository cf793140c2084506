// Package etcd is Steward's narrow adapter to etcd's client API: it reads a cluster's member list and each
// member's status, with short timeouts, and (in later work) changes membership. Nothing else in Steward imports
// clientv3. Clients are pooled per cluster and reused across reconciles; every call honours the caller's
// context.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Timeouts of observation calls: a member that does not answer in this time is reported unhealthy; a slow
// answer must not hold up the reconcile of a healthy majority.
const (
	DialTimeout    = 2 * time.Second
	RequestTimeout = 2 * time.Second
)

// Member is one entry of etcd's member list.
type Member struct {
	ID         uint64
	Name       string // empty until the member has started and published it
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
}

// Status is one member's answer to a status request.
type Status struct {
	Endpoint    string
	MemberID    uint64
	LeaderID    uint64
	Version     string
	DBSizeBytes int64
	IsLearner   bool
	RaftTerm    uint64
	RaftIndex   uint64
	Errors      []string
	Err         error // the request failed
}

// Healthy reports whether the member answered, with no member-reported errors (alarms such as NOSPACE appear there), and knows a leader.
func (s Status) Healthy() bool { return s.Err == nil && len(s.Errors) == 0 && s.LeaderID != 0 }

// ClusterView is what one observation of etcd returned.
type ClusterView struct {
	ClusterID uint64
	Members   []Member
	// Statuses by endpoint, for every endpoint asked.
	Statuses map[string]Status
	// ListErr is why no member list could be read (no quorum, no member reachable), nil when it was.
	ListErr error
	// VoterEndpoints are the endpoints that answered as voting members: where membership changes are sent,
	// because a learner refuses them.
	VoterEndpoints []string
}

// Pool keeps one client per cluster, keyed by the caller (the EtcdCluster's UID).
type Pool struct {
	mu      sync.Mutex
	clients map[string]*clientv3.Client
}

// NewPool returns an empty pool.
func NewPool() *Pool { return &Pool{clients: map[string]*clientv3.Client{}} }

// client returns the pooled client for key, pointed at endpoints.
func (p *Pool) client(key string, endpoints []string) (*clientv3.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[key]; ok {
		if !sameEndpoints(c.Endpoints(), endpoints) {
			c.SetEndpoints(endpoints...)
		}
		return c, nil
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          DialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		DialOptions:          []grpc.DialOption{},
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("create etcd client for %v: %w", endpoints, err)
	}
	p.clients[key] = c
	return c, nil
}

// Forget closes and drops the client of a cluster that was deleted.
func (p *Pool) Forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[key]; ok {
		_ = c.Close()
		delete(p.clients, key)
	}
}

// Observe reads the member list (through any endpoint) and every endpoint's status, concurrently.
func (p *Pool) Observe(ctx context.Context, key string, endpoints []string) (ClusterView, error) {
	view := ClusterView{Statuses: map[string]Status{}}
	if len(endpoints) == 0 {
		view.ListErr = errors.New("no member has an address yet")
		return view, nil
	}
	c, err := p.client(key, endpoints)
	if err != nil {
		return view, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, ep := range endpoints {
		wg.Add(1)
		go func(ep string) {
			defer wg.Done()
			s := status(ctx, c, ep)
			mu.Lock()
			view.Statuses[ep] = s
			mu.Unlock()
		}(ep)
	}
	wg.Wait()
	// Ask voters for the member list: a learner refuses it ("rpc not supported for learner").
	var voters []string
	for _, ep := range endpoints {
		if s := view.Statuses[ep]; s.Err == nil && !s.IsLearner {
			voters = append(voters, ep)
		}
	}
	view.VoterEndpoints = voters
	if len(voters) > 0 && !sameEndpoints(c.Endpoints(), voters) {
		c.SetEndpoints(voters...)
	}
	lctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	resp, err := c.MemberList(lctx)
	cancel()
	if err != nil {
		view.ListErr = fmt.Errorf("member list: %w", err)
		return view, nil
	}
	view.ClusterID = resp.Header.ClusterId
	for _, m := range resp.Members {
		view.Members = append(view.Members, Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
	}
	sort.Slice(view.Members, func(i, j int) bool { return view.Members[i].ID < view.Members[j].ID })
	return view, nil
}

func status(ctx context.Context, c *clientv3.Client, endpoint string) Status {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	s := Status{Endpoint: endpoint}
	resp, err := c.Status(ctx, endpoint)
	if err != nil {
		s.Err = err
		return s
	}
	s.MemberID, s.LeaderID, s.Version = resp.Header.MemberId, resp.Leader, resp.Version
	s.DBSizeBytes, s.IsLearner, s.RaftTerm, s.RaftIndex = resp.DbSize, resp.IsLearner, resp.RaftTerm, resp.RaftIndex
	s.Errors = resp.Errors
	return s
}

func sameEndpoints(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	return strings.Join(a, ",") == strings.Join(b, ",")
}

// FormatID renders a member or cluster ID the way etcdctl does.
func FormatID(id uint64) string { return fmt.Sprintf("%x", id) }

// ErrLearnerNotReady is returned by PromoteLearner while the learner has not caught up with the leader.
var ErrLearnerNotReady = errors.New("learner has not caught up with the leader yet")

// withClient runs one membership call on the cluster's pooled client, bounded by RequestTimeout.
func (p *Pool) withClient(ctx context.Context, key string, endpoints []string, call func(context.Context, *clientv3.Client) error) error {
	c, err := p.client(key, endpoints)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	return call(ctx, c)
}

// AddLearner adds a learner with peerURL and returns its member ID.
func (p *Pool) AddLearner(ctx context.Context, key string, endpoints []string, peerURL string) (uint64, error) {
	var id uint64
	err := p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		resp, err := c.MemberAddAsLearner(ctx, []string{peerURL})
		if err != nil {
			return fmt.Errorf("add learner %s: %w", peerURL, err)
		}
		id = resp.Member.ID
		return nil
	})
	return id, err
}

// PromoteLearner makes learner id a voter. etcd refuses until the learner has caught up: ErrLearnerNotReady.
func (p *Pool) PromoteLearner(ctx context.Context, key string, endpoints []string, id uint64) error {
	return p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		if _, err := c.MemberPromote(ctx, id); err != nil {
			if strings.Contains(err.Error(), "can only promote a learner member which is in sync with leader") {
				return ErrLearnerNotReady
			}
			return fmt.Errorf("promote learner %x: %w", id, err)
		}
		return nil
	})
}

// RemoveMember removes member id from the cluster.
func (p *Pool) RemoveMember(ctx context.Context, key string, endpoints []string, id uint64) error {
	return p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		if _, err := c.MemberRemove(ctx, id); err != nil {
			return fmt.Errorf("remove member %x: %w", id, err)
		}
		return nil
	})
}
