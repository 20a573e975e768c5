package raft

import (
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/raft/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// ServePeer serves an accepted connection whose first message is a peer
// hello (see IsPeerHello): it feeds the peer's messages to the raft loop
// until the connection fails or the node closes, then closes conn. Run it
// on its own goroutine; the node takes care of nothing else on conn.
func (n *Node) ServePeer(conn transport.Conn, first []byte) {
	defer conn.Close()
	h, err := parseHello(first)
	if err == nil && (h.cluster != n.cfg.ClusterID || h.from == 0 || h.from == n.id) {
		err = fmt.Errorf("raft: hello from node %d of cluster %d", h.from, h.cluster)
	}
	if err != nil {
		n.log.Warn("refusing peer connection", "remote", conn.RemoteAddr(), "err", err)
		return
	}
	if !n.track(conn) {
		return
	}
	defer n.untrack(conn)
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
}

func (r *peerReader) handle(frame []byte) error {
	if len(frame) == 0 {
		return fmt.Errorf("raft: empty frame")
	}
	switch frame[0] {
	case frameMessage:
		m := &pb.Message{}
		if err := proto.Unmarshal(frame[1:], m); err != nil {
			return fmt.Errorf("raft: bad message: %w", err)
		}
		return r.deliver(m)
	case frameSnapshotBegin:
		index, term, err := parseSnapshotBegin(frame)
		if err != nil {
			return err
		}
		r.discard()
		r.staged = r.n.store.NewStaged(index, term)
		return nil
	case frameSnapshotChunk:
		if r.staged == nil {
			return fmt.Errorf("raft: snapshot chunk outside a transfer")
		}
		return forEachChunkRecord(frame[1:], r.staged.Add)
	}
	return fmt.Errorf("raft: unknown frame type %q", frame[0])
}

// deliver passes m to the loop; a MsgSnap takes the staged data with it.
func (r *peerReader) deliver(m *pb.Message) error {
	in := inbound{msg: m}
	if m.GetType() == pb.MsgSnap {
		md := m.GetSnapshot().GetMetadata()
		st := r.staged
		r.staged = nil
		if st == nil || st.Index() != md.GetIndex() || st.Term() != md.GetTerm() {
			if st != nil {
				st.Discard()
			}
			r.n.log.Warn("snapshot message without its data; dropped", "peer", r.from, "index", md.GetIndex())
			return nil
		}
		if err := st.Finish(); err != nil {
			st.Discard()
			return err
		}
		in.staged = st
	}
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
		r.staged.Discard()
		r.staged = nil
	}
}
