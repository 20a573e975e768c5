package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// Size limits, the same the server enforces.
const (
	MaxKey   = limits.MaxKey
	MaxValue = limits.MaxValue
)

// Client talks to a kvd cluster. It is safe for concurrent use by many
// goroutines; one Client per process is usually right.
type Client struct {
	cfg     Config
	tr      transport.Transport
	ownTr   bool
	mu      sync.Mutex
	nodes   map[string]*node
	dialing map[string]chan struct{}
	leader  atomic.Pointer[string] // believed leader's address
	suspect suspects               // nodes that let an attempt time out
	cluster clusterPin             // the one cluster it talks to (cluster.go)
	closed  atomic.Bool
	life    context.Context // cancelled by Close: ends calls that do not poll closed
	stop    context.CancelFunc
	stats   counters
	readIdx atomic.Uint32 // which endpoint non-leader reads use
	now     func() mono   // the client's clock (Knobs.Clock)
	watches watchSet      // open watches, for RequestProgress
}

// New returns a client for cfg.Endpoints. It connects lazily, so New fails
// only on a bad Config or transport.
func New(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, tr: cfg.Transport, nodes: map[string]*node{}, dialing: map[string]chan struct{}{},
		now: clockOf(cfg.Knobs)}
	c.cluster.id.Store(uint64(cfg.ClusterID))
	c.life, c.stop = context.WithCancel(context.Background())
	if c.tr == nil {
		tr, err := tcp.New(tcp.Config{TLS: cfg.tcpTLS()})
		if err != nil {
			return nil, err
		}
		c.tr, c.ownTr = tr, true
	}
	if cfg.AttemptTimeout > 0 {
		go c.watchStalls()
	}
	return c, nil
}

// Close closes every connection (and the transport, if the client made it).
// Calls in progress fail with ErrClosed or ErrUnavailable.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed.Swap(true) {
		c.mu.Unlock()
		return nil
	}
	nodes := c.nodes
	c.nodes = map[string]*node{}
	c.mu.Unlock()
	c.stop()
	for _, n := range nodes {
		n.close(ErrClosed)
	}
	if c.ownTr {
		return c.tr.Close()
	}
	return nil
}

// untilClosed is ctx bounded by timeout (none if 0) that also ends when
// the client closes, for the waits that do not poll closed (a dial, a
// backup's stream). It costs a registration: not for the per-operation
// paths.
func (c *Client) untilClosed(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	stop := context.AfterFunc(c.life, cancel)
	return ctx, func() { stop(); cancel() }
}

// nodeFor returns a live connection to addr, dialing it if needed. Only one
// dial per address is in flight; others wait for it.
func (c *Client) nodeFor(ctx context.Context, addr string) (*node, error) {
	n, _, err := c.nodeForRead(ctx, addr)
	return n, err
}

// nodeForRead is nodeFor that also reports whether it had to wait (for its
// own dial or another's), which a GET's clock reading taken before the
// call does not cover well. A node of another cluster than the client's is
// refused (its connection is kept, for Status).
func (c *Client) nodeForRead(ctx context.Context, addr string) (*node, bool, error) {
	n, waited, err := c.connect(ctx, addr)
	if err != nil {
		return nil, waited, err
	}
	c.settle(ctx, n)
	if err := c.cluster.check(n); err != nil {
		return nil, waited, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if waited && n.hello.LeaderAddr != "" && c.leader.Load() == nil {
		c.setLeader(n.hello.LeaderAddr)
	}
	return n, waited, nil
}

// connect returns a live connection to addr, whatever its cluster, dialing
// it if needed. Only one dial per address is in flight; others wait for it.
func (c *Client) connect(ctx context.Context, addr string) (*node, bool, error) {
	for waited := false; ; waited = true {
		if c.closed.Load() {
			return nil, waited, ErrClosed
		}
		c.mu.Lock()
		if n := c.nodes[addr]; n != nil && !n.isBroken() {
			c.mu.Unlock()
			return n, waited, nil
		}
		if wait, ok := c.dialing[addr]; ok {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, true, ctx.Err()
			}
		}
		done := make(chan struct{})
		c.dialing[addr] = done
		c.mu.Unlock()

		dctx, cancel := c.untilClosed(ctx, c.cfg.DialTimeout)
		n, err := dialNode(dctx, c.tr, addr, nodeOptions{c.cfg.CacheEntries, c.cfg.LeaseDrift, &c.stats.clockSyncs, &c.stats, c.now})
		cancel()
		c.mu.Lock()
		delete(c.dialing, addr)
		if c.closed.Load() { // Close ran while we dialed (and may have ended the dial)
			if err == nil {
				n.close(ErrClosed)
			}
			n, err = nil, ErrClosed
		}
		if err == nil {
			c.nodes[addr] = n
		}
		close(done)
		c.mu.Unlock()
		return n, true, err
	}
}

func (c *Client) setLeader(addr string) {
	if addr == "" {
		c.leader.Store(nil)
		return
	}
	c.leader.Store(&addr)
}

// withTimeout applies RequestTimeout to contexts without a deadline.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.cfg.RequestTimeout)
}

// targets lists the addresses to try for a leader-bound request: the
// believed leader first, then every endpoint, leaving out the suspects
// (nodes that let an attempt time out and have not answered since) unless
// nothing else is left.
func (c *Client) targets() []string {
	out := make([]string, 0, len(c.cfg.Endpoints)+1)
	if l := c.leader.Load(); l != nil && !c.suspect.has(*l) {
		out = append(out, *l)
	}
	for _, e := range c.cfg.Endpoints {
		if (len(out) == 0 || e != out[0]) && !c.suspect.has(e) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return c.cfg.Endpoints
	}
	return out
}

// leaderCall sends req to the leader, following NotLeader answers and
// moving past unreachable nodes, with backoff, until ctx ends.
//
// A write is retried only while no attempt can have been applied: the node
// was never reached, or it answered that it did not propose the write (not
// leader, proposal dropped). Retrying a write that may have been applied
// could apply it a second time after somebody else's later write, so such a
// write fails with ErrUnavailable instead, as "maybe applied". Reads
// (idempotent) are retried freely.
//
// An attempt that gets no answer within AttemptTimeout counts as the node
// failing (see attempt): it is dropped as leader and tried last from then
// on, a read moves on to the next node at once, and a write fails at once
// as maybe applied, so that the next request goes elsewhere instead of
// waiting on a stalled leader for the rest of its deadline.
func (c *Client) leaderCall(ctx context.Context, req *wire.Request, idempotent bool) (wire.Response, error) {
	return c.leaderCallFrom(ctx, req, idempotent, &failures{})
}

// leaderCallFrom is leaderCall that adds its failures to f (a GET's
// one-sided attempts may have begun it). It gives up before ctx ends when
// every node of a round refused the request in a way that waiting cannot
// change soon (nothing listens, not kvd, another cluster: see refused).
func (c *Client) leaderCallFrom(ctx context.Context, req *wire.Request, idempotent bool, f *failures) (wire.Response, error) {
	backoff := minBackoff
	// A write returns at its first attempt that may have been applied, so
	// when it fails here every attempt before the last provably had no
	// effect, and so did the last if notApplied(f.last): then the error
	// wraps ErrNotApplied. The last error alone does not always say so (a
	// NotLeaderError is a refusal before proposing, but does not wrap
	// ErrNotApplied).
	fail := func(cause error) error {
		var extra []error
		if !idempotent && f.last != nil && notApplied(f.last) && !errors.Is(f.last, ErrNotApplied) {
			extra = append(extra, ErrNotApplied)
		}
		err := f.err(cause, extra...)
		err.write = !idempotent
		return err
	}
	for {
		targets := c.targets()
		for _, addr := range targets {
			resp, err := c.attempt(ctx, addr, req)
			var nl *NotLeaderError
			if errors.As(err, &nl) && nl.LeaderAddr != "" && nl.LeaderAddr != addr && !c.suspect.has(nl.LeaderAddr) {
				// (A suspect named as leader is not followed: the
				// answering node has not noticed yet that it stalled.)
				f.add(addr, fromNode(addr, err))
				c.setLeader(nl.LeaderAddr)
				addr = nl.LeaderAddr
				resp, err = c.attempt(ctx, addr, req)
			}
			if err == nil {
				return resp, nil
			}
			err = fromNode(addr, err)
			f.add(addr, err)
			switch {
			case ctx.Err() != nil:
				return wire.Response{}, fail(ctx.Err())
			case !retryable(err):
				return wire.Response{}, err
			}
			if l := c.leader.Load(); l != nil && *l == addr {
				c.setLeader("")
			}
			if !idempotent && !notApplied(err) {
				return wire.Response{}, maybeApplied(err)
			}
		}
		if f.allRefused(targets) {
			return wire.Response{}, fail(nil)
		}
		select {
		case <-ctx.Done():
			return wire.Response{}, fail(ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// Backoff between rounds of a leader-bound request in which no node could
// serve it (typically: an election is under way). The cap is short because
// an election after a leader failure takes one to two election timeouts,
// and a client asleep for a second after it ends would add that second to
// the outage it sees.
const (
	minBackoff = 20 * time.Millisecond
	maxBackoff = 250 * time.Millisecond
)

// errAttemptTimeout marks an attempt that got no answer within
// AttemptTimeout.
var errAttemptTimeout = errors.New("no answer within the attempt timeout")

// attempt is one try of a leader-bound request at addr: callAt, bounded by
// AttemptTimeout. A node that does not answer within it is marked suspect
// until it answers again (see suspects), and the failure wraps
// ErrUnavailable, and errNotSent if the request never left the client.
func (c *Client) attempt(ctx context.Context, addr string, req *wire.Request) (wire.Response, error) {
	d := c.cfg.AttemptTimeout
	if v, ok := ctx.Value(attemptKey{}).(time.Duration); ok {
		d = v
	}
	switch req.Op {
	case wire.OpMemberAdd, wire.OpMemberAddVoter, wire.OpMemberUpdate, wire.OpMemberRemove, wire.OpMemberPromote, wire.OpMoveLeader:
		d = -1 // may legitimately take long: promotion waits for the learner, a leader move for the lease to end
	}
	if d <= 0 {
		return c.callAt(ctx, addr, req)
	}
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	resp, err := c.callAt(actx, addr, req)
	if err == nil || ctx.Err() != nil || actx.Err() == nil || !errors.Is(err, context.DeadlineExceeded) {
		return resp, err
	}
	c.markSuspect(addr)
	if errors.Is(err, errNotSent) {
		return resp, fmt.Errorf("%w: %w: %s: %w (%v)", ErrUnavailable, errNotSent, addr, errAttemptTimeout, d)
	}
	return resp, fmt.Errorf("%w: %s: %w (%v)", ErrUnavailable, addr, errAttemptTimeout, d)
}

// attemptKey is the context key of WithAttemptTimeout's bound.
type attemptKey struct{}

// WithAttemptTimeout returns a context with which a call bounds each
// attempt at a node by d in place of Config.AttemptTimeout; d <= 0 leaves
// attempts unbounded, so the call waits at a node as long as ctx allows.
// It is for servers whose own clients bring their deadlines (the etcd
// API, whose clients' requests, a large DeleteRange, may rightly take
// longer than an attempt): a write then answers with its outcome rather
// than fail "maybe applied" at the attempt bound.
func WithAttemptTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, attemptKey{}, d)
}

// errNotSent marks failures that happened before a request left the client.
// It wraps ErrNotApplied, which callers see (as does a server's answer
// that it did not apply the request, StatusRetry).
var errNotSent = fmt.Errorf("request not sent: %w", ErrNotApplied)

// notApplied reports whether err proves the request had no effect.
func notApplied(err error) bool {
	return errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNotApplied) ||
		errors.Is(err, ErrPermissionDenied) || errors.Is(err, ErrNoSpace)
}

// nodeError names the node an error came from.
type nodeError struct {
	addr string
	err  error
}

func (e *nodeError) Error() string { return e.err.Error() + " [node " + e.addr + "]" }
func (e *nodeError) Unwrap() error { return e.err }

// fromNode makes err name addr, unless it already does.
func fromNode(addr string, err error) error {
	var ne *nodeError
	if err == nil || errors.As(err, &ne) {
		return err
	}
	return &nodeError{addr, err}
}

func maybeApplied(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: outcome unknown: %w", ErrUnavailable, err)
}

// callAt sends req to addr and maps the response status onto an error.
func (c *Client) callAt(ctx context.Context, addr string, req *wire.Request) (wire.Response, error) {
	n, err := c.nodeFor(ctx, addr)
	if err != nil {
		return wire.Response{}, fmt.Errorf("%w: %w", errNotSent, err)
	}
	if req.Op == wire.OpPutBatch && n.hello.Features&wire.FeaturePutBatch == 0 {
		return wire.Response{}, fmt.Errorf("%w: %w: %s", errNotSent, errNoPutBatch, addr)
	}
	r := *req
	older := r.Op == wire.OpGet && r.Flags&wire.GetMeta != 0 && !n.keepsRevisions()
	if older {
		r.Flags &^= wire.GetMeta // a server before revisions refuses it
	}
	resp, err := n.call(ctx, &r)
	if err != nil {
		return resp, err
	}
	if older && resp.Status == wire.StatusOK {
		// The answer in the shape of one with metadata: all an older
		// server knows is the mod revision.
		resp.Value = append(revision.Meta{Mod: resp.Version}.Append(nil), resp.Value...)
	}
	return resp, statusError(&resp)
}

func retryable(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotLeader)
}

// statusError is the error a response stands for; internal/errs holds
// the one table of statuses and errors, which the server encodes with.
func statusError(r *wire.Response) error { return errs.Decode(r) }

func checkKey(key []byte) error {
	switch {
	case len(key) == 0:
		return ErrEmptyKey
	case len(key) > MaxKey:
		return fmt.Errorf("%w: %d bytes (max %d)", ErrKeyTooLarge, len(key), MaxKey)
	}
	return nil
}

// Put stores value under key. It returns once the write is committed and
// applied by the leader. A Put that fails with ErrUnavailable may or may not
// have been applied: the client retries a write by itself only while it can
// prove no attempt took effect, because a blind retry could apply it again
// after a later write by somebody else. PutRevision is Put with options
// (IfModRevision) that also returns the write's revision.
func (c *Client) Put(ctx context.Context, key, value []byte) error {
	_, err := c.PutRevision(ctx, key, value)
	return err
}

// Status asks one endpoint for its status. It answers from a node of any
// cluster, so that a tool can show which one each endpoint belongs to
// (NodeStatus.ClusterID): the one request a client sends to another
// cluster's node.
func (c *Client) Status(ctx context.Context, endpoint string) (NodeStatus, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var st NodeStatus
	n, _, err := c.connect(ctx, endpoint)
	var resp wire.Response
	if err == nil {
		if resp, err = n.call(ctx, &wire.Request{Op: wire.OpStatus}); err == nil {
			err = statusError(&resp)
		}
	}
	if err != nil {
		var f failures
		f.add(endpoint, err)
		return st, f.err(nil)
	}
	return st, decodeJSON(resp.Value, &st)
}

// Members lists the cluster's members, as the leader knows them.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpMemberList}, true)
	if err != nil {
		return nil, err
	}
	var ms []Member
	return ms, decodeJSON(resp.Value, &ms)
}

// AddMember adds node id at addr as a learner: it receives the log but does
// not vote until PromoteMember.
func (c *Client) AddMember(ctx context.Context, id uint64, addr string) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	_, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpMemberAdd, Key: strconv.AppendUint(nil, id, 10), Value: []byte(addr)}, false)
	return err
}

// AddVoter adds node id at addr as a voter at once (etcd's MemberAdd
// without a learner): it counts towards every quorum from then on, so the
// leader refuses it (ErrBadRequest saying why) unless the voters it has
// heard from lately are a quorum with it, which a one-voter cluster never
// is: there, add a learner and promote it. Start the node with --join
// soon after. A server that predates it refuses the op (it closes the
// connection) and adds nothing (docs/upgrading.md).
func (c *Client) AddVoter(ctx context.Context, id uint64, addr string) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	_, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpMemberAddVoter, Key: strconv.AppendUint(nil, id, 10), Value: []byte(addr)}, false)
	return err
}

// UpdateMember changes member id's peer address to addr (etcd's
// MemberUpdate): the members dial it there from then on; restart its
// node listening at addr. Another member's address is refused. A server
// that predates it refuses the op (it closes the connection) and changes
// nothing.
func (c *Client) UpdateMember(ctx context.Context, id uint64, addr string) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	_, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpMemberUpdate, Key: strconv.AppendUint(nil, id, 10), Value: []byte(addr)}, false)
	return err
}

// PromoteMember makes learner id a voting member once it has caught up with
// the leader's log (it waits for that, until ctx ends).
func (c *Client) PromoteMember(ctx context.Context, id uint64) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	_, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpMemberPromote, Key: strconv.AppendUint(nil, id, 10)}, true)
	return err
}

// RemoveMember removes node id from the cluster.
func (c *Client) RemoveMember(ctx context.Context, id uint64) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	_, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpMemberRemove, Key: strconv.AppendUint(nil, id, 10)}, false)
	return err
}

// Health checks that endpoint serves a linearizable read: a ReadIndex GET
// at that node, which confirms with a quorum through it (as etcdctl
// endpoint health reads a key). The key need not exist. An endpoint of
// another cluster than the client's is unhealthy (ErrClusterMismatch).
func (c *Client) Health(ctx context.Context, endpoint string) error {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	_, err := c.callAt(ctx, endpoint, &wire.Request{Op: wire.OpGet, Flags: wire.ReadIndex, Key: []byte(probeKey)})
	if err == nil || errors.Is(err, ErrNotFound) {
		return nil
	}
	var f failures
	f.add(endpoint, err)
	return f.err(ctx.Err())
}
