package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
)

// getMany runs GetMany and renders each answer as rig.get does.
func (r *rig) getMany(level Consistency, keys ...string) []string {
	r.t.Helper()
	bs := make([][]byte, len(keys))
	for i, k := range keys {
		bs[i] = []byte(k)
	}
	res, err := r.c.GetMany(context.Background(), bs, WithConsistency(level))
	if err != nil {
		r.t.Fatalf("GetMany: %v", err)
	}
	out := make([]string, len(res))
	for i, x := range res {
		out[i] = answerNotFound
		if x.Found {
			out[i] = string(x.Value)
		}
	}
	return out
}

// connect dials the fake, so that a trace holds only the GETs' READs.
func (r *rig) connect() {
	r.t.Helper()
	if _, err := r.c.nodeFor(context.Background(), fakeAddr); err != nil {
		r.t.Fatal(err)
	}
}

func TestGetManyBatchesReads(t *testing.T) {
	r := newRig(t)
	r.lease(time.Hour)
	var keys, want []string
	for i := range 12 {
		k := fmt.Sprintf("key-%d", i)
		keys = append(keys, k)
		if i%4 == 3 {
			want = append(want, answerNotFound) // never stored
			continue
		}
		r.put(k, "value-"+k)
		want = append(want, "value-"+k)
	}
	r.connect()
	s0 := r.c.Stats()
	r.f.begin(nil)
	got := r.getMany(Linearizable, keys...)
	trace, rpcs := r.f.end()
	s1 := r.c.Stats()
	if !slices.Equal(got, want) {
		t.Fatalf("GetMany = %q, want %q", got, want)
	}
	// Two batches of keys (7 and 5), two round trips each; round trip 1 of
	// a batch is both buckets of every key (the lease cached at connect
	// serves), round trip 2 the header (some key missed), then the records
	// and the missing keys' buckets.
	if len(trace) != 4 || trace[0] != strings.Repeat("B", 14) || trace[2] != strings.Repeat("B", 10) ||
		trace[1][0] != 'H' || trace[3][0] != 'H' {
		t.Fatalf("READ batches %q, want 4: 14B, H+round trip 2, 10B, H+round trip 2", trace)
	}
	if len(rpcs) != 0 {
		t.Fatalf("%d RPC GETs, want none", len(rpcs))
	}
	if d := s1.OneSided - s0.OneSided; d != 12 {
		t.Fatalf("OneSided +%d, want +12", d)
	}
	if d := s1.OneSidedRounds - s0.OneSidedRounds; d != 4 {
		t.Fatalf("OneSidedRounds +%d, want +4", d)
	}
}

// moveSlot moves key's slot word from bucket `from` to an empty slot of
// bucket `to` in the region's raw bytes, as the table's writer moves a key
// (store the word in the new slot, then clear the old one).
func (r *rig) moveSlot(key string, from, to uint32) bool {
	fp := table.Fingerprint(table.Hash([]byte(key)))
	h := r.tbl.Header()
	src := r.f.mem[h.BucketOffset(from):][:table.BucketSize]
	dst := r.f.mem[h.BucketOffset(to):][:table.BucketSize]
	for i := 0; i < table.SlotsPerBucket; i++ {
		w := binary.LittleEndian.Uint64(src[i*8:])
		if w == 0 || table.DecodeSlot(w).FP != fp {
			continue
		}
		for j := 0; j < table.SlotsPerBucket; j++ {
			if binary.LittleEndian.Uint64(dst[j*8:]) == 0 {
				binary.LittleEndian.PutUint64(dst[j*8:], w)
				binary.LittleEndian.PutUint64(src[i*8:], 0)
				return true
			}
		}
	}
	return false
}

// TestGetManyMovedKeyIsNotMissed: a key that moves from its second bucket to
// its first between the batch's reads of the two is in neither copy that
// round trip 1 read. The batch must not call that a miss: round trip 2
// sees the buckets changed and the key is read on its own.
func TestGetManyMovedKeyIsNotMissed(t *testing.T) {
	r := newRig(t)
	r.lease(time.Hour)
	r.put("k", "v1")
	b1, b2 := table.Buckets(table.Hash([]byte("k")), r.tbl.Header().Buckets)
	r.moveSlot("k", b1, b2) // start in b2 (a no-op if it is there already)
	r.connect()
	r.f.begin(func(batch, op int) {
		if batch == 1 && op == 1 { // b1 was read, b2 not yet
			if !r.moveSlot("k", b2, b1) {
				t.Error("could not move k")
			}
		}
	})
	got := r.getMany(Linearizable, "k")
	trace, _ := r.f.end()
	if !slices.Equal(got, []string{"v1"}) {
		t.Fatalf("GetMany = %q, want [v1] (trace %q)", got, trace)
	}
	// The batch (BB, then HBB: the key is back in b1), then the key alone
	// (BB, R).
	if want := []string{"BB", "HBB", "BB", "R"}; !slices.Equal(trace, want) {
		t.Fatalf("READ batches %q, want %q", trace, want)
	}
}

func TestGetManyFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(r *rig)
		level Consistency
		want  []string
		rpc   []uint16
	}{
		{name: "region incomplete: the miss by RPC, the hit one-sided",
			setup: func(r *rig) { r.lease(time.Hour); r.tbl.SetIncomplete(true) },
			want:  []string{"v1", rpcMarker}, rpc: []uint16{wire.Linearizable}},
		{name: "no lease: every key by RPC",
			setup: func(r *rig) {},
			want:  []string{rpcMarker, rpcMarker}, rpc: []uint16{wire.Linearizable, wire.Linearizable}},
		{name: "no lease, serializable: one-sided",
			setup: func(r *rig) {}, level: Serializable,
			want: []string{"v1", answerNotFound}},
		{name: "readindex: by RPC",
			setup: func(r *rig) { r.lease(time.Hour) }, level: ReadIndex,
			want: []string{rpcMarker, rpcMarker}, rpc: []uint16{wire.ReadIndex, wire.ReadIndex}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.put("k", "v1")
			tc.setup(r)
			r.connect()
			r.f.begin(nil)
			got := r.getMany(tc.level, "k", "nope")
			_, rpcs := r.f.end()
			if !slices.Equal(got, tc.want) {
				t.Fatalf("GetMany = %q, want %q", got, tc.want)
			}
			if !slices.Equal(rpcs, tc.rpc) {
				t.Fatalf("RPC GETs with flags %v, want %v", rpcs, tc.rpc)
			}
		})
	}
}

func TestGetManyInput(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if res, err := r.c.GetMany(ctx, nil); err != nil || len(res) != 0 {
		t.Fatalf("no keys: %v, %v", res, err)
	}
	if _, err := r.c.GetMany(ctx, make([][]byte, MaxGetMany+1)); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("too many keys: %v, want ErrBadRequest", err)
	}
	if _, err := r.c.GetMany(ctx, [][]byte{[]byte("k"), nil}); !errors.Is(err, ErrEmptyKey) {
		t.Fatalf("an empty key: %v, want ErrEmptyKey", err)
	}
}

// TestGetManyJudgedByLeaseReadBefore: a lease that appears only between a
// batch's round trips judges neither its hits (their slots were read
// before it, and it could come from a lease granted since: leasecache.go)
// nor its misses (judged only by a lease cached before the batch). Both
// keys are read on their own, with the expiry the batch cached.
func TestGetManyJudgedByLeaseReadBefore(t *testing.T) {
	r := newReadyRig(t)
	r.tbl.SetLease(0)
	r.forgetLease()
	r.f.begin(func(batch, op int) {
		if batch == 2 && op == 0 {
			r.lease(time.Hour)
		}
	})
	got := r.getMany(Linearizable, "k", "nope")
	trace, rpcs := r.f.end()
	if !slices.Equal(got, []string{"v1", answerNotFound}) {
		t.Fatalf("GetMany = %q (trace %q)", got, trace)
	}
	if want := []string{"HBBBB", "HRBB", "BB", "R", "BB", "HBB"}; !slices.Equal(trace, want) || len(rpcs) != 0 {
		t.Fatalf("READ batches %q and %d RPCs, want %q and none", trace, len(rpcs), want)
	}
}
