package table

import (
	"errors"

	"github.com/kvd-project/kvd/internal/errs"
)

// Sentinel errors. Writer-side errors are wrapped with detail (%w); reader-
// side functions return the bare sentinels so that they never allocate.
// Test them with errors.Is. The size and space errors are kvd's own
// (internal/errs), which a client gets too.
var (
	// ErrNoSpace: a Put found no room, either in the record area or in the
	// key's two candidate buckets. The table is unchanged.
	ErrNoSpace = errs.ErrNoSpace
	// ErrEmptyKey: keys are 1..MaxKey bytes.
	ErrEmptyKey = errs.ErrEmptyKey
	// ErrKeyTooLarge: the key is longer than MaxKey.
	ErrKeyTooLarge = errs.ErrKeyTooLarge
	// ErrValueTooLarge: the value is longer than MaxValue.
	ErrValueTooLarge = errs.ErrValueTooLarge
	// ErrBadConfig: a Config field is out of range (errs.ErrConfig).
	ErrBadConfig = errs.ErrConfig
	// ErrBadRegion: the memory handed to Format cannot hold a table
	// (too small, or not 8-byte aligned).
	ErrBadRegion = errors.New("table: unusable region")

	// ErrBadHeader: the header bytes are not a valid table header (wrong
	// magic, impossible geometry, or too short). A region that was never
	// formatted reads this way.
	ErrBadHeader = errors.New("table: bad header")
	// ErrLayoutVersion: the header is a table header of a layout version
	// this package does not read.
	ErrLayoutVersion = errors.New("table: unsupported layout version")
	// ErrBadLength: the record bytes do not have the length the slot
	// promised, or their key and value lengths do not add up to it. The
	// bytes were torn or reused, or the slot is stale: retry.
	ErrBadLength = errors.New("table: record length mismatch")
	// ErrTorn: the record's checksum does not match (or a field no writer
	// produces is set): the READ saw a write half done, or reused bytes.
	// Retry.
	ErrTorn = errors.New("table: torn or corrupt record")
	// ErrKeyMismatch: the record is intact but holds another key (a
	// fingerprint collision, or a stale slot whose bytes were reused). This
	// slot is not the key's; other matching slots may be.
	ErrKeyMismatch = errors.New("table: key mismatch")
	// ErrDead: the record is intact but was superseded or deleted after the
	// slot was read. Retry.
	ErrDead = errors.New("table: record dead")
	// ErrHidden: the record is intact but one of an atomic group of writes
	// (a transaction's) that the writer has not finished: it may be the
	// key's value from before the group or from after it, and a reader
	// accepting either could see part of the group. Retry.
	ErrHidden = errors.New("table: record hidden by a write in progress")

	// ErrTooEarly: Reveal was called before RevealIn allows it, or inside
	// an atomic group. Nothing changed; call it again later.
	ErrTooEarly = errors.New("table: too early to reveal the rebuild's records")
)
