package raft

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// Defaults for the zero fields of Config.
const (
	DefaultTickInterval           = 100 * time.Millisecond
	DefaultElectionTicks          = 10
	DefaultHeartbeatTicks         = 1
	DefaultLeaseDrift             = 0.1
	DefaultSnapshotCount          = 10000
	DefaultSnapshotCatchUpEntries = 5000
	DefaultSnapshotChunkSize      = 1 << 20
	DefaultMaxSnapshotBytes       = 16 << 30
	DefaultMaxSizePerMsg          = 512 << 10
	DefaultMaxInflightMsgs        = 256
	DefaultMaxUncommittedBytes    = 64 << 20
	DefaultMaxApplyBytes          = 8 << 20
	DefaultPeerQueueSize          = 1024
	DefaultEntryCacheSize         = 4096
)

// Config configures a Node. The zero value of every field but ID, DataDir,
// Transport and InitialCluster (or Addr, when joining) takes the documented
// default. Fields that kvd sets from a flag carry the flag's name
// (InitialCluster: --initial-cluster).
type Config struct {
	// ID is this node's raft id, never 0.
	ID uint64
	// InitialClusterToken names the cluster when it is created: its
	// cluster id is derived from the token and the initial member list
	// (InitialCluster, ids and addresses), so every initial member
	// computes the same id on its own, and clusters created with different
	// tokens or members never take each other's peers. The id is stored
	// with the node's data; a restart with a token or InitialCluster that
	// give another id is refused (ErrClusterMismatch). A joining node
	// ignores the token: it learns the id from the cluster. Use a token
	// unique to each cluster. Default DefaultClusterToken.
	InitialClusterToken string
	// InitialCluster maps id to address ("host:port" of the transport
	// listener) for the initial cluster, this node included. It bootstraps
	// a new cluster (every initial member must be given the same map) and
	// seeds the address book; once the node has state on disk, the
	// membership recorded there wins. A joining node lists the existing
	// members it may contact.
	InitialCluster map[uint64]string
	// Addr is the address peers reach this node at. Default
	// InitialCluster[ID]; required when joining.
	Addr string
	// ClientAddr is the address clients reach this node at, if it is not
	// Addr (the node listens for peers apart): the node announces it in
	// its peer hellos, and the others give it to clients as this node's
	// address when it leads (NotLeaderError.LeaderAddr, Node.ClientAddr).
	// Default Addr.
	ClientAddr string
	// Join starts the node without bootstrapping: it waits to be added by
	// the cluster (AddMember on the leader) and learns the log from it.
	Join bool
	// DataDir holds the node's Pebble database.
	DataDir string
	// RaftLog is where the node keeps its raft log (--raft-log):
	// store.RaftLogPebble ("pebble") keeps it in the state's Pebble
	// database, every Ready one synced batch; store.RaftLogWAL ("wal", the
	// default) keeps it in a dedicated log (internal/wal) in DataDir/wal,
	// every Ready one write and one fdatasync of that log, with the state
	// machine's writes going to Pebble unsynced (their durability comes
	// from the log, replayed at start from the applied index Pebble last
	// persisted; see internal/store/raftlog.go). A DataDir whose log is in
	// Pebble is converted when started with "wal"; going back is refused.
	RaftLog string
	// FS, if set, is the file system DataDir is on, instead of the
	// operating system's: for tests, which inject storage faults with a
	// wrapper (Pebble's vfs/errorfs). Default nil.
	FS vfs.FS
	// Transport carries peer traffic: the node dials peers through it and
	// the caller hands it accepted peer connections (ServePeer).
	Transport transport.Transport

	// StateMachine is what the node replicates (see StateMachine).
	// Required by Open (Validate checks the rest without it).
	StateMachine StateMachine
	// OnLease, if set, receives the read lease's expiry whenever it
	// changes: each time the leader extends it (about once a tick), and
	// with a zero expiry when it ends early (stepping down, a new term,
	// shutdown). A lease that simply runs out is not reported: it is over
	// at its expiry whatever anyone does, which is what lets a reader trust
	// it without trusting this process to be running (see the package
	// comment). Calls come from the raft loop, in order, and must be quick
	// and must not block (the server stores one word).
	OnLease func(term uint64, expiry time.Time)
	// OnRemoved, if set, is called once when the node learns it was
	// removed from the cluster (removal.go), after its raft loop has
	// stopped applying and before the removal is acknowledged to anyone:
	// it must stop every read this node serves (the server withdraws its
	// region and its connections). err is the *RemovedError that Failure
	// then returns.
	OnRemoved func(err error)
	// Registerer, if set, receives the node's metrics (kvd_raft_*).
	Registerer prometheus.Registerer
	// Logger receives the node's and raft's log lines. Default slog.Default().
	Logger *slog.Logger

	// TickInterval is raft's logical clock period. Default 100ms.
	TickInterval time.Duration
	// ElectionTicks is the election timeout in ticks. Default 10.
	ElectionTicks int
	// HeartbeatTicks is the heartbeat interval in ticks. Default 1.
	HeartbeatTicks int
	// LeaseDrift bounds how much faster any node's clock may run than the
	// leader's, as a fraction (0.1: 10%); the lease is shortened by it.
	// Default 0.1; must be in [0, 0.5].
	LeaseDrift float64

	// SnapshotCount is how many applied entries trigger a snapshot and log
	// compaction. Default 10000.
	SnapshotCount uint64
	// SnapshotCatchUpEntries is how many entries below a snapshot the log
	// keeps, so slightly lagging followers catch up without a snapshot.
	// Default 5000 (never more than SnapshotCount).
	SnapshotCatchUpEntries uint64
	// SnapshotChunkSize bounds one message of a snapshot transfer (a single
	// larger key/value pair travels alone). Default 1 MiB.
	SnapshotChunkSize int
	// MaxSnapshotBytes bounds the data of one snapshot transfer a peer
	// sends (the key, value and lease records of its frames, which are
	// staged on disk until the transfer ends): a transfer that goes past
	// it is abandoned, its staged data discarded, the session closed,
	// logged and counted (kvd_raft_peer_messages_dropped_total{reason=
	// "snapshot_too_large"}). All peer sessions together may stage at most
	// twice it (one transfer, and one a broken session abandoned but has
	// not yet closed), a finished transfer counted until it is installed
	// or discarded: past that the session whose frame went over is
	// treated alike. Without these bounds peer sessions could fill the
	// disk. It must exceed the largest state the cluster holds. Default
	// DefaultMaxSnapshotBytes (16 GiB); the server sets its own.
	MaxSnapshotBytes uint64

	// MaxSizePerMsg bounds the entries in one append message; keep it well
	// under the transport's MaxMessage (each peer connection must carry
	// about 1.5 times MaxSizePerMsg, and at least the largest command,
	// limits.MaxCommand, with its framing; a connection that cannot is
	// refused). Default 512 KiB.
	MaxSizePerMsg uint64
	// MaxInflightMsgs bounds unacknowledged append messages per follower.
	// Default 256.
	MaxInflightMsgs int
	// MaxUncommittedBytes bounds the leader's uncommitted log tail; beyond it
	// proposals fail with ErrProposalDropped. Default 64 MiB.
	MaxUncommittedBytes uint64
	// MaxApplyBytes bounds the committed entries applied in one batch.
	// Default 8 MiB.
	MaxApplyBytes uint64
	// PeerQueueSize is the per-peer queue of outgoing messages; when it is
	// full, messages are dropped (raft retransmits). Default 1024.
	PeerQueueSize int
	// EntryCacheSize is how many recent log entries stay in memory. Default
	// 4096; negative disables the cache.
	EntryCacheSize int

	// Knobs are for tests only; production leaves them zero.
	Knobs Knobs
}

// Knobs let tests drive a node. The zero value changes nothing.
type Knobs struct {
	// Clock, if set, is the node's clock for everything the raft loop
	// times by it: its ticks, the vote grace after a restart, and the
	// read lease's send times and expiry (which Status judges by it too).
	// A test drives the loop deterministically on a fake one (see
	// harness_test.go). Default time.Now.
	Clock func() time.Time
	// WALSegmentSize is the raft log's segment file size in the "wal"
	// mode (wal.DefaultSegmentSize if zero): tests make it small, as each
	// segment is zero-filled when made.
	WALSegmentSize int64
}

// clock is the node's clock (Knobs.Clock).
func (c Config) clock() func() time.Time {
	if c.Knobs.Clock != nil {
		return c.Knobs.Clock
	}
	return time.Now
}

func (c Config) withDefaults() Config {
	c.TickInterval = cmp.Or(c.TickInterval, DefaultTickInterval)
	c.ElectionTicks = cmp.Or(c.ElectionTicks, DefaultElectionTicks)
	c.HeartbeatTicks = cmp.Or(c.HeartbeatTicks, DefaultHeartbeatTicks)
	c.LeaseDrift = cmp.Or(c.LeaseDrift, DefaultLeaseDrift)
	c.SnapshotCount = cmp.Or(c.SnapshotCount, DefaultSnapshotCount)
	c.MaxSnapshotBytes = cmp.Or(c.MaxSnapshotBytes, DefaultMaxSnapshotBytes)
	c.SnapshotCatchUpEntries = cmp.Or(c.SnapshotCatchUpEntries, min(DefaultSnapshotCatchUpEntries, c.SnapshotCount))
	c.SnapshotChunkSize = cmp.Or(c.SnapshotChunkSize, DefaultSnapshotChunkSize)
	c.MaxSizePerMsg = cmp.Or(c.MaxSizePerMsg, DefaultMaxSizePerMsg)
	c.MaxInflightMsgs = cmp.Or(c.MaxInflightMsgs, DefaultMaxInflightMsgs)
	c.MaxUncommittedBytes = cmp.Or(c.MaxUncommittedBytes, DefaultMaxUncommittedBytes)
	c.MaxApplyBytes = cmp.Or(c.MaxApplyBytes, DefaultMaxApplyBytes)
	c.PeerQueueSize = cmp.Or(c.PeerQueueSize, DefaultPeerQueueSize)
	c.EntryCacheSize = cmp.Or(c.EntryCacheSize, DefaultEntryCacheSize)
	c.RaftLog = cmp.Or(c.RaftLog, store.DefaultRaftLog)
	c.Addr = cmp.Or(c.Addr, c.InitialCluster[c.ID])
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first invalid field, wrapping ErrConfig. Zero fields
// are checked as their defaults; c itself is not changed.
func (c Config) Validate() error {
	c = c.withDefaults()
	_, selfListed := c.InitialCluster[c.ID]
	switch {
	case c.ID == 0:
		return fmt.Errorf("%w: ID must not be 0", ErrConfig)
	case c.DataDir == "":
		return fmt.Errorf("%w: DataDir is required", ErrConfig)
	case c.Transport == nil:
		return fmt.Errorf("%w: Transport is required", ErrConfig)
	case !c.Join && !selfListed:
		return fmt.Errorf("%w: InitialCluster must include this node (%d) unless joining", ErrConfig, c.ID)
	case c.Addr == "":
		return fmt.Errorf("%w: Addr is required when joining", ErrConfig)
	case len(c.InitialClusterToken) > maxClusterToken:
		return fmt.Errorf("%w: InitialClusterToken of %d bytes (at most %d)", ErrConfig, len(c.InitialClusterToken), maxClusterToken)
	case c.TickInterval < time.Millisecond:
		return fmt.Errorf("%w: TickInterval %v below 1ms", ErrConfig, c.TickInterval)
	case c.HeartbeatTicks < 1 || c.ElectionTicks <= c.HeartbeatTicks:
		return fmt.Errorf("%w: need 1 <= HeartbeatTicks (%d) < ElectionTicks (%d)", ErrConfig, c.HeartbeatTicks, c.ElectionTicks)
	case !(c.LeaseDrift >= 0 && c.LeaseDrift <= 0.5): // NaN fails too
		return fmt.Errorf("%w: LeaseDrift %v not in [0, 0.5]", ErrConfig, c.LeaseDrift)
	case c.leaseDuration() <= 0:
		return fmt.Errorf("%w: ElectionTicks %d too small for a lease with drift %v", ErrConfig, c.ElectionTicks, c.LeaseDrift)
	case c.SnapshotCatchUpEntries > c.SnapshotCount:
		return fmt.Errorf("%w: SnapshotCatchUpEntries %d above SnapshotCount %d", ErrConfig, c.SnapshotCatchUpEntries, c.SnapshotCount)
	case c.SnapshotChunkSize < 0 || c.MaxInflightMsgs < 0 || c.PeerQueueSize < 0:
		return fmt.Errorf("%w: negative size", ErrConfig)
	case store.ValidRaftLog(c.RaftLog) != nil:
		return fmt.Errorf("%w: %w", ErrConfig, store.ValidRaftLog(c.RaftLog))
	case c.MaxSizePerMsg > transport.DefaultMaxMessage/2:
		// A sanity bound only: each connection's actual limit is checked
		// when it is established (checkMessageLimit).
		return fmt.Errorf("%w: MaxSizePerMsg %d must stay well under the transport's MaxMessage", ErrConfig, c.MaxSizePerMsg)
	}
	for id, addr := range c.InitialCluster {
		if id == 0 || addr == "" {
			return fmt.Errorf("%w: peer %d has address %q", ErrConfig, id, addr)
		}
	}
	return nil
}

// Framing allowances for maxPeerMessage.
const (
	// messageOverhead bounds a frame's tag and transfer id and a
	// raftpb.Message's fields other than its entries (a MsgSnap's snapshot
	// data, the member list, is far smaller than an append).
	messageOverhead = 1 << 10
	// entryOverhead bounds a raftpb.Entry's fields other than its data, with
	// its tag and length inside the message.
	entryOverhead = 64
)

// maxPeerMessage is the largest message the node may have to send a peer:
//   - an append message: raft fills it with entries up to MaxSizePerMsg as
//     it counts them (each entry's encoded size), to which the message adds
//     a tag and a length per entry, at most half again (an entry encodes in
//     at least 4 bytes: its index and term);
//   - an append of a single entry, which raft sends however large: the
//     largest command (limits.MaxCommand);
//   - a snapshot chunk, which carries at least one pair however large
//     (otherwise chunks are cut to the connection's limit, so
//     SnapshotChunkSize need not fit).
func (c Config) maxPeerMessage() int {
	appendMsg := max(int(c.MaxSizePerMsg)+int(c.MaxSizePerMsg)/2, limits.MaxCommand+entryOverhead)
	pair := uvarintLen(limits.MaxKey) + limits.MaxKey + uvarintLen(8+limits.MaxValue) + 8 + limits.MaxValue
	return max(appendMsg, snapshotFrameHeader+pair) + messageOverhead
}

// electionTimeout is the election timeout in wall-clock time.
func (c Config) electionTimeout() time.Duration {
	return time.Duration(c.ElectionTicks) * c.TickInterval
}

// leaseDuration is how long after the send time t of an acknowledged
// heartbeat the leader may consider its lease valid: an election timeout
// shrunk by the clock drift bound, less one tick for the granularity of the
// followers' tick counting. See the package comment.
func (c Config) leaseDuration() time.Duration {
	return time.Duration(float64(c.electionTimeout())*(1-c.LeaseDrift)) - c.TickInterval
}
