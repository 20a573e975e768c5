package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

// oneSidedView is what a one-sided reader accepts for key in the region
// bytes now: "v@version", "miss", or "retry" (torn, dead, hidden).
func oneSidedView(mem, key []byte) string {
	h, err := table.ParseHeader(mem)
	if err != nil {
		return "retry"
	}
	hash := table.Hash(key)
	b1, b2 := table.Buckets(hash, h.Buckets)
	var out [table.SlotsPerBucket]table.Slot
	for _, b := range [2]uint32{b1, b2} {
		bucket := mem[h.BucketOffset(b) : h.BucketOffset(b)+uint64(h.BucketBytes)]
		n := table.ScanBucket(bucket, table.Fingerprint(hash), &out)
		for _, s := range out[:n] {
			var v []byte
			var meta revision.Meta
			if s.Inline {
				v, meta, err = h.VerifyInline(bucket[table.BucketSize:], key, table.DecodeInlineSlot(s.Word()), nil)
			} else {
				v, meta, err = h.VerifyRecord(mem[s.Offset:s.Offset+s.Len], key, s)
			}
			switch {
			case errors.Is(err, table.ErrKeyMismatch):
				continue
			case err != nil:
				return "retry"
			}
			return fmt.Sprintf("%s@%d", v, meta.Mod)
		}
	}
	return "miss"
}

func txnClient(t *testing.T, s *Server) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Endpoints: []string{s.Addr()}, AttemptTimeout: 10 * time.Second, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTxnAppliedAtomicallyToRegion: while the region applies a transaction
// that updates, creates and deletes keys, at no step does a one-sided
// reader accept one key as it was before the transaction and another as it
// is after it: the steps are the table's atomic group (withhold, PUTs,
// DELETEs, reveal). Afterwards every key reads as after.
func TestTxnAppliedAtomicallyToRegion(t *testing.T) {
	skipShort(t)
	var f Faults
	s := floodServer(t, Config{Knobs: f.KnobsFor(1)}, tcp.Config{})
	c := txnClient(t, s)
	ctx := context.Background()
	before := map[string]string{}
	for _, k := range []string{"a", "b", "d", "e"} {
		v, err := c.PutRevision(ctx, []byte(k), []byte("old"))
		if err != nil {
			t.Fatal(err)
		}
		before[k] = fmt.Sprintf("old@%d", v)
	}
	before["c"] = "miss"
	mem := s.region.Bytes()
	var steps []string
	var torn []string
	after := map[string]string{} // filled once the version is known
	f.OnAtomicStep(func(step string) {
		steps = append(steps, step)
		var sawBefore, sawAfter []string
		for k, b := range before {
			switch view := oneSidedView(mem, []byte(k)); {
			case view == b:
				sawBefore = append(sawBefore, k)
			case view != "retry":
				sawAfter = append(sawAfter, k) // checked against the version below
				after[k+"@"+step] = view
			}
		}
		if len(sawBefore) > 0 && len(sawAfter) > 0 {
			torn = append(torn, fmt.Sprintf("after %s: %v before, %v after", step, sawBefore, sawAfter))
		}
	})
	r, err := c.Txn(ctx, client.Txn{Then: []client.Op{
		client.OpPut([]byte("a"), []byte("new")), client.OpDelete([]byte("d")),
		client.OpPut([]byte("b"), []byte("new")), client.OpDelete([]byte("e")),
		client.OpPut([]byte("c"), []byte("new")),
	}})
	if err != nil || !r.Succeeded {
		t.Fatalf("txn: %+v, %v", r, err)
	}
	release := HoldTable(s) // the applies that ran the step are over
	f.OnAtomicStep(nil)
	release()
	if got := strings.Join(steps, " "); got != "withheld a b c d e" {
		t.Fatalf("atomic apply steps %q, want withhold, then the PUTs (a b c), then the DELETEs (d e)", got)
	}
	if len(torn) > 0 {
		t.Fatalf("a reader could see half the transaction: %v", torn)
	}
	want := fmt.Sprintf("new@%d", r.Revision)
	for k := range before {
		v := oneSidedView(mem, []byte(k))
		if (k == "d" || k == "e") && v != "miss" || k != "d" && k != "e" && v != want {
			t.Errorf("%s reads %s after the transaction", k, v)
		}
	}
	for k, v := range after {
		if v != want && v != "miss" {
			t.Errorf("%s: a reader accepted %s during the transaction, neither before nor after it", k, v)
		}
	}
	// A single-key write is not an atomic group: no steps.
	steps = nil
	f.OnAtomicStep(func(step string) { steps = append(steps, step) })
	if _, err := c.PutRevision(ctx, []byte("a"), []byte("x"), client.IfModRevision(r.Revision)); err != nil {
		t.Fatal(err)
	}
	release = HoldTable(s)
	f.OnAtomicStep(nil)
	release()
	if len(steps) != 0 {
		t.Fatalf("a compare-and-swap of one key went through an atomic group: %v", steps)
	}
}

// TestTxnRequestsRefused: transactions the server must not propose are
// answered StatusBadRequest with a message, the connection stays usable.
func TestTxnRequestsRefused(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	dup := txn.Txn{Then: []txn.Op{{Type: txn.Put, Key: []byte("k")}, {Type: txn.Delete, Key: []byte("k")}}}
	for _, tc := range []struct {
		name string
		req  wire.Request
		want string
	}{
		{"not a transaction", wire.Request{Op: wire.OpTxn, Value: []byte{1, 2, 3}}, "txn: malformed"},
		{"truncated", wire.Request{Op: wire.OpTxn, Value: []byte{0, 0, 1, 0, 0, 0, 1}}, "txn: malformed"},
		{"duplicate key", wire.Request{Op: wire.OpTxn, Value: txn.Append(nil, &dup)}, "duplicate key given in txn request"},
		{"with a key", wire.Request{Op: wire.OpTxn, Key: []byte("k"), Value: txn.Append(nil, &txn.Txn{})}, "carries a key"},
		{"put ignoring its value with a value", wire.Request{Op: wire.OpPut, Flags: wire.PutIgnoreValue, Key: []byte("k"), Value: []byte("v")}, "value is provided"},
		{"put with an unknown flag", wire.Request{Op: wire.OpPut, Flags: 8, Key: []byte("k")}, "unknown flags 0x8"},
		{"txn over the operation limit", wire.Request{Op: wire.OpTxn, Value: txn.Append(nil, &txn.Txn{Compares: make([]txn.Compare, txn.MaxOps+1)})}, "too many operations in txn request"},
	} {
		resp := s.handle(context.Background(), &tc.req)
		if resp.Status != wire.StatusBadRequest || !strings.Contains(string(resp.Value), tc.want) {
			t.Errorf("%s: status %d %q, want bad request saying %q", tc.name, resp.Status, resp.Value, tc.want)
		}
	}
	// Through a real connection: refused, and the connection still serves.
	nc := helloed(t, s.Addr())
	defer nc.Close()
	for i, req := range []wire.Request{{Op: wire.OpTxn, ID: 1, Value: []byte{9}}, {Op: wire.OpGet, ID: 2, Flags: wire.Serializable, Key: []byte("k")}} {
		if _, err := nc.Write(rawRequest(&req)); err != nil {
			t.Fatal(err)
		}
		var resp wire.Response
		for {
			if typ, body := readRawFrame(t, nc); typ == 1 { // a MSG; other frames return credits
				if err := wire.DecodeResponse(body, &resp); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		if want := []wire.Status{wire.StatusBadRequest, wire.StatusNotFound}[i]; resp.Status != want {
			t.Fatalf("request %d: status %d, want %d", i, resp.Status, want)
		}
	}
}
