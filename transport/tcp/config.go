package tcp

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/transport"
)

// Defaults for Config's zero fields, besides transport.DefaultMaxMessage and
// transport.DefaultCredits.
const (
	// DefaultMaxOutstandingReads is how many Read calls may be in flight on
	// one connection; more wait for a slot.
	DefaultMaxOutstandingReads = 256
	// DefaultDialTimeout bounds connecting plus the handshake when the
	// context has no earlier deadline.
	DefaultDialTimeout = 10 * time.Second

	// DefaultMaxConns is how many connections each listener holds at once
	// (Config.MaxConns).
	DefaultMaxConns = 10000
	// DefaultHandshakeTimeout bounds an accepted connection's handshake
	// (Config.HandshakeTimeout).
	DefaultHandshakeTimeout = 5 * time.Second
	// DefaultIdleTimeout closes an accepted connection on which nothing
	// arrives for this long (Config.IdleTimeout).
	DefaultIdleTimeout = 5 * time.Minute
	// DefaultReadTimeout bounds how long one frame takes to arrive once its
	// header has (Config.ReadTimeout).
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout closes a connection whose peer takes no bytes for
	// this long while this end is writing (Config.WriteTimeout).
	DefaultWriteTimeout = 10 * time.Second
)

// Limits of the wire format and of what a peer may ask for.
const (
	maxMaxMessage = 1 << 30
	maxCredits    = 1<<16 - 1
	maxReads      = 1 << 16
	maxNodeName   = 255
)

// Sentinel errors of this package.
var (
	// ErrConfig: a Config field is out of range.
	ErrConfig = errs.ErrConfig
	// ErrPartitioned: a Filter cut the connection's endpoints apart, so a
	// READ was refused. Messages are dropped silently instead, as a lossy
	// network would.
	ErrPartitioned = errors.New("tcp: partitioned by filter")
	// ErrRefused: the listener refused the connection because it already
	// holds Config.MaxConns of them. Dial's error wraps it.
	ErrRefused = errors.New("tcp: connection refused by the listener")
	// ErrTimeout: the connection was closed because its peer broke one of
	// the timeouts (Config.IdleTimeout, ReadTimeout, WriteTimeout). Errors
	// from the closed connection wrap it and transport.ErrClosed.
	ErrTimeout = errors.New("tcp: connection timed out")
)

// Filter reports whether traffic between the endpoints named local and
// remote (Config.Node of each side) must be cut. It is called for every
// message sent or received and every READ posted or served, so it must be
// fast and safe for concurrent use; it may consult state that changes (a
// test's partition table), which is how a test partitions and heals.
type Filter func(local, remote string) bool

// Config configures a Transport. The zero value is valid: every zero field
// takes the documented default.
type Config struct {
	// MaxMessage is the largest message this end accepts. A connection uses
	// the smaller of both ends' values. Default transport.DefaultMaxMessage;
	// at most 1 GiB.
	MaxMessage int

	// Credits is how many delivered but unconsumed messages this end queues
	// per connection, so how many messages the peer may send before it must
	// wait for Recv here. Default transport.DefaultCredits; at most 65535.
	Credits int

	// MaxOutstandingReads is how many READ batches one connection has in
	// flight at once in each direction; a Read beyond it waits. Each end
	// preallocates this many request slots and this many serving slots.
	// Default DefaultMaxOutstandingReads; at most 65536.
	MaxOutstandingReads int

	// DialTimeout bounds Dial (connect and handshake) when its context has
	// no earlier deadline. Default DefaultDialTimeout.
	DialTimeout time.Duration

	// MaxConns is how many connections each listener holds at once:
	// accepted sockets still in their handshake, waiting for Accept, or
	// open (until closed by either end). A socket beyond it is refused at
	// once: the listener sends a refusal in place of its hello and closes
	// it, and the dialer's Dial fails wrapping ErrRefused. A server may
	// change it per listener (see Limits). Default DefaultMaxConns;
	// negative: no limit.
	MaxConns int

	// HandshakeTimeout bounds an accepted connection's handshake (TLS, if
	// any, and the hellos); a dialer that has not finished it by then is
	// dropped. Default DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration

	// IdleTimeout closes an accepted connection on which no frame arrives
	// for this long (messages, READ requests, credits: anything). Dialed
	// connections have none; an accepted one can be given another, or
	// none, with SetIdleTimeout (a server exempts its cluster peers, which
	// may be silent between elections). Default DefaultIdleTimeout;
	// negative: none.
	IdleTimeout time.Duration

	// ReadTimeout closes a connection on which a frame, once its header has
	// arrived, is not complete this long after: a peer cannot hold a
	// half-sent frame (and the memory it has sent so far) open. A frame's
	// payload is also buffered only as it arrives, never from the header's
	// length. Default DefaultReadTimeout; negative: none.
	ReadTimeout time.Duration

	// WriteTimeout closes a connection whose peer takes no bytes for this
	// long while this end has bytes to write to it (a peer that stops
	// reading its socket): Send, READ responses and credits then fail with
	// ErrClosed instead of waiting on it forever. Default
	// DefaultWriteTimeout; negative: none.
	WriteTimeout time.Duration

	// Node names this endpoint to peers (it travels in the handshake) and to
	// Filter. Default: the address of the transport's first listener at the
	// time of the handshake, or "" if it has none. Tests that partition
	// nodes should set it. At most 255 bytes.
	Node string

	// Filter, if set, cuts chosen peers off: see Filter and SetFilter.
	Filter Filter

	// TLS, if set, runs every connection over TLS 1.3 (see TLS): this
	// transport's listeners accept only TLS, and its dials speak only TLS.
	// Nil: plaintext.
	TLS *TLS
}

func (c Config) withDefaults() Config {
	if c.MaxMessage == 0 {
		c.MaxMessage = transport.DefaultMaxMessage
	}
	if c.Credits == 0 {
		c.Credits = transport.DefaultCredits
	}
	if c.MaxOutstandingReads == 0 {
		c.MaxOutstandingReads = DefaultMaxOutstandingReads
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	return c
}

// Validate reports the first out-of-range field, wrapping ErrConfig. Zero
// fields are checked as their defaults; c itself is not changed.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.MaxMessage < 0 || c.MaxMessage > maxMaxMessage:
		return fmt.Errorf("%w: MaxMessage %d not in [1, %d]", ErrConfig, c.MaxMessage, maxMaxMessage)
	case c.Credits < 0 || c.Credits > maxCredits:
		return fmt.Errorf("%w: Credits %d not in [1, %d]", ErrConfig, c.Credits, maxCredits)
	case c.MaxOutstandingReads < 0 || c.MaxOutstandingReads > maxReads:
		return fmt.Errorf("%w: MaxOutstandingReads %d not in [1, %d]", ErrConfig, c.MaxOutstandingReads, maxReads)
	case c.DialTimeout < 0:
		return fmt.Errorf("%w: negative DialTimeout %v", ErrConfig, c.DialTimeout)
	case c.HandshakeTimeout < 0:
		return fmt.Errorf("%w: negative HandshakeTimeout %v", ErrConfig, c.HandshakeTimeout)
	case len(c.Node) > maxNodeName:
		return fmt.Errorf("%w: Node is %d bytes, max %d", ErrConfig, len(c.Node), maxNodeName)
	}
	return c.TLS.validate()
}
