package peer

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/ratelog"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// Set is a node's peer layer. It sends the loop's outgoing messages: one
// goroutine and one connection per peer, dialled lazily and redialled with
// backoff. The loop only ever enqueues (never blocks); a full queue drops
// the message. It also serves the peers' sessions (Serve).
//
// Each peer streams at most one snapshot transfer at a time: queueing a new
// MsgSnap for a peer aborts the transfer in progress (raft only tracks the
// latest), and so does a change of term or leadership (AbortTransfers); a
// new transfer starts sending only once the aborted one has stopped. Every
// aborted transfer is reported to raft as failed.
type Set struct {
	cfg     Config
	ctx     context.Context // ends when the node closes
	host    Host
	log     *slog.Logger
	metrics *Metrics

	mu     sync.Mutex
	peers  map[uint64]*peer
	closed bool
	wg     sync.WaitGroup // peer goroutines and snapshot transfers
	// epoch counts AbortTransfers calls; a snapshot queued in an earlier
	// epoch is not streamed.
	epoch atomic.Uint64

	ident identity        // this node's cluster id, for the hellos
	limit ratelog.Limiter // refusal and drop log lines
	// sessions are the served (inbound) peer connections by member, under
	// mu: removing a member closes its sessions.
	sessions map[uint64]map[transport.Conn]struct{}
	// farewells are the removed members told so, under mu (removal.go).
	farewells map[uint64]*farewellState
	// staging is the snapshot data all sessions hold staged, bounded by
	// twice Config.MaxSnapshotBytes (Reader.charge).
	staging atomic.Int64

	connMu      sync.Mutex
	conns       map[transport.Conn]struct{} // every served connection
	connsClosed bool
	serving     sync.WaitGroup // Serve calls
}

type peer struct {
	ps     *Set
	id     uint64
	q      chan outMsg
	ctx    context.Context
	cancel context.CancelFunc
	// latest is the seq of the newest snapshot queued for the peer; older
	// ones are not streamed.
	latest atomic.Uint64

	xmu  sync.Mutex
	xfer *transfer // the snapshot transfer in progress, if any

	// otherFormat is when the peer's hello last named another data format
	// (unix ns; 0: it did not, or a later hello named this node's): see
	// formatPause.
	otherFormat atomic.Int64
}

// transfer is one snapshot stream's handle.
type transfer struct {
	cancel context.CancelFunc
	done   chan struct{} // closed once the stream sends nothing more
}

// outMsg is a raft message; a MsgSnap carries the checkpoint to stream, the
// loop's sequence number for the transfer and the abort epoch it was queued
// in.
type outMsg struct {
	m     *pb.Message
	cp    *store.Checkpoint
	seq   uint64
	epoch uint64
}

// New returns the peer layer of a node; ctx ends when the node closes,
// which stops its senders and sessions. It starts nothing until used.
func New(ctx context.Context, cfg Config) (*Set, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Set{
		cfg: cfg, ctx: ctx, host: cfg.Host, log: cfg.Logger, metrics: cfg.Metrics,
		peers:     make(map[uint64]*peer),
		sessions:  make(map[uint64]map[transport.Conn]struct{}),
		farewells: make(map[uint64]*farewellState),
		conns:     make(map[transport.Conn]struct{}),
	}
	s.ident.id.Store(cfg.ClusterID)
	return s, nil
}

// ClusterID is the id of the cluster this node belongs to, or 0 while a
// joining node has not yet been contacted by the cluster.
func (ps *Set) ClusterID() uint64 { return ps.ident.get() }

// Staged is how many bytes of snapshot data all sessions hold staged (in
// transfers being received, or received and not yet installed or
// discarded).
func (ps *Set) Staged() int64 { return ps.staging.Load() }

// get returns id's sender, starting it if the address is known.
func (ps *Set) get(id uint64) *peer {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil
	}
	if p := ps.peers[id]; p != nil {
		return p
	}
	if ps.host.PeerAddr(id) == "" {
		return nil
	}
	ctx, cancel := context.WithCancel(ps.ctx)
	p := &peer{ps: ps, id: id, q: make(chan outMsg, ps.cfg.QueueSize), ctx: ctx, cancel: cancel}
	ps.peers[id] = p
	ps.wg.Add(1)
	go p.run()
	return p
}

// Send enqueues m; false means it was dropped.
func (ps *Set) Send(m *pb.Message) bool {
	p := ps.get(m.GetTo())
	return p != nil && p.enqueue(outMsg{m: m})
}

// SendSnapshot enqueues transfer seq of cp ending with m, aborting the
// transfer to that peer in progress, if any; false means it was refused
// and cp is still the caller's. Only the raft loop calls it.
func (ps *Set) SendSnapshot(m *pb.Message, cp *store.Checkpoint, seq uint64) bool {
	p := ps.get(m.GetTo())
	if p == nil {
		return false
	}
	p.latest.Store(seq)
	p.abortTransfer()
	return p.enqueue(outMsg{m: m, cp: cp, seq: seq, epoch: ps.epoch.Load()})
}

// AbortTransfers aborts every snapshot transfer in progress or queued: the
// loop calls it when the term or the leadership changes.
func (ps *Set) AbortTransfers() {
	ps.epoch.Add(1)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.peers {
		p.abortTransfer()
	}
}

func (p *peer) enqueue(om outMsg) bool {
	select {
	case p.q <- om:
		return true
	default:
		return false
	}
}

// current reports whether the snapshot om is still the one to stream.
func (p *peer) current(om outMsg) bool {
	return om.seq == p.latest.Load() && om.epoch == p.ps.epoch.Load()
}

// abortTransfer cancels the peer's transfer in progress, if any.
func (p *peer) abortTransfer() {
	p.xmu.Lock()
	if p.xfer != nil {
		p.xfer.cancel()
	}
	p.xmu.Unlock()
}

// startTransfer streams om's snapshot on conn from a goroutine of its own,
// after the previous transfer, which it aborts, has stopped.
func (p *peer) startTransfer(conn transport.Conn, om outMsg) {
	p.xmu.Lock()
	// Checked under xmu, which abortTransfer takes after bumping latest or
	// epoch: either this sees the bump, or the abort sees this transfer.
	if !p.current(om) {
		p.xmu.Unlock()
		p.failed(om)
		return
	}
	ctx, cancel := context.WithCancel(p.ctx)
	t := &transfer{cancel: cancel, done: make(chan struct{})}
	prev := p.xfer
	p.xfer = t
	p.xmu.Unlock()
	if prev != nil {
		prev.cancel()
	}
	p.ps.wg.Add(1)
	go p.streamSnapshot(ctx, t, prev, conn, om)
}

// endTransfer retires t once its stream sends nothing more.
func (p *peer) endTransfer(t *transfer) {
	t.cancel()
	p.xmu.Lock()
	if p.xfer == t {
		p.xfer = nil
	}
	p.xmu.Unlock()
	close(t.done)
}

// Remove stops the sender to a member that left and closes the sessions
// it had opened here: a removed node is no peer (Serve refuses it from
// now on; see addSession for the race with a session being accepted).
// If the member was removed (not merely absent from a snapshot's
// membership), it is told so at addr (removal.go).
func (ps *Set) Remove(id uint64, addr string) {
	defer func() {
		if ps.host.IsRemoved(id) {
			ps.startFarewell(id, addr)
		}
	}()
	ps.mu.Lock()
	p := ps.peers[id]
	delete(ps.peers, id)
	sessions := ps.sessions[id]
	delete(ps.sessions, id)
	ps.mu.Unlock()
	if p != nil {
		p.cancel()
	}
	for c := range sessions {
		c.Close()
	}
}

// Known returns the ids of the members this node sends to or serves a
// session of.
func (ps *Set) Known() []uint64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ids := make([]uint64, 0, len(ps.peers)+len(ps.sessions))
	for id := range ps.peers {
		ids = append(ids, id)
	}
	for id := range ps.sessions {
		if _, ok := ps.peers[id]; !ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// Sessions is how many sessions of member id this node serves.
func (ps *Set) Sessions(id uint64) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.sessions[id])
}

// addSession registers a served connection from member id. Serve
// registers a session before it checks membership, and the loop updates
// the membership before it calls Remove: so either the check sees the
// removal, or Remove sees (and closes) the session.
func (ps *Set) addSession(id uint64, c transport.Conn) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.sessions[id] == nil {
		ps.sessions[id] = make(map[transport.Conn]struct{})
	}
	ps.sessions[id][c] = struct{}{}
}

func (ps *Set) removeSession(id uint64, c transport.Conn) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.sessions[id], c)
	if len(ps.sessions[id]) == 0 {
		delete(ps.sessions, id)
	}
}

// Close closes every served connection, stops every sender and waits for
// them, their transfers and the sessions. Call it once the node's context
// has ended and the raft loop has stopped.
func (ps *Set) Close() {
	ps.connMu.Lock()
	ps.connsClosed = true
	for c := range ps.conns {
		c.Close()
	}
	ps.connMu.Unlock()
	ps.mu.Lock()
	ps.closed = true
	for _, p := range ps.peers {
		p.cancel()
	}
	ps.mu.Unlock()
	ps.wg.Wait()
	ps.serving.Wait()
}

func (p *peer) run() {
	defer p.ps.wg.Done()
	var conn transport.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
		p.drop()
	}()
	var backoff time.Duration
	var retryAt time.Time
	var buf []byte
	for {
		var om outMsg
		select {
		case <-p.ctx.Done():
			return
		case om = <-p.q:
		}
		if om.cp != nil && !p.current(om) {
			p.failed(om) // superseded, or of an earlier term
			continue
		}
		if conn == nil {
			if time.Now().Before(retryAt) || p.pausedForFormat() {
				p.failed(om)
				continue
			}
			c, err := p.dial()
			if err != nil {
				backoff = nextBackoff(backoff, p.ps.cfg)
				retryAt = time.Now().Add(backoff)
				p.ps.log.Debug("peer dial failed", "peer", p.id, "retry_in", backoff, "err", err)
				p.failed(om)
				continue
			}
			conn, backoff = c, 0
		}
		if om.cp != nil {
			p.startTransfer(conn, om)
			continue
		}
		var err error
		if buf, err = AppendMessage(buf[:0], om.m); err != nil || len(buf) > conn.MaxMessage() {
			p.ps.log.Error("raft message cannot be sent", "peer", p.id, "bytes", len(buf), "err", err)
			p.failed(om)
			continue
		}
		if err := conn.Send(p.ctx, buf); err != nil {
			p.ps.log.Debug("peer send failed; reconnecting", "peer", p.id, "err", err)
			conn.Close()
			conn = nil
			p.failed(om)
		}
	}
}

func nextBackoff(b time.Duration, cfg Config) time.Duration {
	limit := min(cfg.ElectionTimeout, 2*time.Second)
	if b == 0 {
		return min(cfg.TickInterval, limit)
	}
	return min(2*b, limit)
}

// dial connects to the peer and introduces this node.
func (p *peer) dial() (transport.Conn, error) {
	ps := p.ps
	ctx, cancel := context.WithTimeout(p.ctx, ps.cfg.ElectionTimeout)
	defer cancel()
	conn, err := ps.cfg.Transport.Dial(ctx, ps.host.PeerAddr(p.id))
	if err != nil {
		return nil, err
	}
	if err := ps.host.CheckConn(conn); err != nil {
		conn.Close()
		ps.log.Error("refusing peer connection", "peer", p.id, "remote", conn.RemoteAddr(), "err", err)
		return nil, err
	}
	// A joining node that has not learned its cluster id yet sends 0, which
	// every node refuses; it has nothing to say to the cluster before the
	// cluster has contacted it anyway.
	h := AppendHello(nil, Hello{From: ps.cfg.ID, Cluster: ps.ident.get(), Addr: ps.cfg.Addr, ClientAddr: ps.cfg.ClientAddr,
		Format: store.DataFormat})
	if err := conn.Send(ctx, h); err != nil {
		conn.Close()
		return nil, err
	}
	if err := conn.Send(ctx, appendDataFormat(nil, store.DataFormat)); err != nil {
		conn.Close()
		return nil, err
	}
	ps.wg.Add(1) // run's own count is held: the set is not closed yet
	go p.watchRefusal(conn)
	return conn, nil
}

// failed tells raft a message did not go out.
func (p *peer) failed(om outMsg) {
	if om.cp != nil {
		om.cp.Release()
		p.ps.host.ReportSnapshot(p.id, om.seq, false)
		return
	}
	p.ps.host.ReportUnreachable(p.id)
}

// drop releases what is still queued when the sender stops.
func (p *peer) drop() {
	for {
		select {
		case om := <-p.q:
			if om.cp != nil {
				om.cp.Release()
			}
		default:
			return
		}
	}
}
