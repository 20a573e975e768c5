package wal

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Recovered is what Open read back from the log.
type Recovered struct {
	// HardState is the latest HardState recorded (empty if none).
	HardState *pb.HardState
	// Index and Term are the truncation point: the entries at or below
	// Index are gone (compacted, or replaced by a snapshot).
	Index, Term uint64
	// Entries are the entries after Index, in order.
	Entries []*pb.Entry
}

// How a segment's records end.
type endKind int

const (
	endRecord endKind = iota // an end-of-segment record
	endBad                   // bytes that are not a record of the segment
	endFile                  // the end of the file
)

// scanned is one segment as read at open.
type scanned struct {
	seq    uint64
	f      vfs.File
	salted bool // its header has a salt (false: the format without salts)
	salt   salt
	size   int64 // the file's size
	recs   []scannedRecord
	end    int64 // offset after the last valid record (before an end record)
	ended  endKind
	beyond uint64 // endBad: the highest generation of a valid record after end
	// endRecord: the end record's generation (the sync that preceded the
	// next segment's first record closed it), and the segment it names
	// next with that segment's salt (named false: it names none)
	endBatch uint64
	next     uint64
	nextSalt salt
	named    bool
	// raw is the segment's bytes, kept only when its header is bad: the
	// salt named by the previous segment's end record may still check
	// its records (checkSegments)
	raw []byte
}

type scannedRecord struct {
	typ   recType
	batch uint64
	off   int64
	size  int32
	entry *pb.Entry // recEntry
	data  []byte    // other types: the payload, copied
}

// Open opens (creating if needed) the log in cfg.Dir and replays it. A
// torn tail (the unsynced end of the last segment) ends the log; damage
// anywhere else is ErrCorrupt. Open then goes on in the last segment,
// after a synced marker that keeps what lay past the torn tail from ever
// being read again, or starts a new segment if the last one is full.
func Open(cfg Config) (*Log, *Recovered, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	fs := cfg.FS
	if err := makeDir(fs, cfg.Dir); err != nil {
		return nil, nil, err
	}
	lock, err := fs.Lock(fs.PathJoin(cfg.Dir, "LOCK"))
	if err != nil {
		return nil, nil, fmt.Errorf("wal: lock %s: %w", cfg.Dir, err)
	}
	l := &Log{cfg: cfg, maxPayload: cfg.maxPayload(), lock: lock, hs: &pb.HardState{}, batch: 1, nextSeq: 1}
	rec, err := l.open()
	if err != nil {
		l.collectSpare()
		for _, s := range l.segs {
			_ = s.f.Close()
		}
		if l.dir != nil {
			_ = l.dir.Close()
		}
		_ = lock.Close()
		return nil, nil, err
	}
	l.publish()
	return l, rec, nil
}

// makeDir creates dir if needed and syncs its parent, so that the
// directory's own name is durable before anything in it is relied on.
func makeDir(fs vfs.FS, dir string) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	parent, err := fs.OpenDir(fs.PathDir(dir))
	if err != nil {
		return err
	}
	return errors.Join(parent.Sync(), parent.Close())
}

func (l *Log) open() (*Recovered, error) {
	fs := l.cfg.FS
	var err error
	if l.dir, err = fs.OpenDir(l.cfg.Dir); err != nil {
		return nil, err
	}
	names, err := fs.List(l.cfg.Dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, name := range names {
		seq, spare, ok := parseName(name)
		if !ok {
			continue
		}
		l.nextSeq = max(l.nextSeq, seq+1)
		if spare {
			l.spares = append(l.spares, seq)
		} else {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	slices.Sort(l.spares)
	var scans []*scanned
	defer func() {
		for _, sc := range scans {
			if sc.f != nil && l.segment(sc.seq) == nil {
				_ = sc.f.Close()
			}
		}
	}()
	for _, seq := range seqs {
		sc, err := l.scanSegment(seq)
		if err != nil {
			return nil, err
		}
		scans = append(scans, sc)
	}
	kept, err := l.checkSegments(scans)
	if err != nil {
		return nil, err
	}
	rec, err := l.replay(kept)
	if err != nil {
		return nil, err
	}
	if err := l.restart(kept, scans[len(kept):]); err != nil {
		return nil, err
	}
	return rec, nil
}

// scanSegment reads segment seq and decodes its records.
func (l *Log) scanSegment(seq uint64) (*scanned, error) {
	fs := l.cfg.FS
	f, err := fs.OpenReadWrite(fs.PathJoin(l.cfg.Dir, segName(seq)), vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	sc := &scanned{seq: seq, f: f}
	st, err := f.Stat()
	if err != nil {
		return sc, err
	}
	sc.size = st.Size()
	if st.Size() > MaxSegmentFile {
		return sc, fmt.Errorf("%w: segment %s is %d bytes, more than %d", ErrCorrupt, segName(seq), st.Size(), MaxSegmentFile)
	}
	buf := make([]byte, st.Size())
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return sc, fmt.Errorf("wal: read %s: %w", segName(seq), err)
	}
	return sc, sc.decode(buf)
}

// decode fills sc from the segment's bytes. The record at offset 0 must
// be the segment's header, and no other record may be one; the header's
// salt is what every later record's checksum starts with (see doc.go for
// why bytes a client chose then never count as a record). A record of an
// older generation than the one before it is not a record of the log: it
// is a leftover from before Open continued the segment (see restart).
func (sc *scanned) decode(buf []byte) error {
	off := 0
	var prev uint64
	for off < len(buf) {
		r, n, err := decodeRecord(buf[off:], sc.seq, sc.salt, MaxRecord)
		if err == nil && (r.batch < prev || (r.typ == recSegment) != (off == 0)) {
			err = errNoRecord
		}
		if err != nil {
			sc.ended, sc.end = endBad, int64(off)
			if off > 0 {
				sc.beyond = highestBatchAfter(buf, off+recordAlign, sc.seq, sc.salt)
			} else {
				// Without its header the segment's salt is unknown here.
				sc.raw = buf
			}
			return nil
		}
		if off == 0 {
			h, err := parseHeader(r.payload)
			if err != nil {
				return fmt.Errorf("segment %s: %w", segName(sc.seq), err)
			}
			sc.salted, sc.salt = h.salted, h.salt
		}
		if r.typ == recEnd {
			sc.ended, sc.end, sc.endBatch = endRecord, int64(off), r.batch
			sc.next, sc.nextSalt, sc.named = parseEnd(r.payload)
			return nil
		}
		sr := scannedRecord{typ: r.typ, batch: r.batch, off: int64(off), size: int32(n)}
		if r.typ == recEntry {
			sr.entry = &pb.Entry{}
			if err := proto.Unmarshal(r.payload, sr.entry); err != nil {
				return fmt.Errorf("%w: segment %s offset %d: entry: %w", ErrCorrupt, segName(sc.seq), off, err)
			}
		} else {
			sr.data = slices.Clone(r.payload)
		}
		sc.recs = append(sc.recs, sr)
		prev = r.batch
		off += n
	}
	sc.ended, sc.end = endFile, int64(off)
	return nil
}

// highestBatchAfter is the highest generation of any valid record of
// segment seq (salted with s) starting at an aligned offset from off on
// (0 if none).
func highestBatchAfter(buf []byte, off int, seq uint64, s salt) uint64 {
	var hi uint64
	for off = align(off); off+hdrSize <= len(buf); off += recordAlign {
		if r, _, err := decodeRecord(buf[off:], seq, s, MaxRecord); err == nil && r.typ != recSegment {
			hi = max(hi, r.batch)
		}
	}
	return hi
}

// checkSegments decides which segments hold the log and that the damage
// found, if any, is a torn tail. Every segment but the last was synced
// whole (with its end record) before the next got a record, and a record
// of generation g is only written once every record of generation g-2 and
// before is durable. So: a trailing segment with no valid record is a
// segment started but never written (dropped); every other segment but
// the last must end with an end record; and a bad record followed by a
// valid one two generations newer than the last good record is
// corruption, not a torn write.
func (l *Log) checkSegments(scans []*scanned) ([]*scanned, error) {
	k := len(scans)
	for k > 0 && len(scans[k-1].recs) == 0 {
		k--
	}
	// lastBatch is the generation of the last valid record, the end
	// record included.
	var lastBatch uint64
	if k > 0 {
		recs := scans[k-1].recs
		lastBatch = recs[len(recs)-1].batch
		if scans[k-1].ended == endRecord {
			lastBatch = scans[k-1].endBatch
		}
	}
	for _, sc := range scans[k:] {
		headerless(scans[:k], sc)
		if sc.ended == endBad && sc.beyond >= lastBatch+2 {
			return nil, fmt.Errorf("%w: segment %s: bad first record followed by valid records", ErrCorrupt, segName(sc.seq))
		}
	}
	for i, sc := range scans[:k] {
		if len(sc.recs) == 0 || sc.recs[0].typ != recSegment {
			return nil, fmt.Errorf("%w: segment %s does not start with its header", ErrCorrupt, segName(sc.seq))
		}
		if i < k-1 && sc.ended != endRecord {
			return nil, fmt.Errorf("%w: segment %s: bad record at offset %d before the last segment", ErrCorrupt, segName(sc.seq), sc.end)
		}
		if h, err := parseHeader(sc.recs[0].data); err != nil {
			return nil, err
		} else if i > 0 && h.prev != scans[i-1].seq {
			return nil, fmt.Errorf("%w: segment %s follows %s, not %s", ErrCorrupt, segName(sc.seq), segName(scans[i-1].seq), segName(h.prev))
		}
	}
	if k > 0 {
		if sc := scans[k-1]; sc.ended == endBad && sc.beyond >= lastBatch+2 {
			return nil, fmt.Errorf("%w: segment %s: bad record at offset %d followed by later synced records", ErrCorrupt, segName(sc.seq), sc.end)
		}
	}
	return scans[:k], nil
}

// headerless finds, for a trailing segment whose header is bad, the
// highest generation of its records by the salt the last kept segment's
// end record named for it. The header was written before any other
// record of the segment, in the generation after the end record's, so a
// record two generations past the end record proves the header was
// synced: damaged since, not torn (the caller's check). Without a naming
// end record (an older segment's, or none) nothing can be checked, and
// the segment reads as never written.
func headerless(kept []*scanned, sc *scanned) {
	raw := sc.raw
	sc.raw = nil
	if raw == nil || len(kept) == 0 {
		return
	}
	last := kept[len(kept)-1]
	if last.ended != endRecord || !last.named || last.next != sc.seq {
		return
	}
	sc.beyond = highestBatchAfter(raw, recordAlign, sc.seq, last.nextSalt)
}

// replay rebuilds the log's state from the kept segments' records. The
// truncation point only grows, so the final one is the highest recorded;
// no entry recorded before the latest Reset survives it; after it, each
// entry replaces the one at its index and everything after, and the first
// entry above the truncation point must extend the log without a gap.
func (l *Log) replay(kept []*scanned) (*Recovered, error) {
	resetSeg, resetRec := -1, -1
	for i, sc := range kept {
		for j, r := range sc.recs {
			var t indexTerm
			var err error
			switch r.typ {
			case recSegment:
				var h header
				h, err = parseHeader(r.data)
				t = h.trunc
				if err == nil {
					err = l.setReplayedHardState(h.hs)
				}
			case recHardState:
				err = l.setReplayedHardState(r.data)
			case recCompact, recReset:
				t.index, t.term, err = parseIndexTerm(r.data)
				if r.typ == recReset {
					resetSeg, resetRec = i, j
				}
			}
			if err != nil {
				return nil, fmt.Errorf("segment %s offset %d: %w", segName(sc.seq), r.off, err)
			}
			if t.index >= l.trunc.index && r.typ != recHardState && r.typ != recEntry {
				l.trunc = t
			}
			l.batch = max(l.batch, r.batch+1)
		}
		l.batch = max(l.batch, sc.beyond+1, sc.endBatch+1)
	}
	var ents []*pb.Entry
	for i, sc := range kept {
		s := &segment{seq: sc.seq, f: sc.f, size: sc.end, flushed: sc.end, salt: sc.salt}
		l.segs = append(l.segs, s)
		for j, r := range sc.recs {
			if r.typ != recEntry {
				continue
			}
			e := r.entry
			s.maxIndex = max(s.maxIndex, e.GetIndex())
			if i < resetSeg || (i == resetSeg && j < resetRec) {
				continue
			}
			if e.GetIndex() <= l.trunc.index {
				// Compacted since, but it still replaced every entry after it.
				ents, l.ents = ents[:0], l.ents[:0]
				continue
			}
			if e.GetIndex() > l.last()+1 {
				return nil, fmt.Errorf("%w: segment %s offset %d: entry %d after last index %d", ErrCorrupt, segName(sc.seq), r.off, e.GetIndex(), l.last())
			}
			n := e.GetIndex() - l.trunc.index - 1
			ents = append(ents[:n], e)
			l.ents = append(l.ents[:n], loc{seq: sc.seq, off: r.off, size: r.size, term: e.GetTerm()})
		}
	}
	if resetSeg >= 0 {
		l.resetSeq = kept[resetSeg].seq
	}
	return &Recovered{HardState: proto.Clone(l.hs).(*pb.HardState), Index: l.trunc.index, Term: l.trunc.term, Entries: ents}, nil
}

func (l *Log) setReplayedHardState(b []byte) error {
	hs := &pb.HardState{}
	if err := proto.Unmarshal(b, hs); err != nil {
		return fmt.Errorf("%w: HardState: %w", ErrCorrupt, err)
	}
	l.hs = hs
	return nil
}

// restart removes the trailing segments that were started but never
// written and goes on in the last kept segment if it can (continueSegment),
// so that a restart takes no new segment file. Otherwise (no segment, a
// segment already ended, one of another size, or one without a salt, whose
// leftovers past the tail could be records a client forged) it ends the
// last segment with an end record over whatever torn bytes follow its last
// record and starts a new segment.
func (l *Log) restart(kept, dropped []*scanned) error {
	fs := l.cfg.FS
	for _, sc := range dropped {
		_ = sc.f.Close()
		sc.f = nil
		if err := fs.Remove(fs.PathJoin(l.cfg.Dir, segName(sc.seq))); err != nil {
			return err
		}
	}
	if len(dropped) > 0 {
		if err := l.dir.Sync(); err != nil {
			return err
		}
	}
	n := len(kept)
	if n > 0 && kept[n-1].ended != endRecord && kept[n-1].size == l.cfg.SegmentSize && kept[n-1].salted {
		return l.continueSegment()
	}
	nextSalt, err := l.drawSalt()
	if err != nil {
		return err
	}
	if n > 0 && kept[n-1].ended != endRecord {
		s := l.active()
		end := appendEnd(nil, s.seq, l.batch, s.salt, l.nextSeq, nextSalt)
		if _, err := s.f.WriteAt(end, s.size); err != nil {
			return err
		}
		if err := s.f.SyncData(); err != nil {
			return err
		}
	}
	if err := l.startSegment(nextSalt); err != nil {
		return err
	}
	return l.syncLocked()
}

// continueSegment makes the last kept segment the active one again,
// appending after its last valid record. First it syncs the file, so that
// what replay read (perhaps from the page cache of a process that died) is
// durable before anything relies on it. Then it writes, over the first
// bytes past the tail, a marker record (the current HardState again,
// which replays as a no-op) of a generation newer than every valid record
// anywhere in the file, and syncs it; see doc.go for why that makes the
// bytes past the tail unreadable for good. If the segment is full, put
// rolls to a new one instead.
func (l *Log) continueSegment() error {
	if err := l.active().f.SyncData(); err != nil {
		return err
	}
	b, err := proto.Marshal(l.hs)
	if err != nil {
		return err
	}
	if _, _, err := l.put(recHardState, b); err != nil {
		return err
	}
	return l.syncLocked()
}
