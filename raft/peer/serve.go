package peer

import (
	"errors"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// Serve serves an accepted connection whose first message is a peer hello
// (see IsHello): it feeds the peer's messages to the raft loop until the
// connection fails or the node closes, then closes conn. Run it on its own
// goroutine; the node takes care of nothing else on conn.
//
// The session is refused unless the hello comes from a member of this
// node's cluster, and every message is vetted before raft sees it (both in
// filter.go).
func (ps *Set) Serve(conn transport.Conn, first []byte) {
	defer conn.Close()
	// With TLS (or RDMA authentication) on, only a connection that proved a
	// peer credential may speak raft; a client certificate may not.
	if id := transport.IdentityOf(conn); !id.PeerAllowed() {
		ps.refuse(RefuseNotPeer, conn, fmt.Errorf("%w: connection authenticated as %q (role %v), not as a peer", ErrRefused, id.Name(), id.Role))
		return
	}
	h, why, err := ps.admitHello(first)
	switch {
	case err == nil:
		ps.noteFormat(h.From, true)
	case why == RefuseDataFormat && ps.host.IsMember(h.From):
		ps.noteFormat(h.From, false)
	}
	if err != nil {
		ps.refuse(why, conn, err)
		return
	}
	if err := ps.host.CheckConn(conn); err != nil {
		ps.metrics.Refused(RefuseMessageLimit)
		ps.log.Error("refusing peer connection", "peer", h.From, "remote", conn.RemoteAddr(), "err", err)
		return
	}
	if !ps.track(conn) {
		return
	}
	defer ps.untrack(conn)
	ps.addSession(h.From, conn)
	defer ps.removeSession(h.From, conn)
	if !ps.host.IsMember(h.From) { // after addSession: see there
		if ps.host.IsRemoved(h.From) {
			ps.refuseRemoved(conn, h.From)
			return
		}
		ps.refuse(RefuseNotMember, conn, fmt.Errorf("%w: node %d is not a member", ErrRefused, h.From))
		return
	}
	if h.Addr != "" {
		ps.host.LearnAddr(h.From, h.Addr)
	}
	ps.host.LearnClientAddr(h.From, h.ClientAddr)
	r := ps.NewReader(h.From)
	defer r.Close()
	var buf []byte
	for {
		msg, err := conn.Recv(ps.ctx, buf)
		if err != nil {
			return
		}
		buf = msg
		if err := r.Handle(msg); errors.Is(err, errRemovedNotice) {
			return
		} else if err != nil {
			ps.log.Warn("dropping peer connection", "peer", h.From, "err", err)
			return
		}
	}
}

func (ps *Set) track(c transport.Conn) bool {
	ps.connMu.Lock()
	defer ps.connMu.Unlock()
	if ps.connsClosed {
		return false
	}
	ps.conns[c] = struct{}{}
	ps.serving.Add(1)
	return true
}

func (ps *Set) untrack(c transport.Conn) {
	ps.connMu.Lock()
	delete(ps.conns, c)
	ps.connMu.Unlock()
	ps.serving.Done()
}

// Reader decodes the frames of one session of member from and hands what
// passes the filter to the Host. Serve runs one per session; a test may
// feed one frames directly.
type Reader struct {
	ps     *Set
	from   uint64
	staged *store.Staged // snapshot data being received
	xfer   TransferID    // the transfer staged belongs to
	bytes  uint64        // of staged's data frames so far (Config.MaxSnapshotBytes)
}

// NewReader returns a reader of frames from member from's session.
func (ps *Set) NewReader(from uint64) *Reader {
	return &Reader{ps: ps, from: from}
}

// Handle decodes one frame; an error means the session must end.
func (r *Reader) Handle(frame []byte) error {
	if len(frame) == 0 {
		return fmt.Errorf("raft: empty frame")
	}
	switch frame[0] {
	case FrameMessage:
		return r.handleMessage(frame)
	case FrameSnapshotBegin:
		id, err := parseSnapshotBegin(frame)
		if err != nil {
			return err
		}
		// The peer streams one transfer at a time: an unfinished earlier
		// one was abandoned.
		r.Close()
		r.staged, r.xfer, r.bytes = r.ps.cfg.Store.NewStaged(id.Index, id.Term), id, 0
		return nil
	case FrameSnapshotChunk, FrameSnapshotLease, FrameSnapshotRevision:
		return r.handleRecords(frame)
	case FrameSnapshotEnd:
		id, body, err := parseSnapshotFrame(frame)
		if err != nil {
			return err
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(body, m); err != nil {
			return fmt.Errorf("raft: bad snapshot message: %w", err)
		}
		return r.deliverSnapshot(id, m)
	case FrameRemoved:
		return r.handleRemoved(frame)
	case FrameDataFormat:
		return handleDataFormat(frame)
	}
	return fmt.Errorf("raft: unknown frame type %q", frame[0])
}

func (r *Reader) handleMessage(frame []byte) error {
	m := &pb.Message{}
	if err := proto.Unmarshal(frame[1:], m); err != nil {
		r.ps.metrics.Dropped(DropMalformed)
		return fmt.Errorf("raft: bad message: %w", err)
	}
	if m.GetType() == pb.MsgSnap {
		// Only an 'S' frame ties a MsgSnap to its data.
		r.ps.dropped(DropType, r.from, fmt.Errorf("%w: snapshot message outside a transfer (index %d)",
			ErrDropped, m.GetSnapshot().GetMetadata().GetIndex()))
		return nil
	}
	return r.deliverChecked(m, nil)
}

// handleRecords stages the records of a 'C' frame (keys), an 'L' frame
// (leases) or an 'H' frame (revision space), if it belongs to the
// transfer being staged. The store checks each record's shape.
func (r *Reader) handleRecords(frame []byte) error {
	id, body, err := parseSnapshotFrame(frame)
	if err != nil {
		return err
	}
	if !r.current(id) {
		r.reject(id, recordsWhat(frame[0]))
		return nil
	}
	if err := r.charge(body); err != nil {
		return err
	}
	switch frame[0] {
	case FrameSnapshotLease:
		return forEachChunkRecord(body, r.staged.AddLease)
	case FrameSnapshotRevision:
		return forEachChunkRecord(body, r.staged.AddRevision)
	}
	return forEachChunkRecord(body, r.staged.Add)
}

// recordsWhat names the records of a data frame of type tag.
func recordsWhat(tag byte) string {
	switch tag {
	case FrameSnapshotLease:
		return "lease data"
	case FrameSnapshotRevision:
		return "revision data"
	}
	return "snapshot data"
}

// charge counts a data frame's body against Config.MaxSnapshotBytes, and
// against twice it for the data all sessions hold staged; past either the
// transfer is abandoned and the session ends (the error).
func (r *Reader) charge(body []byte) error {
	n := int64(len(body))
	r.bytes += uint64(n)
	total := r.ps.staging.Add(n)
	limit := r.ps.cfg.MaxSnapshotBytes
	var err error
	switch {
	case r.bytes > limit:
		err = fmt.Errorf("raft: snapshot transfer %s past MaxSnapshotBytes (%d bytes)", r.xfer, limit)
	case total > 2*int64(min(limit, 1<<61)):
		err = fmt.Errorf("raft: snapshot transfer %s would take the data staged by all peer sessions to %d bytes, past twice MaxSnapshotBytes (%d bytes)",
			r.xfer, total, limit)
	}
	if err != nil {
		r.Close()
		r.ps.metrics.Dropped(DropSnapTooBig)
	}
	return err
}

// take hands over the staged transfer. Its bytes stay counted as staging
// until it is installed or discarded, wherever it waits meanwhile (the
// loop's queue, a Ready to come): otherwise a session could finish
// transfer after transfer while the loop is busy, each counted from zero.
func (r *Reader) take() *store.Staged {
	st := r.staged
	charged, staging := int64(r.bytes), &r.ps.staging
	st.OnDone(func() { staging.Add(-charged) })
	r.staged, r.bytes = nil, 0
	return st
}

// current reports whether id names the transfer being staged.
func (r *Reader) current(id TransferID) bool {
	return r.staged != nil && id == r.xfer
}

// reject counts a frame of transfer id ignored because that transfer is
// not the one being staged; the log of such drops is rate-limited.
func (r *Reader) reject(id TransferID, what string) {
	r.ps.dropped(DropSnapMismatch, r.from, fmt.Errorf("%s of transfer %s (staging %s)", what, id, r.xfer))
}

// deliverSnapshot passes the MsgSnap m ending transfer id to the loop with
// the transfer's staged data; the MsgSnap of any other transfer is dropped.
func (r *Reader) deliverSnapshot(id TransferID, m *pb.Message) error {
	if !r.current(id) {
		r.reject(id, "snapshot message")
		return nil
	}
	st := r.take()
	md := m.GetSnapshot().GetMetadata()
	if m.GetType() != pb.MsgSnap || md.GetIndex() != id.Index || md.GetTerm() != id.Term {
		st.Discard()
		r.ps.dropped(DropSnapMismatch, r.from, fmt.Errorf("transfer %s ended by a %s for snapshot %d/%d",
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
// passes the filter (checkPeerMessage), and drops it otherwise.
func (r *Reader) deliverChecked(m *pb.Message, st *store.Staged) error {
	if why, err := checkPeerMessage(m, r.from, r.ps.cfg.ID); err != nil {
		if st != nil {
			st.Discard()
		}
		r.ps.dropped(why, r.from, err)
		return nil
	}
	return r.ps.host.Deliver(m, st)
}

// Close discards the transfer being staged, if any.
func (r *Reader) Close() {
	if r.staged != nil {
		r.take().Discard()
	}
}
