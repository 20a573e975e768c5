package peer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// Defaults of Config's optional fields.
const (
	DefaultQueueSize            = 1024
	DefaultSnapshotChunkSize    = 1 << 20
	DefaultMaxSnapshotBytes     = 16 << 30
	DefaultTickInterval         = 100 * time.Millisecond
	DefaultElectionTimeout      = time.Second
	DefaultSnapshotFrameTimeout = time.Minute
)

// Host is the raft node the peer layer serves: where received messages go,
// where the outcome of sends is reported, and what it knows of the
// membership.
type Host interface {
	// Deliver hands a vetted message to the raft loop, a MsgSnap with its
	// staged data. It fails only once the node stops, and then discards
	// staged.
	Deliver(m *pb.Message, staged *store.Staged) error
	// ReportUnreachable tells raft a message to id did not go out. It must
	// not block: losing the report only delays raft's reaction.
	ReportUnreachable(id uint64)
	// ReportSnapshot tells raft the outcome of snapshot transfer seq to id.
	// raft must get it (without it the follower stays paused), so it may
	// block, until the node stops.
	ReportSnapshot(id, seq uint64, ok bool)
	// IsMember reports whether id is a member of the cluster.
	IsMember(id uint64) bool
	// IsRemoved reports whether id was a member and was removed.
	IsRemoved(id uint64) bool
	// Removed tells the node that member by told it it was removed from
	// the cluster (removal.go). It returns once the node serves nothing
	// more: the caller then acknowledges the removal to by.
	Removed(by uint64)
	// PeerAddr is the address known for id ("" if none).
	PeerAddr(id uint64) string
	// LearnAddr records the address a peer announced, unless one is known.
	LearnAddr(id uint64, addr string)
	// LearnClientAddr records the client address a peer announced in the
	// hello of its latest session ("": none, so its peer address).
	LearnClientAddr(id uint64, addr string)
	// CheckConn refuses a connection that cannot carry the largest message
	// raft may send on it; it runs on every connection established, dialled
	// or served.
	CheckConn(conn transport.Conn) error
}

// Dialer connects to a peer's address: a transport.Transport does.
type Dialer interface {
	Dial(ctx context.Context, addr string) (transport.Conn, error)
}

// Config is the peer layer's configuration. ID, Transport, Store and Host
// are required.
type Config struct {
	ID   uint64 // this node's member id
	Addr string // this node's address, announced in its hellos
	// ClientAddr is the address this node's clients reach it at, announced
	// in its hellos when it differs from Addr ("": the same).
	ClientAddr string
	// ClusterID is the node's cluster id (SettleClusterID), or 0 on a
	// joining node that learns it from the first member's session.
	ClusterID uint64
	Transport Dialer // dials the peers
	// Store stages received snapshot data and records a learned cluster id.
	Store   *store.Store
	Host    Host
	Logger  *slog.Logger
	Metrics *Metrics // nil: a fresh, unregistered set

	// QueueSize is the per-peer queue of outgoing messages; a message
	// finding it full is dropped and the peer reported unreachable.
	QueueSize int
	// TickInterval is the first redial backoff; ElectionTimeout bounds a
	// dial and (with 2s) the backoff.
	TickInterval    time.Duration
	ElectionTimeout time.Duration
	// SnapshotChunkSize bounds one frame of a snapshot transfer sent;
	// MaxSnapshotBytes bounds the data of one transfer received (and twice
	// it the data all sessions hold staged).
	SnapshotChunkSize int
	MaxSnapshotBytes  uint64

	Knobs Knobs
}

// Knobs are settings tests change; production leaves them zero.
type Knobs struct {
	// SnapshotFrameTimeout bounds how long one frame of a snapshot
	// transfer may wait to be sent. A peer that takes nothing for this
	// long (its session open, its credits never returned) would otherwise
	// hold the transfer, and the Pebble checkpoint it pins, until the next
	// change of leadership; past it the transfer fails, the checkpoint is
	// released and raft is told, to try again later. A frame is at most
	// SnapshotChunkSize (1 MiB by default): a minute
	// (DefaultSnapshotFrameTimeout) is slower than any link a cluster runs
	// on.
	SnapshotFrameTimeout time.Duration
}

func (c Config) withDefaults() Config {
	c.QueueSize = cmp.Or(c.QueueSize, DefaultQueueSize)
	c.SnapshotChunkSize = cmp.Or(c.SnapshotChunkSize, DefaultSnapshotChunkSize)
	c.MaxSnapshotBytes = cmp.Or(c.MaxSnapshotBytes, DefaultMaxSnapshotBytes)
	c.TickInterval = cmp.Or(c.TickInterval, DefaultTickInterval)
	c.ElectionTimeout = cmp.Or(c.ElectionTimeout, DefaultElectionTimeout)
	c.Knobs.SnapshotFrameTimeout = cmp.Or(c.Knobs.SnapshotFrameTimeout, DefaultSnapshotFrameTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics()
	}
	return c
}

// ErrConfig: the peer layer's configuration is unusable.
var ErrConfig = errors.New("peer: invalid configuration")

// Validate reports what makes c unusable; it changes nothing.
func (c Config) Validate() error {
	switch {
	case c.ID == 0:
		return fmt.Errorf("%w: ID 0", ErrConfig)
	case c.Transport == nil || c.Store == nil || c.Host == nil:
		return fmt.Errorf("%w: Transport, Store and Host are required", ErrConfig)
	case c.QueueSize < 0 || c.SnapshotChunkSize < 0 || c.TickInterval < 0 || c.ElectionTimeout < 0 ||
		c.Knobs.SnapshotFrameTimeout < 0:
		return fmt.Errorf("%w: negative size or duration", ErrConfig)
	}
	return nil
}
