package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kvd-project/kvd/raft/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// Node is one member of a raft group replicating a key/value state machine
// onto Pebble. All methods are safe for concurrent use.
type Node struct {
	cfg     Config
	id      uint64
	log     *slog.Logger
	store   *store.Store
	metrics *metrics
	lease   *lease  // the leader's read lease (lease.go)
	leases  *lessor // TTL leases (lessor.go)
	peers   *peerSet

	// Work for the raft loop, which owns the raft state machine.
	propc   chan *proposal
	readc   chan *readRequest
	recvc   chan inbound
	reportc chan report

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	stopc  chan struct{} // closed by Close
	donec  chan struct{} // closed when the loop has exited
	// failure records a storage failure: the store's fault or the error
	// that stopped the loop (storage.go).
	failure *failure

	// useMu keeps Get and ForEach off the store while Close closes it.
	useMu       sync.RWMutex
	storeClosed bool

	frz freezer // Freeze's state (freeze.go)

	nextReq atomic.Uint64
	// staging is the snapshot data all peer sessions hold staged, bounded
	// by twice Config.MaxSnapshotBytes (peerReader.charge).
	staging atomic.Int64
	confMu  sync.Mutex // one membership change at a time from this node

	statusMu sync.Mutex
	status   Status

	addrMu sync.RWMutex
	addrs  map[uint64]string

	connMu sync.Mutex
	conns  map[transport.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // ServePeer calls

	closeOnce sync.Once
	closeErr  error
}

// Status is a node's view of the group.
type Status struct {
	ID       uint64
	LeaderID uint64 // 0 if unknown
	Term     uint64
	Commit   uint64
	Applied  uint64
	// LeaseValid: this node is the leader and its read lease has not lapsed.
	LeaseValid bool
	IsLeader   bool
	// LeaderReady: this node is the leader and has applied every entry of
	// earlier terms (through its own term's first entry). Until then its
	// state lacks writes that will commit, and admission that sizes a write
	// against that state (the server's table reservations) must wait: see
	// WithAdmissionTerm.
	LeaderReady bool
}

// Member is one node of the group as the applied configuration has it.
type Member struct {
	ID        uint64
	Addr      string
	IsLearner bool
}

// Open starts a node: it recovers the state in cfg.DataDir (or bootstraps
// a new group from cfg.InitialCluster, unless cfg.Join), and starts the
// raft loop.
// Apply callbacks may come as soon as Open returns.
func Open(cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.FS == nil { // with an injected FS, DataDir is that FS's
		if err := checkNotRestoring(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("raft: register metrics: %w", err)
	}
	fail := newFailure()
	st, err := store.Open(cfg.DataDir, store.Options{
		EntryCacheSize: cfg.EntryCacheSize, Logger: cfg.Logger, FS: cfg.FS,
		OnFault: func(cause error) { fail.set(cause) },
	})
	if err != nil {
		m.unregister(cfg.Registerer)
		if errors.Is(err, store.ErrFault) {
			// The disk refused the open's writes (full, read-only, ...).
			return nil, asStorageError(err)
		}
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		cfg:     cfg,
		id:      cfg.ID,
		log:     cfg.Logger.With("raft_id", cfg.ID),
		store:   st,
		metrics: m,
		propc:   make(chan *proposal, 1024),
		readc:   make(chan *readRequest, 256),
		recvc:   make(chan inbound, 256),
		reportc: make(chan report, 1024),
		frz:     freezer{reqs: make(chan freezeRequest)},
		ctx:     ctx,
		cancel:  cancel,
		stopc:   make(chan struct{}),
		donec:   make(chan struct{}),
		failure: fail,
		conns:   make(map[transport.Conn]struct{}),
		leases:  newLessor(),
	}
	n.nextReq.Store(rand.Uint64() >> 1)
	n.initAddrs()
	n.peers = newPeerSet(n)
	lp, err := newClusterLoop(n)
	if err != nil {
		cancel()
		st.Close()
		m.unregister(cfg.Registerer)
		return nil, err
	}
	n.lease = newLease(cfg.OnLease, lp.term)
	lp.publishStatus()
	go lp.run()
	return n, nil
}

// Close stops the node: pending requests fail with ErrStopped, peer
// connections close, and the database is closed. It is idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stopc)
		n.cancel()
		<-n.donec
		n.connMu.Lock()
		n.closed = true
		for c := range n.conns {
			c.Close()
		}
		n.connMu.Unlock()
		n.peers.close()
		n.wg.Wait()
		n.discardInbound()
		n.metrics.unregister(n.cfg.Registerer)
		n.useMu.Lock()
		n.storeClosed = true
		n.closeErr = n.store.Close()
		n.useMu.Unlock()
	})
	return n.closeErr
}

// discardInbound drops the peer messages the loop did not take, deleting
// the staged data of snapshots among them: a peer reader racing the loop's
// exit may still have queued one. Close calls it once no reader is left
// and before the store closes.
func (n *Node) discardInbound() {
	for {
		select {
		case in := <-n.recvc:
			if in.staged != nil {
				in.staged.Discard()
			}
		default:
			return
		}
	}
}

// stoppedErr is the error for requests made after the loop exited: the
// storage failure that stopped it (a *StorageError), if any.
func (n *Node) stoppedErr() error {
	if se := n.failure.get(); se != nil {
		return se
	}
	return ErrStopped
}

// Status returns the node's current view.
func (n *Node) Status() Status {
	n.statusMu.Lock()
	st := n.status
	n.statusMu.Unlock()
	st.LeaseValid = st.IsLeader && n.lease.valid()
	return st
}

// Get returns key's applied value and version (the raft index of the write)
// from Pebble. It is not linearizable by itself: call ReadIndex first for
// that.
func (n *Node) Get(key []byte) (value []byte, version uint64, ok bool, err error) {
	n.useMu.RLock()
	defer n.useMu.RUnlock()
	if n.storeClosed {
		return nil, 0, false, n.stoppedErr()
	}
	return n.store.Get(key)
}

// ForEach calls fn for every applied key in key order, from a point-in-time
// view of the applied state (key and value are valid only during the call;
// an error from fn stops the walk and is returned). The view includes every
// write whose Apply callback returned before ForEach was called; Apply calls
// in progress or later may or may not be in it. Because Apply reports each
// key's final state per committed batch, replaying those calls over the view
// is harmless, so "ForEach, then every later Apply" rebuilds a cache
// exactly. It may be called from Applier.Restore.
func (n *Node) ForEach(fn func(key, value []byte, version uint64) error) error {
	n.useMu.RLock()
	defer n.useMu.RUnlock()
	if n.storeClosed {
		return n.stoppedErr()
	}
	return n.store.ForEach(fn)
}

// Members returns the group's members as of the applied configuration, in
// id order.
func (n *Node) Members() []Member {
	ms := n.store.Members() // in memory: safe after Close too
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, Member{ID: m.ID, Addr: m.Addr, IsLearner: m.IsLearner})
	}
	slices.SortFunc(out, func(a, b Member) int { return cmpUint64(a.ID, b.ID) })
	return out
}

// PeerAddr returns the address the node knows for id ("" if none).
func (n *Node) PeerAddr(id uint64) string {
	n.addrMu.RLock()
	defer n.addrMu.RUnlock()
	return n.addrs[id]
}

func (n *Node) initAddrs() {
	n.addrs = make(map[uint64]string, len(n.cfg.InitialCluster)+1)
	for id, addr := range n.cfg.InitialCluster {
		n.addrs[id] = addr
	}
	for _, m := range n.store.Members() {
		if m.Addr != "" {
			n.addrs[m.ID] = m.Addr
		}
	}
	n.addrs[n.id] = n.cfg.Addr
}

func (n *Node) setAddr(id uint64, addr string) {
	if addr == "" || id == n.id {
		return
	}
	n.addrMu.Lock()
	n.addrs[id] = addr
	n.addrMu.Unlock()
}

// learnAddr records an address a peer announced, unless one is known.
func (n *Node) learnAddr(id uint64, addr string) {
	n.addrMu.Lock()
	if _, ok := n.addrs[id]; !ok {
		n.addrs[id] = addr
	}
	n.addrMu.Unlock()
}

func (n *Node) forgetPeer(id uint64) {
	if id == n.id {
		return
	}
	n.addrMu.Lock()
	delete(n.addrs, id)
	n.addrMu.Unlock()
	n.peers.remove(id)
}

func (n *Node) notLeader(lead uint64) error {
	return &NotLeaderError{LeaderID: lead, LeaderAddr: n.PeerAddr(lead)}
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// GetMany calls fn for each key with its applied value and version, all
// from one point-in-time view of the applied state, and returns that view's
// applied index. Like Get, it is not linearizable by itself.
func (n *Node) GetMany(keys [][]byte, fn func(i int, value []byte, version uint64, found bool)) (applied uint64, err error) {
	n.useMu.RLock()
	defer n.useMu.RUnlock()
	if n.storeClosed {
		return 0, n.stoppedErr()
	}
	return n.store.GetMany(keys, fn)
}

// Scan calls fn for the applied keys k with start <= k < end (an empty
// end: no upper bound) in key order, from one point-in-time view of the
// applied state in Pebble, and returns that view's applied index. fn
// returns false to stop; key and value are valid only during the call.
// Like Get, it may run one batch ahead of the Applier: a caller that must
// not show state ahead of its cache waits until the returned index is
// applied there.
func (n *Node) Scan(start, end []byte, fn func(key, value []byte, version uint64) bool) (applied uint64, err error) {
	n.useMu.RLock()
	defer n.useMu.RUnlock()
	if n.storeClosed {
		return 0, n.stoppedErr()
	}
	return n.store.Scan(start, end, fn)
}
