package raft

import (
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// ServePeer serves an accepted connection whose first message is a peer
// hello (see IsPeerHello): it feeds the peer's messages to the raft loop
// until the connection fails or the node closes, then closes conn. Run it
// on its own goroutine; the node takes care of nothing else on conn.
//
// The session is refused unless the hello comes from a member of this
// node's cluster (filter_session.go), and every message is vetted before
// raft sees it (filter.go).
func (n *Node) ServePeer(conn transport.Conn, first []byte) {
	defer conn.Close()
	// With TLS (or RDMA authentication) on, only a connection that proved a
	// peer credential may speak raft; a client certificate may not.
	if id := transport.IdentityOf(conn); !id.PeerAllowed() {
		n.peers.refuse(refuseNotPeer, conn, fmt.Errorf("%w: connection authenticated as %q (role %v), not as a peer", ErrPeerRefused, id.Name(), id.Role))
		return
	}
	h, why, err := n.admitHello(first)
	if err != nil {
		n.peers.refuse(why, conn, err)
		return
	}
	if err := n.checkMessageLimit(conn); err != nil {
		n.metrics.refused(refuseMessageLimit)
		n.log.Error("refusing peer connection", "peer", h.from, "remote", conn.RemoteAddr(), "err", err)
		return
	}
	if !n.track(conn) {
		return
	}
	defer n.untrack(conn)
	n.peers.addSession(h.from, conn)
	defer n.peers.removeSession(h.from, conn)
	if !n.isMember(h.from) { // after addSession: see there
		n.peers.refuse(refuseNotMember, conn, fmt.Errorf("%w: node %d is not a member", ErrPeerRefused, h.from))
		return
	}
	if h.addr != "" {
		n.learnAddr(h.from, h.addr)
	}
	r := &peerReader{n: n, from: h.from}
	defer r.discard()
	var buf []byte
	for {
		msg, err := conn.Recv(n.ctx, buf)
		if err != nil {
			return
		}
		buf = msg
		if err := r.handle(msg); err != nil {
			n.log.Warn("dropping peer connection", "peer", h.from, "err", err)
			return
		}
	}
}

func (n *Node) track(c transport.Conn) bool {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	if n.closed {
		return false
	}
	n.conns[c] = struct{}{}
	n.wg.Add(1)
	return true
}

func (n *Node) untrack(c transport.Conn) {
	n.connMu.Lock()
	delete(n.conns, c)
	n.connMu.Unlock()
	n.wg.Done()
}

// peerReader decodes one peer connection's frames.
type peerReader struct {
	n      *Node
	from   uint64
	staged *store.Staged // snapshot data being received
	xfer   transferID    // the transfer staged belongs to
	bytes  uint64        // of staged's data frames so far (Config.MaxSnapshotBytes)
}

func (r *peerReader) handle(frame []byte) error {
	if len(frame) == 0 {
		return fmt.Errorf("raft: empty frame")
	}
	switch frame[0] {
	case frameMessage:
		m := &pb.Message{}
		if err := proto.Unmarshal(frame[1:], m); err != nil {
			r.n.metrics.dropped(dropMalformed)
			return fmt.Errorf("raft: bad message: %w", err)
		}
		if m.GetType() == pb.MsgSnap {
			// Only an 'S' frame ties a MsgSnap to its data.
			r.n.peers.dropped(dropType, r.from, fmt.Errorf("%w: snapshot message outside a transfer (index %d)",
				errDropped, m.GetSnapshot().GetMetadata().GetIndex()))
			return nil
		}
		return r.deliverChecked(m, nil)
	case frameSnapshotBegin:
		id, err := parseSnapshotBegin(frame)
		if err != nil {
			return err
		}
		// The peer streams one transfer at a time: an unfinished earlier
		// one was abandoned.
		r.discard()
		r.staged, r.xfer, r.bytes = r.n.store.NewStaged(id.index, id.term), id, 0
		return nil
	case frameSnapshotChunk:
		id, body, err := parseSnapshotFrame(frame)
		if err != nil {
			return err
		}
		if !r.current(id) {
			r.reject(id, "snapshot data")
			return nil
		}
		if err := r.charge(body); err != nil {
			return err
		}
		return forEachChunkRecord(body, r.staged.Add)
	case frameSnapshotLease:
		id, body, err := parseSnapshotFrame(frame)
		if err != nil {
			return err
		}
		if !r.current(id) {
			r.reject(id, "lease data")
			return nil
		}
		if err := r.charge(body); err != nil {
			return err
		}
		return forEachChunkRecord(body, r.staged.AddLease)
	case frameSnapshotEnd:
		id, body, err := parseSnapshotFrame(frame)
		if err != nil {
			return err
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(body, m); err != nil {
			return fmt.Errorf("raft: bad snapshot message: %w", err)
		}
		return r.deliverSnapshot(id, m)
	}
	return fmt.Errorf("raft: unknown frame type %q", frame[0])
}

// charge counts a data frame's body against Config.MaxSnapshotBytes, and
// against twice it for the data all sessions hold staged; past either the
// transfer is abandoned and the session ends (the error).
func (r *peerReader) charge(body []byte) error {
	n := int64(len(body))
	r.bytes += uint64(n)
	total := r.n.staging.Add(n)
	limit := r.n.cfg.MaxSnapshotBytes
	var err error
	switch {
	case r.bytes > limit:
		err = fmt.Errorf("raft: snapshot transfer %s past MaxSnapshotBytes (%d bytes)", r.xfer, limit)
	case total > 2*int64(min(limit, 1<<61)):
		err = fmt.Errorf("raft: snapshot transfer %s would take the data staged by all peer sessions to %d bytes, past twice MaxSnapshotBytes (%d bytes)",
			r.xfer, total, limit)
	}
	if err != nil {
		r.discard()
		r.n.metrics.dropped(dropSnapTooBig)
	}
	return err
}

// take hands over the staged transfer. Its bytes stay counted as staging
// until it is installed or discarded, wherever it waits meanwhile (the
// loop's queue, a Ready to come): otherwise a session could finish
// transfer after transfer while the loop is busy, each counted from zero.
func (r *peerReader) take() *store.Staged {
	st := r.staged
	charged, staging := int64(r.bytes), &r.n.staging
	st.OnDone(func() { staging.Add(-charged) })
	r.staged, r.bytes = nil, 0
	return st
}

// current reports whether id names the transfer being staged.
func (r *peerReader) current(id transferID) bool {
	return r.staged != nil && id == r.xfer
}

// reject counts a frame of transfer id ignored because that transfer is
// not the one being staged; the log of such drops is rate-limited.
func (r *peerReader) reject(id transferID, what string) {
	r.n.peers.dropped(dropSnapMismatch, r.from, fmt.Errorf("%s of transfer %s (staging %s)", what, id, r.xfer))
}

// deliverSnapshot passes the MsgSnap m ending transfer id to the loop with
// the transfer's staged data; the MsgSnap of any other transfer is dropped.
func (r *peerReader) deliverSnapshot(id transferID, m *pb.Message) error {
	if !r.current(id) {
		r.reject(id, "snapshot message")
		return nil
	}
	st := r.take()
	md := m.GetSnapshot().GetMetadata()
	if m.GetType() != pb.MsgSnap || md.GetIndex() != id.index || md.GetTerm() != id.term {
		st.Discard()
		r.n.peers.dropped(dropSnapMismatch, r.from, fmt.Errorf("transfer %s ended by a %s for snapshot %d/%d",
			id, m.GetType(), md.GetIndex(), md.GetTerm()))
		return nil
	}
	if err := st.Finish(); err != nil {
		st.Discard()
		return err
	}
	return r.deliverChecked(m, st)
}

// deliverChecked passes m (and a MsgSnap's staged data) to the loop if it
// passes the filter (filter.go), and drops it otherwise.
func (r *peerReader) deliverChecked(m *pb.Message, st *store.Staged) error {
	if why, err := checkPeerMessage(m, r.from, r.n.id); err != nil {
		if st != nil {
			st.Discard()
		}
		r.n.peers.dropped(why, r.from, err)
		return nil
	}
	return r.deliver(inbound{msg: m, staged: st})
}

// deliver passes in to the loop (a MsgSnap with its staged data).
func (r *peerReader) deliver(in inbound) error {
	select {
	case r.n.recvc <- in:
		return nil
	case <-r.n.stopc:
		if in.staged != nil {
			in.staged.Discard()
		}
		return ErrStopped
	}
}

func (r *peerReader) discard() {
	if r.staged != nil {
		r.take().Discard()
	}
}
