package server

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/mirror"
	"github.com/kvd-project/kvd/internal/rangeq"
	kvstore "github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/watch"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/raft"
	"github.com/kvd-project/kvd/transport"
)

// Config configures a Server.
type Config struct {
	// ID is this node's Raft id, non-zero. Default 1.
	ID uint64
	// Listen is the address clients connect to, and peers too unless
	// ListenPeer is set. Required.
	Listen string
	// ListenPeer, if set, is the address peers connect to: the node then
	// serves peers only there and clients only at Listen, and refuses
	// (counted, reason wrong_listener) what arrives at the other one. The
	// member address in InitialCluster is then the peer address. Empty:
	// Listen carries both.
	ListenPeer string
	// DataDir holds the node's Pebble database. Required.
	DataDir string
	// Transport serves the listener, the region and peer connections.
	// Required; the server does not close it.
	Transport transport.Transport
	// PeerTransport, if set, carries the peer traffic instead of
	// Transport: the ListenPeer listener and the dials to peers (so that
	// peers may speak TLS, or not, independently of clients). Needs
	// ListenPeer. Default Transport. The server does not close it.
	PeerTransport transport.Transport
	// TableMem is the size of the table region in bytes. Default 64 MiB.
	TableMem int
	// ReuseGrace is how long a superseded record's bytes stay untouched
	// before reuse; one-sided GETs slower than half of it are retried.
	// Default 1s.
	ReuseGrace time.Duration
	// TableInline is the inline budget per slot in bytes
	// (table.Config.InlineMax): every bucket of the region gets an arena of
	// about 10 times it, and records of at most this many bytes in the
	// tagged inline format (table.InlineLen: 8*(1+ceil((38+key+value)/7)))
	// live there, so that a client reads such a key in one round trip of
	// two READs. A multiple of 8, table.MinInline to table.MaxInline.
	// Default DefaultTableInline; TableInlineOff: no arenas (a GET of a key
	// whose location the client has not cached takes a second round trip
	// for its record, and the region holds about 8 times the keys).
	TableInline int
	// TableInlineGrace is ReuseGrace for arena bytes; one-sided GETs that
	// read an inline record and took longer than half of it are retried.
	// Default min(100ms, ReuseGrace). Ignored with TableInlineOff.
	TableInlineGrace time.Duration
	// InitialCluster maps every member's id to its peer address (Listen,
	// or ListenPeer when set). Empty means a single-node cluster of ID at
	// that address.
	InitialCluster map[uint64]string
	// Join starts this node as a new member of an existing cluster (added
	// with "kvctl member add" first) instead of bootstrapping one.
	Join bool
	// InitialClusterToken names the cluster when it is created; with
	// InitialCluster it makes the cluster id that peers must present (see
	// raft.Config.InitialClusterToken). Default raft.DefaultClusterToken.
	InitialClusterToken string
	// SnapshotCount is how many applied entries trigger a snapshot and log
	// compaction. Default 10000.
	SnapshotCount uint64
	// RaftLog is where the node keeps its Raft log (--raft-log): "pebble"
	// (in the state's Pebble database, each Ready one synced batch) or
	// "wal" (a dedicated log beside it, each Ready one fdatasync of the
	// log and the state written unsynced). Default "wal". See
	// raft.Config.RaftLog.
	RaftLog string
	// TickInterval is the Raft tick. Default 100ms; elections take 10 ticks.
	TickInterval time.Duration
	// LeaseDrift bounds how much faster any node's clock may run than the
	// leader's (and, for clients, than theirs), as a fraction; the lease is
	// shortened by it. Default 0.1 (raft.DefaultLeaseDrift); at most 0.5.
	LeaseDrift float64
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the server's metrics. Nil means none.
	Registerer prometheus.Registerer
	// Restore names a backup file (kvctl snapshot save) to initialise the
	// empty DataDir from before the node starts: the node starts as an
	// initial member of a new cluster (InitialCluster,
	// InitialClusterToken; not Join) whose state is the backup's. Every
	// initial member restores the same file. A DataDir that holds anything
	// is refused (raft.ErrNotEmpty): restarts leave Restore empty.
	Restore string
	// MaxConnections is the most connections the server holds at once on
	// each listener, clients' and peers' together without ListenPeer (each other member holds one or two);
	// over the tcp transport, sockets still in their handshake count too.
	// Beyond it a new connection is refused at once: the tcp transport
	// tells the dialer why, and kvd_connections_refused_total counts it.
	// Default DefaultMaxConnections.
	MaxConnections int
	// LeaseClock is the clock the leader times TTL leases and periodic
	// auto-compaction by (kv.Config.LeaseClock). Default time.Now; tests
	// inject one.
	LeaseClock func() time.Time
	// AutoCompactionMode and AutoCompactionRetention are etcd's
	// --auto-compaction-mode (periodic or revision) and
	// --auto-compaction-retention (periodic: a duration, or hours; revision:
	// revisions to keep; "0": off). Defaults kv.DefaultAutoCompactionMode
	// and kv.DefaultAutoCompactionRetention (an hour of history).
	AutoCompactionMode      string
	AutoCompactionRetention string
	// Watch bounds watches (watch.go): the recent events each node keeps
	// in memory to serve them (Watch.HistoryEvents events, default
	// 10000, and Watch.HistoryBytes bytes of keys and values, default
	// 64 MiB) and the watches open on the node at once
	// (Watch.MaxWatchers, default 10000). Older events are read from the
	// stored history; a watch from a compacted revision fails as
	// compacted.
	Watch watch.Config
	// MaxWatchesPerConn is the most watches one client connection may
	// have open. Default DefaultMaxWatchesPerConn.
	MaxWatchesPerConn int
	// WatchProgressNotifyInterval is how often a watch created with
	// progress_notify that has sent nothing meanwhile is told, while it is
	// synced, the revision its stream is complete through (etcd's
	// --experimental-watch-progress-notify-interval). Default
	// DefaultWatchProgressNotifyInterval; at least
	// MinWatchProgressNotifyInterval (Knobs.WatchProgressNotifyInterval
	// overrides it in tests).
	WatchProgressNotifyInterval time.Duration

	// Knobs are for tests; production leaves them zero.
	Knobs Knobs
}

// Knobs are test settings of a Server: timings a test shortens or
// lengthens to reach a state quickly, or to keep it out of the way, and
// the region mirror's hooks. The zero value, which production uses, takes
// the defaults.
type Knobs struct {
	// Mirror are the region mirror's (mirror.Knobs).
	Mirror mirror.Knobs
	// ReplyTimeout bounds how long a reply (a watch message, a snapshot
	// chunk) waits for the client to make room for it before the client
	// is closed as a slow reader. Default 10s (replyTimeout).
	ReplyTimeout time.Duration
	// ProgressEvery is how often at most an idle watch is told its
	// progress (and a watch connection's ticker runs). Default 1s
	// (progressEvery).
	ProgressEvery time.Duration
	// WatchProgressNotifyInterval, if set, replaces
	// Config.WatchProgressNotifyInterval, below its minimum too.
	WatchProgressNotifyInterval time.Duration
	// LeaseListPage is the most lease ids one lease list reply holds.
	// Default wire.MaxLeaseListIDs; tests lower it to page with few leases.
	LeaseListPage int
	// ScanBounds bound one scan reply and what a sorted scan holds.
	// Default rangeq.ReplyBounds (each zero field); tests lower them to
	// page and to refuse a sort with few keys.
	ScanBounds rangeq.Bounds
	// WALSegmentSize is the Raft log's segment size in the "wal" mode
	// (raft.Knobs.WALSegmentSize; wal.DefaultSegmentSize if zero). Each
	// segment is zero-filled when made: tests that start many nodes make
	// it small.
	WALSegmentSize int64
}

func (k Knobs) withDefaults() Knobs {
	k.ReplyTimeout = cmp.Or(k.ReplyTimeout, replyTimeout)
	k.ProgressEvery = cmp.Or(k.ProgressEvery, progressEvery)
	k.LeaseListPage = cmp.Or(k.LeaseListPage, wire.MaxLeaseListIDs)
	d := rangeq.ReplyBounds
	k.ScanBounds = rangeq.Bounds{Keys: cmp.Or(k.ScanBounds.Keys, d.Keys), Bytes: cmp.Or(k.ScanBounds.Bytes, d.Bytes),
		SortKeys: cmp.Or(k.ScanBounds.SortKeys, d.SortKeys), SortBytes: cmp.Or(k.ScanBounds.SortBytes, d.SortBytes)}
	return k
}

// Defaults.
const (
	DefaultTableMem      = 64 << 20
	DefaultReuseGrace    = time.Second
	DefaultSnapshotCount = 10000
	DefaultTickInterval  = 100 * time.Millisecond
	minTableMem          = 64 << 10

	// DefaultTableInline is the default inline budget: a 256-byte value
	// under a key of up to 32 bytes is inline (table.InlineLen(32, 256)),
	// so a GET of it takes one round trip.
	DefaultTableInline = 384
	// TableInlineOff, as Config.TableInline, gives the region no arenas.
	TableInlineOff = -1

	// A snapshot transfer a peer sends may hold at most
	// maxSnapshotPerTableByte times --table-mem of data, and at least
	// minMaxSnapshotBytes (raft.Config.MaxSnapshotBytes): 1 GiB for the
	// default 64 MiB region, 2 GiB for 256 MiB. A longer one is abandoned
	// and its session closed, so a peer session cannot fill the disk.
	maxSnapshotPerTableByte = 8
	minMaxSnapshotBytes     = 1 << 30

	// DefaultMaxConnections is Config.MaxConnections's default
	// (--max-connections). An idle client connection costs the server
	// about 30 KiB of heap and three goroutines.
	DefaultMaxConnections = 10000

	// DefaultMaxWatchesPerConn is Config.MaxWatchesPerConn's default.
	DefaultMaxWatchesPerConn = 1000

	// DefaultWatchProgressNotifyInterval is etcd's default.
	DefaultWatchProgressNotifyInterval = 10 * time.Minute
	// MinWatchProgressNotifyInterval: shorter, and every quiet watch that
	// asked costs the node a message that often.
	MinWatchProgressNotifyInterval = time.Second
)

// withDefaults returns c with every zero field that has a default set to
// it.
func (c Config) withDefaults() Config {
	c.ID = cmp.Or(c.ID, 1)
	c.TableMem = cmp.Or(c.TableMem, DefaultTableMem)
	c.ReuseGrace = cmp.Or(c.ReuseGrace, DefaultReuseGrace)
	c.TableInline = cmp.Or(c.TableInline, DefaultTableInline)
	c.SnapshotCount = cmp.Or(c.SnapshotCount, DefaultSnapshotCount)
	c.RaftLog = cmp.Or(c.RaftLog, kvstore.DefaultRaftLog)
	c.TickInterval = cmp.Or(c.TickInterval, DefaultTickInterval)
	c.MaxConnections = cmp.Or(c.MaxConnections, DefaultMaxConnections)
	c.MaxWatchesPerConn = cmp.Or(c.MaxWatchesPerConn, DefaultMaxWatchesPerConn)
	c.WatchProgressNotifyInterval = cmp.Or(c.WatchProgressNotifyInterval, DefaultWatchProgressNotifyInterval)
	c.Watch = c.Watch.WithDefaults()
	if len(c.InitialCluster) == 0 {
		c.InitialCluster = map[uint64]string{c.ID: c.peerListen()}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Knobs = c.Knobs.withDefaults()
	return c
}

// progressNotifyInterval is the interval progress_notify watches are
// told at: the knob's if set.
func (c Config) progressNotifyInterval() time.Duration {
	return cmp.Or(c.Knobs.WatchProgressNotifyInterval, c.WatchProgressNotifyInterval)
}

// Validate reports the first invalid field. Zero fields are checked as
// their defaults; c itself is not changed.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Listen == "":
		return errors.New("server: Listen address is required")
	case c.DataDir == "":
		return errors.New("server: DataDir is required")
	case c.Transport == nil:
		return errors.New("server: Transport is required")
	case c.PeerTransport != nil && c.ListenPeer == "":
		return errors.New("server: PeerTransport needs ListenPeer: without it peers share the Listen listener")
	case c.ListenPeer != "" && c.ListenPeer == c.Listen:
		return fmt.Errorf("server: ListenPeer and Listen are both %s: give peers an address of their own, or leave ListenPeer empty", c.Listen)
	case c.TableMem < minTableMem:
		return fmt.Errorf("server: table memory %d bytes is below the minimum %d", c.TableMem, minTableMem)
	case c.ReuseGrace < 10*time.Millisecond:
		return fmt.Errorf("server: reuse grace %v is below the minimum 10ms", c.ReuseGrace)
	case kvstore.ValidRaftLog(c.RaftLog) != nil:
		return fmt.Errorf("server: %w", kvstore.ValidRaftLog(c.RaftLog))
	case c.TableInline < 0 && c.TableInline != TableInlineOff:
		return fmt.Errorf("%w: table inline budget %d: want a positive budget or TableInlineOff", table.ErrBadConfig, c.TableInline)
	}
	if err := c.tableConfig().Validate(); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if c.MaxConnections < 0 {
		return fmt.Errorf("server: max connections %d is negative", c.MaxConnections)
	}
	if err := c.Watch.Validate(); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if err := kv.CheckAutoCompaction(c.AutoCompactionMode, c.AutoCompactionRetention); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	switch _, listed := c.InitialCluster[c.ID]; {
	case c.MaxWatchesPerConn < 0:
		return fmt.Errorf("server: max watches per connection %d is negative", c.MaxWatchesPerConn)
	case c.WatchProgressNotifyInterval < MinWatchProgressNotifyInterval:
		return fmt.Errorf("server: watch progress notify interval %v is below the minimum %v",
			c.WatchProgressNotifyInterval, MinWatchProgressNotifyInterval)
	case !(c.LeaseDrift >= 0 && c.LeaseDrift <= 0.5): // NaN fails too
		return fmt.Errorf("server: lease drift %v not in [0, 0.5]", c.LeaseDrift)
	case c.Restore != "" && c.Join:
		return errors.New("server: a restored node starts a new cluster; it cannot also join one")
	case !listed && !c.Join:
		return fmt.Errorf("server: id %d is not in the initial cluster", c.ID)
	}
	// What the raft node will refuse, refused now: before a restore or
	// anything else writes the data directory.
	if err := c.raftConfig().Validate(); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// memberAddr is the address peers reach this node at: its entry in the
// initial cluster, or where it listens for peers if a joining node is not
// listed there (as when no initial cluster is given).
func (c Config) memberAddr() string {
	if addr, ok := c.InitialCluster[c.ID]; ok {
		return addr
	}
	return c.peerListen()
}

// peerListen is the address the node listens on for peers.
func (c Config) peerListen() string { return cmp.Or(c.ListenPeer, c.Listen) }

// peerTransport is the transport of the peer traffic.
func (c Config) peerTransport() transport.Transport {
	if c.PeerTransport != nil {
		return c.PeerTransport
	}
	return c.Transport
}

// raftConfig is the raft node's configuration, without the server's hooks
// (OnLease, and the state machine's Publisher), which start adds.
func (c Config) raftConfig() raft.Config {
	return raft.Config{
		ID:                  c.ID,
		InitialCluster:      c.InitialCluster,
		Addr:                c.memberAddr(),
		Join:                c.Join,
		InitialClusterToken: c.InitialClusterToken,
		DataDir:             c.DataDir,
		Transport:           c.peerTransport(),
		TickInterval:        c.TickInterval,
		LeaseDrift:          c.LeaseDrift,
		SnapshotCount:       c.SnapshotCount,
		RaftLog:             c.RaftLog,
		// A cluster's state fits its leader's region (writes without room
		// are refused), so a transfer this much larger than this node's
		// is a peer's mistake or attack, not a snapshot: refused before it
		// fills the disk. Nodes may have regions of different sizes.
		MaxSnapshotBytes: max(maxSnapshotPerTableByte*uint64(c.TableMem), minMaxSnapshotBytes),
		Registerer:       c.Registerer,
		Logger:           c.Logger,
		Knobs:            raft.Knobs{WALSegmentSize: c.Knobs.WALSegmentSize},
	}
}

// mirrorConfig is the region mirror's configuration, over the region's
// memory, publishing applied writes to events.
func (c *Config) mirrorConfig(region []byte, events mirror.Sink, log *slog.Logger) mirror.Config {
	return mirror.Config{Region: region, Table: c.tableConfig(), Events: events, Logger: log, Knobs: c.Knobs.Mirror}
}

// tableConfig is the table region's shape.
func (c Config) tableConfig() table.Config {
	if c.TableInline == TableInlineOff {
		return table.Config{Grace: c.ReuseGrace}
	}
	return table.Config{Grace: c.ReuseGrace, InlineMax: c.TableInline, InlineGrace: c.TableInlineGrace}
}
