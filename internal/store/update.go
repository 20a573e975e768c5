package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/internal/revision"
)

// Update collects one Ready's durable effects: an optional snapshot install,
// log append, HardState, and the state-machine writes of the committed
// entries with the new applied index. Commit writes them in one Pebble batch
// (with Options.RaftLog "wal": the log part to the WAL, the rest to Pebble;
// see commitWAL).
// Reads through the Update (Get, and Delete's existence check) see its own writes.
//
// An Update belongs to the raft loop; after Commit or Close it is spent.
type Update struct {
	s *Store
	// b is a plain batch until the Update first reads through it
	// (reader): most Updates (PUTs, whose keys' Meta the key index
	// holds) only write, and indexing every record costs as much as a
	// memtable insert.
	b       *pebble.Batch
	indexed bool
	// order holds the history's by-revision records while b is plain
	// (orderBatch): they go at the end of the batch (finish), where they
	// follow one another in key order, so that Pebble's memtable inserts
	// each after the last without a search (its inserter keeps its place
	// from one record of a batch to the next). Interleaved with the
	// writes to keys all over the key space they each cost a full search.
	order *pebble.Batch

	// Pending in-memory effects, published by Commit.
	hs       *pb.HardState
	cs       *pb.ConfState
	snap     *pb.Snapshot
	trunc    truncState
	last     uint64
	applied  uint64
	gen      uint64
	reset    bool // a snapshot was installed: log and cache start over
	appends  [][]*pb.Entry
	members  map[uint64]Member
	memDirty bool
	synced   bool // CommitNoSyncWait's fsync is waited for (or was not needed)
	// published: the batch is in Pebble. ixAhead: the store's key index
	// holds writes of this Update (rebuilt if it is abandoned).
	published, ixAhead bool
	// ix is the key index the Update writes: the store's, or after a
	// snapshot install the installed generation's, which the commit makes
	// the store's.
	ix *keyIndex

	keyBuf, valBuf []byte
	num            [8]byte

	rv updateRevs // revision.go
}

// updateBufs are an Update's encoding buffers, handed from one Update to
// the next (Store.spare) so that the apply path does not allocate them
// for every Ready.
type updateBufs struct{ key, val, revKey, revVal []byte }

// maxSpareBuf is the largest buffer handed on: one that grew for a large
// value is left to the garbage collector.
const maxSpareBuf = 64 << 10

// u64 is v encoded as the store encodes numbers, in a buffer the next
// call reuses (a batch copies what it is given).
func (u *Update) u64(v uint64) []byte {
	binary.LittleEndian.PutUint64(u.num[:], v)
	return u.num[:]
}

// NewUpdate starts an Update on top of the store's current state.
func (s *Store) NewUpdate() *Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := &Update{
		s:       s,
		ix:      s.ix,
		b:       s.db.NewBatch(),
		trunc:   s.trunc,
		last:    s.last,
		applied: s.applied,
		gen:     s.gen,
	}
	u.keyBuf, u.valBuf, u.rv.kbuf, u.rv.vbuf = s.spare.key, s.spare.val, s.spare.revKey, s.spare.revVal
	s.spare = updateBufs{}
	return u
}

// InstallSnapshot replaces the log, the KV state, the configuration and the
// address book with snap's: the KV state becomes st's generation (st must
// hold snap's data) and the members come from snap.Data (EncodeMembers).
// The Update takes st over.
func (u *Update) InstallSnapshot(snap *pb.Snapshot, st *Staged) error {
	md := snap.GetMetadata()
	if st == nil || st.index != md.GetIndex() || st.term != md.GetTerm() {
		return fmt.Errorf("%w: snapshot %d/%d has no matching staged data", ErrBadSnapshot, md.GetIndex(), md.GetTerm())
	}
	ms, err := DecodeMembers(snap.GetData())
	if err != nil {
		return err
	}
	snap = proto.CloneOf(snap)
	pb.EnsureSnapshot(snap)
	trunc := truncState{md.GetIndex(), md.GetTerm()}
	ix, err := buildIndex(u.s.db, st.gen) // the staged records are in Pebble (Staged.Finish)
	if err != nil {
		return err
	}
	b, err := u.reader() // installRevs reads through it
	if err != nil {
		return err
	}
	var errs []error
	if u.s.wal == nil { // else the log is reset at Commit (commitWAL)
		errs = append(errs, b.DeleteRange(logStart, logEnd, nil), b.Set(keyTrunc, trunc.encode(), nil))
	}
	errs = append(errs,
		u.setProto(keySnapshot, snap),
		u.setProto(keyConfState, snap.GetMetadata().GetConfState()),
		b.Set(keyApplied, encodeU64(trunc.index), nil),
		b.DeleteRange(memberStart, memberEnd, nil),
		b.DeleteRange(leaseGenPrefix(u.gen), leaseGenEnd(u.gen), nil), // its leases go with its keys
		b.Set(keyGen, encodeU64(st.gen), nil),
		u.installRevs(u.gen, st.gen, ix.maxRev), // its revisions and history go with its keys
	)
	u.members = make(map[uint64]Member, len(ms))
	for _, m := range ms {
		errs = append(errs, b.Set(memberKey(m.ID), encodeMember(m), nil))
		u.members[m.ID] = m
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	st.consumed = true
	st.finishAccounting()
	u.memDirty = true
	u.snap, u.cs = snap, snap.GetMetadata().GetConfState()
	u.trunc, u.last, u.applied, u.gen = trunc, trunc.index, trunc.index, st.gen
	u.ix = ix
	u.reset, u.appends = true, nil
	return nil
}

// reader is the Update's batch, indexed so that reads through it see its
// writes: the plain batch written so far becomes an indexed one at the
// first read, and stays one.
func (u *Update) reader() (*pebble.Batch, error) {
	if u.indexed {
		return u.b, nil
	}
	if err := u.appendOrder(); err != nil {
		return nil, err
	}
	ib := u.s.db.NewIndexedBatch()
	if err := ib.Apply(u.b, nil); err != nil {
		ib.Close()
		return nil, err
	}
	u.b.Close()
	u.b, u.indexed = ib, true
	return ib, nil
}

// orderBatch is the batch the history's by-revision records go in: order
// while b is plain, b once it is indexed (reads find them there).
// Nothing but RecordHistory writes or deletes such records in an Update
// (the compactor deletes them in batches of its own, and a snapshot
// install, which drops a generation's, reads first), so moving them to
// the end of the batch changes nothing Pebble ends up holding.
func (u *Update) orderBatch() *pebble.Batch {
	if u.indexed {
		return u.b
	}
	if u.order == nil {
		u.order = u.s.db.NewBatch()
	}
	return u.order
}

// appendOrder moves the by-revision records held aside to the end of b.
func (u *Update) appendOrder() error {
	if u.order == nil {
		return nil
	}
	err := u.b.Apply(u.order, nil)
	u.order.Close()
	u.order = nil
	return err
}

// finish completes the batch before its commit: the store revision's
// record, then the history's by-revision records.
func (u *Update) finish() error {
	return errors.Join(u.writeRevision(), u.appendOrder())
}

// Append writes entries to the log, replacing any existing suffix from
// ents[0]'s index on.
func (u *Update) Append(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	first, newLast := ents[0].GetIndex(), ents[len(ents)-1].GetIndex()
	if first <= u.trunc.index || first > u.last+1 {
		return fmt.Errorf("store: append at %d does not fit log (%d,%d]", first, u.trunc.index, u.last)
	}
	if u.s.wal != nil { // written to the log at Commit (commitWAL)
		u.last = newLast
		u.appends = append(u.appends, ents)
		return nil
	}
	for _, e := range ents {
		var err error
		if u.valBuf, err = (proto.MarshalOptions{}).MarshalAppend(u.valBuf[:0], e); err != nil {
			return err
		}
		u.keyBuf = appendLogKey(u.keyBuf[:0], e.GetIndex())
		if err := u.b.Set(u.keyBuf, u.valBuf, nil); err != nil {
			return err
		}
	}
	if u.last > newLast {
		if err := u.b.DeleteRange(logKey(newLast+1), logKey(u.last+1), nil); err != nil {
			return err
		}
	}
	u.last = newLast
	u.appends = append(u.appends, ents)
	return nil
}

// SetHardState records hs (empty values are ignored).
func (u *Update) SetHardState(hs *pb.HardState) error {
	if hs == nil {
		return nil
	}
	u.hs = hs
	if u.s.wal != nil {
		return nil // written to the log at Commit (commitWAL)
	}
	return u.setProto(keyHardState, hs)
}

// SetConfState records the configuration produced by applying a conf change.
func (u *Update) SetConfState(cs *pb.ConfState) error {
	u.cs = cs
	return u.setProto(keyConfState, cs)
}

// SetApplied records the index of the last entry applied by this Update.
func (u *Update) SetApplied(index uint64) error {
	u.applied = index
	return u.b.Set(keyApplied, u.u64(index), nil)
}

// Put sets key to value, with its revision metadata m, in the KV state:
// it records the write in the history at m.Mod, which is the state.
func (u *Update) Put(key, value []byte, m revision.Meta) error {
	return u.RecordHistory(key, value, m, false)
}

// Get returns a copy of key's value and its revision metadata in the KV
// state as this Update sees it (its own writes included): what a
// transaction applied in this Update reads.
func (u *Update) Get(key []byte) (value []byte, m revision.Meta, ok bool, err error) {
	var last ixRev
	var found bool
	if st := u.ix.get(key); st != nil {
		last, found = latest(st.revs)
	}
	if !found || last.deleted {
		return nil, revision.Meta{}, false, nil
	}
	r, err := u.reader()
	if err != nil {
		return nil, revision.Meta{}, false, err
	}
	_, err = readValue(r, u.gen, key, last, &u.keyBuf, func(v []byte, meta revision.Meta) bool {
		value, m = append([]byte{}, v...), meta
		return true
	})
	if err != nil {
		return nil, revision.Meta{}, false, err
	}
	return value, m, true, nil
}

// Meta is key's revision metadata in the KV state as this Update sees it
// (the zero Meta: absent), without reading its value.
func (u *Update) Meta(key []byte) (revision.Meta, error) {
	m, _ := u.lookup(key)
	return m, nil
}

// lookup is key's Meta and presence as this Update sees them, from the
// key index.
func (u *Update) lookup(key []byte) (m revision.Meta, present bool) {
	if st := u.ix.get(key); st != nil {
		if r, ok := latest(st.revs); ok && !r.deleted {
			return st.last, true
		}
	}
	return revision.Meta{}, false
}

// Delete removes key from the KV state at revision rev and reports whether
// it was there (counting this Update's own writes); if it was, the history
// records its deletion at rev.
func (u *Update) Delete(key []byte, rev uint64) (existed bool, err error) {
	if _, present := u.lookup(key); !present {
		return false, nil
	}
	return true, u.RecordHistory(key, nil, revision.Meta{Mod: rev}, true)
}

// SetMember adds or updates an address book entry.
func (u *Update) SetMember(m Member) error {
	u.memberMap()[m.ID] = m
	return u.b.Set(memberKey(m.ID), encodeMember(m), nil)
}

// Member is id's address book entry as this Update sees it: the stored
// one, or what the Update itself set (an earlier entry of the same batch).
func (u *Update) Member(id uint64) (Member, bool) {
	if u.memDirty {
		m, ok := u.members[id]
		return m, ok && !m.Removed
	}
	u.s.mu.Lock()
	defer u.s.mu.Unlock()
	m, ok := u.s.members[id]
	return m, ok && !m.Removed
}

// RemoveMember drops an address book entry, leaving a tombstone
// (Member.Removed): the id is never a member again.
func (u *Update) RemoveMember(id uint64) error {
	m := Member{ID: id, Removed: true}
	u.memberMap()[id] = m
	return u.b.Set(memberKey(id), encodeMember(m), nil)
}

func (u *Update) memberMap() map[uint64]Member {
	if !u.memDirty {
		u.s.mu.Lock()
		u.members = make(map[uint64]Member, len(u.s.members)+1)
		for id, m := range u.s.members {
			u.members[id] = m
		}
		u.s.mu.Unlock()
		u.memDirty = true
	}
	return u.members
}

func (u *Update) setProto(key []byte, m proto.Message) error {
	data, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return u.b.Set(key, data, nil)
}

// Empty reports whether the Update has nothing to write.
func (u *Update) Empty() bool {
	return u.b.Empty() && len(u.appends) == 0 && u.hs == nil && !u.rv.revUnwritten && u.order == nil
}

// Commit writes the batch (fsyncing the WAL if sync) and publishes the new
// state to the store's readers. The Update is spent afterwards. Once the
// store has faulted, Commit fails with a *FaultError (without writing), and
// a fault during the commit fails it at once, whatever Pebble would have
// said: nothing is reported durable after a failed write or fsync.
func (u *Update) Commit(sync bool) error {
	defer u.Close()
	if u.s.closed.Load() {
		return ErrClosed
	}
	if err := u.s.fault.err(); err != nil {
		return err // even an empty Ready: the loop learns of a fault at its next one
	}
	if err := u.finish(); err != nil {
		return err
	}
	if u.s.wal != nil {
		return u.commitWAL(sync, false)
	}
	if u.b.Empty() {
		return nil // a Ready with nothing durable (only messages, say)
	}
	opts := pebble.NoSync
	if sync {
		opts = pebble.Sync
	}
	b := u.b
	return u.commitGuarded(func() error { return b.Commit(opts) })
}

// commitGuarded runs write (the Update's commit to Pebble, and in the
// "wal" mode to the log) under the fault guard, switches the generation
// if the Update installs a snapshot, and publishes the new state.
func (u *Update) commitGuarded(write func() error) error {
	s := u.s
	if u.reset {
		// Readers must not see the old generation deleted before they see
		// the new one named current.
		s.genMu.Lock()
	}
	err, finished := s.guard(write)
	if !finished {
		u.b = nil // abandoned inside Pebble or the log (fault.go): leave the batch alone
	}
	if u.reset {
		if err == nil {
			// Readers take the generation, its key index and the
			// published revisions together (readView).
			s.gen, s.ix = u.gen, u.ix
			u.publish()
		}
		s.genMu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	if !u.reset {
		u.publish()
	}
	if u.reset && u.applied == u.trunc.index {
		// The installed snapshot becomes the one to send on, should this
		// node lead before it takes its own. (raft never applies entries in
		// the Ready that installs a snapshot; the check is belt and braces.)
		s.setCheckpoint(u.trunc.index, u.trunc.term)
	}
	return nil
}

// CommitNoSyncWait is Commit(true) split in two: it writes the batch and
// asks for the WAL fsync without waiting for it, so the caller can work
// while the disk does. The Update's effects are visible at once (to Pebble
// readers and the store's raft Storage methods) but durable only once
// SyncWait has returned nil; the caller must not report anything of this
// Update durable before that, and must call SyncWait exactly once. An
// Update that installs a snapshot is committed synchronously (the
// generation switch holds a lock across the commit). In the "wal" mode
// the sync is the log's, and it is left to SyncWait only when the entries
// the Update applies were durable before it (commitWAL).
func (u *Update) CommitNoSyncWait() error {
	if err := u.finish(); err != nil {
		return err
	}
	if u.s.wal != nil {
		if u.s.closed.Load() {
			return ErrClosed
		}
		if err := u.s.fault.err(); err != nil {
			return err
		}
		return u.commitWAL(true, true)
	}
	if u.reset || u.b.Empty() {
		u.synced = true
		return u.Commit(true)
	}
	if u.s.closed.Load() {
		return ErrClosed
	}
	if err := u.s.fault.err(); err != nil {
		return err
	}
	b, db := u.b, u.s.db
	err, finished := u.s.guard(func() error { return db.ApplyNoSyncWait(b, pebble.Sync) })
	if !finished {
		u.b = nil
	}
	if err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	u.publish()
	return nil
}

// SyncWait waits for the fsync CommitNoSyncWait asked for. Like Commit, it
// reports a fault recorded at any time before it returns instead of
// success: nothing is durable after a failed fsync.
func (u *Update) SyncWait() error {
	if u.s.wal != nil {
		return u.syncWaitWAL()
	}
	if u.synced {
		return nil
	}
	u.synced = true
	b := u.b
	if b == nil {
		return fmt.Errorf("store: sync: %w", u.s.fault.err())
	}
	err, _ := u.s.guard(b.SyncWait)
	if err != nil {
		return fmt.Errorf("store: sync: %w", err)
	}
	return nil
}

// publish makes the committed Update's effects visible in memory.
func (u *Update) publish() {
	s := u.s
	u.published = true
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.reset {
		s.cache, s.snap = nil, u.snap
		s.last = u.trunc.index
	}
	for _, ents := range u.appends {
		s.cacheAppend(ents)
	}
	s.trunc, s.applied = u.trunc, u.applied
	if u.hs != nil {
		s.hs = u.hs
	}
	if u.cs != nil {
		s.cs = u.cs
	}
	if u.memDirty {
		s.members = u.members
	}
	u.publishRevs()
}

// Close abandons the Update if it was not committed.
func (u *Update) Close() {
	if u.ixAhead && !u.published && u.ix == u.s.ix {
		u.s.rebuildIndex() // it holds writes Pebble never got
	}
	if u.b != nil {
		u.b.Close()
		u.b = nil
	}
	if u.order != nil {
		u.order.Close()
		u.order = nil
	}
	u.handOn()
}

// handOn gives the Update's buffers to the store's next Update.
func (u *Update) handOn() {
	bufs := updateBufs{u.keyBuf, u.valBuf, u.rv.kbuf, u.rv.vbuf}
	if bufs.key == nil || max(cap(bufs.key), cap(bufs.val), cap(bufs.revKey), cap(bufs.revVal)) > maxSpareBuf {
		return
	}
	u.keyBuf, u.valBuf, u.rv.kbuf, u.rv.vbuf = nil, nil, nil, nil
	u.s.mu.Lock()
	u.s.spare = bufs
	u.s.mu.Unlock()
}

// Range calls fn for the keys k with start <= k < end (an empty end: no
// bound) in the KV state as this Update sees it (its own writes
// included), in key order, until fn returns false. key and value are
// valid only during the call. fn may write through the Update: the walk
// goes over a clone of the index.
func (u *Update) Range(start, end []byte, fn func(key, value []byte, m revision.Meta) bool) error {
	r, err := u.reader()
	if err != nil {
		return err
	}
	return rangeIndex(u.ix.clone(), r, u.gen, start, end, math.MaxUint64, fn)
}
