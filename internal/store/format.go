package store

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Data formats. The data format names the model of what a data directory
// holds and what its log entries mean: members of one cluster must agree
// on it (the peer hello carries it), and a store refuses a directory it
// cannot read at Open rather than misreading it.
//
// Format 1 is not migrated in place: members migrating one by one would
// disagree on the revisions they assign, so the way from it is a backup
// (docs/upgrading.md). Format 2 is: format 3 keeps its state and its
// entries' meaning, and adds commands (transaction operations on ranges,
// nested transactions, put options) that a format-2 member would refuse
// where a format-3 member applies them. A format-2 directory holds none of
// them. Format 4 keeps the log's meaning and stores the history another
// way (history.go): each write's value once, by revision, with an index by
// key. Open rewrites the history of a format-2 or format-3 directory so
// (migrate.go). Format 5 keeps the state of format 4 and adds a log entry
// a format-4 member would misapply: a transaction whose range reads a
// past revision (a format-4 member reads the current state there and
// applies the writes of one that a format-5 member refuses whole, its
// revision compacted). Format 6 keeps the state of format 5 and adds a
// log entry a format-5 member would skip as malformed: a batch of
// independent PUTs (internal/kv's opPutBatch). Format 7 keeps the log of
// format 6 and drops the records kept by key (the KV state and the
// history's index, which the key index in memory replaces, keyindex.go)
// and the compactor's cursor: a snapshot of format 7 lacks what a
// format-6 member reads. Open migrates a directory of format 4, 5 or 6
// to it (migrateToIndex); the hello keeps members of different formats
// apart until all run format 7.
const (
	// DataFormat is the format this build writes and reads: every key
	// carries its revision.Meta, the store a dense revision, the log may
	// hold every command of this build, and the history, kept by
	// revision, is the state.
	DataFormat = 7
	// DataFormatByKey is the format whose KV state and history index
	// were kept by key, migrated in place to DataFormat at Open.
	DataFormatByKey = 6
	// DataFormatPastRangeTxn is the format whose log could not hold a
	// batch of PUTs; its state is DataFormat's, recorded as DataFormat at
	// Open.
	DataFormatPastRangeTxn = 5
	// DataFormatHistoryByRevision is the format whose log could not hold
	// a transaction's range at a past revision; its state is DataFormat's,
	// recorded as DataFormat at Open.
	DataFormatHistoryByRevision = 4
	// DataFormatValueByKey is the format whose history kept each value
	// in its by-key record, migrated in place to DataFormat at Open.
	DataFormatValueByKey = 3
	// DataFormatRevisions is the first format with revisions, migrated in
	// place to DataFormat at Open.
	DataFormatRevisions = 2
	// DataFormatNoRevisions is the format of directories written before
	// the format was recorded: one version per key (the index of the
	// entry that last wrote it), no store revision.
	DataFormatNoRevisions = 1
)

// keyFormat records the data format. It is written when a store is created,
// before anything else, so a directory with state and no format key was
// written by a build from before data formats (DataFormatNoRevisions).
var keyFormat = []byte("mformat")

// ErrDataFormat: the data directory is of a data format this build does
// not open. Errors carrying it are *FormatError values.
var ErrDataFormat = errors.New("store: data format")

// FormatError is Open's refusal of a directory of another data format; its
// message names the way forward.
type FormatError struct {
	Dir   string
	Found uint64 // the directory's format
}

func (e *FormatError) Error() string {
	if e.Found > DataFormat {
		return fmt.Sprintf("data directory %s was written by a newer kvd (data format %d); this kvd reads format %d: run the newer kvd on it, see docs/upgrading.md",
			e.Dir, e.Found, DataFormat)
	}
	return fmt.Sprintf("data directory %s was written by an older kvd (data format %d) without revisions; this kvd needs format %d: save a backup with the older kvd (kvctl snapshot save), then start this kvd from it (kvd --restore FILE ...), see docs/upgrading.md",
		e.Dir, e.Found, DataFormat)
}

// Is makes errors.Is(err, ErrDataFormat) hold.
func (e *FormatError) Is(target error) bool { return target == ErrDataFormat }

// checkFormat is Open's first step: it refuses a directory of a format it
// does not read, records DataFormat in a new one (synced, before anything
// else is written to it), and migrates one of DataFormatRevisions to
// DataFormatByKey, recording DataFormat in it (synced, in the batch that
// ends the migration, before anything else of this build is written to
// it).
func (s *Store) checkFormat(dir string) error {
	raw, ok, err := s.getRaw(keyFormat)
	if err != nil {
		return err
	}
	if ok {
		f, err := decodeU64(raw)
		switch {
		case err != nil:
			return fmt.Errorf("%w: data format: %w", ErrCorrupt, err)
		case f >= DataFormatRevisions && f < DataFormat:
			if f < DataFormatHistoryByRevision {
				if err := s.migrateHistory(); err != nil {
					return fmt.Errorf("store: open %s: migrate data format %d to %d: %w", dir, f, DataFormat, err)
				}
			}
			if err := s.migrateToIndex(); err != nil {
				return fmt.Errorf("store: open %s: migrate data format %d to %d: %w", dir, f, DataFormat, err)
			}
			return nil
		case f != DataFormat:
			return &FormatError{Dir: dir, Found: f}
		}
		return nil
	}
	old, err := s.holdsState()
	switch {
	case err != nil:
		return err
	case old:
		return &FormatError{Dir: dir, Found: DataFormatNoRevisions}
	}
	if err := s.setSynced(keyFormat, encodeU64(DataFormat)); err != nil {
		return fmt.Errorf("store: open %s: %w", dir, err) // as probe's: the disk takes no writes
	}
	return nil
}

// holdsState reports whether the database holds raft state or KV data: a
// directory an older build ran a node in. (That build also wrote an
// applied index of 0 when it opened an empty store, and may have recorded
// the cluster and node ids of a node that never joined: none of that is
// state to misread.)
func (s *Store) holdsState() (bool, error) {
	for _, k := range [][]byte{keyHardState, keyConfState, keySnapshot, keyTrunc} {
		if _, ok, err := s.getRaw(k); err != nil || ok {
			return ok, err
		}
	}
	for _, r := range [][2][]byte{{logStart, logEnd}, {memberStart, memberEnd}, {kvStart, kvEnd}, {leaseStart, leaseEnd}} {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: r[0], UpperBound: r[1]})
		if err != nil {
			return false, err
		}
		found := it.First()
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return false, err
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}
