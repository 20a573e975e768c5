package raft

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// waitTimeout bounds every wait in these tests. It is not an assertion on
// speed: only a hang, or a broken cluster, reaches it.
const waitTimeout = 30 * time.Second

func testConfig() Config {
	return withTestRaftLog(Config{
		TickInterval:   20 * time.Millisecond,
		ElectionTicks:  10,
		HeartbeatTicks: 1,
		Logger:         peertest.Logger(),
	})
}

// withTestRaftLog puts cfg's raft log where KVD_TEST_RAFT_LOG says (empty:
// the default, "wal"), so that the package's cluster and scenario tests
// run on either (the Makefile's test-go runs them with "pebble" too), with WAL
// segments (each zero-filled when made) as small as the largest command
// allows.
func withTestRaftLog(cfg Config) Config {
	cfg.RaftLog = os.Getenv("KVD_TEST_RAFT_LOG")
	cfg.Knobs.WALSegmentSize = testWALSegmentSize
	return cfg
}

// testWALSegmentSize holds the largest entry a test writes (limits.MaxCommand)
// with room to spare: a segment holds whole records only.
const testWALSegmentSize = 4 << 20

var _ = [testWALSegmentSize - 2*limits.MaxCommand]struct{}{}

// testStoreOptions are the store options of a node of testConfig.
func testStoreOptions() store.Options {
	cfg := testConfig()
	return store.Options{RaftLog: cfg.RaftLog, WALSegmentSize: cfg.Knobs.WALSegmentSize}
}

// applierLog mirrors the applied state from the Apply and Restore
// callbacks, as the server's table would.
type applierLog struct {
	node     atomic.Pointer[Node]
	opened   chan struct{} // closed once node is set
	mu       sync.Mutex
	state    map[string]versioned
	restores int
	lastVer  uint64
	ordered  bool
}

type versioned struct {
	value   string
	version uint64
}

func newApplierLog() *applierLog {
	return &applierLog{state: map[string]versioned{}, ordered: true, opened: make(chan struct{})}
}

// setNode records the node Open returned; a Restore waiting for it goes on.
func (a *applierLog) setNode(n *Node) {
	a.node.Store(n)
	close(a.opened)
}

func (a *applierLog) Apply(ws []Write) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, w := range ws {
		// Versions grow (testKV writes one key per entry).
		if w.Version < a.lastVer || w.Version == a.lastVer && i == 0 {
			a.ordered = false
		}
		a.lastVer = w.Version
		if w.Deleted {
			delete(a.state, string(w.Key))
			continue
		}
		a.state[string(w.Key)] = versioned{string(w.Value), w.Version}
	}
}

func (a *applierLog) Restore() {
	<-a.opened // Restore can only race Open's return by a hair
	n := a.node.Load()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.restores++
	a.loadLocked(n)
}

// load rebuilds the mirror from ForEach, as the server does at start: Apply
// calls wait meanwhile and land on the rebuilt state.
func (a *applierLog) load(n *Node) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.loadLocked(n)
}

func (a *applierLog) loadLocked(n *Node) {
	clear(a.state)
	// A batch being applied may be replayed over the view: order is checked
	// from the next call on.
	a.lastVer = 0
	err := n.ForEach(func(k, v []byte, ver uint64) error {
		a.state[string(k)] = versioned{string(v), ver}
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

// leaseEvent is one OnLease call, stamped on arrival.
type leaseEvent struct {
	at     time.Time
	term   uint64
	expiry time.Time // zero: the lease ended early
}

func (e leaseEvent) valid() bool { return !e.expiry.IsZero() }

type leaseLog struct {
	mu     sync.Mutex
	events []leaseEvent
}

func (l *leaseLog) record(term uint64, expiry time.Time) {
	l.mu.Lock()
	l.events = append(l.events, leaseEvent{time.Now(), term, expiry})
	l.mu.Unlock()
}

func (l *leaseLog) all() []leaseEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

type testNode struct {
	id     uint64
	name   string // partition label
	addr   string
	dir    string
	node   *Node
	tr     transport.Transport
	ln     transport.Listener // reserved before the first start
	app    *applierLog
	leases *leaseLog
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// network builds the transports of a test cluster and partitions them.
type network interface {
	// transport returns a new endpoint for the node labelled name.
	transport(t testing.TB, name string) transport.Transport
	// listenAddr is where the node labelled name listens the first time.
	listenAddr(name string) string
	// isolate cuts (or heals) all traffic to and from the node.
	isolate(name string, cut bool)
}

func (n *memNet) transport(_ testing.TB, name string) transport.Transport { return n.endpoint(name) }
func (n *memNet) listenAddr(name string) string                           { return name }

// tcpNet runs the cluster over the real TCP transport on loopback.
type tcpNet struct {
	mu  sync.Mutex
	cut map[string]bool
}

func newTCPNet() *tcpNet { return &tcpNet{cut: map[string]bool{}} }

func (n *tcpNet) transport(t testing.TB, name string) transport.Transport {
	tr, err := tcp.New(tcp.Config{Node: name, Filter: n.filter})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func (n *tcpNet) filter(local, remote string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut[local] || n.cut[remote]
}

func (n *tcpNet) listenAddr(string) string { return "127.0.0.1:0" }

func (n *tcpNet) isolate(name string, cut bool) {
	n.mu.Lock()
	n.cut[name] = cut
	n.mu.Unlock()
}

// networks are the transports the cluster tests run over.
var networks = []struct {
	name string
	make func() network
}{
	{"mem", func() network { return newMemNet() }},
	{"tcp", func() network { return newTCPNet() }},
}

type cluster struct {
	t     testing.TB
	dir   string // the nodes' data directories are below it
	net   network
	base  Config
	peers map[uint64]string
	nodes map[uint64]*testNode
}

// newCluster starts size nodes (ids 1..size) of a new group over the
// in-memory network.
func newCluster(t testing.TB, size int, base Config) *cluster {
	return newClusterOn(t, newMemNet(), size, base)
}

func newClusterOn(t testing.TB, nw network, size int, base Config) *cluster {
	t.Helper()
	// The temporary directory is made before stopAll is registered, so that
	// it is removed after the nodes are closed (cleanups run last first):
	// Pebble may still read its files (table statistics) until Close.
	c := &cluster{t: t, dir: t.TempDir(), net: nw, base: base, peers: map[uint64]string{}, nodes: map[uint64]*testNode{}}
	t.Cleanup(c.stopAll)
	for id := uint64(1); id <= uint64(size); id++ {
		c.reserve(id)
	}
	for id := range c.peers {
		c.start(id, false)
	}
	return c
}

// reserve creates node id's endpoint and listener, so its address is known
// (and in c.peers) before any node starts.
func (c *cluster) reserve(id uint64) *testNode {
	c.t.Helper()
	dir, err := os.MkdirTemp(c.dir, fmt.Sprintf("%d-", id))
	if err != nil {
		c.t.Fatal(err)
	}
	tn := &testNode{id: id, name: fmt.Sprintf("node%d", id), dir: filepath.Join(dir, fmt.Sprint(id))}
	tn.tr = c.net.transport(c.t, tn.name)
	ln, err := tn.tr.Listen(c.net.listenAddr(tn.name))
	if err != nil {
		c.t.Fatal(err)
	}
	tn.ln, tn.addr = ln, ln.Addr()
	c.nodes[id], c.peers[id] = tn, tn.addr
	return tn
}

// start opens node id (reusing its data directory and address if it ran
// before; reserving both if it never existed).
func (c *cluster) start(id uint64, join bool) *testNode {
	c.t.Helper()
	tn := c.nodes[id]
	if tn == nil {
		tn = c.reserve(id)
	}
	ln := tn.ln
	tn.ln = nil
	if ln == nil {
		tn.tr = c.net.transport(c.t, tn.name)
		var err error
		if ln, err = tn.tr.Listen(tn.addr); err != nil {
			c.t.Fatal(err)
		}
	}
	tn.app, tn.leases = newApplierLog(), &leaseLog{}
	cfg := c.base
	cfg.ID, cfg.DataDir, cfg.Transport, cfg.Join = id, tn.dir, tn.tr, join
	cfg.InitialCluster = maps.Clone(c.peers)
	cfg.Addr = tn.addr
	cfg.OnLease = tn.leases.record
	cfg = withKV(cfg, tn.app)
	n, err := Open(cfg)
	if err != nil {
		c.t.Fatalf("Open node %d: %v", id, err)
	}
	tn.node = n
	tn.app.setNode(n)
	tn.app.load(n)
	ctx, cancel := context.WithCancel(context.Background())
	tn.cancel = cancel
	tn.wg.Add(1)
	go func() {
		defer tn.wg.Done()
		peertest.AcceptPeers(ctx, ln, IsPeerHello, n.ServePeer)
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
	slices.SortFunc(out, func(a, b *testNode) int { return cmp.Compare(a.id, b.id) })
	return out
}

// members is the expected membership: every running node (and learners)
// as voters, with their addresses.
func (c *cluster) members(learners ...uint64) []Member {
	var out []Member
	for id, addr := range c.peers {
		out = append(out, Member{ID: id, Addr: addr, IsLearner: slices.Contains(learners, id)})
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// leader waits until one running node leads and every running node among
// from (all running if empty) agrees, and returns it.
func (c *cluster) leader(from ...*testNode) *testNode {
	c.t.Helper()
	if len(from) == 0 {
		from = c.running()
	}
	var lead *testNode
	wait.For(c.t, "a leader", func() bool {
		lead = nil
		var id uint64
		for _, tn := range from {
			st := tn.node.Status()
			if st.LeaderID == 0 || (id != 0 && st.LeaderID != id) {
				return false
			}
			id = st.LeaderID
		}
		lead = c.nodes[id]
		return lead != nil && lead.node != nil && lead.node.Status().IsLeader
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
		version, err = c.leader().node.Put(ctx, []byte(key), []byte(value))
		return err == nil
	})
	return version
}

// del deletes through whichever node leads, retrying across elections.
func (c *cluster) del(key string) {
	c.t.Helper()
	wait.For(c.t, "delete "+key, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _, err := c.leader().node.Delete(ctx, []byte(key))
		return err == nil
	})
}

// caughtUp waits until tn has applied everything the leader committed.
func (c *cluster) caughtUp(tn *testNode) {
	c.t.Helper()
	wait.For(c.t, fmt.Sprintf("node %d to catch up", tn.id), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return tn.node.ReadIndex(ctx) == nil
	})
}

// kvState reads a node's applied state with ForEach.
func kvState(t *testing.T, n *Node) map[string]versioned {
	t.Helper()
	out := map[string]versioned{}
	if err := n.ForEach(func(k, v []byte, ver uint64) error {
		out[string(k)] = versioned{string(v), ver}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkMirror asserts the Applier's view equals the node's applied state.
func checkMirror(t *testing.T, tn *testNode) {
	t.Helper()
	mirror, _, ordered := tn.app.snapshot()
	if !ordered {
		t.Errorf("node %d: Apply calls out of log order", tn.id)
	}
	if state := kvState(t, tn.node); !maps.Equal(mirror, state) {
		t.Errorf("node %d: applier mirror (%d keys) differs from applied state (%d keys)", tn.id, len(mirror), len(state))
	}
}
