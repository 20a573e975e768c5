package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// Consistency is how fresh a GET must be.
type Consistency uint8

const (
	// Linearizable (the default): one-sided READs of the leader's region,
	// accepted only while its lease is valid in both header reads; falls back
	// to a ReadIndex RPC when that cannot be proven.
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
	// Transport carries requests and READs. Default: a new TCP transport,
	// closed by Client.Close. A transport passed in is not closed.
	Transport transport.Transport
	// DialTimeout bounds connecting to one endpoint. Default 3s.
	DialTimeout time.Duration
	// RequestTimeout bounds a call whose context has no deadline. Default 15s.
	RequestTimeout time.Duration
	// Consistency is the default for Get. Default Linearizable.
	Consistency Consistency
	// ReadRetries is how many times a one-sided GET retries a torn, stale or
	// unprovable read before asking the server by RPC. Default 8.
	ReadRetries int
	// CacheEntries bounds the per-node cache of record locations that lets a
	// GET finish in one round trip. Default 65536; negative disables it.
	CacheEntries int
}

const (
	defaultDialTimeout    = 3 * time.Second
	defaultRequestTimeout = 15 * time.Second
	defaultReadRetries    = 8
	defaultCacheEntries   = 1 << 16
)

// Validate reports whether c is usable, filling in defaults.
func (c *Config) Validate() error {
	if len(c.Endpoints) == 0 {
		return errors.New("kvd: client needs at least one endpoint")
	}
	for _, e := range c.Endpoints {
		if e == "" {
			return errors.New("kvd: empty endpoint")
		}
	}
	if c.Consistency > ReadIndex {
		return fmt.Errorf("kvd: unknown consistency %d", c.Consistency)
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = defaultDialTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = defaultRequestTimeout
	}
	if c.ReadRetries <= 0 {
		c.ReadRetries = defaultReadRetries
	}
	if c.CacheEntries == 0 {
		c.CacheEntries = defaultCacheEntries
	}
	return nil
}
