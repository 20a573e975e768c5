package txn

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
)

// TestDecodeAllocatesWithinLimits: a transaction is refused past
// MaxCompares and MaxOps, but Parse allocates the Compare and Op slices for
// the counts the frame's header claims (up to 65535 each) before Validate
// checks them, bounded only by the frame's length: a 1.4 MiB request that
// names 65535 compares and 2 x 65535 operations makes the server allocate
// about 12 MiB (8.7 times the frame, and far beyond the budget the server
// charges a txn request for) only to refuse it.
func TestDecodeAllocatesWithinLimits(t *testing.T) {
	const n = 1<<16 - 1
	b := binary.LittleEndian.AppendUint16(nil, n) // compares
	b = binary.LittleEndian.AppendUint16(b, n)    // then
	b = binary.LittleEndian.AppendUint16(b, n)    // else
	for range n {                                 // compares: target version, key "", version
		b = append(b, byte(TargetVersion), byte(Equal), 0, 0)
		b = binary.LittleEndian.AppendUint64(b, 0)
	}
	for range 2 * n { // operations: DELETE of "" (7 bytes each)
		b = append(b, byte(Delete), 0, 0, 0, 0, 0, 0)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Decode(b)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Decode of %d compares and 2x%d operations: %v; want ErrInvalid", n, n, err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("refusing a %d KiB transaction of %d compares and 2x%d operations allocated %d KiB", len(b)>>10, n, n, alloc>>10)
	if alloc > uint64(len(b)) {
		t.Errorf("Decode allocated %d KiB to refuse a %d KiB transaction over MaxCompares (%d) and MaxOps (%d); want at most the frame's size",
			alloc>>10, len(b)>>10, MaxCompares, MaxOps)
	}
}
