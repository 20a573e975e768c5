package kv

import "errors"

// Sentinel errors of the key/value state machine. Errors returned by a
// Store wrap them (test with errors.Is); the raft node's own (not leader,
// proposal dropped, stopped...) pass through as raft's.
var (
	// ErrInvalidKey: the key is empty or longer than limits.MaxKeyLen.
	ErrInvalidKey = errors.New("raft: invalid key")
	// ErrValueTooLarge: the value is longer than limits.MaxValueLen.
	ErrValueTooLarge = errors.New("raft: value too large")
	// ErrLeaseNotFound: the TTL lease does not exist (never granted,
	// revoked, or expired), or the leader has begun expiring it.
	ErrLeaseNotFound = errors.New("raft: lease not found")
	// ErrLeaseExists: a grant named an id already in use.
	ErrLeaseExists = errors.New("raft: lease already exists")
	// ErrTooManyLeases: MaxLeases leases exist.
	ErrTooManyLeases = errors.New("raft: too many leases")
	// ErrLeaseTTL: the TTL is outside [MinLeaseTTL, MaxLeaseTTL].
	ErrLeaseTTL = errors.New("raft: lease TTL out of range")
)
