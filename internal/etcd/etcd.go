// Package etcd is Steward's narrow adapter to etcd's client API: it reads a cluster's member list, each
// member's status, the alarms raised and the cluster version, with short timeouts, and changes membership,
// leadership and the cluster version (downgrades). Nothing else in Steward imports clientv3. Clients are pooled per cluster and
// reused across reconciles; every call honours the caller's context.
package etcd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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
	// DBSizeInUseBytes is the part of the database in use (the rest is free pages a defragmentation returns).
	DBSizeInUseBytes int64
	IsLearner        bool
	RaftTerm         uint64
	RaftIndex        uint64
	// AppliedIndex is the raft index the member has applied; RaftIndex the one it knows committed.
	AppliedIndex uint64
	// Revision is the key space's revision the member reported.
	Revision int64
	// StorageVersion is the version of the member's data format (etcd 3.6+, empty before).
	StorageVersion string
	// DowngradeTarget is the version of the downgrade etcd has enabled, empty when none (etcd 3.6+).
	DowngradeTarget string
	Errors          []string
	Err             error // the request failed
}

// Healthy reports whether the member answered, knows a leader and reports no errors but a NOSPACE alarm. etcd
// lists every raised alarm among each member's errors (as "memberID:<id> alarm:<type>"). A NOSPACE alarm makes
// the whole cluster refuse writes, but its members still serve reads and deletes and stay in step: counting them
// unhealthy would call quorum lost and let a replacement or a restore from a backup loose on a cluster whose data
// is intact. The alarm is reported on its own (status.alarms, Degraded NoSpaceAlarm). A CORRUPT alarm, which makes
// members refuse reads too, still counts.
func (s Status) Healthy() bool {
	if s.Err != nil || s.LeaderID == 0 {
		return false
	}
	for _, e := range s.Errors {
		if !strings.Contains(e, "alarm:NOSPACE") {
			return false
		}
	}
	return true
}

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
	// ClusterVersion is the cluster version as the leader (or else any voter) reports it; DowngradeTarget the
	// downgrade etcd has enabled, empty when none.
	ClusterVersion  string
	DowngradeTarget string
	// Alarms are the alarms etcd has raised and not disarmed; AlarmErr says why they could not be read (then
	// Alarms is nil and says nothing).
	Alarms   []Alarm
	AlarmErr error
}

// Alarm is one alarm etcd keeps raised on a member.
type Alarm struct {
	MemberID uint64
	// Type is etcd's alarm type: NOSPACE or CORRUPT.
	Type string
}

// Pool keeps one client per cluster, keyed by the caller (the EtcdCluster's namespace/name), and the TLS each
// cluster is dialed with.
type Pool struct {
	mu        sync.Mutex
	clients   map[string]*clientv3.Client
	tls       map[string]*TLS
	configs   map[string]*tls.Config
	passwords map[string]Password
	// rejected: when etcd refused the cluster's password, as its pooled client was created (absent: it did not).
	rejected map[string]time.Time
	// refusals: the run of ErrClusterNotSettled refusals of each cluster's membership changes, as this process saw it.
	refusals map[string]refusalRun
}

// refusalRun is a run of refused membership changes: when it began and when the last one was.
type refusalRun struct{ since, last time.Time }

// PasswordRetry is how long a client dialed without its refused password is used before the password is tried
// again: another controller may have made the user meanwhile (Steward's own, through its certificate).
const PasswordRetry = 10 * time.Second

// NewPool returns an empty pool.
func NewPool() *Pool {
	return &Pool{clients: map[string]*clientv3.Client{}, tls: map[string]*TLS{}, configs: map[string]*tls.Config{},
		passwords: map[string]Password{}, rejected: map[string]time.Time{}, refusals: map[string]refusalRun{}}
}

// SetPassword sets the password user the cluster under key is dialed as, besides its TLS (the zero Password:
// none). A change closes the pooled client, so the next call authenticates with it.
func (p *Pool) SetPassword(key string, pw Password) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.passwords[key] == pw {
		return
	}
	p.closeLocked(key)
	if pw == (Password{}) {
		delete(p.passwords, key)
		return
	}
	p.passwords[key] = pw
}

// PasswordRejected reports whether etcd refused the cluster's password when its pooled client last
// authenticated: that client then acts with its certificate only, if it has one.
func (p *Pool) PasswordRejected(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.rejected[key]
	return ok
}

// Redial closes the cluster's pooled client, so that the next call authenticates afresh (after its password
// user was made).
func (p *Pool) Redial(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked(key)
}

func (p *Pool) closeLocked(key string) {
	if c, ok := p.clients[key]; ok {
		_ = c.Close()
		delete(p.clients, key)
	}
	delete(p.rejected, key)
}

// SetTLS sets how the cluster under key is dialed (nil: plaintext). A change (a renewed client certificate)
// closes the pooled client, so the next call dials with the new certificate.
func (p *Pool) SetTLS(key string, t *TLS) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.tls[key]; ok && old.Equal(t) {
		return nil
	}
	cfg, err := t.Config()
	if err != nil {
		return err
	}
	p.closeLocked(key)
	p.tls[key], p.configs[key] = t, cfg
	return nil
}

func (p *Pool) tlsConfig(key string) *tls.Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.configs[key]
}

// dialOne connects to the one member at endpoint with the cluster's TLS and password, for a call that acts on
// the member that receives it. The caller closes the client.
func (p *Pool) dialOne(ctx context.Context, key, endpoint string) (*clientv3.Client, error) {
	p.mu.Lock()
	cfg := clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: DialTimeout, Logger: zap.NewNop(), Context: ctx, TLS: p.configs[key]}
	pw := p.passwords[key]
	p.mu.Unlock()
	c, _, err := dial(cfg, pw)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", endpoint, err)
	}
	return c, nil
}

// client returns the pooled client for key, pointed at endpoints (those of one scheme: balancedEndpoints).
func (p *Pool) client(key string, endpoints []string) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no member has an address yet")
	}
	endpoints = balancedEndpoints(endpoints)
	// Dialed without the lock: authenticating waits for a member to answer (up to DialTimeout), and other
	// clusters' reconciles must not wait for it. A dial that SetTLS or SetPassword overtook is thrown away and
	// done again with the cluster's new identity.
	for attempt := 0; ; attempt++ {
		p.mu.Lock()
		if c, ok := p.reusableLocked(key, endpoints); ok {
			p.mu.Unlock()
			return c, nil
		}
		tlsConfig, pw := p.configs[key], p.passwords[key]
		p.mu.Unlock()
		c, rejected, err := dial(clientv3.Config{
			Endpoints:            endpoints,
			DialTimeout:          DialTimeout,
			DialKeepAliveTime:    10 * time.Second,
			DialKeepAliveTimeout: 5 * time.Second,
			DialOptions:          []grpc.DialOption{},
			TLS:                  tlsConfig,
			Logger:               zap.NewNop(),
		}, pw)
		if err != nil {
			return nil, fmt.Errorf("create etcd client for %v: %w", endpoints, err)
		}
		p.mu.Lock()
		if p.configs[key] != tlsConfig || p.passwords[key] != pw {
			p.mu.Unlock()
			_ = c.Close()
			if attempt < 2 {
				continue
			}
			return nil, fmt.Errorf("create etcd client for %v: the cluster's TLS or password kept changing while dialing", endpoints)
		}
		if other, ok := p.reusableLocked(key, endpoints); ok {
			// Another caller pooled a client for the cluster meanwhile: keep that one.
			p.mu.Unlock()
			_ = c.Close()
			return other, nil
		}
		p.clients[key] = c
		if rejected {
			p.rejected[key] = time.Now()
		}
		p.mu.Unlock()
		return c, nil
	}
}

// reusableLocked returns the pooled client of key pointed at endpoints, unless it must be dialed again (its
// password was refused long enough ago to try again, or it was set up for the other scheme); such a client is
// closed. Called with mu held.
func (p *Pool) reusableLocked(key string, endpoints []string) (*clientv3.Client, bool) {
	c, ok := p.clients[key]
	if !ok {
		return nil, false
	}
	if at, refused := p.rejected[key]; refused && time.Since(at) > PasswordRetry {
		p.closeLocked(key)
		return nil, false
	}
	if have := c.Endpoints(); len(have) > 0 && schemeOf(have[0]) != schemeOf(endpoints[0]) {
		// The client's transport was set up for the scheme of its first endpoint; another needs a new one.
		p.closeLocked(key)
		return nil, false
	}
	if !sameEndpoints(c.Endpoints(), endpoints) {
		c.SetEndpoints(endpoints...)
	}
	return c, true
}

// Forget closes and drops the client of a cluster that was deleted.
func (p *Pool) Forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked(key)
	delete(p.tls, key)
	delete(p.configs, key)
	delete(p.passwords, key)
	delete(p.refusals, key)
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
	if len(voters) == 0 {
		// A member that gives no status gives no member list either (that needs quorum besides), and asking
		// would cost the pass the whole RequestTimeout, on every pass of a bootstrap or an outage. The message
		// stays the same from pass to pass: it is part of status, and a change would wake the next pass at once.
		view.ListErr = fmt.Errorf("no voting member answered a status request (%d asked)", len(endpoints))
		return view, nil
	}
	view.ClusterVersion, view.DowngradeTarget = clusterVersion(ctx, httpClient(p.tlsConfig(key)), view.Statuses, voters)
	if c, err = p.client(key, voters); err != nil {
		return view, err
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
	view.Alarms, view.AlarmErr = alarms(ctx, c, view.Statuses)
	return view, nil
}

// alarms reads the alarms etcd keeps raised. etcd serves the alarm list through raft (a proposal, written to
// every member's log), so it is asked only when a member's status answer reports errors, among which etcd lists
// every raised alarm (as text): with no error in any answer there is no alarm, and a healthy cluster's passes
// cost etcd no write.
func alarms(ctx context.Context, c *clientv3.Client, statuses map[string]Status) ([]Alarm, error) {
	answered, withErrors := false, false
	for _, s := range statuses {
		answered = answered || s.Err == nil
		withErrors = withErrors || s.Err == nil && len(s.Errors) > 0
	}
	switch {
	case !answered:
		return nil, errors.New("alarm list: no member answered its status request")
	case !withErrors:
		return []Alarm{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	resp, err := c.AlarmList(ctx)
	if err != nil {
		return nil, fmt.Errorf("alarm list: %w", err)
	}
	out := make([]Alarm, 0, len(resp.Alarms))
	for _, a := range resp.Alarms {
		out = append(out, Alarm{MemberID: a.MemberID, Type: a.Alarm.String()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].MemberID != out[j].MemberID {
			return out[i].MemberID < out[j].MemberID
		}
		return out[i].Type < out[j].Type
	})
	return out, nil
}

// status asks the member at endpoint for its status, over a connection of its own to that member (the answer is
// about the member that receives the request).
//
// Not through clientv3's Maintenance.Status: that call is marked safe to repeat, so its client retries an
// unavailable member every few tens of milliseconds until RequestTimeout runs out. A member that is down for a
// moment is what every step waits through (a removed member's exited process, a learner or a rolled member not
// listening yet), and each pass would stall the whole timeout on it before it could look at the others. The
// same client's connection carries its TLS, its auth token and its retry of requests that never left the
// client; a refused connection fails the request at once, and the next pass asks again.
func status(ctx context.Context, c *clientv3.Client, endpoint string) Status {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	s := Status{Endpoint: endpoint}
	conn, err := c.Dial(endpoint)
	if err != nil {
		s.Err = fmt.Errorf("dial %s: %w", endpoint, err)
		return s
	}
	defer func() { _ = conn.Close() }()
	resp, err := etcdserverpb.NewMaintenanceClient(conn).Status(ctx, &etcdserverpb.StatusRequest{})
	if err != nil {
		s.Err = clientv3.ContextError(ctx, err)
		return s
	}
	s.MemberID, s.LeaderID, s.Version = resp.Header.MemberId, resp.Leader, resp.Version
	s.DBSizeBytes, s.DBSizeInUseBytes, s.IsLearner = resp.DbSize, resp.DbSizeInUse, resp.IsLearner
	s.RaftTerm, s.RaftIndex, s.Revision = resp.RaftTerm, resp.RaftIndex, resp.Header.Revision
	s.AppliedIndex, s.StorageVersion = resp.RaftAppliedIndex, resp.StorageVersion
	if d := resp.DowngradeInfo; d != nil && d.Enabled {
		s.DowngradeTarget = d.TargetVersion
	}
	s.Errors = resp.Errors
	return s
}

// versionEndpoint returns the cluster version a member reports on /version.
func versionEndpoint(ctx context.Context, httpClient *http.Client, endpoint string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/version", nil)
	if err != nil {
		return "", fmt.Errorf("version request: %w", err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("get %s/version: %w", endpoint, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var v struct {
		Cluster string `json:"etcdcluster"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&v); err != nil {
		return "", fmt.Errorf("read %s/version: %w", endpoint, err)
	}
	return v.Cluster, nil
}

// clusterVersion asks one voter for the cluster version, which is not part of the gRPC status (etcd serves it on
// the client port's /version): the leader first, being first to know a change, else the other voters in turn
// until one answers. The downgrade target comes from the same member's status. One request per pass, not one per
// member: it is a fact of the whole cluster.
func clusterVersion(ctx context.Context, hc *http.Client, statuses map[string]Status, voters []string) (version, downgrade string) {
	ordered := append([]string(nil), voters...)
	sort.SliceStable(ordered, func(i, j int) bool {
		si, sj := statuses[ordered[i]], statuses[ordered[j]]
		return si.MemberID == si.LeaderID && sj.MemberID != sj.LeaderID
	})
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	for _, ep := range ordered {
		if v, err := versionEndpoint(ctx, hc, ep); err == nil && v != "" {
			return v, statuses[ep].DowngradeTarget
		}
	}
	return "", ""
}

// balancedEndpoints are the endpoints one pooled client balances over: clientv3 dials all of them with the
// transport of the first one's scheme, so while members switch between plaintext and TLS only those of the
// scheme most of them have (https on a tie) are kept. Calls to one member (Status) dial it by its own scheme.
func balancedEndpoints(endpoints []string) []string {
	var plain, secure []string
	for _, ep := range endpoints {
		if schemeOf(ep) == "https" {
			secure = append(secure, ep)
		} else {
			plain = append(plain, ep)
		}
	}
	if len(plain) > len(secure) {
		return plain
	}
	if len(secure) == 0 {
		return endpoints
	}
	return secure
}

func schemeOf(endpoint string) string {
	scheme, _, _ := strings.Cut(endpoint, "://")
	return scheme
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

// ParseID reads a member ID written by FormatID.
func ParseID(s string) (uint64, error) { return strconv.ParseUint(s, 16, 64) }

// ErrLearnerNotReady is returned by PromoteLearner while the learner has not caught up with the leader.
var ErrLearnerNotReady = errors.New("learner has not caught up with the leader yet")

// ErrClusterNotSettled is returned by AddLearner and RemoveMember while etcd refuses the change because members
// have not been connected long enough (etcd's strict reconfiguration check, "unhealthy cluster": an add while any
// member has been connected less than 5 seconds, a voter's removal while too few of the others have been for the
// rest to keep a quorum). It passes by itself once they have.
var ErrClusterNotSettled = errors.New("etcd refuses membership changes until every member has been connected for a few seconds")

// refusedUntilSettled: err is etcd's strict reconfiguration check refusing a membership change (ErrClusterNotSettled).
func refusedUntilSettled(err error) bool {
	return err != nil && strings.Contains(err.Error(), "etcdserver: unhealthy cluster")
}

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

// Revision is the cluster's key-space revision, read linearizably (through the leader) now.
func (p *Pool) Revision(ctx context.Context, key string, endpoints []string) (int64, error) {
	var rev int64
	err := p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		r, err := c.Get(ctx, "\x00", clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("read revision: %w", err)
		}
		rev = r.Header.Revision
		return nil
	})
	return rev, err
}

// AskEachAfter is how long a cluster's membership changes are refused as ErrClusterNotSettled through the balanced
// client before each member is asked on its own. etcd's own window is 5 s after a peer (re)connects; past it, a member
// that still refuses has a peer it counts as not connected although they replicate (a peer marked inactive by a
// failed send stays so until its stream reconnects: etcd-io/etcd#14523), and another member may not.
const AskEachAfter = 10 * time.Second

// refusalGap is how long after the last refusal a new one starts a new run.
const refusalGap = 30 * time.Second

// RefusedError is an ErrClusterNotSettled refusal of a membership change, with what asking each member found.
type RefusedError struct {
	// Since is when this run of refusals began, as this process saw it.
	Since time.Time
	// Refusing are the endpoints that refused when asked on their own; Unreachable those that could not be
	// asked. Both empty while the run is younger than AskEachAfter.
	Refusing, Unreachable []string
}

func (e *RefusedError) Error() string {
	if len(e.Refusing) == 0 {
		return ErrClusterNotSettled.Error()
	}
	return fmt.Sprintf("%s: refused by %s asked on their own", ErrClusterNotSettled, strings.Join(e.Refusing, ", "))
}

// Is makes a RefusedError an ErrClusterNotSettled.
func (e *RefusedError) Is(target error) bool { return target == ErrClusterNotSettled }

// AddLearner adds a learner with peerURL and returns its member ID, asked as changeMembership asks.
func (p *Pool) AddLearner(ctx context.Context, key string, endpoints []string, peerURL string) (uint64, error) {
	var id uint64
	err := p.changeMembership(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		resp, err := c.MemberAddAsLearner(ctx, []string{peerURL})
		if err != nil {
			if refusedUntilSettled(err) {
				return fmt.Errorf("add learner %s: %w", peerURL, ErrClusterNotSettled)
			}
			return fmt.Errorf("add learner %s: %w", peerURL, err)
		}
		id = resp.Member.ID
		return nil
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// changeMembership makes a membership change (an add or a removal) through the cluster's balanced client. Each
// member judges a change by its own view of its peers' connections, so once the cluster's changes have been
// refused as ErrClusterNotSettled for AskEachAfter, every member is asked on its own until one accepts: a
// *RefusedError says which refused.
func (p *Pool) changeMembership(ctx context.Context, key string, endpoints []string, change func(context.Context, *clientv3.Client) error) error {
	err := p.withClient(ctx, key, endpoints, change)
	if !errors.Is(err, ErrClusterNotSettled) {
		p.endRefusals(key)
		return err
	}
	refused := &RefusedError{Since: p.refused(key, time.Now())}
	if time.Since(refused.Since) < AskEachAfter {
		return refused
	}
	for _, ep := range balancedEndpoints(endpoints) {
		c, derr := p.dialOne(ctx, key, ep)
		if derr != nil {
			// Nothing was sent: the next member may take it.
			refused.Unreachable = append(refused.Unreachable, ep)
			continue
		}
		actx, cancel := context.WithTimeout(ctx, RequestTimeout)
		err = change(actx, c)
		cancel()
		_ = c.Close()
		switch {
		case err == nil:
			p.endRefusals(key)
			return nil
		case errors.Is(err, ErrClusterNotSettled):
			refused.Refusing = append(refused.Refusing, ep)
		default:
			// The change may have been proposed: the next pass sees from the member list whether it was.
			return fmt.Errorf("asking %s on its own: %w", ep, err)
		}
	}
	return refused
}

// refused records a refused membership change of the cluster at now and returns when the run of refusals began.
func (p *Pool) refused(key string, now time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	run, ok := p.refusals[key]
	if !ok || now.Sub(run.last) > refusalGap {
		run.since = now
	}
	run.last = now
	p.refusals[key] = run
	return run.since
}

// endRefusals ends the cluster's run of refused membership changes.
func (p *Pool) endRefusals(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.refusals, key)
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

// RemoveMember removes member id from the cluster, asked as changeMembership asks. etcd refuses a voter's removal
// for a few seconds after members (re)connect: ErrClusterNotSettled.
func (p *Pool) RemoveMember(ctx context.Context, key string, endpoints []string, id uint64) error {
	return p.changeMembership(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		return confirmRemoved(id, func() error {
			_, err := c.MemberRemove(ctx, id)
			if refusedUntilSettled(err) {
				return fmt.Errorf("%w (%w)", ErrClusterNotSettled, err)
			}
			return err
		}, func() ([]uint64, error) {
			resp, err := c.MemberList(ctx)
			if err != nil {
				return nil, err
			}
			ids := make([]uint64, len(resp.Members))
			for i, m := range resp.Members {
				ids[i] = m.ID
			}
			return ids, nil
		})
	})
}

// confirmRemoved runs a member removal and, when it fails, asks the member list whether it happened anyway: a
// removed member stops at once, so a request that reached the member being removed can fail ("server stopped")
// after the removal committed. A removal that happened is reported as done (the step's Event and log follow);
// one that did not, or whose outcome the list cannot tell, keeps its error.
func confirmRemoved(id uint64, remove func() error, list func() ([]uint64, error)) error {
	err := remove()
	if err == nil {
		return nil
	}
	if ids, lerr := list(); lerr == nil && !slices.Contains(ids, id) {
		return nil
	}
	return fmt.Errorf("remove member %x: %w", id, err)
}

// UpdatePeerURL sets the peer URL etcd lists for member id: its peers dial it there from now on.
func (p *Pool) UpdatePeerURL(ctx context.Context, key string, endpoints []string, id uint64, url string) error {
	return p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		if _, err := c.MemberUpdate(ctx, id, []string{url}); err != nil {
			return fmt.Errorf("update peer URL of member %x to %s: %w", id, url, err)
		}
		return nil
	})
}

// MoveLeader hands leadership from the leader to member to. etcd only takes the request from the leader itself,
// so it goes over a connection to leaderEndpoint of its own, closed afterwards (a rare call: once per leader
// restart).
func (p *Pool) MoveLeader(ctx context.Context, key, leaderEndpoint string, to uint64) error {
	c, err := p.dialOne(ctx, key, leaderEndpoint)
	if err != nil {
		return fmt.Errorf("leader: %w", err)
	}
	defer func() { _ = c.Close() }()
	// A transfer waits for the transferee to catch up and win an election: longer than a plain request.
	ctx, cancel := context.WithTimeout(ctx, 3*RequestTimeout)
	defer cancel()
	if _, err := c.MoveLeader(ctx, to); err != nil {
		return fmt.Errorf("move leader to %x: %w", to, err)
	}
	return nil
}

// EnableDowngrade validates and then enables etcd's downgrade of the cluster version to version (major.minor).
func (p *Pool) EnableDowngrade(ctx context.Context, key string, endpoints []string, version string) error {
	return p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		if _, err := c.Downgrade(ctx, clientv3.DowngradeValidate, version); err != nil {
			return fmt.Errorf("validate downgrade to %s: %w", version, err)
		}
		if _, err := c.Downgrade(ctx, clientv3.DowngradeEnable, version); err != nil {
			return fmt.Errorf("enable downgrade to %s: %w", version, err)
		}
		return nil
	})
}

// CancelDowngrade cancels the downgrade etcd has enabled.
func (p *Pool) CancelDowngrade(ctx context.Context, key string, endpoints []string) error {
	return p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		if _, err := c.Downgrade(ctx, clientv3.DowngradeCancel, ""); err != nil {
			return fmt.Errorf("cancel downgrade: %w", err)
		}
		return nil
	})
}

// DefragmentTimeout bounds one member's defragmentation: etcd rewrites the whole database file, at disk speed
// (seconds per GiB on SSDs); the member answers nothing else meanwhile.
const DefragmentTimeout = 5 * time.Minute

// Defragment defragments the database of the member at endpoint, over a connection of its own to that member
// (the request acts on the member that receives it), and returns the size of its database file before and after.
func (p *Pool) Defragment(ctx context.Context, key, endpoint string) (before, after int64, err error) {
	c, err := p.dialOne(ctx, key, endpoint)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = c.Close() }()
	if s := status(ctx, c, endpoint); s.Err == nil {
		before = s.DBSizeBytes
	}
	dctx, cancel := context.WithTimeout(ctx, DefragmentTimeout)
	defer cancel()
	if _, err := c.Defragment(dctx, endpoint); err != nil {
		return before, 0, fmt.Errorf("defragment %s: %w", endpoint, err)
	}
	s := status(ctx, c, endpoint)
	if s.Err != nil {
		return before, 0, fmt.Errorf("status of %s after its defragmentation: %w", endpoint, s.Err)
	}
	return before, s.DBSizeBytes, nil
}

// CompactRevision is the revision the cluster is compacted to, as the member at endpoint reports it (a HashKV
// request, which reads the whole key space: asked only while a NOSPACE recovery needs it).
func (p *Pool) CompactRevision(ctx context.Context, key string, endpoints []string, endpoint string) (int64, error) {
	var rev int64
	err := p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		resp, err := c.HashKV(ctx, endpoint, 0)
		if err != nil {
			return fmt.Errorf("hash of %s: %w", endpoint, err)
		}
		rev = resp.CompactRevision
		return nil
	})
	return rev, err
}

// Compact compacts the key space up to revision rev and waits until every member has applied it (physical), so
// that the space of older revisions is free pages when it returns. Compacting to a revision already compacted is
// not an error.
func (p *Pool) Compact(ctx context.Context, key string, endpoints []string, rev int64) error {
	return p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			return fmt.Errorf("compact to revision %d: %w", rev, err)
		}
		return nil
	})
}

// DisarmNoSpace disarms every NOSPACE alarm etcd keeps raised (other alarms stay), and returns how many it
// disarmed.
func (p *Pool) DisarmNoSpace(ctx context.Context, key string, endpoints []string) (int, error) {
	n := 0
	err := p.withClient(ctx, key, endpoints, func(ctx context.Context, c *clientv3.Client) error {
		resp, err := c.AlarmList(ctx)
		if err != nil {
			return fmt.Errorf("alarm list: %w", err)
		}
		for _, a := range resp.Alarms {
			if a.Alarm != etcdserverpb.AlarmType_NOSPACE {
				continue
			}
			if _, err := c.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm}); err != nil {
				return fmt.Errorf("disarm NOSPACE of member %x: %w", a.MemberID, err)
			}
			n++
		}
		return nil
	})
	return n, err
}

// HashKVTimeout bounds one member's HashKV: it reads the member's whole key space (seconds per GiB).
const HashKVTimeout = time.Minute

// KVHash is one member's answer to HashKV: the hash of its key space from its compacted revision up to the
// revision asked.
type KVHash struct {
	Hash            uint32
	CompactRevision int64
	Err             error
}

// HashKVs asks the member at each of endpoints for the hash of its key space at revision rev, one after the
// other (each reads its member's whole database), over the cluster's pooled client. Keyed by endpoint.
func (p *Pool) HashKVs(ctx context.Context, key string, endpoints []string, rev int64) (map[string]KVHash, error) {
	c, err := p.client(key, endpoints)
	if err != nil {
		return nil, err
	}
	out := make(map[string]KVHash, len(endpoints))
	for _, ep := range endpoints {
		hctx, cancel := context.WithTimeout(ctx, HashKVTimeout)
		resp, err := c.HashKV(hctx, ep, rev)
		cancel()
		if err != nil {
			out[ep] = KVHash{Err: fmt.Errorf("hash of %s at revision %d: %w", ep, rev, err)}
			continue
		}
		out[ep] = KVHash{Hash: resp.Hash, CompactRevision: resp.CompactRevision}
	}
	return out, nil
}
