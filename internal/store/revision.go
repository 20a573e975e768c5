package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/kvd-project/kvd/internal/errs"
)

// The revision space holds the store revision, the compaction revision and
// the history of every key (history.go). It lives under the KV generation,
// like the keys and the leases, so that a snapshot install swaps all three
// in one batch and a reader sees one generation's whole state.
//
//	"r" + be64(gen) + 's'      store revision: le64
//	"r" + be64(gen) + 'c'      compaction revision: le64
//	"r" + be64(gen) + 'w' + be64(rev) + be32(seq) + key
//	                           history, in revision order (seq: the write's
//	                           place in its revision): a flags byte
//	                           (1: tombstone) + revision.Meta + value
//
// Formats 2 to 6 also kept, and Open migrates away (migrate.go):
//
//	"r" + be64(gen) + 'd'      physical compaction's cursor
//	"r" + be64(gen) + 'h' + esc(key) + 0x00 0x01 + be64(^rev)
//	                           index of the history by key, newest first:
//	                           the flags byte + be32(seq) (formats 4 to 6;
//	                           formats 2 and 3 kept the value here and
//	                           nothing in the 'w' record)
const prefixRev = 'r'

// Kinds of record in a generation's revision space.
const (
	revRevision = 's'
	revCompact  = 'c'
	revCursor   = 'd'
	revHistory  = 'h'
	revOrder    = 'w'
)

const revKeyHeader = 9 // prefix + be64(gen)

var (
	revStart = []byte{prefixRev}
	revEnd   = []byte{prefixRev + 1}
)

// revGenPrefix is the first key of generation gen's revision space.
func revGenPrefix(gen uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{prefixRev}, gen)
}

// revGenEnd is the exclusive upper bound of generation gen's revision space.
func revGenEnd(gen uint64) []byte {
	if gen == math.MaxUint64 {
		return revEnd
	}
	return revGenPrefix(gen + 1)
}

// appendRevKey appends the key of record kind in gen's revision space.
func appendRevKey(dst []byte, gen uint64, kind byte) []byte {
	dst = append(dst, prefixRev)
	dst = binary.BigEndian.AppendUint64(dst, gen)
	return append(dst, kind)
}

// revState is the store's published store and compaction revisions (those
// of the committed state) and its physical compactor.
type revState struct {
	rev, compact atomic.Uint64
	comp         *compactor
	// cur is the physical compaction's progress, which its batches,
	// one at a time (compactor.mu), read and advance.
	cur compactCursor
}

// updateRevs is an Update's view of the two revisions, loaded from the
// store at first use (the raft loop commits one Update before it starts
// the next) and published by Commit.
type updateRevs struct {
	loaded, dirty bool
	// revUnwritten: SetRevision moved rev and its record is not yet in
	// the batch (writeRevision puts it there once, at Commit).
	revUnwritten bool
	rev, compact uint64
	// seqRev and seq number the writes of revision seqRev in the order
	// RecordHistory records them: etcd's order of a transaction's events.
	seqRev     uint64
	seq        uint32
	kbuf, vbuf []byte
}

func (u *Update) revs() *updateRevs {
	r := &u.rv
	if !r.loaded {
		r.loaded = true
		r.rev, r.compact = u.s.rs.rev.Load(), u.s.rs.compact.Load()
	}
	return r
}

// Revision is the store revision as this Update sees it (its own
// SetRevision included): the revision of the last applied request that
// changed the state; 0 before any did.
func (u *Update) Revision() uint64 { return u.revs().rev }

// SetRevision records rev as the store revision. The store revision
// never goes back. Its record goes in the Update's batch once, at Commit,
// however many entries of the Update moved it: nothing reads it through
// the batch, and readers of other goroutines see it only committed.
func (u *Update) SetRevision(rev uint64) error {
	r := u.revs()
	if rev < r.rev {
		return fmt.Errorf("store: revision %d would go back from %d", rev, r.rev)
	}
	r.rev, r.dirty, r.revUnwritten = rev, true, true
	return nil
}

// writeRevision puts the store revision SetRevision last recorded in the
// batch, in the Update's generation (a snapshot installed before it in
// the same Update made that the new one).
func (u *Update) writeRevision() error {
	r := &u.rv
	if !r.revUnwritten {
		return nil
	}
	r.revUnwritten = false
	r.kbuf = appendRevKey(r.kbuf[:0], u.gen, revRevision)
	return u.b.Set(r.kbuf, u.u64(r.rev), nil)
}

// CompactRevision is the compaction revision as this Update sees it.
func (u *Update) CompactRevision() uint64 { return u.revs().compact }

// Revision is the committed store revision (0 before any write). It is
// published when the Update that sets it commits, like Applied.
func (s *Store) Revision() uint64 { return s.rs.rev.Load() }

// CompactRevision is the committed compaction revision: reads at revisions
// below it fail with errs.ErrCompacted (0: nothing compacted).
func (s *Store) CompactRevision() uint64 { return s.rs.compact.Load() }

// publishRevs makes a committed Update's revisions the store's, and wakes
// the compactor when there may be history to delete.
func (u *Update) publishRevs() {
	r := &u.rv
	if u.reset {
		// A snapshot install loaded the new generation's revisions.
		u.s.rs.rev.Store(r.rev)
		u.s.rs.compact.Store(r.compact)
		u.s.rs.comp.kick()
		return
	}
	if !r.dirty {
		return
	}
	u.s.rs.rev.Store(r.rev)
	if u.s.rs.compact.Swap(r.compact) != r.compact {
		u.s.rs.comp.kick()
	}
}

// loadRevs reads generation gen's store and compaction revisions.
func loadRevs(get func([]byte) ([]byte, bool, error), gen uint64) (rev, compact uint64, err error) {
	for _, f := range []struct {
		kind byte
		dst  *uint64
	}{{revRevision, &rev}, {revCompact, &compact}} {
		raw, ok, err := get(appendRevKey(nil, gen, f.kind))
		if err != nil {
			return 0, 0, err
		}
		if ok {
			if *f.dst, err = decodeU64(raw); err != nil {
				return 0, 0, err
			}
		}
	}
	return rev, compact, nil
}

// recoverRevs loads the current generation's revisions at Open.
func (s *Store) recoverRevs() error {
	rev, compact, err := loadRevs(s.getRaw, s.gen)
	if err != nil {
		return err
	}
	s.rs.rev.Store(rev)
	s.rs.compact.Store(compact)
	return nil
}

// installRevs takes the revisions of st's generation (written by
// Staged.AddRevision) for the Update that installs it, and drops the old
// generation's revision space in its batch. The store revision is at
// least its newest write's, maxRev (the state is the history at it).
func (u *Update) installRevs(old, gen, maxRev uint64) error {
	rev, compact, err := loadRevs(u.getRaw, gen)
	if err != nil {
		return err
	}
	r := u.revs()
	// The new generation holds its own revision record: one SetRevision
	// left unwritten belonged to the old one.
	r.rev, r.compact, r.dirty, r.revUnwritten = rev, compact, true, false
	if maxRev > rev {
		r.rev, r.revUnwritten = maxRev, true
	}
	return u.b.DeleteRange(revGenPrefix(old), revGenEnd(old), nil)
}

// revsAt reads the store and compaction revisions a snapshot holds for
// gen: exactly those of the history it holds.
func revsAt(snap *pebble.Snapshot, gen uint64) (rev, compact uint64, err error) {
	return loadRevs(func(key []byte) ([]byte, bool, error) {
		raw, c, err := snap.Get(key)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
			return nil, false, nil
		case err != nil:
			return nil, false, err
		}
		defer c.Close()
		return append([]byte(nil), raw...), true, nil
	}, gen)
}

// checkRev checks that rev (0: the latest) may be read from a state at
// store revision cur compacted at compact, and returns the revision to
// read at. A read at the compaction revision itself is answered, as
// etcd's is.
func checkRev(rev, cur, compact uint64) (uint64, error) {
	switch {
	case rev == 0:
		return cur, nil
	case rev > cur:
		return 0, fmt.Errorf("%w: revision %d, current %d", errs.ErrFutureRevision, rev, cur)
	case rev < compact:
		return 0, fmt.Errorf("%w: revision %d, compacted at %d", errs.ErrCompacted, rev, compact)
	}
	return rev, nil
}
