package store

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kvd-project/kvd/internal/pebbletune"
	"github.com/kvd-project/kvd/internal/wal"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// DefaultEntryCacheSize is Options.EntryCacheSize's default.
const DefaultEntryCacheSize = 4096

// Options configures Open. The zero value is usable.
type Options struct {
	// EntryCacheSize is how many of the newest log entries (at least; up to
	// twice as many) stay in memory so that replicating to followers rarely
	// reads Pebble. 0 means DefaultEntryCacheSize; negative disables the
	// cache.
	EntryCacheSize int
	// MemTableSize is Pebble's memtable size; 0 means
	// pebbletune.DefaultMemTableSize, or pebbletune.NoWALMemTableSize in
	// the "wal" mode without Pebble's log.
	MemTableSize uint64
	// Logger receives Pebble's messages (informational ones at Debug),
	// rate-limited. nil discards them.
	Logger *slog.Logger
	// FS is the file system the database is kept in; nil means the
	// operating system's. Tests inject faults with a wrapper (Pebble's
	// vfs/errorfs). The store adds its fault detection on top (fault.go).
	FS vfs.FS
	// RaftLog is where the raft log is kept: RaftLogWAL (the default, ""
	// too; raftlog.go) or RaftLogPebble. A directory whose log is in
	// Pebble is converted at Open when RaftLogWAL is asked for; the
	// converse is refused (ErrRaftLogMode).
	RaftLog string
	// WALSegmentSize is the size of the raft log's segment files in the
	// "wal" mode (wal.DefaultSegmentSize if zero). Tests make it small.
	WALSegmentSize int64
	// Knobs are for tests and benchmarks.
	Knobs Knobs
	// OnFault, if set, is called once, at the store's first storage fault
	// (see fault.go), with its cause. It is called from whichever goroutine
	// hit the fault, possibly one of Pebble's, and must not block or call
	// into the store.
	OnFault func(cause error)
}

// Knobs are Options for tests and benchmarks only.
type Knobs struct {
	// PebbleWAL keeps Pebble's own write-ahead log in the "wal" mode,
	// where the store otherwise runs Pebble without it (raftlog.go): the
	// comparison BenchmarkPutCPU draws.
	PebbleWAL bool
}

// Store is the durable state of one raft node. See the package comment for
// which goroutine may call what.
type Store struct {
	db        *pebble.DB
	cacheSize int
	// wal holds the raft log in the "wal" mode (nil: the log is in
	// Pebble). See raftlog.go.
	wal *wal.Log
	// walDurable is the log's last index as of its latest sync (the
	// "wal" mode's rule 1).
	walDurable atomic.Uint64
	// noPebbleWAL: Pebble runs without its write-ahead log ("wal" mode,
	// raftlog.go): its writes are durable only once flushed (durably).
	noPebbleWAL bool
	// flushed is the largest sequence number a completed flush made
	// durable (raftlog.go's rule 2 without a WAL in Pebble).
	flushed *flushMark
	// walPending are the log compactions CreateSnapshot asked for that
	// wait for a flush of the state they need (raft loop only).
	walPending []pendingCompaction

	// mu guards the in-memory mirror of the raft metadata and log bounds.
	// Only the raft loop writes them; the lock makes the odd read from another
	// goroutine (Applied, Members) safe.
	mu      sync.Mutex
	hs      *pb.HardState
	cs      *pb.ConfState
	snap    *pb.Snapshot
	trunc   truncState
	last    uint64
	cache   []*pb.Entry // the newest entries, ending at last
	applied uint64
	members map[uint64]Member

	// genMu orders KV readers against the switch to a new generation: the
	// batch that switches also deletes the old one.
	genMu   sync.RWMutex
	gen     uint64
	nextGen atomic.Uint64

	cpMu       sync.Mutex
	checkpoint *Checkpoint
	closed     atomic.Bool

	// cluster is the recorded cluster id (see SetClusterID); clusterMu
	// orders its writers.
	cluster   atomic.Uint64
	clusterMu sync.Mutex

	fault *faultState // see fault.go

	rs revState // store and compaction revisions (revision.go)

	// ix is the current generation's key index (keyindex.go); it
	// changes with the generation, under genMu.
	ix    *keyIndex
	views viewSet // open readViews (read.go)
	knobs Knobs
	spare updateBufs // guarded by mu
}

// Open opens (creating if needed) the store in dir and recovers its state
// from Pebble alone.
func Open(dir string, opts Options) (*Store, error) {
	if opts.EntryCacheSize == 0 {
		opts.EntryCacheSize = DefaultEntryCacheSize
	}
	if err := ValidRaftLog(opts.RaftLog); err != nil {
		return nil, err
	}
	opts.RaftLog = cmp.Or(opts.RaftLog, DefaultRaftLog)
	log := newLimitedLog(opts.Logger)
	fault := newFaultState(opts.OnFault, log)
	base := opts.FS
	if base == nil {
		base = vfs.Default
	}
	ffs := &faultFS{FS: base, f: fault}
	flushed := &flushMark{}
	po := &pebble.Options{
		FS:            ffs,
		Logger:        pebbleLogger{log: log, fault: fault},
		EventListener: eventListener(log, fault, flushed),
		// In the "wal" mode the log makes the state machine's writes
		// durable, and the store flushes what the log cannot re-create
		// (raftlog.go).
		DisableWAL: opts.RaftLog == RaftLogWAL && !opts.Knobs.PebbleWAL,
	}
	memTable := opts.MemTableSize
	if memTable == 0 && po.DisableWAL {
		memTable = pebbletune.NoWALMemTableSize
	}
	pebbletune.Apply(po, memTable)
	po.Experimental.SpanPolicyFunc = tableRegionEnd
	po.WithFSDefaults() // disk health checks: DiskSlow events
	var db *pebble.DB
	err, _ := fault.guard(func() (err error) {
		db, err = pebble.Open(dir, po)
		return err
	})
	if err != nil {
		// A fault abandons the open where it stands (fault.go): the
		// directory is left as a crash there would have left it.
		return nil, fmt.Errorf("store: open %s: %w", dir, err)
	}
	s := &Store{db: db, cacheSize: max(opts.EntryCacheSize, 0), fault: fault,
		noPebbleWAL: po.DisableWAL, flushed: flushed, knobs: opts.Knobs}
	if err := s.checkFormat(dir); err != nil {
		if !fault.tripped() {
			db.Close()
		}
		return nil, err
	}
	err = s.recover(dir, ffs, opts)
	if err == nil {
		s.ix, err = buildIndex(s.db, s.gen)
	}
	if err != nil {
		if !fault.tripped() {
			db.Close()
			if s.wal != nil {
				s.wal.Close()
			}
		}
		return nil, err
	}
	if err := s.probe(); err != nil {
		if !fault.tripped() {
			db.Close()
			if s.wal != nil {
				s.wal.Close()
			}
		}
		return nil, fmt.Errorf("store: open %s: %w", dir, err)
	}
	s.startCompactor(log)
	return s, nil
}

// probe is Open's last step: one durable write (the applied index,
// rewritten as it is), so that a disk that takes no writes (full,
// read-only, failing) fails the start, with its cause, rather than the
// first request.
func (s *Store) probe() error {
	return s.setSynced(keyApplied, encodeU64(s.applied))
}

// Fault returns the cause of the store's storage fault, or nil if it has
// none (see fault.go). Once a store has faulted it writes nothing more.
func (s *Store) Fault() error {
	if p := s.fault.cause.Load(); p != nil {
		return *p
	}
	return nil
}

// Faulted is closed at the store's storage fault.
func (s *Store) Faulted() <-chan struct{} { return s.fault.done }

// guard runs a Pebble write under the store's fault guard (fault.go).
func (s *Store) guard(fn func() error) (err error, finished bool) {
	return s.fault.guard(fn)
}

func (s *Store) recover(dir string, fs vfs.FS, opts Options) error {
	s.cs = &pb.ConfState{}
	if err := s.loadProto(keyConfState, s.cs); err != nil {
		return err
	}
	pb.EnsureConfState(s.cs)
	s.snap = &pb.Snapshot{}
	if err := s.loadProto(keySnapshot, s.snap); err != nil {
		return err
	}
	pb.EnsureSnapshot(s.snap)
	var err error
	if s.applied, err = s.loadU64(keyApplied, 0); err != nil {
		return err
	}
	if s.gen, err = s.loadU64(keyGen, 1); err != nil {
		return err
	}
	cluster, err := s.loadU64(keyClusterID, 0)
	if err != nil {
		return err
	}
	s.cluster.Store(cluster)
	s.nextGen.Store(s.gen)
	if err := s.openRaftLog(dir, fs, opts); err != nil {
		return err
	}
	if s.members, err = s.loadMembers(); err != nil {
		return err
	}
	if err := s.dropStrayGenerations(); err != nil {
		return err
	}
	if err := s.recoverRevs(); err != nil {
		return err
	}
	return s.ensureSnapshot()
}

// findLast returns the index of the newest log entry, or the truncation
// point if the log is empty.
func (s *Store) findLast() (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logStart, UpperBound: logEnd})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.Last() {
		return s.trunc.index, it.Error()
	}
	e, err := unmarshalEntry(it.Value())
	if err != nil {
		return 0, err
	}
	return e.GetIndex(), nil
}

func (s *Store) loadMembers() (map[uint64]Member, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: memberStart, UpperBound: memberEnd})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	ms := make(map[uint64]Member)
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 9 {
			return nil, fmt.Errorf("%w: member key %x", ErrCorrupt, k)
		}
		id := beU64(k[1:])
		m, err := decodeMember(id, it.Value())
		if err != nil {
			return nil, err
		}
		ms[id] = m
	}
	return ms, it.Error()
}

// dropStrayGenerations deletes KV generations other than the current one:
// leftovers of snapshot transfers cut short by a crash.
func (s *Store) dropStrayGenerations() error {
	b := s.db.NewBatch()
	defer func() {
		if b != nil {
			b.Close()
		}
	}()
	if err := b.DeleteRange(kvStart, genPrefix(s.gen), nil); err != nil {
		return err
	}
	if err := b.DeleteRange(genEnd(s.gen), kvEnd, nil); err != nil {
		return err
	}
	if err := b.DeleteRange(leaseStart, leaseGenPrefix(s.gen), nil); err != nil {
		return err
	}
	if err := b.DeleteRange(leaseGenEnd(s.gen), leaseEnd, nil); err != nil {
		return err
	}
	if err := errors.Join(b.DeleteRange(revStart, revGenPrefix(s.gen), nil),
		b.DeleteRange(revGenEnd(s.gen), revEnd, nil)); err != nil {
		return err
	}
	err, finished := s.guard(func() error { return b.Commit(pebble.NoSync) })
	if !finished {
		b = nil // abandoned inside Pebble: leave it alone
	}
	return err
}

func (s *Store) getRaw(key []byte) ([]byte, bool, error) {
	v, c, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	c.Close()
	return out, true, nil
}

func (s *Store) loadProto(key []byte, m proto.Message) error {
	raw, ok, err := s.getRaw(key)
	if err != nil || !ok {
		return err
	}
	if err := proto.Unmarshal(raw, m); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	return nil
}

func (s *Store) loadU64(key []byte, def uint64) (uint64, error) {
	raw, ok, err := s.getRaw(key)
	if err != nil || !ok {
		return def, err
	}
	return decodeU64(raw)
}

// Close releases the current checkpoint and closes the database. Staged
// transfers and checkpoints still held by others must be released first.
//
// A store that has faulted is not closed: Pebble may have goroutines parked
// for good (fault.go), and closing would wait for them (closing writes, and
// a fault while closing parks the close too). Close then returns the fault,
// and the database stays open (and its directory locked) until the process
// exits.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if err := s.fault.err(); err != nil {
		return fmt.Errorf("%w (database left open)", err) // touch nothing of Pebble's
	}
	s.cpMu.Lock()
	cp := s.checkpoint
	s.checkpoint = nil
	s.cpMu.Unlock()
	if cp != nil {
		cp.Release()
	}
	s.rs.comp.close()
	var ferr error
	if s.noPebbleWAL {
		// Without its WAL, Pebble's close drops the memtable: flushing
		// it spares the next Open replaying the log for it.
		if ferr, _ = s.guard(s.db.Flush); errors.Is(ferr, ErrFault) {
			return fmt.Errorf("%w (database left open)", ferr)
		}
	}
	// Closing writes too (the WAL's tail is synced): a fault there is
	// returned at once, the close left where it parked.
	err, _ := s.guard(s.db.Close)
	err = errors.Join(ferr, err)
	if errors.Is(err, ErrFault) {
		return fmt.Errorf("%w (database left open)", err)
	}
	if s.wal != nil {
		werr, _ := s.guard(s.wal.Close)
		if errors.Is(werr, ErrFault) {
			return fmt.Errorf("%w (raft log left open)", werr)
		}
		err = errors.Join(err, werr)
	}
	return err
}

// Applied is the index of the last entry whose effects are in the KV state.
func (s *Store) Applied() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// ConfState is the configuration as of Applied. The result must not be
// modified.
func (s *Store) ConfState() *pb.ConfState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs
}

// Members returns the address book as of Applied (tombstones left out).
func (s *Store) Members() []Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Member, 0, len(s.members))
	for _, m := range s.members {
		if !m.Removed {
			out = append(out, m)
		}
	}
	return out
}
