package raft

import (
	"context"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/raft/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// peerSet sends the loop's outgoing messages: one goroutine and one
// connection per peer, dialled lazily and redialled with backoff. The loop
// only ever enqueues (never blocks); a full queue drops the message.
type peerSet struct {
	n      *Node
	mu     sync.Mutex
	peers  map[uint64]*peer
	closed bool
	wg     sync.WaitGroup // peer goroutines and snapshot transfers
}

type peer struct {
	ps     *peerSet
	id     uint64
	q      chan outMsg
	ctx    context.Context
	cancel context.CancelFunc
}

// outMsg is a raft message; a MsgSnap carries the checkpoint to stream.
type outMsg struct {
	m  *pb.Message
	cp *store.Checkpoint
}

func newPeerSet(n *Node) *peerSet {
	return &peerSet{n: n, peers: make(map[uint64]*peer)}
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
	return ps.enqueue(outMsg{m: m})
}

// sendSnapshot enqueues a snapshot transfer of cp ending with m; false
// means it was refused and cp is still the caller's.
func (ps *peerSet) sendSnapshot(m *pb.Message, cp *store.Checkpoint) bool {
	return ps.enqueue(outMsg{m: m, cp: cp})
}

func (ps *peerSet) enqueue(om outMsg) bool {
	p := ps.get(om.m.GetTo())
	if p == nil {
		return false
	}
	select {
	case p.q <- om:
		return true
	default:
		return false
	}
}

func (ps *peerSet) remove(id uint64) {
	ps.mu.Lock()
	p := ps.peers[id]
	delete(ps.peers, id)
	ps.mu.Unlock()
	if p != nil {
		p.cancel()
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
			p.ps.wg.Add(1)
			go p.streamSnapshot(conn, om)
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
	h := appendHello(nil, hello{from: n.id, cluster: n.cfg.ClusterID, addr: n.cfg.Addr})
	if err := conn.Send(ctx, h); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// failed tells raft a message did not go out.
func (p *peer) failed(om outMsg) {
	if om.cp != nil {
		om.cp.Release()
		p.ps.n.reportBlocking(report{to: p.id, kind: reportSnapshotFailed})
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
