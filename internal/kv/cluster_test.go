package kv

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/raft"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// waitTimeout bounds every wait in these tests. It is not an assertion on
// speed: only a hang, or a broken cluster, reaches it.
const waitTimeout = 30 * time.Second

func testConfig() Config {
	return Config{Raft: raft.Config{
		TickInterval:   20 * time.Millisecond,
		ElectionTicks:  10,
		HeartbeatTicks: 1,
		Logger:         peertest.Logger(),
	}}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// applierLog mirrors the applied state from the Publisher's Apply and
// Restore calls, as the server's table would.
type applierLog struct {
	store    atomic.Pointer[Store]
	opened   chan struct{} // closed once store is set
	mu       sync.Mutex
	state    map[string]versioned
	restores int
	lastVer  uint64
	ordered  bool
	// Atomic batches (txn_test.go): Apply calls marked Atomic, and
	// whether each was announced by BatchAhead first.
	atomicCalls, unannounced int
	announced                bool
}

type versioned struct {
	value   string
	version uint64
}

func newApplierLog() *applierLog {
	return &applierLog{state: map[string]versioned{}, ordered: true, opened: make(chan struct{})}
}

// setStore records the store Open returned; a Restore waiting for it goes on.
func (a *applierLog) setStore(s *Store) {
	a.store.Store(s)
	close(a.opened)
}

func (a *applierLog) Apply(ws []Write, _ uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.noteAtomic(ws)
	for i, w := range ws {
		// One transaction's writes share its version; otherwise versions
		// grow.
		if w.Meta.Mod < a.lastVer || w.Meta.Mod == a.lastVer && (i == 0 || !w.Atomic) {
			a.ordered = false
		}
		a.lastVer = w.Meta.Mod
		if w.Deleted {
			delete(a.state, string(w.Key))
			continue
		}
		a.state[string(w.Key)] = versioned{string(w.Value), w.Meta.Mod}
	}
}

func (a *applierLog) Restore() {
	<-a.opened // Restore can only race Open's return by a hair
	s := a.store.Load()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.restores++
	a.loadLocked(s)
}

func (a *applierLog) Events([]Write, uint64, bool) {}

// load rebuilds the mirror from ForEach, as the server does at start.
func (a *applierLog) load(s *Store) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.loadLocked(s)
}

func (a *applierLog) loadLocked(s *Store) {
	clear(a.state)
	a.lastVer = 0 // a batch being applied may be replayed over the view
	err := s.ForEach(func(k, v []byte, m revision.Meta) error {
		a.state[string(k)] = versioned{string(v), m.Mod}
		return nil
	})
	if err != nil {
		panic(err)
	}
}

func (a *applierLog) snapshot() (map[string]versioned, int, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.state), a.restores, a.ordered
}

type testNode struct {
	id     uint64
	addr   string
	dir    string
	node   *Store
	tr     transport.Transport
	ln     transport.Listener // reserved before the first start
	app    *applierLog
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// cluster is a group of Stores over the TCP transport on loopback.
type cluster struct {
	t     testing.TB
	dir   string
	base  Config
	peers map[uint64]string
	nodes map[uint64]*testNode
}

// newCluster starts size nodes (ids 1..size) of a new group.
func newCluster(t testing.TB, size int, base Config) *cluster {
	t.Helper()
	// The directory is made before stopAll is registered, so that it is
	// removed after the nodes are closed (cleanups run last first).
	c := &cluster{t: t, dir: t.TempDir(), base: base, peers: map[uint64]string{}, nodes: map[uint64]*testNode{}}
	t.Cleanup(c.stopAll)
	for id := uint64(1); id <= uint64(size); id++ {
		c.reserve(id)
	}
	for id := range c.peers {
		c.start(id, false)
	}
	return c
}

func (c *cluster) transport(id uint64) transport.Transport {
	tr, err := tcp.New(tcp.Config{Node: fmt.Sprint(id)})
	if err != nil {
		c.t.Fatal(err)
	}
	return tr
}

// reserve creates node id's transport and listener, so its address is
// known before any node starts.
func (c *cluster) reserve(id uint64) *testNode {
	c.t.Helper()
	tn := &testNode{id: id, dir: filepath.Join(c.dir, fmt.Sprint(id))}
	tn.tr = c.transport(id)
	ln, err := tn.tr.Listen("127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	tn.ln, tn.addr = ln, ln.Addr()
	c.nodes[id], c.peers[id] = tn, tn.addr
	return tn
}

// start opens node id (reusing its data directory and address if it ran
// before).
func (c *cluster) start(id uint64, join bool) *testNode {
	c.t.Helper()
	tn := c.nodes[id]
	if tn == nil {
		tn = c.reserve(id)
	}
	ln := tn.ln
	tn.ln = nil
	if ln == nil {
		tn.tr = c.transport(id)
		var err error
		if ln, err = tn.tr.Listen(tn.addr); err != nil {
			c.t.Fatal(err)
		}
	}
	tn.app = newApplierLog()
	cfg := c.base
	cfg.Raft.ID, cfg.Raft.DataDir, cfg.Raft.Transport, cfg.Raft.Join = id, tn.dir, tn.tr, join
	cfg.Raft.InitialCluster = maps.Clone(c.peers)
	cfg.Raft.Addr = tn.addr
	cfg.Publisher = tn.app
	s, err := Open(cfg)
	if err != nil {
		c.t.Fatalf("Open node %d: %v", id, err)
	}
	tn.node = s
	tn.app.setStore(s)
	tn.app.load(s)
	ctx, cancel := context.WithCancel(context.Background())
	tn.cancel = cancel
	tn.wg.Add(1)
	go func() {
		defer tn.wg.Done()
		peertest.AcceptPeers(ctx, ln, raft.IsPeerHello, s.Node().ServePeer)
	}()
	return tn
}

func (c *cluster) stop(id uint64) {
	tn := c.nodes[id]
	if tn != nil && tn.ln != nil { // reserved, never started
		tn.tr.Close()
		tn.ln = nil
	}
	if tn == nil || tn.node == nil {
		return
	}
	if err := tn.node.Close(); err != nil {
		c.t.Errorf("Close node %d: %v", id, err)
	}
	tn.cancel()
	tn.tr.Close()
	tn.wg.Wait()
	tn.node = nil
}

func (c *cluster) stopAll() {
	for id := range c.nodes {
		c.stop(id)
	}
}

func (c *cluster) running() []*testNode {
	var out []*testNode
	for _, tn := range c.nodes {
		if tn.node != nil {
			out = append(out, tn)
		}
	}
	slices.SortFunc(out, func(a, b *testNode) int { return int(a.id) - int(b.id) })
	return out
}

// leader waits until one running node leads and every running node
// agrees, and returns it.
func (c *cluster) leader() *testNode {
	c.t.Helper()
	var lead *testNode
	wait.For(c.t, "a leader", func() bool {
		lead = nil
		var id uint64
		for _, tn := range c.running() {
			st := tn.node.Node().Status()
			if st.LeaderID == 0 || (id != 0 && st.LeaderID != id) {
				return false
			}
			id = st.LeaderID
		}
		lead = c.nodes[id]
		return lead != nil && lead.node != nil && lead.node.Node().Status().IsLeader
	})
	return lead
}

// follower returns a running node other than lead.
func (c *cluster) follower(lead *testNode) *testNode {
	c.t.Helper()
	for _, tn := range c.running() {
		if tn != lead {
			return tn
		}
	}
	c.t.Fatal("no running follower")
	return nil
}

// put writes through whichever node leads, retrying across elections.
func (c *cluster) put(key, value string) uint64 {
	c.t.Helper()
	var version uint64
	wait.For(c.t, "put "+key, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		version, err = c.leader().node.Put(ctx, []byte(key), []byte(value), raft.Admission{})
		return err == nil
	})
	return version
}

// caughtUp waits until tn has applied everything the leader committed.
func (c *cluster) caughtUp(tn *testNode) {
	c.t.Helper()
	wait.For(c.t, fmt.Sprintf("node %d to catch up", tn.id), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return tn.node.Node().ReadIndex(ctx) == nil
	})
}

// kvState reads a node's applied state with ForEach.
func kvState(t *testing.T, s *Store) map[string]versioned {
	t.Helper()
	out := map[string]versioned{}
	if err := s.ForEach(func(k, v []byte, m revision.Meta) error {
		out[string(k)] = versioned{string(v), m.Mod}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// firstIndex is the first index of s's raft log.
func firstIndex(t *testing.T, s *Store) uint64 {
	t.Helper()
	st, release, err := s.Node().Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	first, err := st.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	return first
}

// checkMirror asserts the Publisher's view equals the node's applied state.
func checkMirror(t *testing.T, tn *testNode) {
	t.Helper()
	mirror, _, ordered := tn.app.snapshot()
	if !ordered {
		t.Errorf("node %d: Apply calls out of log order", tn.id)
	}
	if state := kvState(t, tn.node); !maps.Equal(mirror, state) {
		t.Errorf("node %d: publisher mirror (%d keys) differs from applied state (%d keys)", tn.id, len(mirror), len(state))
	}
}
