package tcp

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// Defaults for Config's zero fields, besides transport.DefaultMaxMessage and
// transport.DefaultCredits.
const (
	// DefaultMaxOutstandingReads is how many Read calls may be in flight on
	// one connection; more wait for a slot.
	DefaultMaxOutstandingReads = 256
	// DefaultDialTimeout bounds connecting plus the handshake when the
	// context has no earlier deadline. It also bounds the handshake of an
	// accepted connection.
	DefaultDialTimeout = 10 * time.Second
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
	ErrConfig = errors.New("tcp: invalid config")
	// ErrPartitioned: a Filter cut the connection's endpoints apart, so a
	// READ was refused. Messages are dropped silently instead, as a lossy
	// network would.
	ErrPartitioned = errors.New("tcp: partitioned by filter")
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
	// no earlier deadline, and the handshake of accepted connections.
	// Default DefaultDialTimeout.
	DialTimeout time.Duration

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
	return c
}

// Validate reports the first out-of-range field, wrapping ErrConfig.
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
	case len(c.Node) > maxNodeName:
		return fmt.Errorf("%w: Node is %d bytes, max %d", ErrConfig, len(c.Node), maxNodeName)
	}
	return c.TLS.validate()
}
