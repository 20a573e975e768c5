package wal

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Log is a Raft log: entries and HardState in segment files. Appends,
// HardState changes, Compact and Reset are buffered; Sync writes them and
// makes them durable with one fdatasync (group commit). Reads see
// everything appended, synced or not. Safe for concurrent use; writes are
// meant to come from one goroutine (the raft loop).
type Log struct {
	mu         sync.Mutex
	cfg        Config
	maxPayload int
	dir        vfs.File
	lock       interface{ Close() error }

	segs     []*segment // oldest first; the last is the active one
	spares   []uint64   // sequence numbers of spare files, to reuse
	nextSeq  uint64
	batch    uint64 // the current sync generation
	buf      []byte // records of the active segment not yet written
	scratch  []byte
	dirty    bool // records written or buffered since the last sync
	hs       *pb.HardState
	trunc    indexTerm // entries at or below trunc.index are gone
	ents     []loc     // entries trunc.index+1 ... in order
	resetSeq uint64    // the segment holding the latest Reset record
	err      error     // sticky: set by a failed write or sync, or Close
	closed   bool

	// A spare being zero-filled in the background, so that rolling to a
	// new segment does not wait for it: prep is closed when it is done,
	// then prepSeq and prepErr hold the outcome (nil prep: none).
	prep    chan struct{}
	prepSeq uint64
	prepErr error

	stats counters // read by Stats without mu
}

type indexTerm struct{ index, term uint64 }

// loc is where an entry's record lies.
type loc struct {
	seq  uint64
	off  int64
	size int32
	term uint64
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

func (l *Log) last() uint64 { return l.trunc.index + uint64(len(l.ents)) }

// fail makes err sticky: after a failed write or fdatasync the state of
// the file is unknown, so the log takes no more writes.
func (l *Log) fail(err error) error {
	if l.err == nil {
		l.err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// Append appends ents, which must be contiguous and start within
// [FirstIndex, LastIndex+1]; an entry at an index the log already holds
// replaces it and every entry after it, as raft's log does when a new
// leader overwrites an uncommitted suffix. Durable after the next Sync.
func (l *Log) Append(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.publish()
	if l.err != nil {
		return l.err
	}
	first := ents[0].GetIndex()
	if first <= l.trunc.index || first > l.last()+1 {
		return fmt.Errorf("%w: append at %d, log holds (%d, %d]", ErrBadAppend, first, l.trunc.index, l.last())
	}
	for i, e := range ents {
		if e.GetIndex() != first+uint64(i) {
			return fmt.Errorf("%w: entry %d follows %d", ErrBadAppend, e.GetIndex(), first+uint64(i)-1)
		}
		if sz := proto.Size(e); sz > l.maxPayload {
			return fmt.Errorf("%w: entry %d is %d bytes, the limit is %d", ErrTooLarge, e.GetIndex(), sz, l.maxPayload)
		}
	}
	l.ents = l.ents[:first-l.trunc.index-1]
	for _, e := range ents {
		var err error
		l.scratch, err = proto.MarshalOptions{}.MarshalAppend(l.scratch[:0], e)
		if err != nil {
			return fmt.Errorf("wal: marshal entry %d: %w", e.GetIndex(), err)
		}
		s, off, err := l.put(recEntry, l.scratch)
		if err != nil {
			return err
		}
		s.maxIndex = max(s.maxIndex, e.GetIndex())
		l.ents = append(l.ents, loc{seq: s.seq, off: off, size: int32(recordSize(len(l.scratch))), term: e.GetTerm()})
	}
	l.stats.entries.Add(uint64(len(ents)))
	return nil
}

// SetHardState records hs (nothing if it equals the current one). Durable
// after the next Sync.
func (l *Log) SetHardState(hs *pb.HardState) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.publish() // a record may roll the segment
	if l.err != nil {
		return l.err
	}
	if hs == nil || proto.Equal(hs, l.hs) {
		return nil
	}
	b, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	if _, _, err := l.put(recHardState, b); err != nil {
		return err
	}
	l.hs = proto.Clone(hs).(*pb.HardState)
	return nil
}

// put buffers one record in the active segment, rolling to a new segment
// first if it does not fit (keeping room for the end record).
func (l *Log) put(t recType, payload []byte) (*segment, int64, error) {
	n := int64(recordSize(len(payload)))
	if l.active().size+n+endSize > l.cfg.SegmentSize {
		if err := l.roll(); err != nil {
			return nil, 0, l.fail(err)
		}
	}
	s := l.active()
	off := s.size
	l.buf = appendRecord(l.buf, t, s.seq, l.batch, s.salt, payload)
	s.size += n
	l.dirty = true
	return s, off, nil
}

// roll ends the active segment and starts the next. The ended segment is
// synced before the next one gets any record, so that every segment but
// the last is whole on disk: replay may then treat a bad record in any
// other segment as corruption, never as a torn tail.
func (l *Log) roll() error {
	s := l.active()
	nextSalt, err := l.drawSalt()
	if err != nil {
		return err
	}
	l.buf = appendEnd(l.buf, s.seq, l.batch, s.salt, l.nextSeq, nextSalt)
	s.size += endSize
	l.dirty = true
	if err := l.syncLocked(); err != nil {
		return err
	}
	l.stats.rolls.Add(1)
	return l.startSegment(nextSalt)
}

// startSegment makes the next segment, salted with s, the active one,
// with its header buffered, and has a spare prepared for the one after.
func (l *Log) startSegment(s salt) error {
	next, err := l.newSegment(l.nextSeq, s)
	if err != nil {
		return err
	}
	l.nextSeq++
	l.segs = append(l.segs, next)
	l.prepareSpare()
	return l.putHeader()
}

// putHeader buffers the active segment's first record: the HardState and
// truncation point as of now, so that the segments before it can be freed
// without losing either.
func (l *Log) putHeader() error {
	b, err := proto.Marshal(l.hs)
	if err != nil {
		return err
	}
	s := l.active()
	payload := appendHeader(nil, l.trunc, l.prevSeq(), s.salt, b)
	l.buf = appendRecord(l.buf, recSegment, s.seq, l.batch, unsalted, payload)
	s.size += int64(recordSize(len(payload)))
	l.dirty = true
	return nil
}

// flush writes the buffered records to the active segment.
func (l *Log) flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	s := l.active()
	if _, err := s.f.WriteAt(l.buf, s.flushed); err != nil {
		return l.fail(err)
	}
	s.flushed += int64(len(l.buf))
	l.stats.bytes.Add(uint64(len(l.buf)))
	l.buf = l.buf[:0]
	return nil
}

// Sync makes everything appended so far durable: one write and one
// fdatasync for all the records since the last Sync.
func (l *Log) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	return l.syncLocked()
}

func (l *Log) syncLocked() error {
	if !l.dirty {
		return nil
	}
	if err := l.flush(); err != nil {
		return err
	}
	start := time.Now()
	if err := l.active().f.SyncData(); err != nil {
		return l.fail(err)
	}
	l.stats.observeSync(time.Since(start))
	// Every record of a later generation is written after this sync
	// returned: replay relies on it to tell corruption from a torn tail.
	l.batch++
	l.dirty = false
	return nil
}

// Compact drops the entries at or below index (which must be in the log),
// syncs (also when there is nothing to drop), and frees the segments that
// held only dropped entries.
func (l *Log) Compact(index uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.publish()
	if l.err != nil {
		return l.err
	}
	if index <= l.trunc.index {
		return l.syncLocked()
	}
	if index > l.last() {
		return fmt.Errorf("%w: compact to %d beyond last index %d", ErrBadAppend, index, l.last())
	}
	term := l.ents[index-l.trunc.index-1].term
	if _, _, err := l.put(recCompact, indexTermBytes(index, term)); err != nil {
		return err
	}
	if err := l.syncLocked(); err != nil {
		return err
	}
	l.ents = append([]loc(nil), l.ents[index-l.trunc.index:]...)
	l.trunc = indexTerm{index, term}
	l.stats.compactions.Add(1)
	return l.fail2(l.release())
}

// Reset empties the log at (index, term), as installing a snapshot does:
// every entry is dropped and the next append is at index+1. It syncs, and
// frees every segment but the active one.
func (l *Log) Reset(index, term uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.publish()
	if l.err != nil {
		return l.err
	}
	if index < l.trunc.index {
		return fmt.Errorf("%w: reset to %d below the truncation point %d", ErrBadAppend, index, l.trunc.index)
	}
	s, _, err := l.put(recReset, indexTermBytes(index, term))
	if err != nil {
		return err
	}
	if err := l.syncLocked(); err != nil {
		return err
	}
	l.ents = nil
	l.trunc = indexTerm{index, term}
	l.resetSeq = s.seq
	l.stats.resets.Add(1)
	return l.fail2(l.release())
}

// fail2 is fail for an error that may be nil.
func (l *Log) fail2(err error) error {
	if err == nil {
		return nil
	}
	return l.fail(err)
}

// HardState returns the latest HardState set.
func (l *Log) HardState() *pb.HardState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return proto.Clone(l.hs).(*pb.HardState)
}

// FirstIndex is the index of the first entry held (LastIndex+1 if none).
func (l *Log) FirstIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.trunc.index + 1
}

// LastIndex is the index of the last entry held (the truncation point if
// none).
func (l *Log) LastIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last()
}

// Term returns the term of entry i, for i in [FirstIndex-1, LastIndex],
// from memory.
func (l *Log) Term(i uint64) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case i < l.trunc.index:
		return 0, etcdraft.ErrCompacted
	case i == l.trunc.index:
		return l.trunc.term, nil
	case i > l.last():
		return 0, etcdraft.ErrUnavailable
	}
	return l.ents[i-l.trunc.index-1].term, nil
}

// Entries returns the entries [lo, hi): at least one if lo < hi, then no
// more than maxSize bytes in all, as raft.Storage's Entries does.
func (l *Log) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case lo <= l.trunc.index:
		return nil, etcdraft.ErrCompacted
	case hi > l.last()+1:
		return nil, fmt.Errorf("%w: entries [%d,%d) beyond last index %d", etcdraft.ErrUnavailable, lo, hi, l.last())
	case lo >= hi:
		return nil, nil
	}
	if l.err != nil {
		return nil, l.err
	}
	if err := l.flush(); err != nil {
		return nil, err
	}
	var out []*pb.Entry
	var total uint64
	for i := lo; i < hi; {
		run, err := l.readRun(i, hi, maxSize-min(total, maxSize))
		if err != nil {
			return out, err
		}
		for _, e := range run {
			total += uint64(proto.Size(e))
			if len(out) > 0 && total > maxSize {
				return out, nil
			}
			out = append(out, e)
		}
		i += uint64(len(run))
	}
	return out, nil
}

// readChunk bounds one read of back-to-back records.
const readChunk = 256 << 10

// readRun reads entries from i on (below hi) that lie back to back in one
// segment with one read: at least one entry, then no more than readChunk
// or budget bytes.
func (l *Log) readRun(i, hi, budget uint64) ([]*pb.Entry, error) {
	first := l.ents[i-l.trunc.index-1]
	s := l.segment(first.seq)
	if s == nil {
		return nil, fmt.Errorf("%w: entry %d in freed segment %d", ErrCorrupt, i, first.seq)
	}
	n, size := 1, int64(first.size)
	for j := i + 1; j < hi; j++ {
		lc := l.ents[j-l.trunc.index-1]
		if lc.seq != first.seq || lc.off != first.off+size || size+int64(lc.size) > min(readChunk, int64(budget)) {
			break
		}
		n, size = n+1, size+int64(lc.size)
	}
	b := make([]byte, size)
	if _, err := s.f.ReadAt(b, first.off); err != nil {
		return nil, fmt.Errorf("wal: read entries [%d,%d): %w", i, i+uint64(n), err)
	}
	out := make([]*pb.Entry, n)
	for k := range out {
		idx := i + uint64(k)
		lc := l.ents[idx-l.trunc.index-1]
		var err error
		if out[k], err = decodeEntry(b[lc.off-first.off:][:lc.size], s.seq, s.salt, idx, lc.term); err != nil {
			return nil, fmt.Errorf("segment %d offset %d: %w", s.seq, lc.off, err)
		}
	}
	return out, nil
}

// decodeEntry decodes the entry record b and checks it holds entry index
// of term, as the in-memory index says.
func decodeEntry(b []byte, seq uint64, s salt, index, term uint64) (*pb.Entry, error) {
	r, _, err := decodeRecord(b, seq, s, MaxRecord)
	if err != nil || r.typ != recEntry {
		return nil, fmt.Errorf("%w: entry %d unreadable", ErrCorrupt, index)
	}
	e := &pb.Entry{}
	if err := proto.Unmarshal(r.payload, e); err != nil || e.GetIndex() != index || e.GetTerm() != term {
		return nil, fmt.Errorf("%w: entry %d does not match the index", ErrCorrupt, index)
	}
	return e, nil
}

// prevSeq is the sequence number of the segment before the active one (0
// if none is kept).
func (l *Log) prevSeq() uint64 {
	if len(l.segs) < 2 {
		return 0
	}
	return l.segs[len(l.segs)-2].seq
}

func (l *Log) segment(seq uint64) *segment {
	for _, s := range l.segs {
		if s.seq == seq {
			return s
		}
	}
	return nil
}

// Close syncs what is buffered and closes the files. Closing twice is a
// no-op.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	l.collectSpare()
	var err error
	if l.err == nil {
		err = l.syncLocked()
	}
	for _, s := range l.segs {
		err = errors.Join(err, s.f.Close())
	}
	err = errors.Join(err, l.dir.Close())
	if l.lock != nil {
		err = errors.Join(err, l.lock.Close())
	}
	if l.err == nil {
		l.err = ErrClosed
	}
	return err
}
