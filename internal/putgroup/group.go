package putgroup

import (
	"context"
	"fmt"
	"sync"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/limits"
)

// defaultMaxInFlight is Config.MaxInFlight's default. One: the next
// group forms while a Raft round commits this one. (Measured with
// redis-benchmark -c 50 SETs through a gateway on 2 cores: one in flight
// took less CPU per SET and gave more SETs per second than two or four,
// whose groups are smaller.)
const defaultMaxInFlight = 1

// opOverhead is more than one put adds to a transaction's encoding
// besides its key and value (internal/txn's codec).
const opOverhead = 16

// Config configures a Group.
type Config struct {
	// Client commits the groups. Required.
	Client *client.Client
	// Revisions gives every PUT of a group its own revision: a group is
	// committed as a batch (client.PutBatch), whose PUTs are applied one
	// after the other, as separate requests would be, and each PUT gets
	// its own outcome. Without it a group is one transaction.
	Revisions bool
	// MaxInFlight bounds the groups being committed at once (default 1).
	// With more than one, the groups in flight are concurrent: PutAll's
	// runs keep their order only with one.
	MaxInFlight int
	// Knobs are for tests only.
	Knobs Knobs
}

// Knobs let tests reach states that are hard to provoke from outside.
type Knobs struct {
	// BeforeCommit, if set, runs before a group of n PUTs is committed:
	// a test can hold a group while more PUTs queue behind it.
	BeforeCommit func(n int)
}

// Stats count what a Group committed.
type Stats struct {
	Groups  uint64 // groups of more than one PUT
	Grouped uint64 // the PUTs in them
}

// Group commits the PUTs given to it in groups (see the package doc).
type Group struct {
	cfg      Config
	mu       sync.Mutex
	inFlight int // groups being committed; a waiting PUT is handed on by one
	waiting  []*pending
	stats    Stats
}

// pending is one PUT waiting in a Group. done receives its outcome, or run
// when it is to commit the next group itself.
type pending struct {
	key, val []byte
	done     chan outcome
	out      outcome // the outcome, once done gave it
}

type outcome struct {
	rev uint64
	err error
	run []*pending // a group for the PUT's owner to commit: the PUT heads it
}

// Validate reports what is wrong with c, without side effects.
func (c Config) Validate() error {
	if c.Client == nil {
		return fmt.Errorf("%w: putgroup: Client is required", errs.ErrConfig)
	}
	if c.MaxInFlight < 0 {
		return fmt.Errorf("%w: putgroup: MaxInFlight %d is negative", errs.ErrConfig, c.MaxInFlight)
	}
	return nil
}

// New returns a Group for cfg.
func New(cfg Config) (*Group, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = defaultMaxInFlight
	}
	return &Group{cfg: cfg}, nil
}

// Stats returns what g committed so far.
func (g *Group) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}

// Waiting is how many PUTs wait for a group.
func (g *Group) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting)
}

// groupable reports whether a PUT of key to val may join a group: one kvd
// would refuse is sent alone, so that its refusal fails no other PUT.
func groupable(key, val []byte) bool {
	return len(key) > 0 && len(key) <= limits.MaxKey && len(val) <= limits.MaxValue
}

// KV is one PUT of a run given to PutAll.
type KV struct{ Key, Value []byte }

// Put stores val under key, committed with the PUTs given to g meanwhile,
// and returns the revision it was stored at (the group's, or with
// Config.Revisions its own).
func (g *Group) Put(ctx context.Context, key, val []byte) (uint64, error) {
	if !groupable(key, val) {
		return g.cfg.Client.PutRevision(ctx, key, val)
	}
	p := newPending(key, val)
	g.putAll(ctx, []*pending{p})
	return p.out.rev, p.out.err
}

// PutAll stores a run of PUTs from one caller in order: they queue
// together, so that they join the same group or consecutive groups, and
// a later one is never committed before an earlier one. errs[i] is
// puts[i]'s outcome. A PUT kvd would refuse is sent alone, in its place.
func (g *Group) PutAll(ctx context.Context, puts []KV) (errs []error) {
	errs = make([]error, len(puts))
	for i := 0; i < len(puts); {
		if !groupable(puts[i].Key, puts[i].Value) {
			_, errs[i] = g.cfg.Client.PutRevision(ctx, puts[i].Key, puts[i].Value)
			i++
			continue
		}
		var run []*pending
		for ; i < len(puts) && groupable(puts[i].Key, puts[i].Value); i++ {
			run = append(run, newPending(puts[i].Key, puts[i].Value))
		}
		g.putAll(ctx, run)
		for j, p := range run {
			errs[i-len(run)+j] = p.out.err
		}
	}
	return errs
}

func newPending(key, val []byte) *pending {
	return &pending{key: key, val: val, done: make(chan outcome, 1)}
}

// putAll queues ps, in order, and returns when each has its outcome (in
// p.out). A caller that finds fewer than MaxInFlight groups in flight
// takes the next group and commits it itself; a finished group takes the
// next one and hands it on to the owner of the PUT heading it. A PUT's
// done channel never holds a hand-on and an outcome at once: a PUT is
// handed on only as its group is taken (once), and its owner commits that
// group, so its outcome comes after the hand-on was taken.
func (g *Group) putAll(ctx context.Context, ps []*pending) {
	g.mu.Lock()
	g.waiting = append(g.waiting, ps...)
	var batch []*pending
	if g.inFlight < g.cfg.MaxInFlight {
		g.inFlight++
		batch = g.takeLocked()
	}
	g.mu.Unlock()
	if batch != nil {
		g.commitGroup(ctx, batch)
	}
	for _, p := range ps {
		for {
			o := <-p.done
			if o.run == nil {
				p.out = o
				break
			}
			g.commitGroup(ctx, o.run)
		}
	}
}

// commitGroup commits batch, gives each of its PUTs the outcome, then
// takes the next group, if any, and hands it on to the owner of the PUT
// heading it.
func (g *Group) commitGroup(ctx context.Context, batch []*pending) {
	if g.cfg.Knobs.BeforeCommit != nil {
		g.cfg.Knobs.BeforeCommit(len(batch))
	}
	gctx, cancel := groupContext(ctx)
	g.commit(gctx, batch)
	cancel()
	for _, q := range batch {
		q.done <- q.out
	}
	g.mu.Lock()
	if len(batch) > 1 {
		g.stats.Groups++
		g.stats.Grouped += uint64(len(batch))
	}
	if len(g.waiting) > 0 {
		next := g.takeLocked()
		next[0].done <- outcome{run: next}
	} else {
		g.inFlight--
	}
	g.mu.Unlock()
}

// groupContext is the context a group commits under: ctx's deadline and
// values, but not its cancellation. The group is other PUTs' too, so a
// client that gives up on its own (a cancelled gRPC call) must not fail
// theirs.
func groupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(context.WithoutCancel(ctx), dl)
	}
	return context.WithCancel(context.WithoutCancel(ctx))
}

// takeLocked takes the next group: the PUTs that have waited longest, as
// many as one transaction or batch holds (limits.MaxTxnOps operations,
// limits.MaxTxnBytes encoded; a batch's bounds are the same), and at
// least one.
func (g *Group) takeLocked() []*pending {
	size, n := 0, 0
	for _, q := range g.waiting {
		size += opOverhead + len(q.key) + len(q.val)
		if n == min(limits.MaxTxnOps, limits.MaxBatchPuts) || (n > 0 && size > min(limits.MaxTxnBytes, limits.MaxBatchBytes)) {
			break
		}
		n++
	}
	batch := g.waiting[:n:n]
	g.waiting = g.waiting[n:]
	if len(g.waiting) == 0 {
		g.waiting = nil // let the taken ones' array go
	}
	return batch
}

// commit commits a group and leaves each PUT's outcome in its out: a lone
// PUT as a PUT, more as a batch (Config.Revisions) or as one transaction.
func (g *Group) commit(ctx context.Context, batch []*pending) {
	switch {
	case len(batch) == 1:
		p := batch[0]
		p.out.rev, p.out.err = g.cfg.Client.PutRevision(ctx, p.key, p.val)
		return
	case g.cfg.Revisions:
		g.commitBatch(ctx, batch)
		return
	}
	rev, err := g.commitTxn(ctx, batch)
	for _, p := range batch {
		p.out = outcome{rev: rev, err: err}
	}
}

// commitBatch commits a group as a batch: each PUT at its own revision.
func (g *Group) commitBatch(ctx context.Context, batch []*pending) {
	puts := make([]client.BatchPut, len(batch))
	for i, p := range batch {
		puts[i] = client.BatchPut{Key: p.key, Value: p.val}
	}
	rs, err := g.cfg.Client.PutBatch(ctx, puts)
	for i, p := range batch {
		if err != nil {
			p.out = outcome{err: err}
			continue
		}
		p.out = outcome{rev: rs[i].Revision, err: rs[i].Err}
	}
}

// commitTxn commits a group as one transaction that puts each key once,
// to its last value.
func (g *Group) commitTxn(ctx context.Context, batch []*pending) (uint64, error) {
	ops := make([]client.Op, 0, len(batch))
	at := make(map[string]int, len(batch))
	for _, p := range batch {
		op := client.OpPut(p.key, p.val)
		if i, dup := at[string(p.key)]; dup {
			ops[i] = op
			continue
		}
		at[string(p.key)] = len(ops)
		ops = append(ops, op)
	}
	if len(ops) == 1 {
		last := batch[len(batch)-1]
		return g.cfg.Client.PutRevision(ctx, last.key, last.val)
	}
	r, err := g.cfg.Client.Txn(ctx, client.Txn{Then: ops})
	if err != nil {
		return 0, err
	}
	return r.Revision, nil
}
