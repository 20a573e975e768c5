package store

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	etcdraft "go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/wal"
)

// Where the raft log lives (Options.RaftLog).
//
// In the "pebble" mode every Ready is one synced Pebble batch: log entries,
// HardState, truncation point and the state machine's writes with the
// applied index. In the "wal" mode the raft log (entries, HardState,
// truncation point) is an internal/wal log in the data directory's wal/
// subdirectory, and Pebble holds the rest (state, applied index, snapshot
// metadata, configuration, members). A Ready costs one write and one
// fdatasync of the log; the state machine's writes go to Pebble unsynced,
// and Pebble runs without its own write-ahead log (pebble.Options'
// DisableWAL; Knobs.PebbleWAL keeps it, for comparison): a Pebble write is
// durable only once a flush has written its memtable to an sstable
// (flush.go). Either way a crash keeps a prefix of Pebble's committed
// batches (with its WAL: the synced part of it and whatever of the rest
// reached the disk in order; without: the memtables flushed, oldest
// first), and every Update's batch carries its applied index with its
// effects, so Pebble's durable state is the effect of the entries
// through its durable applied index.
//
// The argument that nothing acknowledged is lost in the "wal" mode rests on
// three rules the store keeps:
//
//  1. Pebble's applied index never runs ahead of the log's durable end:
//     an Update whose applied index is beyond the last index the log had
//     synced commits to Pebble only after the log's fdatasync (commitWAL).
//     What Pebble makes durable is a prefix of what it was given, so this
//     holds of its durable state too, however late it becomes durable.
//     So after a crash the entries up to Pebble's applied index A are in
//     the log, and raft re-applies the committed entries after A from it
//     (raft's Config.Applied = A). Applied entries are committed, and
//     committed entries are never overwritten, so the log still holds the
//     very entries whose effects Pebble has.
//  2. The log is compacted to i only after Pebble's state through i is
//     durable (CreateSnapshot, compactWAL). With Pebble's WAL, the
//     snapshot record is written synced, which makes every earlier
//     unsynced batch durable, before wal.Compact. Without it, nothing is
//     forced: the compaction waits until a completed flush has reached
//     the snapshot record's sequence number (flushMark, noted at Pebble's
//     FlushEnd), and so every batch before it, among them the Update that
//     applied through the snapshot's index, at least i. So the log always
//     holds every entry after the durable applied index; Open refuses a
//     directory where it does not (alignWAL).
//  3. A snapshot from the leader is installed in Pebble durably (synced,
//     or flushed) before the log is reset to its index. A crash in
//     between leaves Pebble at the snapshot and the log behind it; Open
//     finishes the reset (recoverWAL).
//
// The HardState's commit may trail Pebble's applied index after a crash
// (it is written with the log's next sync, and an Update that applies
// entries already durable may reach Pebble's disk before that): Open
// raises it to the applied index, which is safe because those entries were
// committed and are in the log.
//
// Pebble's other writes in the "wal" mode, and why each is safe without
// Pebble's WAL:
//
//   - Update batches (state, history, leases, members, ConfState, revision,
//     applied index): re-created by replaying the log from the durable
//     applied index (rule 1).
//   - CreateSnapshot's record and truncation: a lost one costs only the
//     compaction it allowed, which rule 2 delays until it is durable; Open
//     takes a fresh snapshot.
//   - A snapshot install and a restore (an Update with InstallSnapshot):
//     commitDurable before the log's reset (rule 3). The staged generation
//     it switches to was written unsynced before it and is flushed with it.
//   - The data format record, the cluster and node ids, the removal and
//     restore records, the probe at Open (setSynced), and the record of
//     the move of the log out of Pebble (migrateToWAL): commitDurable,
//     which flushes; none is on the write path.
//   - The format migration's batches (migrate.go): unsynced, a prefix of
//     them survives, and the migration is redone from what it finds; the
//     format record that ends it is written durably after them.
//   - The compactor's deletions of history and its cursor (compact.go): one
//     batch each, a prefix survives, and the pass resumes from the
//     durable cursor; a batch reads the compaction revision from Pebble,
//     so it follows the Update that set it.
//   - Open's deletion of stray generations: redone at every Open.
//   - Close flushes, so a clean restart replays nothing.
//
// A directory written with Pebble's WAL opens without it: Pebble replays
// its WAL files and flushes them at Open. One written without it opens
// with it (Knobs.PebbleWAL, or an older build): its state is what was
// flushed, and the log holds every entry after it (rule 2).
const (
	RaftLogPebble = "pebble"
	RaftLogWAL    = "wal"
	// DefaultRaftLog is the mode Options.RaftLog "" means: the log in its
	// own WAL costs one write and one fdatasync of a preallocated file per
	// Ready, less than a synced Pebble batch (docs/operations.md, "The
	// Raft log").
	DefaultRaftLog = RaftLogWAL
)

// WALDir is the subdirectory of the data directory that holds the raft log
// in the "wal" mode.
const WALDir = "wal"

// keyRaftLog records that the directory keeps its raft log in WALDir; its
// absence means the log is in Pebble.
var keyRaftLog = []byte("mraftlog")

// ErrRaftLogMode: the data directory keeps its raft log elsewhere than
// Options.RaftLog says, and cannot be converted that way.
var ErrRaftLogMode = errors.New("store: raft log mode")

// ValidRaftLog reports whether mode names a place for the raft log ("" is
// the default, DefaultRaftLog).
func ValidRaftLog(mode string) error {
	switch mode {
	case "", RaftLogPebble, RaftLogWAL:
		return nil
	}
	return fmt.Errorf("%w: %q is neither %q nor %q", ErrRaftLogMode, mode, RaftLogPebble, RaftLogWAL)
}

// openRaftLog is Open's step after checkFormat: it recovers the raft log
// from where the directory keeps it, converting a directory whose log is
// in Pebble when opts ask for the "wal" mode, and refusing the converse.
func (s *Store) openRaftLog(dir string, fs vfs.FS, opts Options) error {
	_, inWAL, err := s.getRaw(keyRaftLog)
	if err != nil {
		return err
	}
	walCfg := wal.Config{Dir: fs.PathJoin(dir, WALDir), FS: fs, SegmentSize: opts.WALSegmentSize}
	switch {
	case inWAL && opts.RaftLog != RaftLogWAL:
		return fmt.Errorf("%w: data directory %s keeps its raft log in %s/ (--raft-log=%s); start it with --raft-log=%s (there is no conversion back to %s)",
			ErrRaftLogMode, dir, WALDir, RaftLogWAL, RaftLogWAL, RaftLogPebble)
	case inWAL:
		return s.guardWAL(func() error { return s.recoverWAL(walCfg) })
	case opts.RaftLog == RaftLogWAL:
		if err := s.recoverPebbleLog(); err != nil {
			return err
		}
		return s.guardWAL(func() error { return s.migrateToWAL(walCfg) })
	}
	return s.recoverPebbleLog()
}

// guardWAL runs fn, which writes the WAL, under the store's fault guard
// (fault.go): a fault in the WAL's writes parks fn, and Open fails at once.
func (s *Store) guardWAL(fn func() error) error {
	err, _ := s.guard(fn)
	return err
}

// recoverPebbleLog reads the raft log's state from Pebble.
func (s *Store) recoverPebbleLog() error {
	s.hs = &pb.HardState{}
	if err := s.loadProto(keyHardState, s.hs); err != nil {
		return err
	}
	if raw, ok, err := s.getRaw(keyTrunc); err != nil {
		return err
	} else if ok {
		if s.trunc, err = decodeTrunc(raw); err != nil {
			return err
		}
	}
	var err error
	s.last, err = s.findLast()
	return err
}

// migrateToWAL moves a log kept in Pebble into a fresh WAL: it copies the
// entries, HardState and truncation point into it and syncs it, then one
// synced Pebble batch deletes them from Pebble and records the mode. A
// crash before that batch leaves the directory in the "pebble" mode, and
// the next Open copies again into a wiped WAL directory.
func (s *Store) migrateToWAL(cfg wal.Config) error {
	if err := cfg.FS.RemoveAll(cfg.Dir); err != nil {
		return fmt.Errorf("store: clear %s: %w", cfg.Dir, err)
	}
	l, _, err := wal.Open(cfg)
	if err != nil {
		return fmt.Errorf("store: open raft log: %w", err)
	}
	if err := s.copyLog(l); err != nil {
		return errors.Join(fmt.Errorf("store: copy the raft log to %s: %w", cfg.Dir, err), l.Close())
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := errors.Join(b.DeleteRange(logStart, logEnd, nil), b.Delete(keyHardState, nil),
		b.Delete(keyTrunc, nil), b.Set(keyRaftLog, []byte(RaftLogWAL), nil)); err != nil {
		return errors.Join(err, l.Close())
	}
	if err, _ := s.guard(func() error { return s.commitDurable(b) }); err != nil {
		return errors.Join(fmt.Errorf("store: record the raft log mode: %w", err), l.Close())
	}
	s.wal = l
	s.walDurable.Store(s.last)
	return nil
}

// copyLogChunk bounds the entries read from Pebble at once by copyLog.
const copyLogChunk = 1024

// copyLog writes the store's log as recovered from Pebble into the empty
// log l, and syncs it.
func (s *Store) copyLog(l *wal.Log) error {
	if s.trunc.index > 0 {
		if err := l.Reset(s.trunc.index, s.trunc.term); err != nil {
			return err
		}
	}
	for lo := s.trunc.index + 1; lo <= s.last; {
		hi := min(s.last+1, lo+copyLogChunk)
		ents, err := s.readEntries(nil, lo, hi, &sizer{max: ^uint64(0)})
		if err != nil {
			return err
		}
		if err := l.Append(ents); err != nil {
			return err
		}
		lo = hi
	}
	if !etcdraft.IsEmptyHardState(s.hs) {
		if err := l.SetHardState(s.hs); err != nil {
			return err
		}
	}
	return l.Sync()
}

// recoverWAL opens the log and brings it in line with Pebble's state (the
// package's rules 1 and 3): a snapshot Pebble holds beyond the log's
// truncation point that the log does not hold is installed in the log
// (Reset), and a HardState commit below the applied index is raised to it.
func (s *Store) recoverWAL(cfg wal.Config) error {
	l, rec, err := wal.Open(cfg)
	if err != nil {
		return fmt.Errorf("store: open raft log %s: %w", cfg.Dir, err)
	}
	if err := s.alignWAL(l, rec); err != nil {
		return errors.Join(fmt.Errorf("store: recover raft log %s: %w", cfg.Dir, err), l.Close())
	}
	s.wal = l
	s.hs = l.HardState()
	s.trunc = truncState{l.FirstIndex() - 1, 0}
	s.trunc.term, _ = l.Term(s.trunc.index)
	s.last = l.LastIndex()
	s.walDurable.Store(s.last) // Open synced what it replayed
	// The replayed entries fill the cache, unless alignWAL reset the log
	// (they are then not the log's).
	if n := len(rec.Entries); s.cacheSize > 0 && n > 0 && s.trunc.index == rec.Index && rec.Entries[n-1].GetIndex() == s.last {
		s.cache = append([]*pb.Entry(nil), rec.Entries[max(0, len(rec.Entries)-s.cacheSize):]...)
	}
	return nil
}

// alignWAL finishes what a crash cut short (see recoverWAL).
func (s *Store) alignWAL(l *wal.Log, rec *wal.Recovered) error {
	md := s.snap.GetMetadata()
	si, st := md.GetIndex(), md.GetTerm()
	hs := proto.CloneOf(rec.HardState)
	if si > rec.Index {
		if t, err := l.Term(si); err != nil || t != st {
			// Installed in Pebble, not yet in the log (rule 3).
			if err := l.Reset(si, st); err != nil {
				return err
			}
		}
		if st > hs.GetTerm() {
			hs.Term, hs.Vote = new(st), new(uint64(0))
		}
	}
	if first := l.FirstIndex(); s.applied+1 < first {
		// Rule 2 broken: the entries after the durable state are gone.
		return fmt.Errorf("%w: applied index %d below the raft log's truncation point %d", ErrCorrupt, s.applied, first-1)
	}
	if s.applied > l.LastIndex() {
		return fmt.Errorf("%w: applied index %d beyond the raft log's last index %d", ErrCorrupt, s.applied, l.LastIndex())
	}
	if s.applied > hs.GetCommit() {
		hs.Commit = new(s.applied)
	}
	if proto.Equal(hs, rec.HardState) {
		return nil
	}
	if err := l.SetHardState(hs); err != nil {
		return err
	}
	return l.Sync()
}

// RaftLog reports where the store keeps its raft log: RaftLogPebble or
// RaftLogWAL.
func (s *Store) RaftLog() string {
	if s.wal != nil {
		return RaftLogWAL
	}
	return RaftLogPebble
}

// WALStats are the raft log's counters in the "wal" mode (ok false in the
// "pebble" mode, whose log writes are Pebble's).
func (s *Store) WALStats() (st wal.Stats, ok bool) {
	if s.wal == nil {
		return wal.Stats{}, false
	}
	return s.wal.Stats(), true
}
