package kv

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft"
)

// machine is the key/value state machine the raft node replicates
// (raft.StateMachine): it evaluates committed commands into the Ready's
// Pebble batch, publishes their writes once the batch is durable, and
// keeps the TTL lessor. The raft loop makes every call, one at a time.
type machine struct {
	cfg     Config
	pub     Publisher
	leases  *lessor
	metrics *metrics

	// Set by Open.
	id    uint64
	st    *store.Store
	log   *slog.Logger
	retry time.Duration // the leader re-proposes a lost expiry after it

	sc   scratch
	out  []raft.Outcome // Apply's, while it runs
	auto autoCompactor  // the leader's

	// The revision the entry being applied writes at, and whether it
	// changed anything (only then does the store revision move to it).
	next    uint64
	changed bool
	prev    *KV // a PUT's previous key, for its proposer (opPutPrev)
}

// scratch is per-batch state reused across batches.
type scratch struct {
	applies  []Write
	deliver  []Write
	events   []Write // every write of the batch, for Publisher.Events
	eventsAt uint64  // the store revision Events last reported
	skip     []bool
	order    []int
	atomic   bool // an entry wrote several keys: the Apply call is atomic

	// TTL leases (leaseapply.go): grants and revokes applied in the
	// batch, key counts changed, the net change in the number of leases,
	// and the grants alone.
	leaseOps   []leaseOp
	leaseKeys  []leaseKeys
	leaseDelta int
	grants     int
}

func newMachine(cfg Config, m *metrics) *machine {
	return &machine{cfg: cfg, pub: cfg.Publisher, leases: newLessor(), metrics: m,
		auto: autoCompactor{policy: cfg.compaction}}
}

// Open loads the lessor from the applied state.
func (m *machine) Open(env raft.Env) error {
	m.id, m.st, m.log, m.retry = env.ID, env.Store, env.Logger, env.ElectionTimeout
	m.sc.eventsAt = m.st.Revision()
	if err := m.reloadLeases(); err != nil {
		return fmt.Errorf("loading leases: %w", err)
	}
	return nil
}

// Apply evaluates the batch's commands into u. A batch with writes is
// announced to the Publisher (BatchAhead), as u commits next.
func (m *machine) Apply(u *store.Update, ents []*pb.Entry, out []raft.Outcome) ([]raft.Outcome, error) {
	m.out = out
	defer func() { m.out = nil }()
	for _, e := range ents {
		if e.GetType() != pb.EntryNormal || len(e.GetData()) == 0 {
			continue // a membership change, or a new leader's empty entry
		}
		if err := m.applyEntry(u, e); err != nil {
			return m.out, fmt.Errorf("entry %d: %w", e.GetIndex(), err)
		}
	}
	if len(m.sc.applies) > 0 { // Apply is called exactly then (publish)
		m.pub.BatchAhead()
	}
	return m.out, nil
}

// applyEntry applies one command at the next store revision, which it
// takes only if the command changed the state: the revision is dense.
func (m *machine) applyEntry(u *store.Update, e *pb.Entry) error {
	m.next, m.changed = u.Revision()+1, false
	if err := m.applyCommand(u, e); err != nil {
		return err
	}
	if m.changed {
		return u.SetRevision(m.next)
	}
	return nil
}

// served is the revision a command's response carries: its own if it
// changed the state, else the one it was evaluated at (as etcd's
// response header).
func (m *machine) served() uint64 {
	if m.changed {
		return m.next
	}
	return m.next - 1
}

// Committed publishes the batch: its writes (collapsed, then every one as
// events), the lessor's changes, and after a snapshot install the
// reloaded lessor and the Publisher's Restore.
func (m *machine) Committed(applied uint64, installed bool) {
	m.takeEvents()
	m.publish(m.st.Revision())
	m.mirrorLeases()
	m.publishEvents(m.st.Revision(), installed)
	if installed {
		if err := m.reloadLeases(); err != nil {
			m.log.Error("reloading leases after snapshot install", "err", err)
		}
		m.pub.Restore()
	}
}

// Lead promotes or demotes the lessor: a new leader starts every TTL
// lease over, at full TTL; only a leader keeps deadlines.
func (m *machine) Lead(leader bool) {
	m.auto.reset()
	if leader {
		m.leases.promote(m.cfg.LeaseClock())
	} else {
		m.leases.demote()
	}
}

// Tick is the leader's expiry check (expireLeases) and auto-compaction.
func (m *machine) Tick(propose func(raft.Encode)) {
	m.expireLeases(propose)
	m.autoCompact(propose)
}

// complete records the outcome of a command for its proposer's caller,
// if the proposer is this node: raft completes no other node's.
func (m *machine) complete(c command, o raft.Outcome) {
	if c.proposer != m.id {
		return
	}
	o.Proposer, o.ReqID = c.proposer, c.reqID
	m.out = append(m.out, o)
}

func (m *machine) applyCommand(u *store.Update, e *pb.Entry) error {
	c, err := decodeCommand(e.GetData())
	if err != nil {
		// Every node skips it the same way; failing would wedge the group.
		m.log.Error("skipping malformed command", "index", e.GetIndex(), "err", err)
		return nil
	}
	switch c.op {
	case opTxn:
		return m.applyTxn(u, e.GetIndex(), c)
	case opLeaseGrant, opLeaseRevoke:
		return m.applyLeaseCommand(u, e.GetIndex(), c)
	case opCompact:
		return m.applyCompact(u, e.GetIndex(), c)
	case opDeleteRange:
		return m.applyDeleteRange(u, e.GetIndex(), c)
	case opPutBatch:
		return m.applyPutBatch(u, e.GetIndex(), c)
	}
	w, existed, err := m.applyWrite(u, c)
	if err == nil {
		err = m.leaseWrite(u, c.key, 0, c.op == opDelete) // a plain PUT detaches, as in etcd
	}
	if err != nil {
		return err
	}
	m.sc.applies = append(m.sc.applies, w)
	if c.proposer == m.id { // else its result would be boxed for nothing, on every member
		m.complete(c, raft.Outcome{Index: e.GetIndex(), Value: writeResult{rev: m.served(), existed: existed, prev: m.prev}})
	}
	return nil
}

// writeResult is a PUT's or DELETE's outcome: the revision its response
// carries, whether the key existed before, and (opPutPrev) its previous
// value and metadata.
type writeResult struct {
	rev     uint64
	existed bool
	prev    *KV
}

// applyWrite applies a PUT or DELETE command at m.next.
func (m *machine) applyWrite(u *store.Update, c command) (w Write, existed bool, err error) {
	if c.op == opDelete {
		existed, err = u.Delete(c.key, m.next)
		m.changed = existed
		return Write{Meta: revision.Meta{Mod: m.next}, Key: c.key, Deleted: true, absent: !existed}, existed, err
	}
	m.prev = nil
	prev, err := u.Meta(c.key)
	if err != nil {
		return Write{}, false, err
	}
	if c.op == opPutPrev && prev.Version > 0 && c.proposer == m.id {
		// Only the proposer answers with it.
		v, _, _, err := u.Get(c.key)
		if err != nil {
			return Write{}, false, err
		}
		m.prev = &KV{Key: c.key, Value: v, Meta: prev}
	}
	meta := prev.Next(m.next, 0)
	m.changed = true
	return Write{Meta: meta, Key: c.key, Value: c.value}, prev.Version > 0, u.Put(c.key, c.value, meta)
}

// publish reports the batch's writes to the Publisher in one call: in log
// order, one Write per key with the key's final state in the batch.
// Collapsing repeats keeps a cache rebuilt concurrently (see ForEach)
// from ever going backwards when these calls are replayed over it. A call
// whose collapsing moved a key's state past another key's write is marked
// Atomic, so that every state a lock-free reader can see mid-call is one
// some index had. rev is the store revision after the batch.
func (m *machine) publish(rev uint64) {
	sc := &m.sc
	defer func() {
		clear(sc.applies)
		sc.applies, sc.atomic = sc.applies[:0], false
	}()
	if len(sc.applies) == 0 {
		return
	}
	ops := sc.applies
	sc.skip = slices.Grow(sc.skip[:0], len(ops))[:len(ops)]
	clear(sc.skip)
	if len(ops) > 1 {
		sc.order = sc.order[:0]
		for i := range ops {
			sc.order = append(sc.order, i)
		}
		slices.SortStableFunc(sc.order, func(i, j int) int { return bytes.Compare(ops[i].Key, ops[j].Key) })
		for k := 0; k+1 < len(sc.order); k++ {
			if i, j := sc.order[k], sc.order[k+1]; bytes.Equal(ops[i].Key, ops[j].Key) {
				sc.skip[i] = true
				// The key's state now arrives at j's place: any other
				// key's write between i and j would be seen before the
				// write at i that preceded it in the log, a state no
				// index had (a reader of both keys, one after the other,
				// could see the later write and not the earlier one). So
				// the call goes out atomic then.
				if j != i+1 {
					sc.atomic = true
				}
			}
		}
	}
	sc.deliver = sc.deliver[:0]
	for i, op := range ops {
		if !sc.skip[i] {
			op.Atomic = sc.atomic
			sc.deliver = append(sc.deliver, op)
		}
	}
	m.pub.Apply(sc.deliver, rev)
	clear(sc.deliver)
}

// takeEvents keeps the batch's writes for Publisher.Events before publish
// collapses them.
func (m *machine) takeEvents() {
	sc := &m.sc
	sc.events = sc.events[:0]
	for _, w := range sc.applies {
		if !w.absent {
			sc.events = append(sc.events, w)
		}
	}
}

// publishEvents tells the Publisher the batch's writes, after its Apply
// call, if the store revision moved (or a snapshot was installed).
func (m *machine) publishEvents(rev uint64, installed bool) {
	sc := &m.sc
	if rev == sc.eventsAt && !installed {
		return
	}
	sc.eventsAt = rev
	if installed {
		m.pub.Events(nil, rev, true)
	} else {
		m.pub.Events(sc.events, rev, false)
	}
	clear(sc.events)
	sc.events = sc.events[:0]
}
