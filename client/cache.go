package client

import "sync"

// locationCache remembers, per key, the slot word a GET last found (and
// which of the key's two buckets held it), so the next GET reads one
// bucket instead of two: for an inline record, that bucket (slot words and
// arena: any live inline record of the key there will do), one round
// trip; for an out-of-place one, that bucket's slot words and then the
// records they name, two. A hit is trusted only if a record verifies
// against a slot word read before it or with it (for inline records, whose
// tags no value can forge) and reads live (docs/layout.md, "A cached
// location"), so a stale entry costs a round trip, never a stale value.
type locationCache struct {
	max int
	mu  sync.RWMutex
	m   map[string]location
}

// location is where a GET last found a key: its slot word, in the key's
// first bucket or (second) its other one.
type location struct {
	word   uint64
	second bool
}

func newLocationCache(max int) locationCache {
	return locationCache{max: max, m: make(map[string]location)}
}

func (c *locationCache) get(key []byte) (location, bool) {
	if c.max <= 0 {
		return location{}, false
	}
	c.mu.RLock()
	w, ok := c.m[string(key)]
	c.mu.RUnlock()
	return w, ok
}

func (c *locationCache) put(key []byte, word location) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	if old, ok := c.m[string(key)]; ok {
		if old != word {
			c.m[string(key)] = word
		}
		c.mu.Unlock()
		return
	}
	if len(c.m) >= c.max {
		for k := range c.m { // map order is random: evict an arbitrary entry
			delete(c.m, k)
			break
		}
	}
	c.m[string(key)] = word
	c.mu.Unlock()
}

func (c *locationCache) drop(key []byte) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	delete(c.m, string(key))
	c.mu.Unlock()
}

// reset forgets every location (the region was rebuilt).
func (c *locationCache) reset() {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	clear(c.m)
	c.mu.Unlock()
}
