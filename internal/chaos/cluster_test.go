package chaos

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

func newClient(t *testing.T, eps []string, level client.Consistency) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Endpoints: eps, DialTimeout: 500 * time.Millisecond, Consistency: level})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxFor(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	_ = cancel // released when the deadline passes
	return ctx
}

// TestStaleLeaderRefused: a leader cut off from its peers must stop yielding
// accepted one-sided GETs before a new leader can commit a write. A client
// that only knows the old leader must never read the value the new leader
// replaced.
func TestStaleLeaderRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	pc := kvdtest.StartProcCluster(t, procBin(t), 3)
	old := leaderOf(t, pc, 20*time.Second)
	all := newClient(t, pc.Endpoints(), client.Linearizable)
	if err := all.Put(ctxFor(5*time.Second), []byte("k"), []byte("v1")); err != nil {
		t.Fatal(err)
	}
	stale := newClient(t, []string{old.Addr}, client.Linearizable)
	if v, err := stale.Get(ctxFor(5*time.Second), []byte("k")); err != nil || string(v) != "v1" {
		t.Fatalf("before the partition: %q, %v", v, err)
	}

	isolate(t, pc, old)
	var rest []string
	for _, p := range others(pc, old) {
		rest = append(rest, p.Addr)
	}
	fresh := newClient(t, rest, client.Linearizable)
	wait.NoError(t, "the majority to accept a write", func() error {
		return fresh.Put(ctxFor(2*time.Second), []byte("k"), []byte("v2"))
	})
	// The new leader committed v2. The old leader's region must refuse.
	for i := 0; i < 20; i++ {
		v, err := stale.Get(ctxFor(time.Second), []byte("k"))
		if err == nil && string(v) == "v1" {
			t.Fatalf("read %d: the isolated old leader served the superseded value v1", i)
		}
	}
	// Serializable reads may be stale, but never torn: v1 or v2 or an error.
	ser := newClient(t, []string{old.Addr}, client.Serializable)
	if v, err := ser.Get(ctxFor(2*time.Second), []byte("k")); err == nil && string(v) != "v1" && string(v) != "v2" {
		t.Fatalf("serializable read from the old leader returned %q", v)
	}
	healAll(t, pc)
	wait.NoError(t, "the old leader's client to read the majority's write after healing", func() error {
		v, err := stale.Get(ctxFor(2*time.Second), []byte("k"))
		if err == nil && string(v) != "v2" {
			err = fmt.Errorf("read %q", v)
		}
		return err
	})
}

// TestKillLeaderKeepsData is the acceptance scenario: 200 keys, kill -9 the
// leader, every key still reads back from the survivors and new writes
// succeed; the killed node rejoins and catches up to the same applied index.
// A small snapshot count makes the rejoin go through a snapshot.
func TestKillLeaderKeepsData(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	pc := kvdtest.StartProcCluster(t, procBin(t), 3, "--snapshot-count", "64")
	c := newClient(t, pc.Endpoints(), client.Linearizable)
	leaderOf(t, pc, 20*time.Second)
	for i := 0; i < 200; i++ {
		if err := c.Put(ctxFor(5*time.Second), []byte(fmt.Sprintf("key-%03d", i)), []byte(fmt.Sprintf("val-%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	l := leaderOf(t, pc, 5*time.Second)
	l.Kill()
	for i := 0; i < 200; i++ {
		v, err := c.Get(ctxFor(10*time.Second), []byte(fmt.Sprintf("key-%03d", i)))
		if err != nil || string(v) != fmt.Sprintf("val-%03d", i) {
			t.Fatalf("key-%03d after killing the leader: %q, %v", i, v, err)
		}
	}
	// Enough new writes to compact the log past what the dead node has.
	for i := 0; i < 300; i++ {
		if err := c.Put(ctxFor(5*time.Second), []byte(fmt.Sprintf("new-%03d", i)), []byte("x")); err != nil {
			t.Fatalf("write after the kill: %v", err)
		}
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	statusOf := func(p *kvdtest.Proc) client.NodeStatus {
		st, err := c.Status(ctxFor(time.Second), p.Addr)
		if err != nil {
			return client.NodeStatus{}
		}
		return st
	}
	wait.NoError(t, "the restarted node to catch up", func() error {
		want := statusOf(others(pc, l)[0]).Applied
		if got := statusOf(l).Applied; got != want || got == 0 {
			return fmt.Errorf("restarted node applied %d, others %d", got, want)
		}
		return nil
	})
	// Its region was rebuilt from the snapshot: serializable one-sided reads
	// from it alone see every key.
	only := newClient(t, []string{l.Addr}, client.Serializable)
	for _, k := range []string{"key-000", "key-199", "new-000", "new-299"} {
		if _, err := only.Get(ctxFor(5*time.Second), []byte(k)); err != nil {
			t.Fatalf("restarted node lacks %s: %v", k, err)
		}
	}
	if _, err := only.Get(ctxFor(5*time.Second), []byte("never-written")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("never-written key: %v", err)
	}
}
