package kv

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
)

// TestPublishCarriesRevisionAndMeta: the Publisher gets the store
// revision after the batch, and each Write the Meta it was applied with.
func TestPublishCarriesRevisionAndMeta(t *testing.T) {
	rec := &recordingApplier{}
	m := &machine{pub: rec}
	meta := revision.Meta{Create: 3, Mod: 5, Version: 2, Lease: 9}
	m.sc.applies = append(m.sc.applies, Write{Key: []byte("a"), Value: []byte("1"), Meta: meta})
	m.publish(7)
	if len(rec.revs) != 1 || rec.revs[0] != 7 || len(rec.metas) != 1 || rec.metas[0] != meta {
		t.Fatalf("revisions %v, metas %+v; want [7], [%+v]", rec.revs, rec.metas, meta)
	}
}

func TestCommandRoundTrip(t *testing.T) {
	tests := []command{
		{op: opPut, proposer: 1, reqID: 2, key: []byte("k"), value: []byte("v")},
		{op: opPut, proposer: 1 << 60, reqID: 1<<64 - 1, key: bytes.Repeat([]byte("k"), limits.MaxKey), value: []byte{}},
		{op: opDelete, proposer: 3, reqID: 0, key: []byte("gone"), value: []byte{}},
	}
	for _, c := range tests {
		enc := appendCommand(nil, c)
		if len(enc) > commandSize(c) {
			t.Errorf("encoded %d bytes, commandSize says %d", len(enc), commandSize(c))
		}
		got, err := decodeCommand(enc)
		if err != nil || got.op != c.op || got.proposer != c.proposer || got.reqID != c.reqID ||
			!bytes.Equal(got.key, c.key) || !bytes.Equal(got.value, c.value) {
			t.Errorf("round trip of %+v: %+v, %v", c, got, err)
		}
	}
	bad := [][]byte{nil, {9}, {opPut}, {opPut, 1, 2}, {opPut, 1, 2, 5, 'k'}}
	for _, b := range bad {
		if _, err := decodeCommand(b); !errors.Is(err, errBadCommand) {
			t.Errorf("decodeCommand(%v) err = %v", b, err)
		}
	}
}

type applyCall struct {
	version    uint64
	key, value string
	deleted    bool
}

type recordingApplier struct {
	calls   []applyCall
	batches int
	revs    []uint64
	metas   []revision.Meta
}

func (r *recordingApplier) Apply(ws []Write, rev uint64) {
	r.batches++
	r.revs = append(r.revs, rev)
	for _, w := range ws {
		r.metas = append(r.metas, w.Meta)
	}
	for _, w := range ws {
		r.calls = append(r.calls, applyCall{w.Meta.Mod, string(w.Key), string(w.Value), w.Deleted})
	}
}
func (r *recordingApplier) Restore()                     {}
func (r *recordingApplier) BatchAhead()                  {}
func (r *recordingApplier) Events([]Write, uint64, bool) {}

// TestPublishCollapsesRepeats checks that the Publisher sees one call
// per key per batch (the key's final state), in log order.
func TestPublishCollapsesRepeats(t *testing.T) {
	tests := []struct {
		name string
		ops  []Write
		want []applyCall
	}{
		{"single", []Write{{Meta: revision.Meta{Mod: 5}, Key: []byte("a"), Value: []byte("1")}}, []applyCall{{5, "a", "1", false}}},
		{"distinct keys keep log order",
			[]Write{{Meta: revision.Meta{Mod: 5}, Key: []byte("b"), Value: []byte("1")}, {Meta: revision.Meta{Mod: 6}, Key: []byte("a"), Value: []byte("2")}},
			[]applyCall{{5, "b", "1", false}, {6, "a", "2", false}}},
		{"overwrite and delete collapse",
			[]Write{
				{Meta: revision.Meta{Mod: 5}, Key: []byte("a"), Value: []byte("1")},
				{Meta: revision.Meta{Mod: 6}, Key: []byte("b"), Value: []byte("x")},
				{Meta: revision.Meta{Mod: 7}, Key: []byte("a"), Value: []byte("2")},
				{Meta: revision.Meta{Mod: 8}, Key: []byte("b"), Deleted: true},
				{Meta: revision.Meta{Mod: 9}, Key: []byte("c"), Value: []byte("3")},
				{Meta: revision.Meta{Mod: 10}, Key: []byte("a"), Value: []byte("4")},
			},
			[]applyCall{{8, "b", "", true}, {9, "c", "3", false}, {10, "a", "4", false}}},
	}
	for _, tt := range tests {
		rec := &recordingApplier{}
		m := &machine{pub: rec}
		m.sc.applies = append(m.sc.applies, tt.ops...)
		m.publish(0)
		if fmt.Sprint(rec.calls) != fmt.Sprint(tt.want) {
			t.Errorf("%s: calls %v, want %v", tt.name, rec.calls, tt.want)
		}
		if rec.batches != 1 {
			t.Errorf("%s: %d Apply calls, want one per batch", tt.name, rec.batches)
		}
		if len(m.sc.applies) != 0 {
			t.Errorf("%s: scratch not reset", tt.name)
		}
	}
}
