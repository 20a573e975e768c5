package client

import "sync"

// locationCache remembers, per key, the slot word a GET last found, so the
// next GET can read the record in the same round trip as the buckets. A hit
// is trusted only if the slot read in that round trip still holds the very
// same word, so a stale entry costs a round trip, never a stale value.
type locationCache struct {
	max int
	mu  sync.RWMutex
	m   map[string]uint64
}

func newLocationCache(max int) locationCache {
	return locationCache{max: max, m: make(map[string]uint64)}
}

func (c *locationCache) get(key []byte) (uint64, bool) {
	if c.max <= 0 {
		return 0, false
	}
	c.mu.RLock()
	w, ok := c.m[string(key)]
	c.mu.RUnlock()
	return w, ok
}

func (c *locationCache) put(key []byte, word uint64) {
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
