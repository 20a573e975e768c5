package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/rangeq"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

// rangeKeys is "key=value" for each KV, or "key" with keysOnly.
func rangeKeys(r *client.RangeResponse, keysOnly bool) string {
	var parts []string
	for _, kv := range r.KVs {
		if keysOnly {
			parts = append(parts, fmt.Sprintf("%q", kv.Key))
			continue
		}
		parts = append(parts, fmt.Sprintf("%q=%s", kv.Key, kv.Value))
	}
	return strings.Join(parts, " ")
}

// TestRangeSemantics: ranges, prefixes (0xff bytes included), limits,
// keys-only and count-only against a server holding known keys, some of
// them deleted (a deleted key never appears).
func TestRangeSemantics(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	c := txnClient(t, s)
	ctx := context.Background()
	keys := []string{"a", "a/1", "a/2", "a\xff", "a\xff\x00", "a\xff\xff", "b", "b/1", "c", "\xff", "\xff\xff\x01"}
	for _, k := range keys {
		if err := c.Put(ctx, []byte(k), []byte("v"+k)); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a/1", "b/1"} {
		if err := c.Delete(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	b := func(s string) []byte { return []byte(s) }
	for _, tc := range []struct {
		name       string
		start, end []byte
		prefix     []byte // used instead of start/end when not nil
		opts       []client.ReadOption
		keysOnly   bool
		want       string
		more       bool
		count      uint64 // etcd's count of the range, when a limit cuts it
	}{
		{name: "everything", want: `"a"=va "a/2"=va/2 "a\xff"=va` + "\xff" + ` "a\xff\x00"=va` + "\xff\x00" + ` "a\xff\xff"=va` + "\xff\xff" +
			` "b"=vb "c"=vc "\xff"=v` + "\xff" + ` "\xff\xff\x01"=v` + "\xff\xff\x01", keysOnly: false},
		{name: "start == end", start: b("b"), end: b("b"), want: ""},
		{name: "end before start", start: b("c"), end: b("a"), want: ""},
		{name: "empty range between keys", start: b("b0"), end: b("b9"), want: ""},
		{name: "from to", start: b("a/"), end: b("b/"), keysOnly: true, want: `"a/2" "a\xff" "a\xff\x00" "a\xff\xff" "b"`},
		{name: "end excluded", start: b("a"), end: b("a/2"), keysOnly: true, want: `"a"`},
		{name: "open end", start: b("c"), keysOnly: true, want: `"c" "\xff" "\xff\xff\x01"`},
		{name: "prefix", prefix: b("a/"), keysOnly: true, want: `"a/2"`},
		{name: "prefix ending in 0xff", prefix: b("a\xff"), keysOnly: true, want: `"a\xff" "a\xff\x00" "a\xff\xff"`},
		{name: "prefix of 0xff only", prefix: b("\xff"), keysOnly: true, want: `"\xff" "\xff\xff\x01"`},
		{name: "prefix 0xff 0xff", prefix: b("\xff\xff"), keysOnly: true, want: `"\xff\xff\x01"`},
		{name: "deleted key's prefix", prefix: b("b/"), keysOnly: true, want: ""},
		{name: "limit", start: b("a"), opts: []client.ReadOption{client.WithLimit(2)}, keysOnly: true, want: `"a" "a/2"`, more: true, count: 9},
		{name: "limit equal to the keys", prefix: b("a\xff"), opts: []client.ReadOption{client.WithLimit(3)}, keysOnly: true,
			want: `"a\xff" "a\xff\x00" "a\xff\xff"`},
		{name: "keys only", prefix: b("c"), opts: []client.ReadOption{client.WithKeysOnly()}, want: `"c"=`},
	} {
		var r *client.RangeResponse
		var err error
		if tc.prefix != nil {
			r, err = c.Prefix(ctx, tc.prefix, tc.opts...)
		} else {
			r, err = c.Range(ctx, tc.start, tc.end, tc.opts...)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.count == 0 {
			tc.count = uint64(len(r.KVs))
		}
		if got := rangeKeys(r, tc.keysOnly); got != tc.want || r.More != tc.more || r.Count != tc.count {
			t.Errorf("%s: got %s (more %v, count %d), want %s (more %v, count %d)", tc.name, got, r.More, r.Count, tc.want, tc.more, tc.count)
		}
		for _, kv := range r.KVs {
			if kv.ModRevision == 0 {
				t.Errorf("%s: %q has no version", tc.name, kv.Key)
			}
		}
	}
	// Versions are the keys' own: the ones GetModRevision reports.
	r, err := c.Prefix(ctx, b("a"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range r.KVs {
		_, v, err := c.GetModRevision(ctx, kv.Key)
		if err != nil || v != kv.ModRevision {
			t.Errorf("%q: scan version %d, GetModRevision %d, %v", kv.Key, kv.ModRevision, v, err)
		}
	}
	// Count only: the number of keys in the range, no keys, the limit ignored.
	for _, tc := range []struct {
		prefix []byte
		want   uint64
	}{{nil, 9}, {b("a"), 5}, {b("a\xff"), 3}, {b("b/"), 0}, {b("\xff"), 2}} {
		r, err := c.Prefix(ctx, tc.prefix, client.WithCountOnly(), client.WithLimit(1))
		if err != nil || r.Count != tc.want || len(r.KVs) != 0 || r.More {
			t.Errorf("count of %q: %+v, %v; want %d", tc.prefix, r, err, tc.want)
		}
	}
}

// TestRangePaging: a scan continued from Next, page by page with a limit,
// while keys are deleted and added between the pages, sees each key that
// stays at most once and in order, never a deleted one after its delete;
// and a Range without a limit pages through the server's page bounds
// (keys and bytes) by itself.
func TestRangePaging(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	c := txnClient(t, s)
	ctx := context.Background()
	for i := range 10 {
		if err := c.Put(ctx, fmt.Appendf(nil, "k%02d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	start := []byte("k")
	end := client.PrefixEnd([]byte("k"))
	for page := 0; ; page++ {
		r, err := c.Range(ctx, start, end, client.WithLimit(3), client.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.KVs) > 3 {
			t.Fatalf("page %d: %d keys for a limit of 3", page, len(r.KVs))
		}
		for _, kv := range r.KVs {
			got = append(got, string(kv.Key))
		}
		if !r.More {
			break
		}
		if page == 0 {
			// Between pages: delete a key not yet seen, and one seen;
			// add one not yet seen.
			for _, k := range []string{"k05", "k01"} {
				if err := c.Delete(ctx, []byte(k)); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Put(ctx, []byte("k07a"), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		start = r.Next
	}
	want := "k00 k01 k02 k03 k04 k06 k07 k07a k08 k09"
	if strings.Join(got, " ") != want {
		t.Fatalf("paged scan: %v, want %s", got, want)
	}

	// The server's page bounds: MaxScanPageKeys keys ...
	var puts []client.Op
	for i := range wire.MaxScanKeys + 5 {
		puts = append(puts, client.OpPut(fmt.Appendf(nil, "n%05d", i), []byte("x")))
		if len(puts) == client.MaxTxnOps {
			if _, err := c.Txn(ctx, client.Txn{Then: puts}); err != nil {
				t.Fatal(err)
			}
			puts = nil
		}
	}
	if _, err := c.Txn(ctx, client.Txn{Then: puts}); err != nil {
		t.Fatal(err)
	}
	page := rawScan(t, s, rangeq.Request{Start: []byte("n")})
	if len(page.KVs) != wire.MaxScanKeys || page.Flags&wire.ScanMore == 0 || string(page.Next) != fmt.Sprintf("n%05d", wire.MaxScanKeys) {
		t.Fatalf("first page: %d keys, flags %d, next %q; want %d keys and more from n%05d",
			len(page.KVs), page.Flags, page.Next, wire.MaxScanKeys, wire.MaxScanKeys)
	}
	r, err := c.Prefix(ctx, []byte("n"), client.WithKeysOnly())
	if err != nil || len(r.KVs) != wire.MaxScanKeys+5 || r.More {
		t.Fatalf("whole prefix: %d keys (more %v), %v; want %d", len(r.KVs), r.More, err, wire.MaxScanKeys+5)
	}
	// ... and MaxScanPageBytes bytes: two values of 1 MiB do not share a page.
	big := bytes.Repeat([]byte("z"), table.MaxValue)
	for _, k := range []string{"z1", "z2", "z3"} {
		if err := c.Put(ctx, []byte(k), big); err != nil {
			t.Fatal(err)
		}
	}
	page = rawScan(t, s, rangeq.Request{Start: []byte("z")})
	if len(page.KVs) != 1 || string(page.Next) != "z2" {
		t.Fatalf("page of 1 MiB values: %d keys, next %q; want 1, z2", len(page.KVs), page.Next)
	}
	r, err = c.Prefix(ctx, []byte("z"))
	if err != nil || len(r.KVs) != 3 || !bytes.Equal(r.KVs[2].Value, big) {
		t.Fatalf("1 MiB values: %d keys, %v; want 3 whole", len(r.KVs), err)
	}
}

// rawScan asks s for one page at Serializable.
func rawScan(t *testing.T, s *Server, q rangeq.Request) wire.ScanResponse {
	t.Helper()
	resp := s.handle(context.Background(), &wire.Request{Op: wire.OpScan, Flags: wire.Serializable, Value: rangeq.Append(nil, &q)})
	if resp.Status != wire.StatusOK {
		t.Fatalf("scan: status %d %s", resp.Status, resp.Value)
	}
	var page wire.ScanResponse
	if err := wire.DecodeScanResponse(resp.Value, &page); err != nil {
		t.Fatal(err)
	}
	return page
}

// TestScanRequestsRefused: malformed scans are StatusBadRequest (the
// client's ErrBadRequest), over-long bounds StatusKeyTooLarge, never a
// panic; the client refuses over-long bounds itself.
func TestScanRequestsRefused(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	long := bytes.Repeat([]byte("k"), table.MaxKey+1)
	for _, tc := range []struct {
		name string
		req  wire.Request
		want wire.Status
	}{
		{"empty value", wire.Request{Op: wire.OpScan}, wire.StatusBadRequest},
		{"garbage", wire.Request{Op: wire.OpScan, Value: []byte{1, 2, 3}}, wire.StatusBadRequest},
		{"trailing bytes", wire.Request{Op: wire.OpScan, Value: append(rangeq.Append(nil, &rangeq.Request{}), 0)}, wire.StatusBadRequest},
		{"with a key", wire.Request{Op: wire.OpScan, Key: []byte("k"), Value: rangeq.Append(nil, &rangeq.Request{})}, wire.StatusBadRequest},
		{"unknown level", wire.Request{Op: wire.OpScan, Flags: 9, Value: rangeq.Append(nil, &rangeq.Request{})}, wire.StatusBadRequest},
		{"keys only and count only", wire.Request{Op: wire.OpScan,
			Value: rangeq.Append(nil, &rangeq.Request{Flags: rangeq.KeysOnly | rangeq.CountOnly})}, wire.StatusBadRequest},
		{"long start", wire.Request{Op: wire.OpScan, Value: rangeq.Append(nil, &rangeq.Request{Start: long})}, wire.StatusKeyTooLarge},
		{"long end", wire.Request{Op: wire.OpScan, Value: rangeq.Append(nil, &rangeq.Request{End: long})}, wire.StatusKeyTooLarge},
	} {
		if resp := s.handle(context.Background(), &tc.req); resp.Status != tc.want {
			t.Errorf("%s: status %d %q, want %d", tc.name, resp.Status, resp.Value, tc.want)
		}
	}
	c := txnClient(t, s)
	if _, err := c.Range(context.Background(), long, nil); !errors.Is(err, client.ErrKeyTooLarge) {
		t.Errorf("client range with a long start: %v, want ErrKeyTooLarge", err)
	}
}

// TestScanNotAheadOfRegion: a scan reads Pebble, which may be a batch
// ahead of the region; it must not answer until the region has applied
// what it read, or a one-sided GET that starts after the scan returned
// could see an older value than the scan did.
func TestScanNotAheadOfRegion(t *testing.T) {
	var f Faults
	s := floodServer(t, Config{Knobs: f.KnobsFor(1)}, tcp.Config{})
	c := txnClient(t, s)
	ctx := context.Background()
	if err := c.Put(ctx, []byte("k"), []byte("old")); err != nil {
		t.Fatal(err)
	}
	// The next batch's Apply stops at its first step, holding the table
	// lock: Pebble runs a batch ahead of the region.
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	f.OnAtomicStep(func(string) {
		select {
		case held <- struct{}{}:
			<-hold
		default:
		}
	})
	release := func() { close(hold) }
	defer func() {
		if release != nil {
			release()
		}
	}()
	putDone := make(chan error, 1)
	go func() {
		_, err := c.Txn(ctx, client.Txn{Then: []client.Op{client.OpPut([]byte("k"), []byte("new")), client.OpPut([]byte("k2"), []byte("new"))}})
		putDone <- err
	}()
	<-held
	if v, _, ok, err := s.kv.Get([]byte("k")); err != nil || !ok || string(v) != "new" {
		t.Fatalf("Pebble holds %q, %v, %v while the apply is held; want new", v, ok, err)
	}
	scanned := make(chan wire.ScanResponse, 1)
	go func() { scanned <- rawScan(t, s, rangeq.Request{Start: []byte("k"), End: []byte("k\x00")}) }()
	select {
	case p := <-scanned:
		t.Fatalf("the scan answered %q while the region still showed the old value", p.KVs[0].Value)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	release = nil
	p := <-scanned
	if len(p.KVs) != 1 || string(p.KVs[0].Value) != "new" {
		t.Fatalf("scan after the apply: %+v", p.KVs)
	}
	if err := <-putDone; err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, []byte("k")); err != nil || string(v) != "new" {
		t.Fatalf("one-sided get after the scan: %q, %v", v, err)
	}
}

// TestCountEndsWithItsRequest: a count walks its whole range, which may
// be every key the region holds; it stops when its request's context
// ends instead of holding an iterator and a CPU past the deadline.
func TestCountEndsWithItsRequest(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	c := txnClient(t, s)
	ctx := context.Background()
	const keys = 3000 // past several of the walk's looks at its context
	var puts []client.Op
	for i := range keys {
		puts = append(puts, client.OpPut(fmt.Appendf(nil, "c%05d", i), []byte("x")))
		if len(puts) == client.MaxTxnOps || i == keys-1 {
			if _, err := c.Txn(ctx, client.Txn{Then: puts}); err != nil {
				t.Fatal(err)
			}
			puts = nil
		}
	}
	q := rangeq.Request{Start: []byte("c"), Flags: rangeq.CountOnly}
	page, _, err := s.scanPage(ctx, &q)
	if err != nil || page.Count != keys {
		t.Fatalf("count: %d, %v; want %d", page.Count, err, keys)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if page, _, err := s.scanPage(ended, &q); !errors.Is(err, context.Canceled) {
		t.Fatalf("count of a request that ended: %d keys, %v; want context.Canceled", page.Count, err)
	}
}

// TestRangeTellsTheCurrentRevision: a range read at a past revision is
// answered with the keys as they were then and the store's revision now
// (etcd's header revision), at every consistency level, an empty range
// too; a read of the latest state is at the current revision.
func TestRangeTellsTheCurrentRevision(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	c := txnClient(t, s)
	ctx := context.Background()
	r1, err := c.PutRevision(ctx, []byte("k"), []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutRevision(ctx, []byte("k"), []byte("v2")); err != nil {
		t.Fatal(err)
	}
	now, err := c.PutRevision(ctx, []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		start, end string
		opts       []client.ReadOption
		rev        uint64
		want       string
	}{
		{"past", "k", "l", []client.ReadOption{client.WithRev(r1)}, r1, `"k"=v1`},
		{"past, serializable", "k", "l", []client.ReadOption{client.WithRev(r1), client.WithConsistency(client.Serializable)}, r1, `"k"=v1`},
		{"past, read index", "k", "l", []client.ReadOption{client.WithRev(r1), client.WithConsistency(client.ReadIndex)}, r1, `"k"=v1`},
		{"past, empty range", "m", "n", []client.ReadOption{client.WithRev(r1)}, r1, ""},
		{"past, count only", "a", "z", []client.ReadOption{client.WithRev(r1), client.WithCountOnly()}, r1, ""},
		{"latest", "k", "l", nil, now, `"k"=v2`},
	} {
		r, err := c.Range(ctx, []byte(tc.start), []byte(tc.end), tc.opts...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := rangeKeys(r, false); got != tc.want || r.Revision != tc.rev || r.CurrentRevision != now {
			t.Errorf("%s: %q at %d, current %d; want %q at %d, current %d", tc.name, got, r.Revision, r.CurrentRevision, tc.want, tc.rev, now)
		}
	}
}
