package floor

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kvd-project/kvd/internal/pebbletune"
)

// The Pebble log's truncation, as kvd's defaults truncate its Raft log
// (raft.DefaultSnapshotCount, raft.DefaultSnapshotCatchUpEntries).
const (
	pebbleTruncateEvery = 10000
	pebbleKeepEntries   = 5000
)

// DefaultKeys is Config.Keys' default: the key set of the 64-instance PUT
// point.
const DefaultKeys = 100000

// PebbleLog is the floor's stand-in for kvd's store: one Pebble database
// per node, tuned as kvd's is (internal/pebbletune), where each request of
// a batch becomes a log entry (its index's key, the request) and a write of
// its value to a key drawn uniformly from a fixed key set, and each batch
// also rewrites one small state key (kvd's hard state): all in one Pebble
// batch, committed with Sync. Every pebbleTruncateEvery entries the log is
// truncated to its newest pebbleKeepEntries with a range deletion.
//
// It is a floor, not a copy: kvd also writes what it applies in a later
// batch than the entry, keeps more state per key and does Raft's work;
// this does only the writes every node of a design with the Raft log and
// the state in Pebble must do.
type PebbleLog struct {
	db   *pebble.DB
	opts *pebble.WriteOptions
	// entry is the kind byte of each request's record at its index: 'l',
	// a log entry, or 'w', a history record (OpenPebbleState, which keeps
	// them all: truncate is false).
	entry    byte
	truncate bool
	keys     uint64
	next     uint64 // the next entry's index
	trunc    uint64 // entries below it are deleted
	rng      uint64
	kbuf     []byte
}

// OpenPebbleLog opens a fresh Pebble database in dir. With sync false,
// commits skip the fdatasync.
func OpenPebbleLog(dir string, keys int, sync bool) (*PebbleLog, error) {
	if keys <= 0 {
		return nil, fmt.Errorf("%w: %d keys", ErrConfig, keys)
	}
	o := &pebble.Options{}
	pebbletune.Apply(o, 0)
	db, err := pebble.Open(dir, o)
	if err != nil {
		return nil, err
	}
	l := newPebbleLog(db, keys)
	if sync {
		l.opts = pebble.Sync
	}
	return l, nil
}

func newPebbleLog(db *pebble.DB, keys int) *PebbleLog {
	return &PebbleLog{db: db, opts: pebble.NoSync, entry: 'l', truncate: true, keys: uint64(keys), next: 1, trunc: 1, rng: 0x9e3779b97f4a7c15}
}

// OpenPebbleState opens a fresh Pebble database in dir as kvd's store
// opens its own with --raft-log wal: without Pebble's write-ahead log,
// commits unsynced (their durability is the log's). Each request becomes
// what kvd's apply writes at the least: a history record at its index
// (the revisions' history, a key that only grows) and a write of its value
// to a key drawn from the key set; each batch rewrites the applied index.
func OpenPebbleState(dir string, keys int) (*PebbleLog, error) {
	if keys <= 0 {
		return nil, fmt.Errorf("%w: %d keys", ErrConfig, keys)
	}
	o := &pebble.Options{DisableWAL: true}
	pebbletune.Apply(o, pebbletune.NoWALMemTableSize)
	db, err := pebble.Open(dir, o)
	if err != nil {
		return nil, err
	}
	l := newPebbleLog(db, keys)
	l.entry, l.truncate = 'w', false
	return l, nil
}

// StateLog is the floor of kvd's design up to data format 6, its Raft log
// beside Pebble (--raft-log wal): the plain file Log, fdatasynced per
// batch, and then the batch's state and history written to Pebble as two
// records per PUT (OpenPebbleState).
type StateLog struct {
	log   *Log
	state *PebbleLog
}

// OpenStateLog opens the file log at path and the state database in
// path+".state".
func OpenStateLog(path string, keys int, sync bool) (*StateLog, error) {
	log, err := OpenLog(path, sync)
	if err != nil {
		return nil, err
	}
	state, err := OpenPebbleState(path+".state", keys)
	if err != nil {
		log.Close()
		return nil, err
	}
	return &StateLog{log: log, state: state}, nil
}

// Append makes b durable in the log, then writes its state.
func (s *StateLog) Append(b []byte) error {
	if err := s.log.Append(b); err != nil {
		return err
	}
	return s.state.Append(b)
}

// Close closes both.
func (s *StateLog) Close() error { return errors.Join(s.state.Close(), s.log.Close()) }

// Append stores the batch frame body b: a sequence of requests, each a
// 4-byte big-endian length and that many bytes. The key each request's
// value goes to is drawn, not read from it, so that the floor's 64 clients
// spread over the whole key set as kvbench's do.
func (l *PebbleLog) Append(b []byte) error {
	batch := l.db.NewBatch()
	defer batch.Close()
	next := l.next
	if err := l.write(batch, b); err != nil {
		l.next = next // nothing of a refused frame is written
		return err
	}
	return batch.Commit(l.opts)
}

// write adds b's entries, state writes and log truncation to batch.
func (l *PebbleLog) write(batch *pebble.Batch, b []byte) error {
	for len(b) > 0 {
		if len(b) < 4 {
			return fmt.Errorf("%w: %d stray bytes after a batch's last request", errBadFrame, len(b))
		}
		n := binary.BigEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) {
			return fmt.Errorf("%w: request of %d bytes in %d", errBadFrame, n, len(b)-4)
		}
		req := b[4 : 4+n]
		b = b[4+n:]
		l.kbuf = binary.BigEndian.AppendUint64(append(l.kbuf[:0], l.entry), l.next)
		if err := batch.Set(l.kbuf, req, nil); err != nil {
			return err
		}
		l.next++
		l.kbuf = binary.BigEndian.AppendUint64(append(l.kbuf[:0], 'k'), l.draw())
		if err := batch.Set(l.kbuf, req, nil); err != nil {
			return err
		}
	}
	l.kbuf = binary.BigEndian.AppendUint64(append(l.kbuf[:0], 'm'), 0)
	var hs [8]byte
	binary.BigEndian.PutUint64(hs[:], l.next)
	if err := batch.Set(l.kbuf, hs[:], nil); err != nil {
		return err
	}
	if l.truncate && l.next-l.trunc >= pebbleTruncateEvery+pebbleKeepEntries {
		to := l.next - pebbleKeepEntries
		from := binary.BigEndian.AppendUint64([]byte{l.entry}, l.trunc)
		if err := batch.DeleteRange(from, binary.BigEndian.AppendUint64([]byte{l.entry}, to), nil); err != nil {
			return err
		}
		l.trunc = to
	}
	return nil
}

// draw returns the next key index, uniform over the key set (xorshift64).
func (l *PebbleLog) draw() uint64 {
	l.rng ^= l.rng << 13
	l.rng ^= l.rng >> 7
	l.rng ^= l.rng << 17
	return l.rng % l.keys
}

// Close closes the database.
func (l *PebbleLog) Close() error { return l.db.Close() }
