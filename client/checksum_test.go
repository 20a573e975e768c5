package client

import (
	"errors"
	"slices"
	"testing"

	"github.com/kvd-project/kvd/internal/table"
)

// inlineValueByte is the offset in an inline record's block of its value's
// first byte, for a key of keyLen bytes (docs/layout.md, "Inline records":
// each 8-byte word carries 7 payload bytes and the tag; the payload is a
// 14-byte head, the key, the value).
func inlineValueByte(keyLen int) int {
	i := 14 + keyLen
	return 8*(1+i/7) + i%7
}

// TestBadChecksumNeverServed: a record whose bytes no longer match its
// checksum (a torn READ, a bad DIMM, a write the NIC saw half of) is never
// an answer, at any level: a serializable read, which skips the lease,
// verifies the record as a linearizable one does. The client retries, then
// asks by RPC. The damage is a flipped value byte that leaves the tags,
// the length and the key intact, so only the checksum can tell.
func TestBadChecksumNeverServed(t *testing.T) {
	const R = defaultReadRetries
	var inl *inlineRig
	corrupt := func(r *rig) { r.record("k")[table.RecordHeaderSize+1] ^= 0x20 }
	corruptInline := func(*rig) { inl.block("k")[inlineValueByte(1)] ^= 0x20 }
	// The damage is of the kind only the checksum catches.
	t.Run("damage", func(t *testing.T) {
		r := newReadyRig(t)
		rec := slices.Clone(r.record("k"))
		rec[table.RecordHeaderSize+1] ^= 0x20
		if _, _, err := table.VerifyRecord(rec, []byte("k"), table.Slot{Len: uint64(len(rec))}); !errors.Is(err, table.ErrTorn) {
			t.Fatalf("damaged record: %v, want %v", err, table.ErrTorn)
		}
		inl = newInlineRig(t)
		corruptInline(inl.rig)
		p := inl.at["k"]
		if _, _, err := table.VerifyInline(inl.arena(p.bucket), []byte("k"), table.DecodeInlineSlot(p.word), nil); !errors.Is(err, table.ErrTorn) {
			t.Fatalf("damaged inline record: %v, want %v", err, table.ErrTorn)
		}
	})
	for _, level := range []Consistency{Serializable, Linearizable} {
		t.Run(level.String(), func(t *testing.T) {
			outOfPlace := []protoCase{
				{name: "out of place, uncached", setup: corrupt, trace: repTrace(R, traceHit...)},
				{name: "out of place, cached", setup: func(r *rig) { r.warm("k"); corrupt(r) },
					trace: catTraces(traceCachedHit, repTrace(R, traceHit...))},
			}
			inline := []protoCase{
				{name: "inline, uncached", setup: corruptInline, trace: repTrace(R, traceInlineHit...)},
				{name: "inline, cached", setup: func(r *rig) { r.warmWith("k", traceInlineHit); corruptInline(r) },
					trace: catTraces(traceInlineCachedHit, repTrace(R, traceInlineHit...))},
			}
			for _, cases := range [][]protoCase{outOfPlace, inline} {
				for i := range cases {
					cases[i].level = level
					cases[i].want, cases[i].fallbacks = rpcMarker, 1
					cases[i].retries = map[string]uint64{"torn": R}
				}
			}
			runProtoCases(t, outOfPlace, newReadyRig)
			runProtoCases(t, inline, readyInline(&inl))
		})
	}
	// A batched read verifies each record as a GET does; what it cannot
	// prove it leaves to the single-key path, which asks by RPC.
	t.Run("getmany", func(t *testing.T) {
		for _, level := range []Consistency{Serializable, Linearizable} {
			r := newReadyRig(t)
			r.put("j", "v2")
			corrupt(r)
			if got, want := r.getMany(level, "j", "k"), []string{"v2", rpcMarker}; !slices.Equal(got, want) {
				t.Errorf("%v GetMany = %q, want %q", level, got, want)
			}
			inl = newInlineRig(t)
			inl.putInline("j", "v2", false)
			corruptInline(inl.rig)
			if got, want := inl.getMany(level, "j", "k"), []string{"v2", rpcMarker}; !slices.Equal(got, want) {
				t.Errorf("%v GetMany inline = %q, want %q", level, got, want)
			}
		}
	})
}
