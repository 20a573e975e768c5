package raft

import (
	"errors"
	"fmt"
)

// Peer session admission. A connection becomes a peer session only if its
// hello names this node's cluster (see identity.go) and a sender that is a
// member (membership.go: isMember), other than this node. Everything else
// is refused: the connection is closed, the reason logged (rate-limited)
// and counted in kvd_raft_peer_refused_total. The sender's claimed id is
// what later messages of the session must carry (checkPeerMessage).

// refusal says why a peer session was refused; it is the reason label of
// kvd_raft_peer_refused_total.
type refusal string

const (
	refuseMalformed       refusal = "malformed"        // not a well-formed hello
	refuseClusterMismatch refusal = "cluster_mismatch" // another cluster, or none
	refuseSelf            refusal = "self"             // claims to be this node
	refuseNotMember       refusal = "not_member"       // the sender is not a member
	refuseMessageLimit    refusal = "message_limit"    // the connection cannot carry raft's messages
	refuseStorage         refusal = "storage_error"    // the learned cluster id could not be stored
	refuseNotPeer         refusal = "not_peer"         // the connection's credential is not a peer's
)

var refusalReasons = []refusal{refuseNotPeer, refuseMalformed, refuseClusterMismatch, refuseSelf, refuseNotMember,
	refuseMessageLimit, refuseStorage}

// ErrPeerRefused is what the errors logged for refused sessions wrap.
var ErrPeerRefused = errors.New("raft: peer refused")

// admitHello checks a session's hello: the cluster and the sender. A
// joining node that has no cluster id yet takes the one of the first hello
// from a member (learnCluster).
func (n *Node) admitHello(first []byte) (hello, refusal, error) {
	h, err := parseHello(first)
	if err != nil {
		return h, refuseMalformed, fmt.Errorf("%w: %w", ErrPeerRefused, err)
	}
	if h.from == n.id {
		return h, refuseSelf, fmt.Errorf("%w: hello claims to come from this node (%d)", ErrPeerRefused, h.from)
	}
	ours := n.peers.ident.get()
	switch {
	case h.cluster == ours && ours != 0:
		return h, "", nil
	case h.cluster == 0:
		return h, refuseClusterMismatch, fmt.Errorf("%w: hello from node %d names no cluster", ErrPeerRefused, h.from)
	case ours != 0:
		return h, refuseClusterMismatch, fmt.Errorf("%w: hello from node %d of cluster %016x; this node is of cluster %016x",
			ErrPeerRefused, h.from, h.cluster, ours)
	}
	// Joining, and no member has contacted this node yet.
	if !n.isMember(h.from) {
		return h, refuseNotMember, fmt.Errorf("%w: node %d, not among the members to join, cannot tell this node its cluster",
			ErrPeerRefused, h.from)
	}
	ok, err := n.learnCluster(h.cluster, h.from)
	switch {
	case err != nil:
		return h, refuseStorage, fmt.Errorf("%w: cannot record cluster id %016x: %w", ErrPeerRefused, h.cluster, err)
	case !ok:
		return h, refuseClusterMismatch, fmt.Errorf("%w: hello from node %d of cluster %016x; this node is of cluster %016x",
			ErrPeerRefused, h.from, h.cluster, n.peers.ident.get())
	}
	return h, "", nil
}
