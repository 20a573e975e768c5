package peer

import (
	"errors"
	"fmt"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// The filter: what a peer may open a session with, and what it may send.
//
// # Sessions
//
// A connection becomes a peer session only if its hello names this node's
// cluster (see identity.go) and a sender that is a member (Host.IsMember),
// other than this node. Everything else is refused: the connection is
// closed, the reason logged (rate-limited) and counted in
// kvd_raft_peer_refused_total. The sender's claimed id is what later
// messages of the session must carry (checkPeerMessage).
//
// # Messages
//
// etcd raft trusts its input: it steps whatever it is
// given, and some fields it takes on faith make it panic when they are
// wrong (a heartbeat committing past the end of the log, appended entries
// whose indexes do not follow the append's, a snapshot with an impossible
// configuration). Network input must never take a node down, so every
// message from an accepted peer session passes two checks before raft sees
// it: checkPeerMessage here, on the session's goroutine (what the message
// says on its own), and the raft loop's admitState (raft/filter_loop.go),
// against the log (what it claims about this node's state). A message that
// fails either is dropped and counted in kvd_raft_peer_messages_dropped_total;
// the session stays up, since raft copes with lost messages.
//
// The message types a peer may send are those of replication, elections and
// ReadIndex, and nothing else:
//
//	MsgApp, MsgAppResp          log replication, leader <-> follower
//	MsgHeartbeat, MsgHeartbeatResp
//	                            leadership, commit index, and the quorum acks
//	                            that ReadIndex and the lease rest on
//	MsgVote, MsgVoteResp, MsgPreVote, MsgPreVoteResp
//	                            elections (pre-vote is on)
//	MsgReadIndex                a follower's ReadIndex, sent to the leader
//	MsgReadIndexResp            the leader's answer to it
//	MsgTimeoutNow               a leader transfer's start, and a MsgVote
//	                            whose context is raft's "CampaignTransfer":
//	                            the raft loop steps them only as the leader
//	                            authorized them, after giving up its read
//	                            lease (raft/transfer.go)
//	MsgSnap                     only as the end of a snapshot transfer (an
//	                            'S' frame, which carries its data)
//
// Everything else is dropped:
//
//	MsgProp                     proposals enter through the leader's own API
//	                            (proposal forwarding is disabled); a peer's
//	                            would write to the store with no client
//	MsgTransferLeader           a transfer starts on the leader, by its own
//	                            API (Node.TransferLeadership)
//	MsgHup, MsgBeat, MsgCheckQuorum
//	                            the loop's own tick triggers: a peer would
//	                            make this node campaign or step down at will
//	MsgUnreachable, MsgSnapStatus
//	                            the local peer senders' feedback to raft
//	MsgStorageAppend(Resp), MsgStorageApply(Resp), MsgForgetLeader
//	                            local-only messages (asynchronous storage
//	                            writes are not used)
//	anything unknown

// DropReason says why a message from an accepted peer was dropped; it is
// the reason label of kvd_raft_peer_messages_dropped_total.
type DropReason string

const (
	DropWrongSender DropReason = "wrong_sender"       // From is not the session's member
	DropWrongTo     DropReason = "wrong_recipient"    // To is not this node
	DropType        DropReason = "type_not_allowed"   // not a type peers may send
	DropMalformed   DropReason = "malformed"          // undecodable, or fields raft would choke on
	DropBeyondLog   DropReason = "beyond_log"         // refers to log entries this node does not have
	DropSnapTooBig  DropReason = "snapshot_too_large" // a transfer past Config.MaxSnapshotBytes (the session is closed)
	// A frame of a transfer that is not the one being staged, or a
	// transfer ended by a message for another snapshot.
	DropSnapMismatch DropReason = "snapshot_mismatch"
	// A leader transfer's message the leader did not authorize: a
	// MsgTimeoutNow not from the current leader, a transfer vote not
	// after a relinquished lease (raft/transfer.go).
	DropTransfer DropReason = "unauthorized_transfer"
)

var dropReasons = []DropReason{DropWrongSender, DropWrongTo, DropType, DropMalformed, DropBeyondLog, DropSnapTooBig,
	DropSnapMismatch, DropTransfer}

// peerTypes are the message types a peer may send (see above). MsgSnap is
// among them, but serve.go takes it only from a transfer's end frame.
var peerTypes = map[pb.MessageType]bool{
	pb.MsgApp:           true,
	pb.MsgAppResp:       true,
	pb.MsgHeartbeat:     true,
	pb.MsgHeartbeatResp: true,
	pb.MsgVote:          true,
	pb.MsgVoteResp:      true,
	pb.MsgPreVote:       true,
	pb.MsgPreVoteResp:   true,
	pb.MsgReadIndex:     true,
	pb.MsgReadIndexResp: true,
	pb.MsgSnap:          true,
	pb.MsgTimeoutNow:    true, // the raft loop checks the sender (raft/transfer.go)
}

// campaignTransfer is the context raft gives the votes of a leader
// transfer's campaign.
const campaignTransfer = "CampaignTransfer"

// ErrDropped is what the errors of dropped messages wrap (the filter's
// and the raft loop's).
var ErrDropped = errors.New("raft: peer message dropped")

// MaxIndex (twice backup.MaxIndex, a restore's limit) bounds every log
// index a peer may name (a message's index,
// commit and reject hint, its entries', a snapshot's). raft computes
// index+1 unchecked (restoring a snapshot at MaxUint64 makes its unstable
// log start at 0, and the next lookup panics); a log that grew by a
// million entries a second would take 146,000 years to reach this one.
const MaxIndex = 1 << 62

// MaxTerm bounds every term a peer may name (a message's term and log
// term; its entries' and snapshot's are checked against the message's).
// raft computes term+1 unchecked when it campaigns: a node that adopted a
// forged term of 2^64-1 (from one heartbeat, then stored in its hard
// state) would wrap to term 0 at its next election and panic, again after
// every restart, and its answers would carry the term to the leader.
// Terms grow by one per election.
const MaxTerm = 1 << 62

// checkPeerMessage vets m, received on the session of member from by node
// self, on its own: addressing, type, and the fields raft relies on. It
// returns the reason to drop m, or "" to pass it on.
func checkPeerMessage(m *pb.Message, from, self uint64) (DropReason, error) {
	t := m.GetType()
	switch {
	case !peerTypes[t]:
		return DropType, fmt.Errorf("%w: type %s may not come from a peer", ErrDropped, t)
	case m.GetFrom() != from:
		return DropWrongSender, fmt.Errorf("%w: %s from %d on the session of node %d", ErrDropped, t, m.GetFrom(), from)
	case m.GetTo() != self:
		return DropWrongTo, fmt.Errorf("%w: %s to %d", ErrDropped, t, m.GetTo())
	}
	if err := checkFields(m); err != nil {
		return DropMalformed, fmt.Errorf("%w: %s: %w", ErrDropped, t, err)
	}
	return "", nil
}

// checkFields checks what raft takes on faith in a message of an allowed
// type.
func checkFields(m *pb.Message) error {
	t := m.GetType()
	// raft treats a message without a term as a local one and skips every
	// term check; only a forwarded MsgReadIndex is sent without one, and a
	// term on it would make the leader adopt that term.
	if (t == pb.MsgReadIndex) != (m.GetTerm() == 0) {
		return fmt.Errorf("term %d", m.GetTerm())
	}
	if m.GetTerm() > MaxTerm || m.GetLogTerm() > MaxTerm {
		return fmt.Errorf("term %d or log term %d beyond %d", m.GetTerm(), m.GetLogTerm(), uint64(MaxTerm))
	}
	if m.GetIndex() > MaxIndex || m.GetCommit() > MaxIndex || m.GetRejectHint() > MaxIndex {
		return fmt.Errorf("index %d, commit %d or hint %d beyond %d", m.GetIndex(), m.GetCommit(), m.GetRejectHint(), uint64(MaxIndex))
	}
	switch t {
	case pb.MsgApp:
		return checkAppend(m)
	case pb.MsgSnap:
		return checkSnapshot(m)
	case pb.MsgVote, pb.MsgPreVote:
		// raft grants a vote whose context names a leader transfer even
		// inside the leader's lease: the raft loop lets one through only
		// after the leader gave its lease up (raft/transfer.go). Pre-votes
		// of a transfer are never sent.
		if c := m.GetContext(); len(c) != 0 && (t != pb.MsgVote || string(c) != campaignTransfer) {
			return fmt.Errorf("vote request with context %q", c)
		}
	case pb.MsgReadIndex, pb.MsgReadIndexResp:
		// The request context travels as the single entry's data; raft
		// indexes Entries[0].
		if len(m.GetEntries()) != 1 {
			return fmt.Errorf("%d entries", len(m.GetEntries()))
		}
	case pb.MsgAppResp:
		if m.GetReject() && m.GetRejectHint() > m.GetIndex() {
			return fmt.Errorf("reject hint %d above index %d", m.GetRejectHint(), m.GetIndex())
		}
	}
	return nil
}

// checkAppend checks a MsgApp's entries form the log slice it claims: raft
// does not, and entries out of place can make it see a conflict at or below
// its commit index, which it panics on. Entries must also be of a kind this
// cluster writes and decode, or applying them would stop the node.
func checkAppend(m *pb.Message) error {
	ents := m.GetEntries()
	prevIndex, prevTerm, term := m.GetIndex(), m.GetLogTerm(), m.GetTerm()
	if uint64(len(ents)) > MaxIndex-prevIndex { // checkFields: prevIndex <= MaxIndex
		return fmt.Errorf("entries past index %d", uint64(MaxIndex))
	}
	if prevTerm > term {
		return fmt.Errorf("previous entry's term %d above the message's %d", prevTerm, term)
	}
	last := prevTerm
	for i, e := range ents {
		switch {
		case e.GetIndex() != prevIndex+1+uint64(i):
			return fmt.Errorf("entry %d has index %d after %d", i, e.GetIndex(), prevIndex)
		case e.GetTerm() < last || e.GetTerm() > term:
			return fmt.Errorf("entry %d has term %d (previous %d, message %d)", e.GetIndex(), e.GetTerm(), last, term)
		}
		last = e.GetTerm()
		if err := checkEntry(e); err != nil {
			return fmt.Errorf("entry %d: %w", e.GetIndex(), err)
		}
	}
	return nil
}

// checkEntry accepts the entries kvd writes: commands (or empty entries)
// and single-node configuration changes. Commands are not decoded here:
// every node skips a malformed one alike when applying it. kvd never
// proposes ConfChangeV2 or joint configurations.
func checkEntry(e *pb.Entry) error {
	switch e.GetType() {
	case pb.EntryNormal:
		return nil
	case pb.EntryConfChange:
		cc := &pb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return fmt.Errorf("conf change: %w", err)
		}
		switch cc.GetType() {
		case pb.ConfChangeAddNode, pb.ConfChangeRemoveNode, pb.ConfChangeUpdateNode, pb.ConfChangeAddLearnerNode:
		default:
			return fmt.Errorf("conf change of type %d", cc.GetType())
		}
		if cc.GetNodeId() == 0 {
			return fmt.Errorf("conf change for node 0")
		}
		return nil
	}
	return fmt.Errorf("entry type %d", e.GetType())
}

// checkSnapshot checks a MsgSnap's snapshot is one raft can restore (it
// panics on a configuration it cannot rebuild) and the store can install
// (a member list it cannot decode would stop the raft loop).
func checkSnapshot(m *pb.Message) error {
	md := m.GetSnapshot().GetMetadata()
	switch {
	case md.GetIndex() == 0 || md.GetTerm() == 0 || md.GetIndex() > MaxIndex:
		return fmt.Errorf("snapshot at %d/%d", md.GetIndex(), md.GetTerm())
	case md.GetTerm() > m.GetTerm():
		return fmt.Errorf("snapshot term %d above the message's %d", md.GetTerm(), m.GetTerm())
	}
	if err := checkConfState(md.GetConfState()); err != nil {
		return err
	}
	if _, err := store.DecodeMembers(m.GetSnapshot().GetData()); err != nil {
		return err
	}
	return nil
}

// checkConfState accepts the configurations kvd makes: simple (never
// joint), at least one voter, ids non-zero and listed once.
func checkConfState(cs *pb.ConfState) error {
	if len(cs.GetVotersOutgoing()) != 0 || len(cs.GetLearnersNext()) != 0 || cs.GetAutoLeave() {
		return fmt.Errorf("joint configuration %v", cs)
	}
	if len(cs.GetVoters()) == 0 {
		return fmt.Errorf("configuration without voters")
	}
	seen := make(map[uint64]bool, len(cs.GetVoters())+len(cs.GetLearners()))
	for _, ids := range [][]uint64{cs.GetVoters(), cs.GetLearners()} {
		for _, id := range ids {
			if id == 0 || seen[id] {
				return fmt.Errorf("configuration lists node %d twice, or node 0", id)
			}
			seen[id] = true
		}
	}
	return nil
}

// Refusal says why a peer session was refused; it is the reason label of
// kvd_raft_peer_refused_total.
type Refusal string

const (
	RefuseMalformed       Refusal = "malformed"        // not a well-formed hello
	RefuseClusterMismatch Refusal = "cluster_mismatch" // another cluster, or none
	RefuseSelf            Refusal = "self"             // claims to be this node
	RefuseNotMember       Refusal = "not_member"       // the sender is not a member
	RefuseMessageLimit    Refusal = "message_limit"    // the connection cannot carry raft's messages
	RefuseStorage         Refusal = "storage_error"    // the learned cluster id could not be stored
	RefuseNotPeer         Refusal = "not_peer"         // the connection's credential is not a peer's
	RefuseRemoved         Refusal = "removed"          // the sender was a member and was removed (told so: removal.go)
	RefuseDataFormat      Refusal = "data_format"      // the sender runs another data format (another kvd version)
)

var refusalReasons = []Refusal{RefuseNotPeer, RefuseMalformed, RefuseClusterMismatch, RefuseSelf, RefuseNotMember,
	RefuseMessageLimit, RefuseStorage, RefuseRemoved, RefuseDataFormat}

// ErrRefused is what the errors logged for refused sessions wrap.
var ErrRefused = errors.New("raft: peer refused")

// admitHello checks a session's hello: the cluster, the data format and the
// sender. A joining node that has no cluster id yet takes the one of the
// first hello from a member (learnCluster).
func (ps *Set) admitHello(first []byte) (Hello, Refusal, error) {
	h, err := parseHello(first)
	if err != nil {
		return h, RefuseMalformed, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if h.From == ps.cfg.ID {
		return h, RefuseSelf, fmt.Errorf("%w: hello claims to come from this node (%d)", ErrRefused, h.From)
	}
	ours := ps.ident.get()
	switch {
	case h.Cluster == 0:
		return h, RefuseClusterMismatch, fmt.Errorf("%w: hello from node %d names no cluster", ErrRefused, h.From)
	case ours != 0 && h.Cluster != ours:
		return h, RefuseClusterMismatch, fmt.Errorf("%w: hello from node %d of cluster %016x; this node is of cluster %016x",
			ErrRefused, h.From, h.Cluster, ours)
	}
	if err := checkDataFormat(h); err != nil {
		return h, RefuseDataFormat, err
	}
	if ours != 0 {
		return h, "", nil
	}
	// Joining, and no member has contacted this node yet.
	if !ps.host.IsMember(h.From) {
		return h, RefuseNotMember, fmt.Errorf("%w: node %d, not among the members to join, cannot tell this node its cluster",
			ErrRefused, h.From)
	}
	ok, err := ps.learnCluster(h.Cluster, h.From)
	switch {
	case err != nil:
		return h, RefuseStorage, fmt.Errorf("%w: cannot record cluster id %016x: %w", ErrRefused, h.Cluster, err)
	case !ok:
		return h, RefuseClusterMismatch, fmt.Errorf("%w: hello from node %d of cluster %016x; this node is of cluster %016x",
			ErrRefused, h.From, h.Cluster, ps.ident.get())
	}
	return h, "", nil
}

// checkDataFormat refuses a peer of another data format, before anything
// else is learned from it (a joining node's cluster id included): members
// of two formats would disagree on what entries mean. The way forward it
// names depends on the older format: from format 1 a backup (nothing is
// migrated in place), from later ones the newer kvd, which migrates a data
// directory at start (store.DataFormatRevisions).
func checkDataFormat(h Hello) error {
	theirs := h.DataFormat()
	if theirs == store.DataFormat {
		return nil
	}
	which := "an older"
	if theirs > store.DataFormat {
		which = "a newer"
	}
	way := "every member of a cluster must run one format: stop every member, save a backup with the older kvd (kvctl snapshot save), " +
		"start every member of the newer kvd from it (kvd --restore), see docs/upgrading.md"
	if min(theirs, store.DataFormat) >= store.DataFormatRevisions {
		way = "every member of a cluster must run one format: upgrade each member to the newer kvd, which migrates its data directory at start; " +
			"members of the two formats do not talk meanwhile, see docs/upgrading.md"
	}
	return fmt.Errorf("%w: node %d runs data format %d (%s kvd); this node runs data format %d: %s",
		ErrRefused, h.From, theirs, which, store.DataFormat, way)
}

// refuse counts and logs a refused peer session, at most one line per
// reason per ratelog.DefaultEvery: a misconfigured or hostile peer retries
// without end, and the log must not become its amplifier.
func (ps *Set) refuse(why Refusal, conn transport.Conn, err error) {
	ps.metrics.Refused(why)
	if ok, held := ps.limit.Allow("refused:"+string(why), time.Now()); ok {
		ps.log.Warn("refusing peer connection", "reason", string(why), "remote", conn.RemoteAddr(),
			"err", err, "similar_refusals_not_logged", held)
	}
}

// dropped counts and logs (rate-limited) a dropped peer message.
func (ps *Set) dropped(why DropReason, peer uint64, err error) {
	ps.metrics.Dropped(why)
	if ok, held := ps.limit.Allow("dropped:"+string(why), time.Now()); ok {
		ps.log.Warn("dropping peer message", "reason", string(why), "peer", peer,
			"err", err, "similar_drops_not_logged", held)
	}
}
