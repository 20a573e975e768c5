package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	kvsm "github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/mirror"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestPutAnsweredOnlyOnceTheRegionShowsIt: a PUT is acknowledged only
// after the leader applied it to its table region (docs/consistency.md,
// "What the region promises", 1), so a one-sided GET that starts after the
// acknowledgement reads the new value. Answered earlier, a client could
// PUT, be told it is done, and read the old value from the region.
//
// The test holds the batch carrying k=v2 out of the region (Knobs.
// BeforeApply blocks the apply) while the PUT is in flight. The PUT must
// not be answered while the batch is held; once it is let through, the
// answer comes, and a one-sided GET after it reads v2. The only wait is
// holdFor, for an answer that must not come: however loaded the machine,
// the test cannot fail on a server that answers after the apply, and a
// server that answers before it does so a few scheduler hops after the
// commit, well within it. The GET after the answer is serializable: it
// reads the leader's region one-sided whatever the lease, which the held
// loop may have let lapse.
func TestPutAnsweredOnlyOnceTheRegionShowsIt(t *testing.T) {
	const holdFor = time.Second
	var (
		mu      sync.Mutex
		armed   bool
		held    = make(chan struct{})
		release = make(chan struct{})
		letGo   = sync.OnceFunc(func() { close(release) })
	)
	hold := func(ws []kvsm.Write) {
		mu.Lock()
		hit := armed && hasWrite(ws, "k", "v2")
		if hit {
			armed = false
		}
		mu.Unlock()
		if hit {
			close(held)
			<-release
		}
	}
	addr := kvdtest.FreeAddrs(t, 1)[0]
	tr, err := tcp.New(tcp.Config{Node: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	srv, err := server.New(server.Config{Listen: addr, DataDir: t.TempDir(), Transport: tr, TableMem: 1 << 20,
		Logger: quietLog(), Knobs: server.Knobs{Mirror: mirror.Knobs{BeforeApply: hold}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	t.Cleanup(letGo) // before Close: a held apply would hold it
	waitFor(t, "a leader with a valid lease", func() bool { st := srv.Status(); return st.IsLeader && st.LeaseValid })

	c := newPatientClient(t, []string{addr}, client.Linearizable)
	ctx := context.Background()
	if err := c.Put(ctx, []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, []byte("k"), client.WithConsistency(client.Serializable)); err != nil || string(v) != "v1" {
		t.Fatalf("get k = %q, %v; want v1", v, err)
	}

	mu.Lock()
	armed = true
	mu.Unlock()
	type read struct {
		value     string
		err       error
		oneSided  bool
		afterHeld bool // the read began while the batch was still held
	}
	answered := make(chan error, 1)
	readAfter := make(chan read, 1)
	go func() {
		answered <- c.Put(ctx, []byte("k"), []byte("v2"))
		s0 := c.Stats()
		stillHeld := true
		select {
		case <-release:
			stillHeld = false
		default:
		}
		v, err := c.Get(ctx, []byte("k"), client.WithConsistency(client.Serializable))
		readAfter <- read{value: string(v), err: err, oneSided: c.Stats().OneSided > s0.OneSided, afterHeld: stillHeld}
	}()

	select {
	case <-held:
	case <-time.After(15 * time.Second):
		t.Fatal("the batch with k=v2 never reached the region's apply")
	}
	select {
	case err := <-answered:
		r := <-readAfter // a one-sided read: it does not wait for the apply
		letGo()
		t.Fatalf("PUT k=v2 answered (err %v) while its batch was held out of the region; "+
			"a GET after the answer read %q (err %v, one-sided %v, began while held %v)",
			err, r.value, r.err, r.oneSided, r.afterHeld)
	case <-time.After(holdFor):
	}
	letGo()
	if err := <-answered; err != nil {
		t.Fatalf("PUT k=v2: %v", err)
	}
	r := <-readAfter
	if r.err != nil || r.value != "v2" || !r.oneSided {
		t.Fatalf("GET after the PUT's answer: %q, %v (one-sided %v); want v2, one-sided", r.value, r.err, r.oneSided)
	}
}

func hasWrite(ws []kvsm.Write, key, value string) bool {
	for _, w := range ws {
		if string(w.Key) == key && string(w.Value) == value && !w.Deleted {
			return true
		}
	}
	return false
}
