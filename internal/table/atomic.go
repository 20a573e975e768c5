package table

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// The layout is little-endian, but sync/atomic stores in native order; on a
// big-endian machine the word is byte-swapped before the store.
var bigEndian = binary.NativeEndian.Uint16([]byte{0, 1}) == 1

// storeWord publishes an 8-byte little-endian word at b[off:] with one
// atomic store, so a concurrent READ sees the old word or the new one, never
// a mix. off must be 8-aligned relative to an 8-aligned b.
func storeWord(b []byte, off uint64, w uint64) {
	if bigEndian {
		w = bits.ReverseBytes64(w)
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&b[off : off+8][0])), w)
}

// storeHalf is storeWord for a 4-byte word (a record's state).
func storeHalf(b []byte, off uint64, w uint32) {
	if bigEndian {
		w = bits.ReverseBytes32(w)
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[off : off+4][0])), w)
}

// stores makes the writer's atomic stores into a live region (Table.st).
// after, if set (tests only), runs after each one, so that a test can
// check what a concurrent reader could accept at every step; the zero
// value just stores.
type stores struct{ after func() }

// word is storeWord, then the hook.
func (s stores) word(b []byte, off uint64, w uint64) {
	storeWord(b, off, w)
	if s.after != nil {
		s.after()
	}
}

// half is storeHalf, then the hook.
func (s stores) half(b []byte, off uint64, w uint32) {
	storeHalf(b, off, w)
	if s.after != nil {
		s.after()
	}
}

// loadWord reads an 8-byte little-endian word at b[off:] with one atomic
// load (the counterpart of storeWord, for words another goroutine stores).
func loadWord(b []byte, off uint64) uint64 {
	w := atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[off : off+8][0])))
	if bigEndian {
		w = bits.ReverseBytes64(w)
	}
	return w
}
