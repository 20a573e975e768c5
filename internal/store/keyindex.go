package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/btree"

	"github.com/kvd-project/kvd/internal/revision"
)

// keyIndex is the history's index by key, in memory (etcd's treeIndex):
// for every key the history holds, its writes in revision order, each
// naming its by-revision record, and the lease the key is attached to.
// With it a PUT writes one record to Pebble, at the next revision, where
// Pebble appends it without a search or a later rewrite; an index kept in
// Pebble costs a write at a random key per PUT, and that write costs as
// much CPU as all the rest of the state's writes together.
//
// Open builds it from the by-revision records (buildIndex), as does the
// commit that installs a snapshot.
//
// Writers: the Update in hand (the raft loop's; one at a time) records
// its writes here as it makes them, and the compactor drops the writes
// it deleted. Both hold mu. A key keeps its ixKey, in the tree and in
// byKey, from its first write until compaction drops the last: a write
// of a key already there replaces only the ixKey's state, an immutable
// ixState (its revs may share the old one's array, but only beyond the
// old one's length), so it costs one map look-up, not a search of the
// tree (a search is a score of comparisons, each chasing pointers: on
// PUTs of 100,000 keys, one per PUT took a tenth of a node's CPU).
//
// Readers: an Update reads the index as it is (its own writes included).
// Every other reader takes a view (Store.readView): a Clone of the tree,
// made under mu, with the published store and compaction revisions, and
// reads each key's state at the view's revision. Writes of the Update in
// hand are above it. The compactor drops a key's writes at or below the
// compaction revision C of its pass, all but the newest (and that too if
// a tombstone), which no read at C or above needs; and it starts a pass
// only once every view taken before C was published has closed
// (views), so no view reads below the compaction revision of a pass
// that runs while it is open.
//
// An Update that is abandoned (closed without a commit) leaves writes in
// the index that Pebble never got: the index is rebuilt then.
type keyIndex struct {
	mu   sync.Mutex
	tree *btree.BTreeG[*ixKey]
	// byKey holds the tree's entries too, for the writers' look-ups.
	byKey map[string]*ixKey
	revs  int // the writes the tree holds
	// maxRev is the newest write's revision buildIndex found.
	maxRev uint64
}

// ixKey is one key's entry in the index.
type ixKey struct {
	key []byte
	st  atomic.Pointer[ixState]
}

// ixState is a key's writes and lease, as of one change.
type ixState struct {
	revs []ixRev // in revision order
	// last is the key's Meta after its newest write (a tombstone's:
	// zero). Those of older writes are in their records.
	last  revision.Meta
	lease uint64 // the lease the key is attached to (0: none)
}

// state is the key's current state.
func (e *ixKey) state() *ixState { return e.st.Load() }

// ixRev is one write of a key: what names its by-revision record.
type ixRev struct {
	mod     uint64 // the write's revision
	seq     uint32 // the write's place in its revision
	deleted bool   // a tombstone
}

// indexDegree is the B-tree's degree: google/btree's suggested value
// for in-memory trees of small items.
const indexDegree = 32

func lessIxKey(a, b *ixKey) bool { return bytes.Compare(a.key, b.key) < 0 }

func newKeyIndex() *keyIndex {
	return &keyIndex{tree: btree.NewG(indexDegree, lessIxKey), byKey: make(map[string]*ixKey)}
}

// at is the newest of revs at or below rev.
func at(revs []ixRev, rev uint64) (ixRev, bool) {
	for i := len(revs) - 1; i >= 0; i-- {
		if revs[i].mod <= rev {
			return revs[i], true
		}
	}
	return ixRev{}, false
}

// latest is the newest of revs; ok is false if there is none.
func latest(revs []ixRev) (r ixRev, ok bool) {
	if len(revs) == 0 {
		return ixRev{}, false
	}
	return revs[len(revs)-1], true
}

// find returns key's entry in t, or nil.
func find(t *btree.BTreeG[*ixKey], key []byte) *ixKey {
	e, _ := t.Get(&ixKey{key: key})
	return e
}

// get returns key's current state, or nil if the index lacks the key.
// The state must not be changed.
func (x *keyIndex) get(key []byte) *ixState {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.byKey[string(key)]; e != nil {
		return e.state()
	}
	return nil
}

// entry returns key's entry, made (and put in the tree) if it has none;
// the caller holds mu.
func (x *keyIndex) entry(key []byte) *ixKey {
	if e := x.byKey[string(key)]; e != nil {
		return e
	}
	e := &ixKey{key: bytes.Clone(key)}
	e.st.Store(&ixState{})
	x.byKey[string(e.key)] = e
	x.tree.ReplaceOrInsert(e)
	return e
}

// change sets e's state to st, dropping e from the index if st holds
// nothing; the caller holds mu.
func (x *keyIndex) change(e *ixKey, st *ixState) {
	e.st.Store(st)
	if len(st.revs) == 0 && st.lease == 0 {
		delete(x.byKey, string(e.key))
		x.tree.Delete(e)
	}
}

// put records a write of key at m.Mod, with the key's Meta after it (a
// tombstone: deleted), at or above its last write's revision (a second
// write in one revision replaces the first).
func (x *keyIndex) put(key []byte, m revision.Meta, seq uint32, deleted bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entry(key)
	old := e.state()
	r := ixRev{mod: m.Mod, seq: seq, deleted: deleted}
	st := &ixState{lease: old.lease}
	if !deleted {
		st.last = m
	}
	n := len(old.revs)
	switch {
	case n > 0 && old.revs[n-1].mod > r.mod:
		return fmt.Errorf("store: history of %q at revision %d, written at %d already", key, r.mod, old.revs[n-1].mod)
	case n > 0 && old.revs[n-1].mod == r.mod:
		// A copy: the last element is visible to readers of the old state.
		st.revs = append(append(make([]ixRev, 0, n+4), old.revs[:n-1]...), r)
	default:
		st.revs = append(old.revs, r)
		x.revs++
	}
	x.change(e, st)
	return nil
}

// setLease records the lease key is attached to (0: none).
func (x *keyIndex) setLease(key []byte, lease uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entry(key)
	old := e.state()
	x.change(e, &ixState{revs: old.revs, last: old.last, lease: lease})
}

// drop removes the writes of key at or below upTo (the compactor
// deleted their records), and the key if nothing of it is left.
func (x *keyIndex) drop(key []byte, upTo uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.byKey[string(key)]
	if e == nil {
		return
	}
	old := e.state()
	i := 0
	for i < len(old.revs) && old.revs[i].mod <= upTo {
		i++
	}
	x.revs -= i
	x.change(e, &ixState{revs: append([]ixRev(nil), old.revs[i:]...), last: old.last, lease: old.lease})
}

// clone is a copy of the tree for a reader, which the writers' later
// inserts and deletes do not touch.
func (x *keyIndex) clone() *btree.BTreeG[*ixKey] {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.tree.Clone()
}

// replace makes y's tree the index's (a rebuilt one).
func (x *keyIndex) replace(y *keyIndex) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.tree, x.byKey, x.revs = y.tree, y.byKey, y.revs
}

// IndexStats is the size of the store's key index.
type IndexStats struct {
	// Keys is how many keys it holds: those of the state, and those
	// deleted whose tombstone compaction has not yet dropped.
	Keys int
	// Revisions is how many writes it holds, each a by-revision record
	// in Pebble.
	Revisions int
}

func (x *keyIndex) stats() IndexStats {
	x.mu.Lock()
	defer x.mu.Unlock()
	return IndexStats{Keys: x.tree.Len(), Revisions: x.revs}
}

// IndexStats returns the size of the key index; safe from any goroutine.
func (s *Store) IndexStats() IndexStats {
	s.genMu.RLock()
	defer s.genMu.RUnlock()
	return s.ix.stats()
}

// ascend calls fn for the entries of t with start <= key < end (an empty
// end: no bound), in key order, until fn returns false.
func ascend(t *btree.BTreeG[*ixKey], start, end []byte, fn func(e *ixKey) bool) {
	it := func(e *ixKey) bool { return fn(e) }
	if len(end) == 0 {
		t.AscendGreaterOrEqual(&ixKey{key: start}, it)
		return
	}
	if bytes.Compare(start, end) >= 0 {
		return
	}
	t.AscendRange(&ixKey{key: start}, &ixKey{key: end}, it)
}

// buildIndex builds generation gen's key index from r: its writes from
// the by-revision records, in revision order, and its keys' leases.
func buildIndex(r pebble.Reader, gen uint64) (*keyIndex, error) {
	x := newKeyIndex()
	it, err := r.NewIter(&pebble.IterOptions{
		LowerBound: appendRevKey(nil, gen, revOrder), UpperBound: appendRevKey(nil, gen, revOrder+1)})
	if err != nil {
		return nil, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		_, seq, key, valid := splitOrderKey(it.Key()[revKeyHeader+1:])
		if !valid {
			return nil, errors.Join(fmt.Errorf("%w: history key %x", ErrCorrupt, it.Key()), it.Close())
		}
		m, _, deleted, err := decodeHistValue(it.Value())
		if err != nil {
			return nil, errors.Join(err, it.Close())
		}
		if err := x.put(key, m, seq, deleted); err != nil {
			return nil, errors.Join(fmt.Errorf("%w: %w", ErrCorrupt, err), it.Close())
		}
		x.maxRev = max(x.maxRev, m.Mod)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, err
	}
	lo := leaseKey(nil, gen, leaseOfKy, 0, nil)
	le, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: append(leaseGenPrefix(gen), leaseOfKy+1)})
	if err != nil {
		return nil, err
	}
	for ok := le.First(); ok; ok = le.Next() {
		if len(le.Value()) != 8 {
			return nil, errors.Join(fmt.Errorf("%w: key lease of %d bytes", ErrCorrupt, len(le.Value())), le.Close())
		}
		x.setLease(le.Key()[leaseKeyHeader+1:], binary.LittleEndian.Uint64(le.Value()))
	}
	return x, errors.Join(le.Error(), le.Close())
}

// rebuildIndex builds the current generation's key index again from
// Pebble, for an Update abandoned with writes in it that Pebble never
// got. If that fails the store is left faulted: its index would answer
// with writes that never happened.
func (s *Store) rebuildIndex() {
	s.genMu.Lock()
	defer s.genMu.Unlock()
	x, err := buildIndex(s.db, s.gen)
	if err != nil {
		s.fault.trip(fmt.Errorf("store: rebuilding the key index: %w", err))
		return
	}
	s.ix.replace(x)
}
