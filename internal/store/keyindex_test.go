package store

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/kvd-project/kvd/internal/revision"
)

// heapBytes is the live heap after a collection.
func heapBytes() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestKeyIndexMemory: the key index's memory per key and per write is
// what docs/operations.md says (about 200 bytes plus the key per key,
// 30 per write), measured on 20,000 keys of 16 bytes written once, then
// 9 times more.
func TestKeyIndexMemory(t *testing.T) {
	const keys, keyLen = 20000, 16
	const perKey, perWrite = 200, 30 // docs/operations.md
	base := heapBytes()
	x := newKeyIndex()
	put := func(rev uint64) {
		for i := range keys {
			k := fmt.Appendf(nil, "%0*d", keyLen, i)
			m := revision.Meta{Create: 1, Mod: rev*keys + uint64(i), Version: rev + 1}
			if err := x.put(k, m, 0, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(0)
	one := float64(heapBytes()-base) / keys
	for rev := uint64(1); rev < 10; rev++ {
		put(rev)
	}
	ten := float64(heapBytes()-base) / keys
	write := (ten - one) / 9
	t.Logf("key index: %.0f bytes per key of %d bytes with one write, %.1f per further write", one, keyLen, write)
	if one > perKey+keyLen || write > perWrite {
		t.Errorf("%.0f bytes per key with its first write (docs: %d + the key), %.1f per further write (docs: %d)",
			one, perKey, write, perWrite)
	}
	runtime.KeepAlive(x)
}
