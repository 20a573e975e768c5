package table

import (
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/mmap"
	"github.com/kvd-project/kvd/internal/revision"
)

// mapMem returns n bytes of zeroed, page-aligned memory off the Go heap,
// freed when the test ends.
func mapMem(tb testing.TB, n int) []byte {
	tb.Helper()
	b, err := mmap.Alloc(n)
	if err != nil {
		tb.Fatalf("mmap.Alloc(%d): %v", n, err)
	}
	tb.Cleanup(func() {
		if err := mmap.Free(b); err != nil {
			tb.Errorf("mmap.Free: %v", err)
		}
	})
	return b
}

// fakeClock is an injectable clock that only moves when told to. It is safe
// for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// newTable formats a table over fresh memory with a fake clock.
func newTable(tb testing.TB, size int, cfg Config) (*Table, []byte, *fakeClock) {
	tb.Helper()
	clk := &fakeClock{}
	clk.ns.Store(1e12)
	if cfg.Now == nil {
		cfg.Now = clk.Now
	}
	mem := mapMem(tb, size)
	t, err := Format(mem, cfg)
	if err != nil {
		tb.Fatalf("Format: %v", err)
	}
	return t, mem, clk
}

// errMiss is what lookup returns when no slot holds the key.
var errMiss = errors.New("miss")

// lookup does what a client does with the bytes of one READ of the header,
// the key's buckets (with their arenas) and its matching out-of-place
// records, here read straight from mem by a goroutine that is not racing
// the writer. An inline word's record is verified from its bucket's arena.
func lookup(mem, key []byte) (value []byte, version uint64, err error) {
	h, err := ParseHeader(mem)
	if err != nil {
		return nil, 0, err
	}
	hash := Hash(key)
	fp := Fingerprint(hash)
	b1, b2 := Buckets(hash, h.Buckets)
	for _, b := range [2]uint32{b1, b2} {
		for i := range SlotsPerBucket {
			w := binary.LittleEndian.Uint64(mem[h.SlotOffset(b, i):])
			if w == 0 || DecodeSlot(w).FP != fp {
				continue
			}
			value, version, err := verifyWord(mem, h, b, w, key)
			if errors.Is(err, ErrKeyMismatch) {
				continue
			}
			return value, version, err
		}
	}
	return nil, 0, errMiss
}

// verifyWord verifies, as a reader would, the record that slot word w in
// bucket b names.
func verifyWord(mem []byte, h Header, b uint32, w uint64, key []byte) ([]byte, uint64, error) {
	if IsInline(w) {
		base := h.BucketOffset(b) + BucketSize
		arena := mem[base : base+uint64(h.BucketBytes-BucketSize)]
		return verInl(arena, key, DecodeInlineSlot(w), nil)
	}
	s := DecodeSlot(w)
	if !h.InArea(s) {
		return nil, 0, ErrBadLength
	}
	return verRec(mem[s.Offset:s.Offset+s.Len], key, s)
}

// slotOf returns the slot word currently published for key (0 if none).
func slotOf(tb testing.TB, tab *Table, key []byte) uint64 {
	tb.Helper()
	_, w, ok := tab.find(key, Hash(key))
	if !ok {
		return 0
	}
	return w
}

// inlineModes are the arena settings the property tests run under: none
// (every record out of place, layout 2's writer) and small records inline
// (InlineMax 176: values up to about 100 bytes), with an inline grace
// period half the test's own.
var inlineModes = []struct {
	name      string
	inlineMax int
}{
	{"out of place", 0},
	{"inline", 176},
}

// forInlineModes runs f as one subtest per inline mode, with cfg given
// that mode's arenas. Region sizes for f come from grow, which adds the
// arenas' bytes when cfg fixes the bucket count, so that the record area
// stays the size the test was written for.
// churnOps is a churn test's number of operations: n, or half of it in
// -short mode, which keeps these randomized runs to seconds while still
// passing their own checks that they exercised enough (the full run, make
// test, does them all).
func churnOps(n int) int {
	if testing.Short() {
		return n / 2
	}
	return n
}

func forInlineModes(t *testing.T, cfg Config, f func(t *testing.T, cfg Config, grow func(size int) int)) {
	for _, m := range inlineModes {
		t.Run(m.name, func(t *testing.T) {
			c := withInline(cfg, m.inlineMax)
			grow := func(size int) int {
				return size + c.Buckets*int(c.withDefaults().bucketBytes()-BucketSize)
			}
			f(t, c, grow)
		})
	}
}

// withInline is cfg with arenas for records of up to inlineMax bytes (0:
// none) and an inline grace period half of cfg's grace period.
func withInline(cfg Config, inlineMax int) Config {
	cfg.InlineMax = inlineMax
	if inlineMax > 0 {
		g := cfg.withDefaults().Grace
		cfg.InlineGrace = max(g/2/time.Millisecond*time.Millisecond, time.Millisecond)
	}
	return cfg
}

// mv is the revision metadata tests write for a write numbered v: every
// field different, so that a round trip that dropped or swapped one shows.
func mv(v uint64) revision.Meta {
	return revision.Meta{Create: v >> 1, Mod: v, Version: v&7 + 1, Lease: v ^ 0x5a5a}
}

// verRec and verInl are VerifyRecord and VerifyInline for tests that
// follow writes by their Mod alone.
func verRec(rec, key []byte, s Slot) ([]byte, uint64, error) {
	v, m, err := VerifyRecord(rec, key, s)
	return v, m.Mod, err
}

func verInl(arena, key []byte, s InlineSlot, dst []byte) ([]byte, uint64, error) {
	v, m, err := VerifyInline(arena, key, s, dst)
	return v, m.Mod, err
}
