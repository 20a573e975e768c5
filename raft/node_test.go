package raft

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/limits"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestClusterReplicatesPutsAndDeletes(t *testing.T) {
	forNetworks(t, func(t *testing.T, nw network) {
		c := newClusterOn(t, nw, 3, testConfig())
		lead := c.leader()
		ctx := ctxT(t)

		// Concurrent writers: their proposals share Readies.
		var wg sync.WaitGroup
		versions := make([]uint64, 40)
		errs := make([]error, 40)
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				versions[i], errs[i] = lead.node.Put(ctx, fmt.Appendf(nil, "k%02d", i), fmt.Appendf(nil, "v%d", i))
			}()
		}
		wg.Wait()
		seen := map[uint64]bool{}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("Put k%02d: %v", i, err)
			}
			if versions[i] == 0 || seen[versions[i]] {
				t.Fatalf("Put k%02d: version %d is zero or reused", i, versions[i])
			}
			seen[versions[i]] = true
		}
		v1, err := lead.node.Put(ctx, []byte("k00"), []byte("again"))
		if err != nil || v1 <= versions[0] {
			t.Fatalf("overwrite: version %d (first %d), %v", v1, versions[0], err)
		}

		tests := []struct {
			key     string
			existed bool
		}{{"k01", true}, {"k01", false}, {"never", false}}
		var lastDel uint64
		for _, tt := range tests {
			existed, ver, err := lead.node.Delete(ctx, []byte(tt.key))
			if err != nil || existed != tt.existed || ver <= lastDel {
				t.Fatalf("Delete(%s) = %v, %d, %v; want existed=%v and a new version", tt.key, existed, ver, err, tt.existed)
			}
			lastDel = ver
		}

		want := map[string]versioned{"k00": {"again", v1}}
		for i := 2; i < 40; i++ {
			want[fmt.Sprintf("k%02d", i)] = versioned{fmt.Sprintf("v%d", i), versions[i]}
		}
		for _, tn := range c.running() {
			c.caughtUp(tn)
			if got := kvState(t, tn.node); !maps.Equal(got, want) {
				t.Errorf("node %d: state differs: %d keys, want %d", tn.id, len(got), len(want))
			}
			v, ver, ok, err := tn.node.Get([]byte("k00"))
			if err != nil || !ok || string(v) != "again" || ver != v1 {
				t.Errorf("node %d: Get(k00) = %q, %d, %v, %v", tn.id, v, ver, ok, err)
			}
			if _, _, ok, _ := tn.node.Get([]byte("k01")); ok {
				t.Errorf("node %d: deleted key still present", tn.id)
			}
			checkMirror(t, tn)
			st := tn.node.Status()
			if st.ID != tn.id || st.LeaderID != lead.id || st.Applied < lastDel || st.Commit < st.Applied {
				t.Errorf("node %d: status %+v", tn.id, st)
			}
		}
	})
}

func TestFollowerRefersToLeader(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	lead := c.leader()
	ctx := ctxT(t)
	for _, tn := range c.running() {
		if tn == lead {
			continue
		}
		calls := map[string]func() error{
			"Put": func() error { _, err := tn.node.Put(ctx, []byte("k"), []byte("v")); return err },
			"Delete": func() error {
				_, _, err := tn.node.Delete(ctx, []byte("k"))
				return err
			},
			"AddMember":    func() error { return tn.node.AddMember(ctx, 9, "node9") },
			"RemoveMember": func() error { return tn.node.RemoveMember(ctx, lead.id) },
		}
		for name, call := range calls {
			err := call()
			var nl *NotLeaderError
			if !errors.As(err, &nl) || !errors.Is(err, ErrNotLeader) {
				t.Fatalf("node %d %s: err = %v, want a NotLeaderError", tn.id, name, err)
			}
			if nl.LeaderID != lead.id || nl.LeaderAddr != lead.addr {
				t.Errorf("node %d %s: NotLeaderError names %d at %q, want %d at %q", tn.id, name, nl.LeaderID, nl.LeaderAddr, lead.id, lead.addr)
			}
		}
	}
	// A read barrier on a follower (forwarded to the leader) makes every
	// acknowledged write visible to Get there.
	for i := range 5 {
		key, val := fmt.Sprintf("rk%d", i), fmt.Sprintf("rv%d", i)
		ver := c.put(key, val)
		for _, tn := range c.running() {
			if err := tn.node.ReadIndex(ctx); err != nil {
				t.Fatalf("node %d ReadIndex: %v", tn.id, err)
			}
			if v, got, ok, err := tn.node.Get([]byte(key)); !ok || err != nil || string(v) != val || got != ver {
				t.Fatalf("node %d after ReadIndex: Get(%s) = %q, %d, %v, %v", tn.id, key, v, got, ok, err)
			}
		}
	}
}

func TestInvalidRequests(t *testing.T) {
	c := newCluster(t, 1, testConfig())
	lead := c.leader()
	ctx := ctxT(t)
	// The largest command replicates (internal/kv checks the limits).
	if _, err := lead.node.Put(ctx, make([]byte, limits.MaxKey), make([]byte, limits.MaxValue)); err != nil {
		t.Errorf("largest allowed: err = %v", err)
	}
	lead.node.Close()
	if _, err := lead.node.Put(ctx, []byte("k"), nil); !errors.Is(err, ErrStopped) && !errors.Is(err, ErrNotLeader) {
		t.Errorf("Put after Close: %v", err)
	}
	if err := lead.node.ReadIndex(ctx); !errors.Is(err, ErrStopped) {
		t.Errorf("ReadIndex after Close: %v", err)
	}
}

// TestRestartKeepsAcknowledgedWrites closes every node while writes are in
// flight and checks that each acknowledged write survives the restart.
func TestRestartKeepsAcknowledgedWrites(t *testing.T) {
	forNetworks(t, func(t *testing.T, nw network) {
		c := newClusterOn(t, nw, 3, testConfig())
		c.leader()
		var nodes []*Node // the writers' own view: the cluster's changes under them
		for _, tn := range c.running() {
			nodes = append(nodes, tn.node)
		}
		var mu sync.Mutex
		acked := map[string]versioned{}
		var stopping atomic.Bool
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stopping.Load(); {
					key, val := fmt.Sprintf("w%d-%03d", w, i), fmt.Sprintf("val-%d-%d", w, i)
					ver, err := putAnywhere(nodes, key, val)
					if err != nil {
						continue // an election, or the cluster is closing under us
					}
					mu.Lock()
					acked[key] = versioned{val, ver}
					mu.Unlock()
					i++
				}
			}()
		}
		wait.For(t, "acknowledged writes", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) >= 150
		})
		c.stopAll() // mid-stream: some writers are still waiting
		stopping.Store(true)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()

		for id := range c.peers {
			c.start(id, false)
		}
		c.leader()
		for _, tn := range c.running() {
			c.caughtUp(tn)
			state := kvState(t, tn.node)
			for k, want := range acked {
				if got, ok := state[k]; !ok || got != want {
					t.Fatalf("node %d lost acknowledged write %s=%v (has %v, %v)", tn.id, k, want, got, ok)
				}
			}
			checkMirror(t, tn)
		}
	})
}

// putAnywhere writes through whichever of nodes says it leads.
func putAnywhere(nodes []*Node, key, val string) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, n := range nodes {
		if n.Status().IsLeader {
			return n.Put(ctx, []byte(key), []byte(val))
		}
	}
	return 0, ErrNoLeader
}

func TestSingleNode(t *testing.T) {
	c := newCluster(t, 1, testConfig())
	tn := c.leader()
	ctx := ctxT(t)
	ver, err := tn.node.Put(ctx, []byte("a"), []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "lease on a single node", func() bool { return tn.node.Status().LeaseValid })
	if err := tn.node.ReadIndex(ctx); err != nil {
		t.Fatal(err)
	}
	c.stop(1)
	c.start(1, false)
	tn = c.leader()
	if v, got, ok, err := tn.node.Get([]byte("a")); !ok || err != nil || string(v) != "1" || got != ver {
		t.Fatalf("after restart Get = %q, %d, %v, %v", v, got, ok, err)
	}
	if ms := tn.node.Members(); len(ms) != 1 || ms[0] != (Member{ID: 1, Addr: tn.addr}) {
		t.Fatalf("Members = %v", ms)
	}
}

func checkMembers(t *testing.T, n *Node, want []Member) {
	t.Helper()
	if got := n.Members(); !slicesEqual(got, want) {
		t.Fatalf("Members = %v, want %v", got, want)
	}
}

func slicesEqual(a, b []Member) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLeaseOnlyOnLeader checks a lease is granted to the leader alone.
func TestLeaseOnlyOnLeader(t *testing.T) {
	c := newCluster(t, 3, testConfig())
	lead := c.leader()
	wait.For(t, "leader lease", func() bool { return lead.node.Status().LeaseValid })
	term := lead.node.Status().Term
	wait.For(t, "OnLease(valid) on the leader", func() bool {
		ev := lead.leases.all()
		return len(ev) > 0 && ev[len(ev)-1].term == term && ev[len(ev)-1].expiry.After(time.Now())
	})
	c.put("x", "1")
	for _, tn := range c.running() {
		if tn == lead {
			continue
		}
		if tn.node.Status().LeaseValid {
			t.Errorf("follower %d reports a valid lease", tn.id)
		}
		for _, ev := range tn.leases.all() {
			if ev.valid() {
				t.Errorf("follower %d got OnLease(%d, %v)", tn.id, ev.term, ev.expiry)
			}
		}
	}
}

// TestLeaseLapsesBeforeNewLeader isolates the leader and checks that the
// last lease expiry it published had passed before any other node even
// started the election that replaced it.
func TestLeaseLapsesBeforeNewLeader(t *testing.T) {
	forNetworks(t, func(t *testing.T, nw network) {
		cfg := testConfig()
		cfg.TickInterval, cfg.LeaseDrift = 20*time.Millisecond, 0.3
		c := newClusterOn(t, nw, 3, cfg)
		old := c.leader()
		wait.For(t, "leader lease", func() bool { return old.node.Status().LeaseValid })
		oldTerm := old.node.Status().Term

		c.net.isolate(old.name, true)
		var others []*testNode
		for _, tn := range c.running() {
			if tn != old {
				others = append(others, tn)
			}
		}
		var newLead *testNode
		wait.For(t, "a new leader", func() bool {
			newLead = c.leader(others...)
			return newLead != old
		})
		var otherNodes []*Node
		for _, tn := range others {
			otherNodes = append(otherNodes, tn.node)
		}
		wait.For(t, "a write on the new side", func() bool {
			_, err := putAnywhere(otherNodes, "after", "partition")
			return err == nil
		})
		committed := time.Now()

		var lapsed time.Time // the latest expiry the old leader ever published
		for _, ev := range old.leases.all() {
			if ev.term == oldTerm && ev.expiry.After(lapsed) {
				lapsed = ev.expiry
			}
		}
		if lapsed.IsZero() {
			t.Fatal("the isolated leader never published a lease")
		}
		var campaign time.Time
		for _, tn := range others {
			for _, ev := range tn.leases.all() {
				if ev.term > oldTerm && (campaign.IsZero() || ev.at.Before(campaign)) {
					campaign = ev.at
					break
				}
			}
		}
		if campaign.IsZero() || !lapsed.Before(campaign) {
			t.Fatalf("old lease lapsed at %v, a new term began at %v: overlap", lapsed, campaign)
		}
		if !lapsed.Before(committed) {
			t.Fatal("new leader committed before the old lease lapsed")
		}
		if old.node.Status().LeaseValid {
			t.Fatal("isolated leader still reports a valid lease")
		}

		// Healed, the old leader follows and never regains a lease in its term.
		c.net.isolate(old.name, false)
		wait.For(t, "old leader to follow", func() bool {
			st := old.node.Status()
			return !st.IsLeader && st.LeaderID != 0 && st.Term > oldTerm
		})
		c.caughtUp(old)
		if v, _, ok, _ := old.node.Get([]byte("after")); !ok || string(v) != "partition" {
			t.Fatalf("old leader after healing: %q %v", v, ok)
		}
	})
}

// forNetworks runs a cluster test over each network.
func forNetworks(t *testing.T, f func(t *testing.T, nw network)) {
	for _, n := range networks {
		t.Run(n.name, func(t *testing.T) { f(t, n.make()) })
	}
}

// atLeader runs a request at whichever node leads, again at the new leader
// whenever the leadership moved under it: the tests' short ticks make
// elections common on a busy machine. retried reports whether it ran more
// than once, after which a change may find its own first try applied.
func (c *cluster) atLeader(f func(n *Node) error) (retried bool, err error) {
	c.t.Helper()
	tries := 0
	wait.For(c.t, "a leader to take the request", func() bool {
		for _, tn := range c.running() { // (not c.leader: a node about to join follows no one yet)
			if tn.node.Status().IsLeader {
				tries++
				err = f(tn.node)
				return !leadershipMoved(err)
			}
		}
		return false
	})
	return tries > 1, err
}

func leadershipMoved(err error) bool {
	for _, e := range []error{ErrNotLeader, ErrLeaderChanged, ErrNoLeader, ErrProposalDropped} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// TestAdmissionTerm: a write admitted in a term (Admission) enters
// the log only in that term, with the leader ready; otherwise it fails
// with ErrProposalDropped, never in the log.
func TestAdmissionTerm(t *testing.T) {
	c := newCluster(t, 1, testConfig())
	lead := c.leader().node
	wait.For(t, "the leader ready", func() bool { return lead.Status().LeaderReady })
	term := lead.Status().Term
	v1, err := lead.putAdmitted(ctxT(t), Admission{Term: term}, []byte("k"), []byte("now"))
	if err != nil {
		t.Fatalf("admitted in the current term: %v", err)
	}
	for _, other := range []uint64{term - 1, term + 1, NotAdmitted} {
		if _, err := lead.putAdmitted(ctxT(t), Admission{Term: other}, []byte("k"), []byte("stale")); !errors.Is(err, ErrProposalDropped) {
			t.Fatalf("admitted in term %d, proposed in %d: %v; want ErrProposalDropped", other, term, err)
		}
	}
	// The refused proposals took no index: the next write gets v1+1.
	if v2, err := lead.Put(ctxT(t), []byte("k2"), []byte("x")); err != nil || v2 != v1+1 || lead.Status().Term != term {
		t.Fatalf("the write after the refused ones: version %d, %v (want %d, term %d)", v2, err, v1+1, term)
	}
	if v, _, _, _ := lead.Get([]byte("k")); string(v) != "now" {
		t.Fatalf("k = %q", v)
	}
}
