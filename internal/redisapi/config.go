package redisapi

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/resp"
)

// Defaults.
const (
	// DefaultMaxConns is Redis' maxclients default.
	DefaultMaxConns = 10000
	// DefaultIdleTimeout closes a connection that sent nothing for this
	// long (Redis' timeout, which defaults to never: kvd bounds it).
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultMaxPipeline is the most replies a connection holds before it
	// writes them out, however many pipelined commands are waiting.
	DefaultMaxPipeline = 1024
	// DefaultReplyTimeout is how long a connection waits for its client to
	// take a reply before it closes the connection.
	DefaultReplyTimeout = 30 * time.Second
	// DefaultCommandTimeout bounds one command's work against the cluster,
	// its retries included.
	DefaultCommandTimeout = 15 * time.Second
	// DefaultMaxScanCursors is how many SCAN cursors the Server remembers
	// (cursor.go); the oldest is forgotten first.
	DefaultMaxScanCursors = 100000
)

// Config configures a Server. Client is required; every other field's
// zero value is a sensible default.
type Config struct {
	// Client is the kvd client every command goes through. The Server
	// does not close it.
	Client *client.Client
	// Limits bound one request (arguments, inline size, bytes).
	Limits resp.Limits
	// MaxConns bounds the connections served at once; one more is sent
	// Redis' "max number of clients reached" and closed.
	MaxConns int
	// IdleTimeout closes a connection idle for this long; negative: never.
	IdleTimeout time.Duration
	// MaxPipeline bounds the replies to pipelined commands held before
	// they are written out.
	MaxPipeline int
	// ReplyTimeout bounds the wait for a client to read its replies.
	ReplyTimeout time.Duration
	// CommandTimeout bounds one command's work against the cluster.
	CommandTimeout time.Duration
	// MaxScanCursors bounds the SCAN cursors remembered.
	MaxScanCursors int
	// Role is what INFO's replication section reports as this server's
	// place: "node" on a kvd node, "gateway" beside an application.
	Role string
	// Logger receives refusal logs (rate-limited). Default slog.Default().
	Logger *slog.Logger
	// Registerer, if set, gets the Server's metrics (kvd_redis_*).
	Registerer prometheus.Registerer
	// Knobs are for tests only.
	Knobs Knobs
}

// Knobs let tests reach states that are hard to provoke from outside.
type Knobs struct {
	// BeforeCommit, if set, runs before a read-modify-write commits its
	// transaction (attempt counts from 1): a test can change a key read
	// in between.
	BeforeCommit func(attempt int)
	// BeforeSetGroup, if set, runs before a group of n plain SETs is
	// committed (putgroup.Knobs.BeforeCommit): a test can hold a group
	// while more SETs queue behind it.
	BeforeSetGroup func(n int)
}

func (c Config) withDefaults() Config {
	c.Limits = c.Limits.WithDefaults()
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxPipeline == 0 {
		c.MaxPipeline = DefaultMaxPipeline
	}
	if c.ReplyTimeout == 0 {
		c.ReplyTimeout = DefaultReplyTimeout
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = DefaultCommandTimeout
	}
	if c.MaxScanCursors == 0 {
		c.MaxScanCursors = DefaultMaxScanCursors
	}
	if c.Role == "" {
		c.Role = "node"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports what is wrong with c (after defaults), without side
// effects.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: redisapi: "+format, append([]any{errs.ErrConfig}, a...)...)
	}
	switch {
	case c.Client == nil:
		return bad("Client is required")
	case c.Limits.MaxArgs < 0 || c.Limits.MaxInline < 0 || c.Limits.MaxRequestBytes < 0:
		return bad("negative request limit %+v", c.Limits)
	case c.MaxConns < 0:
		return bad("MaxConns %d is negative", c.MaxConns)
	case c.MaxPipeline < 0:
		return bad("MaxPipeline %d is negative", c.MaxPipeline)
	case c.ReplyTimeout < 0:
		return bad("ReplyTimeout %v is negative", c.ReplyTimeout)
	case c.CommandTimeout < 0:
		return bad("CommandTimeout %v is negative", c.CommandTimeout)
	case c.MaxScanCursors < 0:
		return bad("MaxScanCursors %d is negative", c.MaxScanCursors)
	case c.Role != "" && c.Role != "node" && c.Role != "gateway":
		return bad("Role %q is neither node nor gateway", c.Role)
	}
	return nil
}
