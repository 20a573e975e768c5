package etcdapi

import (
	"fmt"
	"log/slog"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/limits"
)

// Defaults, etcd's own where kvd had none (etcd's --max-request-bytes and
// --max-txn-ops).
const (
	// DefaultMaxRequestBytes is the largest request accepted: etcd's 1.5 MiB.
	DefaultMaxRequestBytes = 3 << 19
	// DefaultMaxTxnOps is the most operations one Txn may hold: etcd's 128.
	DefaultMaxTxnOps = 128
	// DefaultMaxConcurrentStreams bounds the gRPC streams (calls, watch and
	// keep-alive streams) one connection may have open at once.
	DefaultMaxConcurrentStreams = 1024
	// DefaultWatchQueueBytes bounds the events one watch stream holds
	// waiting to be sent to its client.
	DefaultWatchQueueBytes = 16 << 20
	// DefaultStreamWorkers is how many goroutines serve calls, reused from
	// one call to the next: a call made while all are busy gets a goroutine
	// of its own, as without workers. 64 covers the concurrency of etcd's
	// benchmark tool at its usual 64 clients.
	DefaultStreamWorkers = 64
	// maxStreamWorkers bounds StreamWorkers: each is an idle goroutine
	// for the Server's life.
	maxStreamWorkers = 4096
	// grpcOverheadBytes is what gRPC may add to a request's payload; the
	// transport's receive limit is MaxRequestBytes plus this (as etcd's).
	grpcOverheadBytes = 512 << 10
)

// Config configures a Server. Client is required; every other field's zero
// value is a sensible default.
type Config struct {
	// Client is the kvd client every request goes through. The Server does
	// not close it.
	Client *client.Client
	// Gateway: the Server runs beside the application, not on a node. Its
	// member list then names the gateway itself (AdvertiseClientURLs), as
	// etcd's grpc-proxy does, so clients that sync endpoints stay on it.
	Gateway bool
	// Name is the member name reported for the gateway (Gateway only);
	// default "kvd-gateway".
	Name string
	// MemberID is the id of the kvd member this Server runs on (0 with
	// Gateway): member lists give it AdvertiseClientURLs, and Status
	// reports it (a gateway's Status reports the leader).
	MemberID uint64
	// AdvertiseClientURLs are the URLs this Server is reached at
	// (--advertise-client-urls), reported in member lists.
	AdvertiseClientURLs []string
	// MaxRequestBytes bounds one request (--max-request-bytes); larger ones
	// fail with etcd's "request is too large". Default
	// DefaultMaxRequestBytes.
	MaxRequestBytes int
	// MaxTxnOps bounds the operations of one Txn (--max-txn-ops). Default
	// DefaultMaxTxnOps.
	MaxTxnOps int
	// MaxConcurrentStreams bounds one connection's open gRPC streams
	// (--max-concurrent-streams). Default DefaultMaxConcurrentStreams.
	MaxConcurrentStreams uint32
	// StreamWorkers is how many goroutines serve gRPC calls, each reused
	// from one call to the next (gRPC's NumStreamWorkers): a call does not
	// pay for a new goroutine and for growing its stack, which under load
	// costs as much CPU as decoding the request. Calls beyond them get
	// goroutines of their own. Default DefaultStreamWorkers; negative:
	// none (a goroutine per call, gRPC's default).
	StreamWorkers int
	// OneSidedGets answers a Range of one key at the latest revision with
	// kvd's GET, one-sided where the client can (RDMA READs, no RPC), and
	// falls back to a range read when the key is missing. The answer is
	// linearizable, but its header revision is a revision the key's value
	// was current at (at least its mod revision), which may be below the
	// store's; etcd's is the store's. Off: every Range is a range read
	// whose header revision is the store's (etcd's behaviour).
	OneSidedGets bool
	// WatchQueueBytes bounds the events of one watch stream's responses
	// waiting to be sent to its client: a watch
	// whose response would go past it is cancelled with a reason saying
	// so. One response larger than it is sent alone. Default
	// DefaultWatchQueueBytes.
	WatchQueueBytes int
	// Logger receives the Server's warnings (rate-limited). Default
	// slog.Default().
	Logger *slog.Logger
	// Knobs are for tests only.
	Knobs Knobs
}

// Knobs let tests reach states that are hard to provoke from outside.
type Knobs struct {
	// BeforeRangeStreamPage, if set, runs before RangeStream reads each
	// page after the first: a write between pages.
	BeforeRangeStreamPage func()
	// WatchSendGate, if set, holds each watch stream's sender until it
	// takes a token (closed: no more holding): a client that reads
	// slowly, without depending on gRPC's flow control windows.
	WatchSendGate <-chan struct{}
	// BeforePutGroup, if set, runs before a group of n Puts is committed
	// (putgroup.Knobs.BeforeCommit): a test can hold a group while more
	// Puts queue behind it.
	BeforePutGroup func(n int)
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "kvd-gateway"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.MaxTxnOps == 0 {
		c.MaxTxnOps = DefaultMaxTxnOps
	}
	if c.WatchQueueBytes == 0 {
		c.WatchQueueBytes = DefaultWatchQueueBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if c.StreamWorkers == 0 {
		c.StreamWorkers = DefaultStreamWorkers
	}
	return c
}

// Validate reports what is wrong with c (after defaults), without side
// effects.
func (c Config) Validate() error {
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: etcdapi: Client is required", errs.ErrConfig)
	case c.MaxRequestBytes < 0:
		return fmt.Errorf("%w: etcdapi: MaxRequestBytes %d is negative", errs.ErrConfig, c.MaxRequestBytes)
	case c.WatchQueueBytes < 0:
		return fmt.Errorf("%w: etcdapi: WatchQueueBytes %d is negative", errs.ErrConfig, c.WatchQueueBytes)
	case c.Gateway && c.MemberID != 0:
		return fmt.Errorf("%w: etcdapi: a gateway is no member (MemberID %d)", errs.ErrConfig, c.MemberID)
	case c.StreamWorkers > maxStreamWorkers:
		return fmt.Errorf("%w: etcdapi: StreamWorkers %d is more than %d", errs.ErrConfig, c.StreamWorkers, maxStreamWorkers)
	case c.MaxTxnOps < 0:
		return fmt.Errorf("%w: etcdapi: MaxTxnOps %d is negative", errs.ErrConfig, c.MaxTxnOps)
	case c.MaxTxnOps > limits.MaxTxnOps:
		return fmt.Errorf("%w: etcdapi: MaxTxnOps %d is more than the store takes (%d)", errs.ErrConfig, c.MaxTxnOps, limits.MaxTxnOps)
	}
	return nil
}
