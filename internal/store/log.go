package store

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The raft.Storage implementation. raft calls these from the loop goroutine;
// everything returned is treated as immutable by both sides.

var _ etcdraft.Storage = (*Store)(nil)

// InitialState returns the persisted HardState and the ConfState as of the
// applied index (which is what raft.Config.Applied must be set to).
func (s *Store) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hs, s.cs, nil
}

// FirstIndex is the first index still in the log: one past the truncation
// point (which may lie below the latest snapshot, see CreateSnapshot).
func (s *Store) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trunc.index + 1, nil
}

// LastIndex is the newest index in the log (the truncation point if the log
// is empty).
func (s *Store) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, nil
}

// Snapshot returns the latest snapshot (empty if none was ever taken).
func (s *Store) Snapshot() (*pb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap, nil
}

// Term returns the term of entry i, for i in [FirstIndex()-1, LastIndex()].
func (s *Store) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.termLocked(i)
}

func (s *Store) termLocked(i uint64) (uint64, error) {
	switch {
	case i == s.trunc.index:
		return s.trunc.term, nil
	case i < s.trunc.index:
		return 0, etcdraft.ErrCompacted
	case i > s.last:
		return 0, etcdraft.ErrUnavailable
	}
	if first := s.cacheFirst(); i >= first {
		return s.cache[i-first].GetTerm(), nil
	}
	if s.wal != nil {
		return s.wal.Term(i)
	}
	e, err := s.readEntry(i)
	if err != nil {
		return 0, err
	}
	return e.GetTerm(), nil
}

// Entries returns the entries [lo, hi), at least one if any, and no more
// than maxSize bytes beyond the first.
func (s *Store) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case lo <= s.trunc.index:
		return nil, etcdraft.ErrCompacted
	case hi > s.last+1:
		return nil, fmt.Errorf("%w: entries [%d,%d) beyond last index %d", etcdraft.ErrUnavailable, lo, hi, s.last)
	case lo >= hi:
		return nil, nil
	}
	sz := sizer{max: maxSize}
	ents := make([]*pb.Entry, 0, min(hi-lo, 256))
	first := s.cacheFirst()
	if lo < first {
		var err error
		ents, err = s.readEntries(ents, lo, min(hi, first), &sz)
		if err != nil || sz.full {
			return ents, err
		}
		lo = min(hi, first)
	}
	for i := lo; i < hi; i++ {
		e := s.cache[i-first]
		if !sz.take(e) {
			break
		}
		ents = append(ents, e)
	}
	return ents, nil
}

// sizer implements the "at least one entry, then no more than max bytes"
// rule shared by both halves of Entries.
type sizer struct {
	max, total uint64
	n          int
	full       bool
}

func (z *sizer) take(e *pb.Entry) bool {
	z.total += uint64(proto.Size(e))
	if z.n > 0 && z.total > z.max {
		z.full = true
		return false
	}
	z.n++
	return true
}

// readEntries appends entries [lo, hi) from the log (Pebble or the WAL)
// to ents.
func (s *Store) readEntries(ents []*pb.Entry, lo, hi uint64, sz *sizer) ([]*pb.Entry, error) {
	if s.wal != nil {
		return s.readWALEntries(ents, lo, hi, sz)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logKey(lo), UpperBound: logKey(hi)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	want := lo
	for ok := it.First(); ok; ok = it.Next() {
		e, err := unmarshalEntry(it.Value())
		if err != nil {
			return nil, err
		}
		if e.GetIndex() != want {
			return nil, fmt.Errorf("%w: log gap, want index %d found %d", etcdraft.ErrUnavailable, want, e.GetIndex())
		}
		if !sz.take(e) {
			return ents, nil
		}
		ents = append(ents, e)
		want++
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	if want != hi {
		return nil, fmt.Errorf("%w: log ends at %d, want up to %d", etcdraft.ErrUnavailable, want-1, hi-1)
	}
	return ents, nil
}

// readWALEntries is readEntries in the "wal" mode.
func (s *Store) readWALEntries(ents []*pb.Entry, lo, hi uint64, sz *sizer) ([]*pb.Entry, error) {
	for lo < hi {
		got, err := s.wal.Entries(lo, hi, sz.max-min(sz.total, sz.max))
		if err != nil {
			return ents, err
		}
		if len(got) == 0 {
			return ents, fmt.Errorf("%w: raft log returned no entry at %d", etcdraft.ErrUnavailable, lo)
		}
		for _, e := range got {
			if !sz.take(e) {
				return ents, nil
			}
			ents = append(ents, e)
		}
		lo += uint64(len(got))
	}
	return ents, nil
}

func (s *Store) readEntry(i uint64) (*pb.Entry, error) {
	raw, ok, err := s.getRaw(logKey(i))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: entry %d missing", etcdraft.ErrUnavailable, i)
	}
	return unmarshalEntry(raw)
}

// cacheFirst is the index of the oldest cached entry (last+1 when empty).
func (s *Store) cacheFirst() uint64 {
	return s.last + 1 - uint64(len(s.cache))
}

// cacheAppend makes ents (already durable) the newest log entries: it moves
// last and keeps the cache, which always ends at last, in step, dropping any
// cached suffix the entries replace. The cache holds the newest cacheSize to
// 2*cacheSize entries.
func (s *Store) cacheAppend(ents []*pb.Entry) {
	first := ents[0].GetIndex()
	switch cf := s.cacheFirst(); {
	case s.cacheSize == 0:
		s.cache = nil
	case first < cf:
		s.cache = append([]*pb.Entry(nil), ents...)
	default:
		s.cache = append(s.cache[:first-cf], ents...)
	}
	s.last = ents[len(ents)-1].GetIndex()
	if len(s.cache) > 2*s.cacheSize {
		// Trim back to cacheSize only once it doubled, so the copy (which
		// lets the dropped prefix be collected) costs O(1) per entry.
		s.cache = append(make([]*pb.Entry, 0, 2*s.cacheSize), s.cache[len(s.cache)-s.cacheSize:]...)
	}
}

// cacheTrim drops cached entries at or below index.
func (s *Store) cacheTrim(index uint64) {
	cf := s.cacheFirst()
	if index < cf {
		return
	}
	if index >= s.last {
		s.cache = nil
		return
	}
	s.cache = append([]*pb.Entry(nil), s.cache[index+1-cf:]...)
}

func unmarshalEntry(raw []byte) (*pb.Entry, error) {
	e := &pb.Entry{}
	if err := proto.Unmarshal(raw, e); err != nil {
		return nil, fmt.Errorf("%w: log entry: %v", ErrCorrupt, err)
	}
	return e, nil
}

func beU64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
