package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/server"
)

// valueFor is a value whose record (with a 6-byte key) is n bytes.
func valueFor(n uint64) []byte {
	v := n - table.RecordLen(6, 0)
	if table.RecordLen(6, int(v)) != n {
		panic("record length not reachable")
	}
	return bytes.Repeat([]byte{'v'}, int(v))
}

// putUntilRefused puts keys prefix000, prefix001, ... with value until the
// table refuses one, and returns the keys it holds.
func putUntilRefused(t *testing.T, c *client.Client, prefix string, value []byte) []string {
	t.Helper()
	var keys []string
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s%03d", prefix, i)
		err := c.Put(context.Background(), []byte(k), value)
		if errors.Is(err, client.ErrNoSpace) {
			return keys
		}
		if err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		keys = append(keys, k)
	}
}

// TestRepackFragmentedRegion: a region missing a key (as a follower's is
// after an apply it could not place) whose free space is all in holes
// smaller than any record, so that neither the repair nor compaction can
// place it, repacks itself (a rebuild) and is whole again; the key is
// served from the region, not by RPC. Without the repack it stays
// incomplete for good (the cluster fill test met that state when such a
// follower became leader).
func TestRepackFragmentedRegion(t *testing.T) {
	skipShort(t)
	const grace = 50 * time.Millisecond
	var f server.Faults
	// No arenas: the fragmentation is made of the record area's records.
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: 128 << 10, ReuseGrace: grace, Knobs: f.KnobsFor, TableInline: server.TableInlineOff})
	kvdtest.WaitLeader(t, nodes, 15*time.Second)
	srv := nodes[0].Srv
	c := newPatientClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx := context.Background()
	resume := f.PauseRepair()
	defer resume()

	big := valueFor(1024)
	if err := c.Put(ctx, []byte("kbig00"), big); err != nil {
		t.Fatal(err)
	}
	// Records of 256 bytes until the area is full (it runs out of bytes
	// before keys), every other one deleted: holes of 256 bytes.
	a := putUntilRefused(t, c, "a", valueFor(256))
	for i := 0; i < len(a); i += 2 {
		if err := c.Delete(ctx, []byte(a[i])); err != nil {
			t.Fatal(err)
		}
	}
	server.MissKey(srv, []byte("kbig00"))
	limboDrained := func() bool { return srv.TableStats().BytesLimbo == 0 }
	wait.For(t, "limbo to drain", limboDrained)
	// Records of 232 bytes into those holes (and the big key's): what is
	// left free is cut into pieces smaller than any record written.
	b := putUntilRefused(t, c, "b", valueFor(232))
	st := srv.TableStats()
	t.Logf("%d a-keys, %d b-keys: %d of %d bytes used, %d free, largest free %d",
		len(a), len(b), st.BytesUsed, st.BytesArea, st.BytesFree, st.LargestFree)
	if st.LargestFree >= table.RecordLen(6, len(big)) || st.BytesFree < 4*table.RecordLen(6, len(big)) {
		t.Fatalf("the setup did not cut the free space up: %+v", st.Stats)
	}
	if !srv.TableHeader().Incomplete {
		t.Fatal("region not flagged incomplete while a key is missing")
	}

	resume()
	wait.For(t, "the region repacked and whole", func() bool { return !srv.TableHeader().Incomplete })
	if n := srv.TableStats().Repacks; n != 1 {
		t.Fatalf("%d repacks; want 1", n)
	}
	if v, ok := server.Gauge(srv, "kvd_table_repacks_total"); !ok || v != 1 {
		t.Fatalf("kvd_table_repacks_total = %v (%v); want 1", v, ok)
	}
	fc := newClient(t, []string{nodes[0].Addr}, client.Serializable)
	got, err := fc.Get(ctx, []byte("kbig00"))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("kbig00 = %d bytes, %v", len(got), err)
	}
	if st := fc.Stats(); st.OneSided != 1 || st.RPCGets != 0 {
		t.Fatalf("kbig00 not served from the region after the repack: %+v", st)
	}
}
