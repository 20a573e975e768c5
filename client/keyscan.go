package client

import (
	"encoding/binary"
	"errors"

	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/table"
)

// keyScan is what bucket reads say about one key (docs/layout.md,
// "Reading"): every slot with the key's fingerprint is either inline, its
// record in the same bucket's arena, in hand, and verified at once from the
// buffer; or out of place, a candidate whose record a later round trip
// READs. Its fields are reused GET after GET (it lives in the scratch).
type keyScan struct {
	key    []byte
	fp     uint16
	arena  uint64        // arena bytes per bucket: the geometry's bucket minus its slot words
	hdr    *table.Header // the geometry's: its layout says how records are laid out
	dst    []byte        // the caller's: a hit's value is appended to it
	oop    []table.Slot  // out-of-place candidates, the first bucket's first
	nFirst int           // oop[:nFirst] came from the key's first bucket

	found  bool          // a live inline record of the key (the highest mod revision if several)
	value  []byte        // dst with its value appended
	meta   revision.Meta // its revision metadata
	loc    location      // its slot word and bucket, for the location cache
	bad    error         // an inline record of the key dead or hidden (errStale), or one torn (errTorn)
	inline bool          // some inline record was verified: a decision rests on arena bytes
	// far is the first inline word with the key's fingerprint whose record
	// lies past the part of the arena READ (0: none), and farSecond says
	// which of the key's buckets held it: a cached GET reads it next.
	far       uint64
	farSecond bool
}

// reset starts a scan for key in buckets of geometry g; candidates are
// appended to oop.
func (k *keyScan) reset(key []byte, g *geometry, dst []byte, oop []table.Slot) {
	*k = keyScan{key: key, fp: table.Fingerprint(table.Hash(key)), arena: uint64(g.bucketBytes - table.BucketSize),
		hdr: &g.hdr, dst: dst, value: dst, oop: oop}
}

// buckets scans the key's two buckets, as READ.
func (k *keyScan) buckets(bk *[2][]byte) {
	k.bucket(bk[0], false)
	k.nFirst = len(k.oop)
	k.bucket(bk[1], true)
}

// bucket scans one bucket as READ (slot words, then arena); second says
// which of the key's buckets it is.
func (k *keyScan) bucket(buf []byte, second bool) {
	for i := 0; i < table.SlotsPerBucket; i++ {
		w := binary.LittleEndian.Uint64(buf[i*table.SlotSize:])
		if w == 0 {
			continue
		}
		sl := table.DecodeSlot(w) // the fingerprint bits are the same in both kinds
		switch {
		case sl.FP != k.fp:
		case sl.Inline:
			k.verify(buf[table.BucketSize:], w, second)
		default:
			k.oop = append(k.oop, sl)
		}
	}
}

// verify checks the inline record that word w names in arena. Only a
// record whose every word carries w's tag passes, so a block rewritten
// while it was READ is never taken for a record (docs/layout.md, "Inline
// records"); a word naming bytes outside its arena is torn too (a word is
// never torn by the NIC, but it is checked before it is trusted).
func (k *keyScan) verify(arena []byte, w uint64, second bool) {
	k.inline = true
	sl := table.DecodeInlineSlot(w)
	if !sl.InArena(k.arena) {
		k.fail(errTorn)
		return
	}
	if sl.Offset+sl.Len > uint64(len(arena)) {
		// Past the part of the arena READ (a cached GET reads only up to
		// its record's end): not in hand, and read next (getCached).
		if k.far == 0 {
			k.far, k.farSecond = w, second
		}
		return
	}
	v, meta, err := k.hdr.VerifyInline(arena, k.key, sl, k.value)
	switch {
	case err == nil:
		if !k.found || meta.Mod > k.meta.Mod {
			// Several live records are copies (a move) or successive
			// records, each current when read: the latest wins.
			if len(k.value) == len(k.dst) {
				k.value = v // the first: already dst and the value, no copy
			} else {
				k.value = append(k.dst, v[len(k.value):]...)
			}
			k.found, k.meta, k.loc = true, meta, location{word: w, second: second}
		}
	case errors.Is(err, table.ErrKeyMismatch):
		// another key with the same fingerprint
	case errors.Is(err, table.ErrDead), errors.Is(err, table.ErrHidden):
		k.fail(errStale) // superseded, or an atomic group's write being applied
	default:
		k.fail(errTorn) // rewritten while READ, or never a record: whose, nobody knows
	}
}

func (k *keyScan) fail(err error) {
	if k.bad == nil {
		k.bad = err
	}
}
