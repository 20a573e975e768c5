package chaos

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/store"
)

// The kill loop's shape: how many rounds, how long the stream runs before
// each kill, how long the leader stays dead while the others go on. Eight
// rounds take about 35 s per raft-log mode on a 2-core machine.
const (
	killRounds   = 8
	killWriters  = 8
	writeBefore  = 1500 * time.Millisecond
	leaderAbsent = 1500 * time.Millisecond
	// killSnapshotCount makes the nodes snapshot, and so truncate their
	// logs, several times per round at the stream's rate.
	killSnapshotCount = "300"
)

// TestKillLoopsKeepAcknowledgedWrites: under a stream of PUTs from several
// goroutines, kill -9 every node at once and then the leader alone, in
// turns, for several rounds, in each raft-log mode. After every restart
// each PUT acknowledged so far reads back with its value, and once the
// stream stops the three members hash their states alike.
func TestKillLoopsKeepAcknowledgedWrites(t *testing.T) {
	bin := procBin(t)
	for _, mode := range []string{store.RaftLogWAL, store.RaftLogPebble} {
		t.Run(mode, func(t *testing.T) {
			pc := kvdtest.StartProcCluster(t, bin, 3, "--raft-log", mode, "--snapshot-count", killSnapshotCount)
			leaderOf(t, pc, 20*time.Second)
			killLoop(t, pc)
		})
	}
}

// ackedSet is the PUTs acknowledged so far: key to value.
type ackedSet struct {
	mu sync.Mutex
	m  map[string]string
}

func (a *ackedSet) add(k, v string) {
	a.mu.Lock()
	a.m[k] = v
	a.mu.Unlock()
}

func (a *ackedSet) snapshot() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]string, len(a.m))
	for k, v := range a.m {
		out[k] = v
	}
	return out
}

func killLoop(t *testing.T, pc *kvdtest.ProcCluster) {
	c := newClient(t, pc.Endpoints(), client.Linearizable)
	acked := &ackedSet{m: map[string]string{}}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range killWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				k, v := fmt.Sprintf("kl/%d/%07d", w, i), fmt.Sprintf("v-%d-%d", w, i)
				if err := c.Put(ctxFor(2*time.Second), []byte(k), []byte(v)); err != nil {
					time.Sleep(20 * time.Millisecond) // the nodes are down: no busy loop
					continue
				}
				acked.add(k, v)
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()

	for round := range killRounds {
		time.Sleep(writeBefore)
		before := len(acked.snapshot())
		what := "all nodes"
		if round%2 == 0 {
			for _, p := range pc.Procs { // as close to together as a loop gets
				p.Kill()
			}
		} else {
			what = "the leader"
			l := leaderOf(t, pc, 20*time.Second)
			l.Kill()
			time.Sleep(leaderAbsent) // the others elect a leader and go on
		}
		for _, p := range pc.Procs {
			if !p.Running() {
				if err := p.Start(); err != nil {
					t.Fatal(err)
				}
			}
		}
		leaderOf(t, pc, 30*time.Second)
		want := acked.snapshot()
		checkAcked(t, c, want)
		t.Logf("round %d, kill -9 of %s: %d acknowledged PUTs read back (%d acknowledged before the kill)", round, what, len(want), before)
	}
	stop.Store(true)
	wg.Wait()
	if n := len(acked.snapshot()); n < killRounds {
		t.Fatalf("only %d PUTs acknowledged in %d rounds: the stream did not run", n, killRounds)
	}
	checkAcked(t, c, acked.snapshot())
	membersAgree(t, pc, c)
}

// checkAcked reads every key with a linearizable range and checks each
// acknowledged PUT is there with its value.
func checkAcked(t *testing.T, c *client.Client, want map[string]string) {
	t.Helper()
	var got map[string]string
	wait.NoError(t, "a linearizable range of the written keys", func() error {
		resp, err := c.Range(ctxFor(10*time.Second), []byte("kl/"), []byte("kl0"))
		if err != nil {
			return err
		}
		got = make(map[string]string, len(resp.KVs))
		for _, kv := range resp.KVs {
			got[string(kv.Key)] = string(kv.Value)
		}
		return nil
	})
	lost := 0
	for k, v := range want {
		if got[k] != v {
			if lost < 5 {
				t.Errorf("acknowledged PUT %s=%s reads back as %q", k, v, got[k])
			}
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged PUTs lost", lost, len(want))
	}
}

// membersAgree waits for the three members to apply the same index and
// checks that their states hash alike at it.
func membersAgree(t *testing.T, pc *kvdtest.ProcCluster, c *client.Client) {
	t.Helper()
	wait.NoError(t, "the members to apply the same index and hash their states alike", func() error {
		var first client.HashKV
		var applied uint64
		for i, p := range pc.Procs {
			st, err := c.Status(ctxFor(2*time.Second), p.Addr)
			if err != nil {
				return err
			}
			h, err := c.HashKV(ctxFor(2*time.Second), p.Addr, 0)
			if err != nil {
				return err
			}
			if i == 0 {
				first, applied = h, st.Applied
				continue
			}
			if st.Applied != applied || h.HashRevision != first.HashRevision {
				return fmt.Errorf("node %d at applied %d revision %d, node 1 at %d, %d", p.ID, st.Applied, h.HashRevision, applied, first.HashRevision)
			}
			if h.Hash != first.Hash {
				t.Fatalf("node %d hashes its state at revision %d as %08x, node 1 as %08x", p.ID, h.HashRevision, h.Hash, first.Hash)
			}
		}
		return nil
	})
}
