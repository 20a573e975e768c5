package raft

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/ratelog"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// peerSet sends the loop's outgoing messages: one goroutine and one
// connection per peer, dialled lazily and redialled with backoff. The loop
// only ever enqueues (never blocks); a full queue drops the message.
//
// Each peer streams at most one snapshot transfer at a time: queueing a new
// MsgSnap for a peer aborts the transfer in progress (raft only tracks the
// latest), and so does a change of term or leadership (abortTransfers); a
// new transfer starts sending only once the aborted one has stopped. Every
// aborted transfer is reported to the loop as failed.
type peerSet struct {
	n      *Node
	mu     sync.Mutex
	peers  map[uint64]*peer
	closed bool
	wg     sync.WaitGroup // peer goroutines and snapshot transfers
	// epoch counts abortTransfers calls; a snapshot queued in an earlier
	// epoch is not streamed.
	epoch atomic.Uint64

	ident identity        // this node's cluster id, for the hellos
	limit ratelog.Limiter // refusal and drop log lines
	// sessions are the served (inbound) peer connections by member, under
	// mu: removing a member closes its sessions.
	sessions map[uint64]map[transport.Conn]struct{}
}

type peer struct {
	ps     *peerSet
	id     uint64
	q      chan outMsg
	ctx    context.Context
	cancel context.CancelFunc
	// latest is the seq of the newest snapshot queued for the peer; older
	// ones are not streamed.
	latest atomic.Uint64

	xmu  sync.Mutex
	xfer *transfer // the snapshot transfer in progress, if any
}

// transfer is one snapshot stream's handle.
type transfer struct {
	cancel context.CancelFunc
	done   chan struct{} // closed once the stream sends nothing more
}

// outMsg is a raft message; a MsgSnap carries the checkpoint to stream, the
// loop's sequence number for the transfer (see loop.snapPending) and the
// abort epoch it was queued in.
type outMsg struct {
	m     *pb.Message
	cp    *store.Checkpoint
	seq   uint64
	epoch uint64
}

func newPeerSet(n *Node) *peerSet {
	return &peerSet{n: n, peers: make(map[uint64]*peer), sessions: make(map[uint64]map[transport.Conn]struct{})}
}

// get returns id's sender, starting it if the address is known.
func (ps *peerSet) get(id uint64) *peer {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil
	}
	if p := ps.peers[id]; p != nil {
		return p
	}
	if ps.n.PeerAddr(id) == "" {
		return nil
	}
	ctx, cancel := context.WithCancel(ps.n.ctx)
	p := &peer{ps: ps, id: id, q: make(chan outMsg, ps.n.cfg.PeerQueueSize), ctx: ctx, cancel: cancel}
	ps.peers[id] = p
	ps.wg.Add(1)
	go p.run()
	return p
}

// send enqueues m; false means it was dropped.
func (ps *peerSet) send(m *pb.Message) bool {
	p := ps.get(m.GetTo())
	return p != nil && p.enqueue(outMsg{m: m})
}

// sendSnapshot enqueues transfer seq of cp ending with m, aborting the
// transfer to that peer in progress, if any; false means it was refused
// and cp is still the caller's. Only the raft loop calls it.
func (ps *peerSet) sendSnapshot(m *pb.Message, cp *store.Checkpoint, seq uint64) bool {
	p := ps.get(m.GetTo())
	if p == nil {
		return false
	}
	p.latest.Store(seq)
	p.abortTransfer()
	return p.enqueue(outMsg{m: m, cp: cp, seq: seq, epoch: ps.epoch.Load()})
}

// abortTransfers aborts every snapshot transfer in progress or queued: the
// loop calls it when the term or the leadership changes.
func (ps *peerSet) abortTransfers() {
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

// remove stops the sender to a member that left and closes the sessions
// it had opened here: a removed node is no peer (ServePeer refuses it from
// now on; see addSession for the race with a session being accepted).
func (ps *peerSet) remove(id uint64) {
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

// known returns the ids of the members this node sends to or serves a
// session of.
func (ps *peerSet) known() []uint64 {
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

// addSession registers a served connection from member id. ServePeer
// registers a session before it checks membership, and the loop updates
// the membership before it calls remove: so either the check sees the
// removal, or remove sees (and closes) the session.
func (ps *peerSet) addSession(id uint64, c transport.Conn) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.sessions[id] == nil {
		ps.sessions[id] = make(map[transport.Conn]struct{})
	}
	ps.sessions[id][c] = struct{}{}
}

func (ps *peerSet) removeSession(id uint64, c transport.Conn) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.sessions[id], c)
	if len(ps.sessions[id]) == 0 {
		delete(ps.sessions, id)
	}
}

// close stops every sender and waits for them and their transfers.
func (ps *peerSet) close() {
	ps.mu.Lock()
	ps.closed = true
	for _, p := range ps.peers {
		p.cancel()
	}
	ps.mu.Unlock()
	ps.wg.Wait()
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
			if time.Now().Before(retryAt) {
				p.failed(om)
				continue
			}
			c, err := p.dial()
			if err != nil {
				backoff = nextBackoff(backoff, p.ps.n.cfg)
				retryAt = time.Now().Add(backoff)
				p.ps.n.log.Debug("peer dial failed", "peer", p.id, "retry_in", backoff, "err", err)
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
		if buf, err = appendMessageFrame(buf[:0], om.m); err != nil || len(buf) > conn.MaxMessage() {
			p.ps.n.log.Error("raft message cannot be sent", "peer", p.id, "bytes", len(buf), "err", err)
			p.failed(om)
			continue
		}
		if err := conn.Send(p.ctx, buf); err != nil {
			p.ps.n.log.Debug("peer send failed; reconnecting", "peer", p.id, "err", err)
			conn.Close()
			conn = nil
			p.failed(om)
		}
	}
}

func nextBackoff(b time.Duration, cfg Config) time.Duration {
	limit := min(cfg.electionTimeout(), 2*time.Second)
	if b == 0 {
		return min(cfg.TickInterval, limit)
	}
	return min(2*b, limit)
}

func appendMessageFrame(dst []byte, m *pb.Message) ([]byte, error) {
	dst = append(dst, frameMessage)
	return proto.MarshalOptions{}.MarshalAppend(dst, m)
}

// dial connects to the peer and introduces this node.
func (p *peer) dial() (transport.Conn, error) {
	n := p.ps.n
	ctx, cancel := context.WithTimeout(p.ctx, n.cfg.electionTimeout())
	defer cancel()
	conn, err := n.cfg.Transport.Dial(ctx, n.PeerAddr(p.id))
	if err != nil {
		return nil, err
	}
	if err := n.checkMessageLimit(conn); err != nil {
		conn.Close()
		n.log.Error("refusing peer connection", "peer", p.id, "remote", conn.RemoteAddr(), "err", err)
		return nil, err
	}
	// A joining node that has not learned its cluster id yet sends 0, which
	// every node refuses; it has nothing to say to the cluster before the
	// cluster has contacted it anyway.
	h := appendHello(nil, hello{from: n.id, cluster: p.ps.ident.get(), addr: n.cfg.Addr})
	if err := conn.Send(ctx, h); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// checkMessageLimit refuses a peer connection that cannot carry the
// largest message raft may need to send on it: raft would resend such a
// message forever. The check runs when a connection is established (dialled
// or served), so a transport configured with too small a MaxMessage fails
// loudly at once.
func (n *Node) checkMessageLimit(conn transport.Conn) error {
	need, limit := n.cfg.maxPeerMessage(), conn.MaxMessage()
	if limit >= need {
		return nil
	}
	return fmt.Errorf("%w: the transport carries messages of at most %d bytes to %s, but raft needs %d "+
		"(MaxSizePerMsg %d, a %d-byte value with its key and framing): raise the transport's MaxMessage "+
		"or lower MaxSizePerMsg: %w",
		ErrConfig, limit, conn.RemoteAddr(), need, n.cfg.MaxSizePerMsg, limits.MaxValueLen, transport.ErrMessageTooLarge)
}

// failed tells raft a message did not go out.
func (p *peer) failed(om outMsg) {
	if om.cp != nil {
		om.cp.Release()
		p.ps.n.reportBlocking(report{to: p.id, kind: reportSnapshotFailed, seq: om.seq})
		return
	}
	p.ps.n.reportNow(report{to: p.id, kind: reportUnreachable})
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

// reportNow passes feedback to the loop if there is room; losing an
// unreachable report only delays raft's reaction.
func (n *Node) reportNow(r report) {
	select {
	case n.reportc <- r:
	default:
	}
}

// reportBlocking passes feedback raft must get (snapshot outcomes: without
// one the follower stays paused) unless the node stops.
func (n *Node) reportBlocking(r report) {
	select {
	case n.reportc <- r:
	case <-n.stopc:
	}
}
