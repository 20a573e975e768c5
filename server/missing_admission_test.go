package server_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/server"
)

// TestLeaderAdmissionCountsMissingKeys: a leader whose region lacks a key
// it holds in Pebble (an apply that did not fit, as a former follower's
// can) must not admit writes into the room that key needs: otherwise the
// committed data outgrows a fresh region of the same size and the node
// cannot restart.
func TestLeaderAdmissionCountsMissingKeys(t *testing.T) {
	var f server.Faults
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: fillTableMem, ReuseGrace: fillGrace, Knobs: f.KnobsFor})
	lead := kvdtest.WaitLeader(t, nodes, 15*time.Second)
	srv := lead.Srv
	c := newPatientClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx := context.Background()
	big := valueFor(1024)
	if err := c.Put(ctx, []byte("kbig00"), big); err != nil {
		t.Fatal(err)
	}
	resume := f.PauseRepair() // the repair loop would race the PUTs below for the key's room
	server.MissKey(srv, []byte("kbig00"))
	waitFor(t, "the key's slot and bytes to clear", func() bool {
		st := srv.TableStats()
		return st.SlotsPending == 0 && st.BytesLimbo == 0
	})
	// The leader admits 256-byte records until its region is full: the
	// missing key's 1024 bytes included.
	a := putUntilRefused(t, c, "a", valueFor(256))
	resume()
	time.Sleep(10 * fillGrace)
	_, _, ok, err := srv.KV().Get([]byte("kbig00"))
	st := srv.TableStats()
	t.Logf("%d keys admitted; kbig00 committed: %v %v; incomplete: %v; %d/%d bytes used, %d free",
		len(a), ok, err, srv.TableHeader().Incomplete, st.BytesUsed, st.BytesArea, st.BytesFree)
	if v, err := c.Get(ctx, []byte("kbig00")); err != nil || !bytes.Equal(v, big) {
		t.Fatalf("kbig00 = %d bytes, %v", len(v), err)
	}
	lead.Stop()
	if err := lead.Start(); err != nil {
		t.Fatalf("restart with the same --table-mem: %v", err)
	}
}

// TestLeaderAdmissionAfterFailedRebuild: a leader whose region rebuild
// failed part way (the region holds only the keys walked before the
// failure, and the rest are in no missing set) must not admit writes
// against that partial region.
func TestLeaderAdmissionAfterFailedRebuild(t *testing.T) {
	var f server.Faults
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{TableMem: fillTableMem, ReuseGrace: fillGrace, Knobs: f.KnobsFor})
	lead := kvdtest.WaitLeader(t, nodes, 15*time.Second)
	srv := lead.Srv
	c := newPatientClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx := context.Background()
	for i := range 8 {
		if err := c.Put(ctx, []byte(fmt.Sprintf("kbig%02d", i)), valueFor(1024)); err != nil {
			t.Fatal(err)
		}
	}
	resume := f.PauseRepair() // its retries would hold the table lock nearly all the time
	f.FailRebuilds(0)         // a rebuild whose walk of Pebble fails (a read error)
	server.Rebuild(srv)
	waitFor(t, "the old records' space to clear", func() bool { return srv.TableStats().BytesLimbo == 0 })
	// PUTs until the leader refuses one, for any reason (a fix may refuse
	// them as unavailable while the region is partial).
	short, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes), AttemptTimeout: time.Second, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	var a []string
	for i := 0; ; i++ {
		k := fmt.Sprintf("a%03d", i)
		if err := short.Put(ctx, []byte(k), valueFor(256)); err != nil {
			t.Logf("put %s: %v", k, err)
			break
		}
		a = append(a, k)
	}
	f.FailRebuilds(-1)
	resume()
	time.Sleep(20 * fillGrace) // the repair loop reruns the rebuild
	st := srv.TableStats()
	t.Logf("%d keys admitted against the partial region; incomplete: %v; %d/%d bytes used",
		len(a), srv.TableHeader().Incomplete, st.BytesUsed, st.BytesArea)
	lead.Stop()
	if err := lead.Start(); err != nil {
		t.Fatalf("restart with the same --table-mem: %v", err)
	}
}
