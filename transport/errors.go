package transport

import "errors"

// Sentinel errors. Implementations wrap them with %w and detail; callers
// test them with errors.Is.
var (
	// ErrClosed: the connection, listener, region or transport was closed
	// (locally or by the peer), or failed and was closed because of it.
	ErrClosed = errors.New("transport: closed")
	// ErrBadKey: a READ named a region that does not exist (never registered,
	// or deregistered) or a key that does not match it.
	ErrBadKey = errors.New("transport: unknown region key")
	// ErrOutOfRange: a READ's offset and length fall outside the region.
	ErrOutOfRange = errors.New("transport: read out of region bounds")
	// ErrMessageTooLarge: a message exceeds the connection's MaxMessage.
	ErrMessageTooLarge = errors.New("transport: message too large")
	// ErrBatchTooLarge: a Read call posted more than MaxBatch ops, or more
	// than MaxReadBatchBytes bytes.
	ErrBatchTooLarge = errors.New("transport: too many reads in one batch")
	// ErrProtocol: the peer sent something the transport cannot parse; the
	// connection is closed.
	ErrProtocol = errors.New("transport: protocol violation")
	// ErrAuthRefused: authentication failed for certain, not for want of time:
	// the peer refused this end's credential, this end refused the peer's
	// proof, or the two ends disagree about authenticating at all. Dialling
	// again with the same configuration cannot succeed, so callers should
	// not retry.
	ErrAuthRefused = errors.New("transport: authentication refused")
	// ErrUnsupported: the transport was built without support for this
	// platform or feature.
	ErrUnsupported = errors.New("transport: unsupported")
)
