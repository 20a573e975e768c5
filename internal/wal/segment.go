package wal

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A segment is one file of the log. Segments are named by a sequence
// number that only grows (never reused, also across restarts), and every
// record carries its segment's number: a recycled file's old records carry
// an older number and so never decode as records of the new segment. Every
// record but the header also has a checksum that starts from the
// segment's salt, a secret drawn when the segment starts, so that no bytes
// a client chose (the values inside entries) ever decode as a record.
type segment struct {
	seq      uint64
	f        vfs.File
	salt     salt
	size     int64  // bytes of records, written or buffered
	flushed  int64  // bytes of records written to the file
	maxIndex uint64 // the highest entry index recorded in this segment (0: none)
}

const (
	segSuffix   = ".wal"
	spareSuffix = ".spare"
	zeroChunk   = 1 << 20
)

func segName(seq uint64) string   { return fmt.Sprintf("%016x%s", seq, segSuffix) }
func spareName(seq uint64) string { return fmt.Sprintf("%016x%s", seq, spareSuffix) }

// parseName returns the sequence number of a segment or spare file name.
func parseName(name string) (seq uint64, spare, ok bool) {
	base, isSeg := strings.CutSuffix(name, segSuffix)
	if !isSeg {
		var isSpare bool
		if base, isSpare = strings.CutSuffix(name, spareSuffix); !isSpare {
			return 0, false, false
		}
		spare = true
	}
	if len(base) != 16 {
		return 0, false, false
	}
	seq, err := strconv.ParseUint(base, 16, 64)
	if err != nil || seq == 0 {
		return 0, false, false
	}
	return seq, spare, true
}

// newSegment makes the file of segment seq, salted with s: a spare renamed (its stale
// records carry an older sequence number), or a new file filled with zeros
// and synced, so that appends into it change no metadata. It syncs the
// directory, so the name is durable before any record is written.
func (l *Log) newSegment(seq uint64, s salt) (*segment, error) {
	fs := l.cfg.FS
	name := fs.PathJoin(l.cfg.Dir, segName(seq))
	var f vfs.File
	if len(l.spares) == 0 {
		l.collectSpare()
	}
	for len(l.spares) > 0 && f == nil {
		old := fs.PathJoin(l.cfg.Dir, spareName(l.spares[0]))
		l.spares = l.spares[1:]
		if st, err := fs.Stat(old); err != nil || st.Size() != l.cfg.SegmentSize {
			_ = fs.Remove(old) // a spare of another segment size: make a new one
			continue
		}
		if err := fs.Rename(old, name); err != nil {
			return nil, err
		}
		var err error
		if f, err = fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified); err != nil {
			return nil, err
		}
	}
	if f == nil {
		var err error
		if f, err = createZeroed(fs, name, l.cfg.SegmentSize); err != nil {
			return nil, err
		}
	}
	if err := l.dir.Sync(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return &segment{seq: seq, f: f, salt: s}, nil
}

// drawSalt draws a new segment's salt. It must be unpredictable: the
// checksums it starts are what keeps a forged record out of the log.
func (l *Log) drawSalt() (salt, error) {
	src := l.cfg.Knobs.SaltSource
	if src == nil {
		src = rand.Reader
	}
	var b [16]byte
	if _, err := io.ReadFull(src, b[:]); err != nil {
		return salt{}, fmt.Errorf("wal: draw a segment salt: %w", err)
	}
	return newSalt(binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])), nil
}

// createZeroed creates name holding size zero bytes, synced.
func createZeroed(fs vfs.FS, name string, size int64) (vfs.File, error) {
	// Sequence numbers are never reused, so name is new: no stale bytes.
	f, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	zeros := make([]byte, min(size, zeroChunk))
	for off := int64(0); off < size; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := f.SyncData(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// release frees the oldest segments that hold nothing the log still needs:
// those whose entries all lie at or below the truncation point, and those
// written before the latest Reset. The record that made them unneeded must
// be durable first (Compact and Reset sync before calling this). The
// active segment is never freed.
func (l *Log) release() error {
	freed := false
	for len(l.segs) > 1 {
		s := l.segs[0]
		if s.seq >= l.resetSeq && s.maxIndex > l.trunc.index {
			break
		}
		if err := l.free(s); err != nil {
			return err
		}
		l.segs = l.segs[1:]
		freed = true
	}
	if !freed {
		return nil
	}
	return l.dir.Sync()
}

// free closes s and keeps its file as a spare, or removes it.
func (l *Log) free(s *segment) error {
	fs := l.cfg.FS
	if err := s.f.Close(); err != nil {
		return err
	}
	name := fs.PathJoin(l.cfg.Dir, segName(s.seq))
	if len(l.spares) < l.cfg.SpareSegments {
		if err := fs.Rename(name, fs.PathJoin(l.cfg.Dir, spareName(s.seq))); err != nil {
			return err
		}
		l.spares = append(l.spares, s.seq)
		return nil
	}
	return fs.Remove(name)
}

// prepareSpare starts zero-filling a spare in the background if there is
// none and none is being prepared. The file is not synced into the
// directory: a spare lost in a crash is only made again.
func (l *Log) prepareSpare() {
	if l.prep != nil || len(l.spares) > 0 || l.cfg.SpareSegments == 0 {
		return
	}
	seq := l.nextSeq
	l.nextSeq++
	done := make(chan struct{})
	l.prep = done
	fs, size := l.cfg.FS, l.cfg.SegmentSize
	name := fs.PathJoin(l.cfg.Dir, spareName(seq))
	go func() {
		defer close(done)
		f, err := createZeroed(fs, name, size)
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			_ = fs.Remove(name)
		}
		// Read only after done is closed.
		l.prepSeq, l.prepErr = seq, err
	}()
}

// collectSpare waits for the spare being prepared, if any, and adds it to
// the spares. A failed preparation is dropped: the next segment is then
// made in place.
func (l *Log) collectSpare() {
	if l.prep == nil {
		return
	}
	<-l.prep
	l.prep = nil
	if l.prepErr == nil {
		l.spares = append(l.spares, l.prepSeq)
	}
}
