package wal

import "errors"

// Errors of the log. Test with errors.Is.
var (
	// ErrCorrupt: the log on disk is damaged somewhere other than its
	// unsynced tail (a torn tail is not an error: it ends the log), or a
	// record read back does not match what the index says it holds.
	ErrCorrupt = errors.New("wal: log corrupt")
	// ErrTooLarge: an entry is larger than a record may be (MaxRecord, or
	// less for small segments).
	ErrTooLarge = errors.New("wal: entry too large")
	// ErrBadAppend: the entries given to Append are not contiguous or do
	// not start within [FirstIndex, LastIndex+1]; or a Compact or Reset
	// names an index the log cannot move to.
	ErrBadAppend = errors.New("wal: entries out of order")
	// ErrClosed: the log was closed, or a write or sync failed earlier (a
	// failed fdatasync may have dropped dirty pages, so the log refuses to
	// go on rather than acknowledge data that may not be on disk).
	ErrClosed = errors.New("wal: log closed or failed")
)
