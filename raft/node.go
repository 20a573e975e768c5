package raft

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kvd-project/kvd/internal/ratelog"
	"github.com/kvd-project/kvd/internal/store"
)

// Node is one member of a raft group replicating a key/value state machine
// onto Pebble. All methods are safe for concurrent use.
type Node struct {
	cfg     Config
	id      uint64
	log     *slog.Logger
	store   *store.Store
	metrics *metrics
	lease   *lease      // the leader's read lease (lease.go)
	peers   peerNetwork // raft/peer
	// peerLog rate-limits the loop's log lines about peers.
	peerLog ratelog.Limiter

	// Work for the raft loop, which owns the raft state machine.
	propc   chan *proposal
	readc   chan *readRequest
	recvc   chan inbound
	reportc chan report
	// transferc hands TransferLeadership's requests to the loop.
	transferc chan *transferRequest

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	stopc  chan struct{} // closed by Close
	donec  chan struct{} // closed when the loop has exited
	// failure records a storage failure: the store's fault or the error
	// that stopped the loop (storage.go).
	failure *failure
	// removal stops the node once it learns it was removed (removal.go).
	removal removal

	// useMu keeps Acquire's holders off the store while Close closes it.
	useMu       sync.RWMutex
	storeClosed bool

	frz freezer // Freeze's state (freeze.go)

	nextReq atomic.Uint64
	confMu  sync.Mutex // one membership change at a time from this node

	statusMu sync.Mutex
	status   Status

	addrMu sync.RWMutex
	addrs  map[uint64]string
	// clientAddrs are the client addresses peers announced in the hellos
	// of their latest sessions ("": none, so the peer address); a peer
	// not in it has not opened one since this node started.
	clientAddrs map[uint64]string

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
	// Admission.
	LeaderReady bool
}

// Member is one node of the group as the applied configuration has it.
type Member struct {
	ID        uint64
	Addr      string
	IsLearner bool
}

// Open starts a node: it recovers the state in cfg.DataDir (or bootstraps
// a new group from cfg.InitialCluster, unless cfg.Join), and starts the raft loop.
// The state machine's calls may come as soon as Open returns.
func Open(cfg Config) (*Node, error) {
	n, lp, err := open(cfg, newPeers)
	if err != nil {
		return nil, err
	}
	go lp.run()
	return n, nil
}

// newNetwork makes a node's peer layer, of the cluster id cluster: newPeers
// (raft/peer), or a test's network.
type newNetwork func(n *Node, cluster uint64) (peerNetwork, error)

// open is Open without starting the loop: the caller runs lp.run, or
// drives the loop itself (harness_test.go), on the peer layer newNet
// makes.
func open(cfg Config, newNet newNetwork) (n *Node, lp *loop, err error) {
	if cfg.StateMachine == nil {
		return nil, nil, fmt.Errorf("%w: StateMachine is required", ErrConfig)
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if cfg.FS == nil { // with an injected FS, DataDir is that FS's
		if err := checkNotRestoring(cfg.DataDir); err != nil {
			return nil, nil, err
		}
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, nil, fmt.Errorf("raft: register metrics: %w", err)
	}
	fail := newFailure()
	st, err := store.Open(cfg.DataDir, store.Options{
		EntryCacheSize: cfg.EntryCacheSize, Logger: cfg.Logger, FS: cfg.FS,
		RaftLog: cfg.RaftLog, WALSegmentSize: cfg.Knobs.WALSegmentSize,
		OnFault: func(cause error) { fail.set(cause) },
	})
	if err != nil {
		m.unregister(cfg.Registerer)
		if errors.Is(err, store.ErrFault) {
			// The disk refused the open's writes (full, read-only, ...).
			return nil, nil, asStorageError(err)
		}
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	n = &Node{
		cfg:       cfg,
		id:        cfg.ID,
		log:       cfg.Logger.With("raft_id", cfg.ID),
		store:     st,
		metrics:   m,
		propc:     make(chan *proposal, 1024),
		readc:     make(chan *readRequest, 256),
		recvc:     make(chan inbound, 256),
		reportc:   make(chan report, 1024),
		transferc: make(chan *transferRequest),
		frz:       freezer{reqs: make(chan freezeRequest)},
		ctx:       ctx,
		cancel:    cancel,
		stopc:     make(chan struct{}),
		donec:     make(chan struct{}),
		failure:   fail,
		removal:   removal{stopc: make(chan struct{})},
	}
	n.nextReq.Store(rand.Uint64() >> 1)
	n.initAddrs()
	lp, err = newClusterLoop(n, newNet)
	if err != nil {
		cancel()
		st.Close()
		m.unregister(cfg.Registerer)
		return nil, nil, err
	}
	n.lease = newLease(cfg.OnLease, lp.term, cfg.clock())
	lp.publishStatus()
	return n, lp, nil
}

// Close stops the node: pending requests fail with ErrStopped, peer
// connections close, and the database is closed. It is idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stopc)
		n.cancel()
		<-n.donec
		if n.peers != nil {
			n.peers.Close()
		}
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
	if err := n.failure.get(); err != nil {
		return err
	}
	return ErrStopped
}

// Status returns the node's current view.
func (n *Node) Status() Status {
	n.statusMu.Lock()
	st := n.status
	n.statusMu.Unlock()
	if n.removal.removed() {
		// Stopped (removal.go): what waits for a leader's news (a watch,
		// /healthz) goes elsewhere.
		st.LeaderID, st.IsLeader, st.LeaderReady = 0, false, false
	}
	st.LeaseValid = st.IsLeader && n.lease.valid()
	return st
}

// Acquire returns the node's store, held open until release is called
// (Close waits for it): for reading the applied state outside the loop.
// Once the node is closed it fails with the error requests get then.
func (n *Node) Acquire() (st *store.Store, release func(), err error) {
	n.useMu.RLock()
	if n.storeClosed {
		n.useMu.RUnlock()
		return nil, nil, n.stoppedErr()
	}
	return n.store, n.useMu.RUnlock, nil
}

// Members returns the group's members as of the applied configuration, in
// id order.
func (n *Node) Members() []Member {
	ms := n.store.Members() // in memory: safe after Close too
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, Member{ID: m.ID, Addr: m.Addr, IsLearner: m.IsLearner})
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// PeerAddr returns the address the node knows for id ("" if none).
func (n *Node) PeerAddr(id uint64) string {
	n.addrMu.RLock()
	defer n.addrMu.RUnlock()
	return n.addrs[id]
}

// ClientAddr returns the address clients reach id at: the one it
// announced in the hello of its latest session to this node
// (KnownClientAddr), or its peer address if it has not announced one yet
// ("" if neither is known). A follower always knows its leader's: the
// leader dials it.
func (n *Node) ClientAddr(id uint64) string {
	if addr, ok := n.KnownClientAddr(id); ok {
		return addr
	}
	return n.PeerAddr(id)
}

// KnownClientAddr returns the client address id announced in the hello of
// its latest session to this node (its peer address, for a member that
// listens for clients and peers on one address), or this node's own
// (Config.ClientAddr, or Addr); ok is false for a member that has not
// opened a session to this node since it started.
func (n *Node) KnownClientAddr(id uint64) (addr string, ok bool) {
	if id == n.id {
		return cmp.Or(n.cfg.ClientAddr, n.cfg.Addr), true
	}
	n.addrMu.RLock()
	defer n.addrMu.RUnlock()
	if addr, ok = n.clientAddrs[id]; ok && addr == "" {
		addr = n.addrs[id]
	}
	return addr, ok
}

// learnClientAddr records the client address id announced in the hello
// of its latest session: "" for none, which means its peer address.
func (n *Node) learnClientAddr(id uint64, addr string) {
	if id == n.id {
		return
	}
	n.addrMu.Lock()
	defer n.addrMu.Unlock()
	if n.clientAddrs == nil {
		n.clientAddrs = map[uint64]string{}
	}
	n.clientAddrs[id] = addr
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
	addr := n.addrs[id]
	delete(n.addrs, id)
	delete(n.clientAddrs, id)
	n.addrMu.Unlock()
	n.peers.Remove(id, addr)
}

func (n *Node) notLeader(lead uint64) error {
	return &NotLeaderError{LeaderID: lead, LeaderAddr: n.ClientAddr(lead)}
}
