package server_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/server"
)

// TestRebuildArenaRegion rebuilds a region whose small records, at their
// record-area size, would take about twice its record area: the table's
// capacity rests on its arenas. The rebuild waits for the arenas' limbo to
// drain and places the keys hidden, moves reusing arena bytes at once
// (docs/design/one-round-trip-gets.md §5.7), so every key is back, every
// record inline (no spill), and every GET is answered one-sided after.
func TestRebuildArenaRegion(t *testing.T) {
	// 72 KiB with a = 352 (arenas of 3520 bytes): 16 buckets, a record
	// area of about 16 KiB, and key capacity 120.
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: 72 << 10, ReuseGrace: 100 * time.Millisecond, TableInline: 352})
	n := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	w := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx := context.Background()
	const keys, valueLen = 100, 250
	want := map[string][]byte{}
	var need uint64
	for i := range keys {
		k := fmt.Sprintf("s%03d", i)
		v := bytes.Repeat([]byte{byte(i)}, valueLen)
		if err := w.Put(ctx, []byte(k), v); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		want[k] = v
		need += table.RecordLen(len(k), len(v))
	}
	before := n.Srv.TableStats()
	if area := before.BytesArea; need <= area || before.Spills != 0 {
		t.Fatalf("setup: %d bytes of records at record-area size, record area %d, %d spills: want more than the area and none", need, area, before.Spills)
	}

	server.Rebuild(n.Srv)
	deadline := time.Now().Add(10 * time.Second)
	for n.Srv.TableHeader().Incomplete {
		if time.Now().After(deadline) {
			t.Fatal("the region never became complete after the rebuild")
		}
		time.Sleep(10 * time.Millisecond)
	}
	after := n.Srv.TableStats()
	if after.Keys != keys || after.Spills != before.Spills || after.BytesUsed != 0 {
		t.Fatalf("after the rebuild: %d keys, %d spills, %d record-area bytes used; want %d, %d, 0", after.Keys, after.Spills, after.BytesUsed, keys, before.Spills)
	}
	r := newClient(t, kvdtest.Endpoints(nodes), client.Serializable)
	st0 := r.Stats()
	for k, v := range want {
		if got, err := r.Get(ctx, []byte(k)); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("get %s after the rebuild = %.20q, %v", k, got, err)
		}
	}
	if st := r.Stats(); st.OneSided-st0.OneSided != keys || st.RPCGets != st0.RPCGets {
		t.Fatalf("%d of %d GETs one-sided, %d by RPC, after the rebuild", st.OneSided-st0.OneSided, keys, st.RPCGets-st0.RPCGets)
	}
}
