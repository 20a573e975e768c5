package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// ClusterID is a cluster's id, printed (String) and parsed
// (ParseClusterID) as 16 hex digits.
type ClusterID = wire.ClusterID

// ParseClusterID reads a cluster id as kvctl status prints it.
func ParseClusterID(s string) (ClusterID, error) { return wire.ParseClusterID(s) }

// Consistency is how fresh a GET must be.
type Consistency uint8

const (
	// Linearizable (the default): one-sided READs of the leader's region,
	// accepted only if the lease expiry in its header is later than the
	// leader's clock can be at that moment, judged on the client's own
	// clock; falls back to a ReadIndex RPC when that cannot be proven.
	Linearizable Consistency = iota
	// Serializable: one-sided READs of any node's region. Never torn, may be
	// stale.
	Serializable
	// ReadIndex: a two-sided RPC confirmed with a quorum; no clock
	// assumption, costs the server CPU.
	ReadIndex
)

func (c Consistency) String() string {
	switch c {
	case Linearizable:
		return "linearizable"
	case Serializable:
		return "serializable"
	case ReadIndex:
		return "readindex"
	}
	return fmt.Sprintf("consistency(%d)", uint8(c))
}

// ParseConsistency maps a flag value onto a Consistency.
func ParseConsistency(s string) (Consistency, error) {
	switch s {
	case "linearizable", "":
		return Linearizable, nil
	case "serializable", "stale":
		return Serializable, nil
	case "readindex":
		return ReadIndex, nil
	}
	return 0, fmt.Errorf("kvd: unknown consistency %q (want linearizable, serializable or readindex)", s)
}

// Config configures a Client. The zero value of every field but Endpoints is
// a sensible default.
type Config struct {
	// Endpoints are the cluster's client addresses ("host:port"). Required.
	Endpoints []string
	// ClusterID, if set, is the cluster the client may talk to: an
	// endpoint of any other is refused (ErrClusterMismatch). If 0, the
	// client pins, at its first connection, the cluster a strict majority
	// of the endpoints name (asking them all at once, for at most half an
	// AttemptTimeout), else the first one an endpoint names, and refuses
	// the endpoints of any other from then on. Nodes older than the id
	// (which name none) are not checked. kvctl status prints the id.
	ClusterID ClusterID
	// Transport carries requests and READs. Default: a new TCP transport,
	// closed by Client.Close. A transport passed in is not closed.
	Transport transport.Transport
	// DialTimeout bounds connecting to one endpoint. Default 3s.
	DialTimeout time.Duration
	// RequestTimeout bounds a call whose context has no deadline. Default 15s.
	RequestTimeout time.Duration
	// AttemptTimeout bounds one attempt of a request at one node. A node
	// that has not answered within it counts as failing (stalled, frozen,
	// cut off), and the client moves on at once rather than wait out the
	// request's context: a read is retried at the next node; a PUT or
	// DELETE, which the silent node may still apply, fails with
	// ErrUnavailable ("maybe applied") without being retried. Until the node
	// answers again the client sends leader-bound requests elsewhere first.
	// One-sided GETs have no timer each: a watchdog closes the connection
	// of a node that has answered none of them for AttemptTimeout while
	// some were waiting (noticed within 1.5 AttemptTimeouts; stall.go),
	// and the GETs retry at the next node.
	// It must exceed the slowest healthy answer (a PUT under load, a
	// ReadIndex GET). Membership changes are exempt: promoting a learner
	// waits for it to catch up. Default 1s; negative disables it.
	AttemptTimeout time.Duration
	// Consistency is the default for Get. Default Linearizable.
	Consistency Consistency
	// ReadRetries is how many times a one-sided GET retries a torn, stale or
	// unprovable read before asking the server by RPC. Default 8.
	ReadRetries int
	// CacheEntries bounds the per-node cache of record locations that lets a
	// GET finish in one round trip. Default 65536; negative disables it.
	CacheEntries int
	// TLS, if set, makes the client's own TCP transport (Transport nil)
	// speak TLS 1.3 to the servers: RootCAs verifies them (nil: the
	// system's roots; their certificates must name the endpoints' hosts),
	// and Certificates or GetClientCertificate is shown to servers that
	// require a client certificate. A Transport passed in keeps its own
	// configuration, so TLS must then be nil (see tcp.Config.TLS).
	TLS *tls.Config
	// LeaseDrift bounds how much faster a server's clock may run than this
	// client's, as a fraction: the client's estimate of a node's clock
	// grows by 1+LeaseDrift per unit of its own elapsed time, so that a
	// lease is never judged valid after it ended. Default 0.1 (the
	// servers' default too); must be in [0, 0.5].
	LeaseDrift float64
	// Knobs are hooks for tests; the zero value is the production client.
	Knobs Knobs
}

// Knobs are hooks for tests of the read protocol.
type Knobs struct {
	// Clock, if set, is the client's monotonic clock (time since any fixed
	// origin) in place of the process's: the clock by which it bounds a
	// node's clock, judges leases and how long a GET took, and times a
	// GET's deadline and the stall watchdog. A test that sets it can put
	// any client time between two READs.
	Clock func() time.Duration
}

const (
	defaultDialTimeout    = 3 * time.Second
	defaultRequestTimeout = 15 * time.Second
	defaultAttemptTimeout = time.Second
	defaultReadRetries    = 8
	defaultCacheEntries   = 1 << 16
)

// DefaultLeaseDrift is Config.LeaseDrift's default, the same as the
// servers' (kvd --lease-drift).
const DefaultLeaseDrift = 0.1

// withDefaults returns c with every unset field set to its default.
func (c Config) withDefaults() Config {
	if c.DialTimeout <= 0 {
		c.DialTimeout = defaultDialTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = defaultRequestTimeout
	}
	switch {
	case c.AttemptTimeout == 0:
		c.AttemptTimeout = defaultAttemptTimeout
	case c.AttemptTimeout < 0:
		c.AttemptTimeout = -1 // off: an attempt lasts as long as its request
	}
	if c.ReadRetries <= 0 {
		c.ReadRetries = defaultReadRetries
	}
	if c.CacheEntries == 0 {
		c.CacheEntries = defaultCacheEntries
	}
	if c.LeaseDrift == 0 {
		c.LeaseDrift = DefaultLeaseDrift
	}
	return c
}

// Validate reports whether c is usable. Unset fields are checked as their
// defaults; c itself is not changed.
func (c Config) Validate() error {
	c = c.withDefaults()
	if len(c.Endpoints) == 0 {
		return errors.New("kvd: client needs at least one endpoint")
	}
	for _, e := range c.Endpoints {
		// Both transports dial host:port; a mistyped endpoint (no port,
		// two joined by a comma) is a configuration error, not an outage.
		if err := transport.CheckAddr(e); err != nil {
			return fmt.Errorf("kvd: endpoint: %w", err)
		}
	}
	switch {
	case c.TLS != nil && c.Transport != nil:
		return errors.New("kvd: Config.TLS applies only to the client's own transport; configure the given Transport's TLS instead")
	case c.Consistency > ReadIndex:
		return fmt.Errorf("kvd: unknown consistency %d", c.Consistency)
	case c.AttemptTimeout > 0 && c.AttemptTimeout < time.Millisecond:
		return fmt.Errorf("kvd: attempt timeout %v is below the minimum 1ms", c.AttemptTimeout)
	case !(c.LeaseDrift >= 0 && c.LeaseDrift <= 0.5): // NaN fails too
		return fmt.Errorf("kvd: LeaseDrift %v not in [0, 0.5]", c.LeaseDrift)
	}
	return nil
}

// tcpTLS is the TLS configuration of the client's own transport, if any.
func (c Config) tcpTLS() *tcp.TLS {
	if c.TLS == nil {
		return nil
	}
	cfg := c.TLS
	return &tcp.TLS{Role: transport.RoleClient, Client: func() (*tls.Config, error) { return cfg, nil }}
}
