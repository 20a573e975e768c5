package raft

import (
	"context"
	"fmt"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft/peer"
	"github.com/kvd-project/kvd/transport"
)

// peerNetwork is the peer layer as the node uses it: raft/peer implements it
// (peer.Set); a test may put another in its place.
type peerNetwork interface {
	// Send enqueues m without blocking; false means it was dropped.
	Send(m *pb.Message) bool
	// SendSnapshot starts transfer seq of cp ending with the MsgSnap m,
	// aborting the one to that peer in progress; false means it was
	// refused and cp is still the caller's. Its outcome comes back as a
	// report.
	SendSnapshot(m *pb.Message, cp *store.Checkpoint, seq uint64) bool
	// AbortTransfers aborts every snapshot transfer (a change of term or
	// leadership).
	AbortTransfers()
	// Known returns the members sent to or served.
	Known() []uint64
	// Remove forgets a member that left, closing its sessions; a removed
	// one is told so at addr (its farewell).
	Remove(id uint64, addr string)
	// FarewellDone waits until removed member id acknowledged its
	// farewell (true), or it gave up or ctx ended (false).
	FarewellDone(ctx context.Context, id uint64) bool
	// Serve serves an accepted peer connection (ServePeer).
	Serve(conn transport.Conn, first []byte)
	// ClusterID is the node's cluster id (0 while a joining node has not
	// learned it).
	ClusterID() uint64
	// Close stops every sender and session and waits for them.
	Close()
}

// The peer layer's bounds on what a peer may name, which the node's own
// state must respect too.
const (
	maxPeerIndex = peer.MaxIndex
	maxPeerTerm  = peer.MaxTerm
)

// snapshotFrameHeader is the framing a snapshot chunk adds (maxPeerMessage).
const snapshotFrameHeader = peer.SnapshotHeaderLen

func uvarintLen(v uint64) int { return peer.UvarintLen(v) }

// IsPeerHello reports whether the first message of a newly accepted
// connection comes from a raft peer; if so, hand the connection to
// (*Node).ServePeer.
func IsPeerHello(first []byte) bool { return peer.IsHello(first) }

// ServePeer serves an accepted connection whose first message is a peer
// hello (see IsPeerHello): it feeds the peer's messages to the raft loop
// until the connection fails or the node closes, then closes conn. Run it
// on its own goroutine; the node takes care of nothing else on conn. The
// peer layer vets the session and every message (raft/peer/filter.go).
func (n *Node) ServePeer(conn transport.Conn, first []byte) { n.peers.Serve(conn, first) }

// ClusterID is the id of the cluster this node belongs to, or 0 while a
// joining node has not yet been contacted by the cluster.
func (n *Node) ClusterID() uint64 { return n.peers.ClusterID() }

// newPeers returns the node's peer layer, of the cluster id cluster.
func newPeers(n *Node, cluster uint64) (peerNetwork, error) {
	cfg := n.cfg
	set, err := peer.New(n.ctx, peer.Config{
		ID: n.id, Addr: cfg.Addr, ClientAddr: cfg.ClientAddr, ClusterID: cluster,
		Transport: cfg.Transport, Store: n.store, Host: host{n}, Logger: n.log, Metrics: n.metrics.peerMetrics(),
		QueueSize: cfg.PeerQueueSize, TickInterval: cfg.TickInterval, ElectionTimeout: cfg.electionTimeout(),
		SnapshotChunkSize: cfg.SnapshotChunkSize, MaxSnapshotBytes: cfg.MaxSnapshotBytes,
	})
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return set, nil
}

// host is the node as the peer layer sees it.
type host struct{ n *Node }

func (h host) Deliver(m *pb.Message, staged *store.Staged) error {
	select {
	case h.n.recvc <- inbound{msg: m, staged: staged}:
		return nil
	case <-h.n.stopc:
	case <-h.n.donec: // stopped on a storage failure or a removal
	}
	if staged != nil {
		staged.Discard()
	}
	return ErrStopped
}

// ReportUnreachable passes the report to the loop if there is room;
// losing it only delays raft's reaction.
func (h host) ReportUnreachable(id uint64) {
	select {
	case h.n.reportc <- report{to: id, kind: reportUnreachable}:
	default:
	}
}

// ReportSnapshot passes a snapshot outcome, which raft must get (without
// one the follower stays paused), unless the node stops.
func (h host) ReportSnapshot(id, seq uint64, ok bool) {
	r := report{to: id, kind: reportSnapshotFailed, seq: seq}
	if ok {
		r.kind = reportSnapshotDone
	}
	select {
	case h.n.reportc <- r:
	case <-h.n.stopc:
	}
}

func (h host) IsMember(id uint64) bool                { return h.n.isMember(id) }
func (h host) PeerAddr(id uint64) string              { return h.n.PeerAddr(id) }
func (h host) LearnAddr(id uint64, addr string)       { h.n.learnAddr(id, addr) }
func (h host) LearnClientAddr(id uint64, addr string) { h.n.learnClientAddr(id, addr) }
func (h host) CheckConn(conn transport.Conn) error    { return h.n.checkMessageLimit(conn) }
func (h host) IsRemoved(id uint64) bool               { return h.n.store.Removed(id) }
func (h host) Removed(by uint64)                      { h.n.stopRemoved(by, false) }

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
		ErrConfig, limit, conn.RemoteAddr(), need, n.cfg.MaxSizePerMsg, limits.MaxValue, transport.ErrMessageTooLarge)
}

// dropped counts and logs (rate-limited) a peer message the loop dropped
// (filter_loop.go), as the peer layer does those it drops.
func (n *Node) dropped(why peer.DropReason, from uint64, err error) {
	n.metrics.dropped(why)
	if ok, held := n.peerLog.Allow("dropped:"+string(why), time.Now()); ok {
		n.log.Warn("dropping peer message", "reason", string(why), "peer", from,
			"err", err, "similar_drops_not_logged", held)
	}
}
