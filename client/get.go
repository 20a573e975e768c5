package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
)

// ReadOption adjusts one Get, Range or Prefix. WithLimit, WithKeysOnly
// and WithCountOnly concern scans only; Get ignores them.
type ReadOption func(*readOptions)

type readOptions struct {
	level Consistency
	scan  scanOptions // Range and Prefix only (scan.go)
}

// WithConsistency overrides Config.Consistency for one Get or scan.
func WithConsistency(l Consistency) ReadOption {
	return func(o *readOptions) { o.level = l }
}

// resolveLevel applies opts; without any it allocates nothing (the options
// struct escapes only on the path that has functions to call).
func resolveLevel(def Consistency, opts []ReadOption) Consistency {
	if len(opts) == 0 {
		return def
	}
	o := readOptions{level: def}
	for _, f := range opts {
		f(&o)
	}
	return o.level
}

// Get returns the value stored under key, or an error wrapping ErrNotFound.
//
// Linearizable and Serializable GETs are one-sided: the client READs the
// server's table region directly (one round trip for a small value, whose
// record is inline in the key's bucket, or when the key's location is
// cached; two otherwise) and verifies what it read; the server's CPU is not
// involved. When a read cannot be verified within Config.ReadRetries
// attempts, the client asks the server by RPC instead.
func (c *Client) Get(ctx context.Context, key []byte, opts ...ReadOption) ([]byte, error) {
	v, _, err := c.GetModRevision(ctx, key, opts...)
	return v, err
}

// GetAppend is Get that appends the value to dst and returns the extended
// slice. With a dst of enough capacity, a one-sided GET allocates nothing
// if ctx has a deadline, or if it has none and the GET never has to wait
// for a READ (over RDMA the usual case); a GET that waits makes the timer
// that bounds it by RequestTimeout then.
func (c *Client) GetAppend(ctx context.Context, dst, key []byte, opts ...ReadOption) ([]byte, error) {
	r, err := c.get(ctx, dst, key, opts)
	v := r.value
	return v, err
}

// GetModRevision is Get that also returns the key's mod revision: the store
// revision of the write that stored the value (Meta.ModRevision).
func (c *Client) GetModRevision(ctx context.Context, key []byte, opts ...ReadOption) ([]byte, uint64, error) {
	r, err := c.get(ctx, nil, key, opts)
	return r.value, r.meta.Mod, err
}

// GetMeta is Get that also returns the key's revision metadata (etcd's
// create and mod revisions, version and lease) and the store revision the
// read was served at.
func (c *Client) GetMeta(ctx context.Context, key []byte, opts ...ReadOption) ([]byte, Meta, uint64, error) {
	r, err := c.get(ctx, nil, key, opts)
	return r.value, metaOf(r.meta), r.rev, err
}

// getResult is a GET's answer: the value (dst with it appended), the key's
// revision metadata, and the store revision the answer was served at (0
// when the path that answered does not know it: an RPC, or a layout 3
// region, whose records carry only the mod revision).
type getResult struct {
	value []byte
	meta  revision.Meta
	rev   uint64
}

func (c *Client) get(ctx context.Context, dst, key []byte, opts []ReadOption) (getResult, error) {
	if err := checkKey(key); err != nil {
		return getResult{}, err
	}
	o := readOptions{level: resolveLevel(c.cfg.Consistency, opts)}
	// One clock reading serves as the base of the deadline, the first
	// attempt's start and its clock-age check (readOneSided): on an
	// emulated CPU each reading is a system call.
	start := c.now()
	ctx, lazy := withDeadlineLazily(ctx, c.now, start, c.cfg.RequestTimeout)
	if lazy != nil {
		defer lazy.release()
	}
	c.stats.gets.Add(1)
	var f failures
	if o.level != ReadIndex {
		res, err := c.readOneSided(ctx, dst, key, o.level, start, &f)
		if errors.Is(err, ErrUnauthenticated) {
			return getResult{}, err
		}
		if err == nil {
			c.stats.oneSided.Add(1)
			c.stats.roundTrips.Add(uint64(res.roundTrips))
			c.stats.reads.Add(uint64(res.reads))
			c.stats.readBytes.Add(uint64(res.bytes))
			if !res.found {
				return getResult{}, ErrNotFound
			}
			return getResult{value: res.value, meta: res.meta, rev: res.rev}, nil
		}
		switch {
		case ctx.Err() != nil:
			return getResult{}, f.err(ctx.Err())
		case f.allRefused(c.cfg.Endpoints):
			return getResult{}, f.err(nil) // the RPC would be refused as well
		}
		c.stats.fallbacks.Add(1)
	}
	r, err := c.getRPC(ctx, key, o.level, &f)
	if err != nil {
		return getResult{}, err
	}
	r.value = append(dst, r.value...)
	return r, nil
}

// readOneSided runs the one-sided protocol against the right node, retrying
// up to ReadRetries times. Linearizable reads go to the believed leader and
// require its lease; on a lease failure the client re-learns the leader.
//
// start is a clock reading taken before anything of this GET was posted:
// the first attempt's start, unless the attempt had to wait for a dial or a
// clock sample before its READs (then it takes a fresh one, as every later
// attempt does). An earlier start only makes the "quicker than half the
// grace period" check stricter.
//
// The nodes it cannot reach go into f; it gives up early when every
// endpoint refused (failures.allRefused).
func (c *Client) readOneSided(ctx context.Context, dst, key []byte, level Consistency, start mono, f *failures) (readResult, error) {
	s := scratchPool.Get().(*getScratch)
	defer scratchPool.Put(s)
	needLease := level == Linearizable
	var lastErr error
	for attempt := 0; attempt < c.cfg.ReadRetries; attempt++ {
		if attempt > 0 {
			start = c.now()
		}
		addr := c.readTarget(level)
		n, dialed, err := c.nodeForRead(ctx, addr)
		if errors.Is(err, ErrUnauthenticated) {
			return readResult{}, err
		}
		if err != nil {
			lastErr = err
			f.add(addr, err)
			if f.allRefused(c.cfg.Endpoints) {
				return readResult{}, err
			}
			c.setLeader("")
			c.rotateRead()
			continue
		}
		if needLease {
			if n.clock.age(start) > clockMaxAge {
				_ = n.syncClock(ctx) // idle: a fresh bound first (on failure the read says why)
				dialed = true        // waited: start afresh
			} else {
				n.maybeRefreshClock(start)
			}
		}
		if dialed {
			start = c.now()
		}
		n.attempts.begin()
		res, err := n.getOneSided(ctx, dst, key, needLease, start, s)
		n.attempts.end()
		if err == nil {
			return res, nil
		}
		lastErr = err
		c.stats.retry(err)
		switch {
		case ctx.Err() != nil:
			return res, ctx.Err()
		case errors.Is(err, errGeometry):
			// The region was rebuilt (or reformatted): re-read its header
			// on the same connection; only if that fails, reconnect.
			if gerr := n.loadGeometry(ctx); gerr != nil {
				n.close(fmt.Errorf("re-reading the table header after a rebuild: %w", gerr))
			}
		case errors.Is(err, errClockStale):
			if serr := n.syncClock(ctx); serr != nil {
				c.dropNode(n, serr) // cannot even read its clock: try elsewhere
			}
		case errors.Is(err, errLeaseLate):
			// The attempt read a valid lease too late to use it; the next
			// one starts from it.
		case errors.Is(err, errLease):
			c.relearnLeader(ctx, n)
		case errors.Is(err, errIncomplete), errors.Is(err, errCandidates):
			return res, err // retrying cannot help; ask by RPC
		case !isProtocolRetry(err):
			n.close(err) // the connection failed
		}
	}
	return readResult{}, lastErr
}

func isProtocolRetry(err error) bool {
	for _, e := range []error{errTorn, errStale, errUnstable, errTooSlow, errLease, errLeaseLate, errClockStale} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// readTarget picks the node a one-sided read goes to: for a linearizable
// read the believed leader, else the endpoints in turn; nodes that let a
// request time out (suspects) only when no other is left.
func (c *Client) readTarget(level Consistency) string {
	if level == Linearizable {
		if l := c.leader.Load(); l != nil && !c.suspect.has(*l) {
			return *l
		}
	}
	eps := c.cfg.Endpoints
	i := int(c.readIdx.Load())
	for k := range eps {
		if e := eps[(i+k)%len(eps)]; !c.suspect.has(e) {
			return e
		}
	}
	return eps[i%len(eps)]
}

func (c *Client) rotateRead() { c.readIdx.Add(1) }

// dropNode stops treating n as the leader and moves reads to the next
// endpoint; the connection stays (the node may only be slow). A node that
// did not answer in time is marked suspect, as leader-bound requests do.
func (c *Client) dropNode(n *node, err error) {
	if l := c.leader.Load(); l != nil && *l == n.addr {
		c.setLeader("")
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errStalled) {
		c.markSuspect(n.addr)
	}
	c.rotateRead()
}

// relearnLeader asks n who leads now (a node whose lease is invalid is either
// not the leader, briefly unsure, or stalled). It waits at most clockTimeout:
// a frozen node must not hold the GET for its whole deadline.
func (c *Client) relearnLeader(ctx context.Context, n *node) {
	ctx, cancel := context.WithTimeout(ctx, clockTimeout)
	defer cancel()
	resp, err := n.call(ctx, &wire.Request{Op: wire.OpHello, Flags: wire.HelloClusterID})
	if err != nil {
		c.dropNode(n, err)
		return
	}
	var h wire.Hello
	if wire.DecodeHello(resp.Value, &h) == nil && h.LeaderAddr != "" {
		c.setLeader(h.LeaderAddr)
		return
	}
	c.setLeader("")
	c.rotateRead()
}

// getRPC asks the leader to read key (for Linearizable and ReadIndex it
// confirms leadership with a quorum first; Serializable skips that).
func (c *Client) getRPC(ctx context.Context, key []byte, level Consistency, f *failures) (getResult, error) {
	flags := wire.Linearizable
	switch level {
	case Serializable:
		flags = wire.Serializable
	case ReadIndex:
		flags = wire.ReadIndex
	}
	c.stats.rpcGets.Add(1)
	// callAt takes GetMeta off for a server before revisions.
	resp, err := c.leaderCallFrom(ctx, &wire.Request{Op: wire.OpGet, Flags: flags | wire.GetMeta, Key: key}, true, f)
	if err != nil {
		return getResult{}, err
	}
	m, err := revision.Decode(resp.Value)
	if err != nil {
		return getResult{}, fmt.Errorf("%w: %w", errMalformedReply, err)
	}
	return getResult{value: resp.Value[revision.Size:], meta: m, rev: resp.Version}, nil
}
