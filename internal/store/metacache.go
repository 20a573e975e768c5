package store

import "github.com/kvd-project/kvd/internal/revision"

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
//     which clears
//     the cache and names the new generation (InstallSnapshot), or through
//     an Update that is not the owner, whose successful commit clears the
//     cache (Update.publish).
//   - The owner's entries may be ahead of Pebble until its batch commits.
//     If it never does (Close without Commit, or a failed Commit), the
//     cache is cleared (Update.Close), so no entry outlives its write.
//     A commit that is applied but whose fsync then fails faults the store,
//     which writes nothing more.
//   - Entries of another generation are never read: a lookup checks gen.
//
// Eviction is CLOCK, driven only by the sequence of applied writes, so
// every member's cache evolves alike; the bound is limits.MetaCacheBytes.
// Nothing about the cache is durable: a restart starts it empty.
type metaCache struct {
	gen   uint64
	idx   map[string]int32 // key -> slots index
	slots []metaSlot
	free  []int32
	hand  int
	bytes int
	max   int
	owner *Update
	last  int32 // the slot find or slot returned last (find's first guess)
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
	if s == nil || !s.hasMeta {
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
	if s == nil || !s.hasLease {
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
	}
}

// putLease records the lease key is attached to in gen (0: none).
func (c *metaCache) putLease(gen uint64, key []byte, lease uint64) {
	if s := c.slot(gen, key); s != nil {
		s.lease, s.hasLease = lease, true
	}
}

// slot returns key's entry in gen, making it (knowing nothing yet) if
// need be; nil if the key alone is over the bound.
func (c *metaCache) slot(gen uint64, key []byte) *metaSlot {
	if c.gen != gen {
		c.reset(gen)
	}
	if s := c.find(key); s != nil {
		s.used = true
		return s
	}
	cost := len(key) + metaSlotOverhead
	if cost > c.max {
		return nil
	}
	for c.bytes+cost > c.max {
		c.evict()
	}
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
	c.bytes += cost
	return &c.slots[i]
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
			delete(c.idx, s.key)
			c.bytes -= len(s.key) + metaSlotOverhead
			*s = metaSlot{}
			c.free = append(c.free, int32(i))
			return
		}
	}
}

// reset empties the cache and makes it gen's.
func (c *metaCache) reset(gen uint64) {
	clear(c.idx)
	c.slots, c.free = c.slots[:0], c.free[:0]
	c.hand, c.bytes, c.gen = 0, 0, gen
}

// len is the number of cached keys.
func (c *metaCache) len() int { return len(c.idx) }
