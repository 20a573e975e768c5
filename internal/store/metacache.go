package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvd-project/kvd/internal/revision"
)

// metaCache holds, for recently written or read keys, the revision.Meta the
// KV state gives them (the zero Meta: absent) and the lease they are
// attached to (0: none), so that a PUT finds its key's Create, Version
// and lease without Pebble point lookups. Each of the two parts of an
// entry may be known or not, independently.
//
// Safety: every cached entry equals what a Pebble read of the cache's
// generation returns, as the Update that owns the cache sees it.
//   - Only Updates read or write it, and at most one Update at a time (its
//     owner, see Update.cache). The owner writes through: Put and Delete
//     store the key's new Meta, and Attach, Detach and RevokeLease its
//     new lease, as they write the batch, and a lookup stores what the
//     batch read returned. Every other write to the KV state or the key
//     leases of the current generation goes through a snapshot install,
//     which clears the cache and names the new generation
//     (InstallSnapshot), or through
//     an Update that is not the owner, whose successful commit clears the
//     cache (Update.publish).
//   - The owner's entries may be ahead of Pebble until its batch commits.
//     If it never does (Close without Commit, or a failed Commit), the
//     cache is cleared (Update.Close), so no entry outlives its write.
//     A commit that is applied but whose fsync then fails faults the store,
//     which writes nothing more.
//   - Entries of another generation are never read: a lookup checks gen.
//
// Completeness: while complete is set, the cache holds an entry for every
// key of gen's KV state that is present or attached to a lease, so a key
// without an entry is absent and on no lease, and a lookup of it needs no
// Pebble read (the entry's parts it lacks are still read).
//   - It is set only by load, which reads every such key of gen from
//     Pebble while no Update owns the cache, so none is ahead of Pebble
//     (at Open, and after a snapshot install commits:
//     Store.loadMetaCache), and only if all of them fit in the bound. A
//     miss is then "absent" in the sense of Safety: as Pebble has it, for
//     the owner; a non-owner's writes clear the cache when they commit.
//   - It holds while the owner writes through: an entry made for a key
//     that had none starts as "absent, no lease" (what completeness said
//     of it) before the write lands on it. An entry that comes to say
//     exactly that is dropped, as a miss says the same (so the bound is
//     spent on present keys alone).
//   - It ends at every event after which a key might lack an entry it
//     needs: reset (a snapshot install, a commit by an Update that was not
//     the owner, a Close or failed Commit of an owner that wrote ahead), a
//     generation change (which resets), any eviction (every entry of a
//     complete cache is needed) and a write of a key too long to cache.
//     Nothing sets it again but load.
//
// Eviction is CLOCK, driven only by the sequence of applied writes, so
// every member's cache evolves alike; the bound is limits.MetaCacheBytes.
// Nothing about the cache is durable: a restart starts it over (load).
type metaCache struct {
	gen      uint64
	idx      map[string]int32 // key -> slots index
	slots    []metaSlot
	free     []int32
	hand     int
	bytes    int
	max      int
	complete atomic.Bool // see Completeness; read by metrics
	owner    *Update
	last     int32 // the slot find or add returned last (find's first guess)
	// absentHits counts lookups answered "absent" (or "no lease") by
	// completeness alone; read by metrics from other goroutines.
	absentHits atomic.Uint64
}

type metaSlot struct {
	key      string // "" marks a free slot
	m        revision.Meta
	lease    uint64
	present  bool // the key is in the KV state (m is its Meta)
	hasMeta  bool // m and present are known
	hasLease bool // lease is known
	used     bool // CLOCK's reference bit
}

// metaSlotOverhead is what an entry costs beside its key's bytes: the
// slot, the map entry and the string header, rounded up.
const metaSlotOverhead = 96

func newMetaCache(max int) *metaCache {
	return &metaCache{idx: make(map[string]int32), max: max}
}

// get returns key's cached state in gen: whether it is present, and its
// Meta if it is; ok is false if the cache does not know.
func (c *metaCache) get(gen uint64, key []byte) (m revision.Meta, present, ok bool) {
	if c.gen != gen {
		return revision.Meta{}, false, false
	}
	s := c.find(key)
	if s == nil {
		if c.complete.Load() {
			c.absentHits.Add(1)
		}
		return revision.Meta{}, false, c.complete.Load()
	}
	if !s.hasMeta {
		return revision.Meta{}, false, false
	}
	s.used = true
	return s.m, s.present, true
}

// getLease returns the lease key is attached to in gen; ok is false if
// the cache does not know.
func (c *metaCache) getLease(gen uint64, key []byte) (lease uint64, ok bool) {
	if c.gen != gen {
		return 0, false
	}
	s := c.find(key)
	if s == nil {
		if c.complete.Load() {
			c.absentHits.Add(1)
		}
		return 0, c.complete.Load()
	}
	if !s.hasLease {
		return 0, false
	}
	s.used = true
	return s.lease, true
}

func (c *metaCache) find(key []byte) *metaSlot {
	// A write finds its key twice in a row (its lookup, then the write's
	// own entry), so the slot found last is tried before the map. A freed
	// slot's key is "": the empty key never takes this path.
	if i := c.last; int(i) < len(c.slots) && len(key) > 0 && c.slots[i].key == string(key) {
		return &c.slots[i]
	}
	if i, ok := c.idx[string(key)]; ok {
		c.last = i
		return &c.slots[i]
	}
	return nil
}

// put records key's state in gen (present, with Meta m, or absent),
// dropping every entry of another generation first.
func (c *metaCache) put(gen uint64, key []byte, m revision.Meta, present bool) {
	if !present {
		m = revision.Meta{}
	}
	if s := c.slot(gen, key); s != nil {
		s.m, s.present, s.hasMeta = m, present, true
		c.dropIfMiss(s)
	}
}

// putLease records the lease key is attached to in gen (0: none).
func (c *metaCache) putLease(gen uint64, key []byte, lease uint64) {
	if s := c.slot(gen, key); s != nil {
		s.lease, s.hasLease = lease, true
		c.dropIfMiss(s)
	}
}

// dropIfMiss drops s if the cache is complete and s says what a miss
// would: absent, on no lease.
func (c *metaCache) dropIfMiss(s *metaSlot) {
	if c.complete.Load() && s.hasMeta && !s.present && s.hasLease && s.lease == 0 {
		c.remove(int(c.idx[s.key]))
	}
}

// slot returns key's entry in gen, making it if need be (knowing nothing
// yet, or on a complete cache that the key is absent and on no lease);
// nil if the key alone is over the bound.
func (c *metaCache) slot(gen uint64, key []byte) *metaSlot {
	if c.gen != gen {
		c.reset(gen)
	}
	if s := c.find(key); s != nil {
		s.used = true
		return s
	}
	known := c.complete.Load() // of key, before an eviction ends it
	cost := len(key) + metaSlotOverhead
	if cost > c.max {
		c.complete.Store(false) // key's state goes uncached
		return nil
	}
	for c.bytes+cost > c.max {
		c.evict()
	}
	s := c.add(key)
	s.hasMeta, s.hasLease = known, known
	return s
}

// add makes an entry for key, which has none, knowing nothing; the
// caller has made room for it.
func (c *metaCache) add(key []byte) *metaSlot {
	k := string(key)
	var i int32
	if n := len(c.free); n > 0 {
		i, c.free = c.free[n-1], c.free[:n-1]
	} else {
		i = int32(len(c.slots))
		c.slots = append(c.slots, metaSlot{})
	}
	c.slots[i] = metaSlot{key: k}
	c.idx[k] = i
	c.last = i
	c.bytes += len(k) + metaSlotOverhead
	return &c.slots[i]
}

// remove drops the entry in slots[i].
func (c *metaCache) remove(i int) {
	s := &c.slots[i]
	delete(c.idx, s.key)
	c.bytes -= len(s.key) + metaSlotOverhead
	*s = metaSlot{}
	c.free = append(c.free, int32(i))
}

// evict drops one entry: the first, from the hand on, not used since the
// hand last passed it.
func (c *metaCache) evict() {
	for {
		if c.hand >= len(c.slots) {
			c.hand = 0
		}
		s := &c.slots[c.hand]
		i := c.hand
		c.hand++
		switch {
		case s.key == "":
		case s.used:
			s.used = false
		default:
			c.remove(i)
			c.complete.Store(false) // every entry of a complete cache is needed
			return
		}
	}
}

// reset empties the cache and makes it gen's.
func (c *metaCache) reset(gen uint64) {
	clear(c.idx)
	c.slots, c.free = c.slots[:0], c.free[:0]
	c.hand, c.bytes, c.gen = 0, 0, gen
	c.complete.Store(false)
}

// len is the number of cached keys.
func (c *metaCache) len() int { return len(c.idx) }

// loadMetaCache fills the metaCache with every key of the current
// generation's KV state that is present or on a lease, making it complete
// if they all fit in its bound; else it keeps those that fit (in key
// order) and stays incomplete, having read no further. No Update may own
// the cache (nor write the KV state before it commits: see Completeness).
// For 60,000 keys it is one scan of their records.
func (s *Store) loadMetaCache() error {
	c, gen := s.mc, s.gen
	c.reset(gen)
	kv, err := s.db.NewIter(&pebble.IterOptions{LowerBound: genPrefix(gen), UpperBound: genEnd(gen)})
	if err != nil {
		return err
	}
	lo := leaseKey(nil, gen, leaseOfKy, 0, nil)
	le, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: append(leaseGenPrefix(gen), leaseOfKy+1)})
	if err != nil {
		return errors.Join(err, kv.Close())
	}
	complete, err := c.load(kv, le)
	if err = errors.Join(err, kv.Close(), le.Close()); err != nil {
		c.reset(gen)
		return err
	}
	c.complete.Store(complete)
	return nil
}

// load merges kv (the generation's keys) and le (its keys' leases), both
// from their first record, into the empty cache; complete is whether
// every key fit.
func (c *metaCache) load(kv, le *pebble.Iterator) (complete bool, err error) {
	kok, lok := kv.First(), le.First()
	for kok || lok {
		var kk, lk []byte
		if kok {
			kk = kv.Key()[kvKeyHeader:]
		}
		if lok {
			lk = le.Key()[leaseKeyHeader+1:]
		}
		key := kk
		switch d := bytes.Compare(kk, lk); {
		case !kok || (lok && d > 0):
			key, kk = lk, nil
		case !lok || d < 0:
			lk = nil
		}
		if c.bytes+len(key)+metaSlotOverhead > c.max {
			return false, errors.Join(kv.Error(), le.Error())
		}
		s := c.add(key)
		s.hasMeta, s.hasLease = true, true
		if kk != nil {
			if s.m, _, err = SplitValue(kv.Value()); err != nil {
				return false, err
			}
			s.present = true
			kok = kv.Next()
		}
		if lk != nil {
			if len(le.Value()) != 8 {
				return false, fmt.Errorf("%w: key lease of %d bytes", ErrCorrupt, len(le.Value()))
			}
			s.lease = binary.LittleEndian.Uint64(le.Value())
			lok = le.Next()
		}
	}
	return true, errors.Join(kv.Error(), le.Error())
}

// reloadMetaCache loads the metaCache after a snapshot install committed
// (loadMetaCache), unless an Update owns it; a failed load leaves it
// incomplete, which is always safe.
func (s *Store) reloadMetaCache() {
	if s.mc.owner != nil {
		return
	}
	_ = s.loadMetaCache()
}

// MetaCacheStats is what the apply path's key metadata cache shows.
type MetaCacheStats struct {
	// Complete: the cache holds every key of the KV state, so a key it
	// lacks is known absent without a Pebble read.
	Complete bool
	// AbsentHits counts lookups of a key's metadata or lease answered
	// "absent" (or "no lease") by completeness alone.
	AbsentHits uint64
}

// MetaCacheStats returns the metadata cache's state; safe from any
// goroutine.
func (s *Store) MetaCacheStats() MetaCacheStats {
	return MetaCacheStats{Complete: s.mc.complete.Load(), AbsentHits: s.mc.absentHits.Load()}
}
