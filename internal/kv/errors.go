package kv

import "github.com/kvd-project/kvd/internal/errs"

// Sentinel errors of the key/value state machine. Errors returned by a
// Store wrap them (test with errors.Is); the raft node's own (not leader,
// proposal dropped, stopped...) pass through as raft's. Each is declared
// once, in internal/errs, or classed there (errs.Classed) so that the
// server's one status table sends it as its class.
var (
	// ErrInvalidKey: the key is empty or longer than limits.MaxKey.
	ErrInvalidKey = errs.Classed(errs.ErrBadRequest, "raft: invalid key")
	// ErrValueTooLarge: the value is longer than limits.MaxValue.
	ErrValueTooLarge = errs.ErrValueTooLarge
	// ErrLeaseNotFound: the TTL lease does not exist (never granted,
	// revoked, or expired), or the leader has begun expiring it.
	ErrLeaseNotFound = errs.ErrLeaseNotFound
	// ErrLeaseExists: a grant named an id already in use.
	ErrLeaseExists = errs.ErrLeaseExists
	// ErrTooManyLeases: MaxLeases leases exist.
	ErrTooManyLeases = errs.Classed(errs.ErrBadRequest, "too many leases")
	// ErrLeaseTTL: the TTL is outside [MinLeaseTTL, MaxLeaseTTL].
	ErrLeaseTTL = errs.Classed(errs.ErrBadRequest, "lease TTL out of range")
)
