package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestPutBatchServed: the hello announces put batches when asked (and
// only then: an older client's decoder takes no more bytes); a batch is
// applied PUT by PUT at consecutive revisions, two PUTs of one key
// included; a batch over its bounds, with a key or flags, or holding
// anything but PUTs is a bad request and applies nothing.
func TestPutBatchServed(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	ctx := context.Background()
	for _, flags := range []uint16{wire.HelloClusterID, wire.HelloClusterID | wire.HelloFeatures} {
		var h wire.Hello
		if err := wire.DecodeHello(s.handle(ctx, &wire.Request{Op: wire.OpHello, Flags: flags}).Value, &h); err != nil {
			t.Fatal(err)
		}
		if want := flags&wire.HelloFeatures != 0; (h.Features&wire.FeaturePutBatch != 0) != want {
			t.Fatalf("hello flags %#x: features %#x; want put batches %v", flags, h.Features, want)
		}
	}
	put := func(k, v string) txn.Op { return txn.Op{Type: txn.Put, Key: []byte(k), Value: []byte(v)} }
	before := s.kv.Revision()
	resp := s.handle(ctx, &wire.Request{Op: wire.OpPutBatch, Value: txn.AppendBatch(nil, []txn.Op{put("a", "1"), put("b", "1"), put("a", "2")})})
	rs, err := wire.DecodeBatchResults(resp.Value)
	if resp.Status != wire.StatusOK || err != nil || len(rs) != 3 {
		t.Fatalf("batch: status %d %q, %+v, %v", resp.Status, resp.Value, rs, err)
	}
	for i, r := range rs {
		if r.Status != wire.StatusOK || r.Revision != before+uint64(i)+1 {
			t.Fatalf("PUT %d: %+v; want revision %d", i, r, before+uint64(i)+1)
		}
	}
	if v, m, ok, err := s.kv.Get([]byte("a")); err != nil || !ok || string(v) != "2" || m.Version != 2 {
		t.Fatalf("a = %q %+v %v %v; want 2 at version 2", v, m, ok, err)
	}
	many := make([]txn.Op, txn.MaxBatchPuts+1)
	for i := range many {
		many[i] = put(fmt.Sprint("m", i), "v")
	}
	for _, tc := range []struct {
		name string
		req  wire.Request
	}{
		{"too many PUTs", wire.Request{Value: txn.AppendBatch(nil, many)}},
		{"a key", wire.Request{Key: []byte("k"), Value: txn.AppendBatch(nil, []txn.Op{put("c", "1")})}},
		{"flags", wire.Request{Flags: 1, Value: txn.AppendBatch(nil, []txn.Op{put("c", "1")})}},
		{"a delete", wire.Request{Value: txn.AppendBatch(nil, []txn.Op{put("c", "1"), {Type: txn.Delete, Key: []byte("a")}})}},
		{"garbage", wire.Request{Value: []byte{1, 2, 3}}},
	} {
		tc.req.Op = wire.OpPutBatch
		rev := s.kv.Revision()
		if resp := s.handle(ctx, &tc.req); resp.Status != wire.StatusBadRequest {
			t.Errorf("%s: status %d %q, want a bad request", tc.name, resp.Status, resp.Value)
		}
		if s.kv.Revision() != rev {
			t.Errorf("%s: applied", tc.name)
		}
	}
}
