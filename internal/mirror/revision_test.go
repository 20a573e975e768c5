package mirror

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/table"
)

// regionGet reads key from the region's bytes as a one-sided reader does
// (header, the key's two buckets, the record its slot names), without the
// lease and timing checks, which need a client.
func regionGet(t *testing.T, mem, key []byte) (value []byte, meta revision.Meta, rev uint64, ok bool) {
	t.Helper()
	h, err := table.ParseHeader(mem)
	if err != nil {
		t.Fatal(err)
	}
	hash := table.Hash(key)
	b1, b2 := table.Buckets(hash, h.Buckets)
	for _, b := range [2]uint32{b1, b2} {
		off := h.BucketOffset(b)
		bucket := mem[off : off+uint64(h.BucketBytes)]
		var slots [table.SlotsPerBucket]table.Slot
		for _, s := range slots[:table.ScanBucket(bucket[:table.BucketSize], table.Fingerprint(hash), &slots)] {
			var v []byte
			var m revision.Meta
			if s.Inline {
				v, m, err = h.VerifyInline(bucket[table.BucketSize:], key, table.DecodeInlineSlot(s.Word()), nil)
			} else {
				v, m, err = h.VerifyRecord(mem[s.Offset:s.Offset+s.Len], key, s)
			}
			if err == nil {
				return v, m, h.Revision, true
			}
		}
	}
	return nil, revision.Meta{}, h.Revision, false
}

// TestRegionCarriesWriteMeta: what a kv.Write carried is what a one-sided
// reader finds in the region, for an out-of-place and an inline record,
// after a key's first and second writes; the header's revision is each
// batch's.
func TestRegionCarriesWriteMeta(t *testing.T) {
	for _, inline := range []int{0, 384} {
		st := newMemStore()
		m, err := New(Config{Region: make([]byte, 1<<21), Table: table.Config{Grace: testGrace, InlineMax: inline},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Knobs: Knobs{PauseRepair: pauseRepair()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		if _, _, err := m.Start(func() (Store, error) { return st, nil }); err != nil {
			t.Fatal(err)
		}
		key := []byte("k")
		var prev revision.Meta
		for i, rev := range []uint64{5, 9} {
			meta := prev.Next(rev, uint64(70+i))
			value := bytes.Repeat([]byte{byte('a' + i)}, 256)
			m.Apply([]kv.Write{{Key: key, Value: value, Meta: meta}}, rev+1)
			v, got, hdrRev, ok := regionGet(t, m.cfg.Region, key)
			if !ok || !bytes.Equal(v, value) || got != meta || hdrRev != rev+1 {
				t.Fatalf("inline %d, write %d: %v %+v at revision %d; want %+v at %d", inline, i+1, ok, got, hdrRev, meta, rev+1)
			}
			if got.Mod != rev || i == 1 && got.Version != 2 {
				t.Fatalf("inline %d, write %d: %+v", inline, i+1, got)
			}
			if _, mm, _, _ := m.Get(context.Background(), key); mm != meta {
				t.Fatalf("Mirror.Get: %+v, want %+v", mm, meta)
			}
			prev = meta
		}
	}
}

// TestRevisionPublishedAfterRecords: during an applied batch the header
// still shows the previous revision; the batch's appears only once its
// records are in place (a reader takes it as a lower bound on what it
// reads next). The AtomicStep knob looks at every step of an atomic batch.
func TestRevisionPublishedAfterRecords(t *testing.T) {
	st := newMemStore()
	st.put("a", "old", 3)
	var m *Mirror
	var seen []uint64
	m = startMirror(t, st, Knobs{PauseRepair: pauseRepair(), AtomicStep: func(string) {
		seen = append(seen, m.tbl.Header().Revision) // the table lock is held
	}}, nil)
	m.Apply([]kv.Write{
		{Key: []byte("a"), Value: []byte("new"), Meta: metaFromVersion(4), Atomic: true},
		{Key: []byte("b"), Value: []byte("new"), Meta: metaFromVersion(4), Atomic: true},
	}, 4)
	if len(seen) != 3 {
		t.Fatalf("%d atomic steps, want 3", len(seen))
	}
	for i, r := range seen {
		if r != 3 {
			t.Fatalf("step %d: header revision %d while the batch was being applied, want 3", i, r)
		}
	}
	if r := m.Header().Revision; r != 4 {
		t.Fatalf("header revision %d after the batch, want 4", r)
	}
}
