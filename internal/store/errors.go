package store

import "errors"

// Sentinel errors; callers test them with errors.Is.
var (
	// ErrCorrupt: a record on disk could not be decoded.
	ErrCorrupt = errors.New("store: corrupt record")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrBadSnapshot: a snapshot did not match the staged data or the log.
	ErrBadSnapshot = errors.New("store: snapshot mismatch")
	// ErrClusterID: the store belongs to another cluster.
	ErrClusterID = errors.New("store: cluster id mismatch")
	// ErrFault: the disk refused a write (or an fsync failed); the store
	// writes nothing more (fault.go). Errors carrying it are *FaultError
	// values naming the cause.
	ErrFault = errors.New("store: storage fault")
)
