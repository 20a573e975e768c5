package raft

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	dto "github.com/prometheus/client_model/go"
	etcdraft "go.etcd.io/raft/v3"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// queueBehindFrozenLoop freezes n's loop, runs each of calls in its own
// goroutine, waits until all of them have queued their proposal, and
// thaws the loop: everything queued is then taken by one drain.
func queueBehindFrozenLoop(t *testing.T, n *Node, calls []func()) *sync.WaitGroup {
	t.Helper()
	thaw := make(chan struct{})
	if err := n.freeze(waitTimeout, thaw); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, call := range calls {
		wg.Go(call)
	}
	wait.For(t, "every proposal queued", func() bool { return len(n.propc) == len(calls) })
	close(thaw)
	return &wg
}

func batchStats(t *testing.T, n *Node) (batches, commands uint64) {
	t.Helper()
	var m dto.Metric
	if err := n.metrics.proposalBatch.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), uint64(m.GetHistogram().GetSampleSum())
}

// TestProposalsFromManyCallersShareOneBatch: Puts and Deletes queued by
// concurrent callers while the loop is busy are proposed as one raft
// message, and each caller still gets its own entry's outcome.
func TestProposalsFromManyCallersShareOneBatch(t *testing.T) {
	c := newCluster(t, 1, testConfig())
	n := c.leader().node
	ctx := ctxT(t)
	if _, err := n.Put(ctx, []byte("present"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	const callers = 64
	versions := make([]uint64, callers)
	var existed [2]bool
	errs := make([]error, callers+2)
	calls := make([]func(), 0, callers+2)
	for i := range callers {
		calls = append(calls, func() {
			versions[i], errs[i] = n.Put(ctx, fmt.Appendf(nil, "k%03d", i), fmt.Appendf(nil, "v%03d", i))
		})
	}
	for i, key := range []string{"present", "absent"} {
		calls = append(calls, func() { existed[i], _, errs[callers+i] = n.Delete(ctx, []byte(key)) })
	}
	b0, c0 := batchStats(t, n)
	queueBehindFrozenLoop(t, n, calls).Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if b, cmds := batchStats(t, n); b-b0 != 1 || cmds-c0 != callers+2 {
		t.Fatalf("%d commands went out in %d batches, want %d in 1", cmds-c0, b-b0, callers+2)
	}
	if !existed[0] || existed[1] {
		t.Fatalf("Delete results crossed: existed = %v, want [true false]", existed)
	}
	seen := map[uint64]bool{}
	for i, v := range versions {
		got, ver, ok, err := n.Get(fmt.Appendf(nil, "k%03d", i))
		if err != nil || !ok || string(got) != fmt.Sprintf("v%03d", i) || ver != v || seen[v] {
			t.Fatalf("caller %d: version %d, stored %q at %d (%v, %v), or a version given twice", i, v, got, ver, ok, err)
		}
		seen[v] = true
	}
}

// TestBatchedCallerThatGivesUpLeavesOthers: a caller whose context ends
// while its proposal waits in a batch gets its context's error; the rest
// of the batch commits and its callers succeed.
func TestBatchedCallerThatGivesUpLeavesOthers(t *testing.T) {
	c := newCluster(t, 1, testConfig())
	n := c.leader().node
	ctx := ctxT(t)
	if _, err := n.Put(ctx, []byte("warm"), []byte("up")); err != nil {
		t.Fatal(err)
	}
	thaw := make(chan struct{})
	if err := n.freeze(waitTimeout, thaw); err != nil {
		t.Fatal(err)
	}
	quitter, quit := context.WithCancel(ctx)
	errs := make([]error, 8)
	quitted := make(chan struct{})
	var wg sync.WaitGroup
	for i := range errs {
		cctx := ctx
		if i == 3 {
			cctx = quitter
		}
		wg.Go(func() {
			_, errs[i] = n.Put(cctx, fmt.Appendf(nil, "k%d", i), []byte("v"))
			if i == 3 {
				close(quitted)
			}
		})
	}
	wait.For(t, "every proposal queued", func() bool { return len(n.propc) == len(errs) })
	quit()
	<-quitted // its proposal stays queued: the loop still takes it
	close(thaw)
	wg.Wait()
	for i, err := range errs {
		if want := i == 3; want != (err != nil) || (want && !errors.Is(err, context.Canceled)) {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
}

// TestRefusedBatchFailsEachCaller: when raft refuses a batch, every
// proposal in it is failed with ErrProposalDropped, each to its own
// caller, and none is left waiting for an entry that will never come.
func TestRefusedBatchFailsEachCaller(t *testing.T) {
	// A follower that believes it leads: raft itself refuses the proposal.
	l := bareLoop(t, 1<<20)
	ps := make([]*proposal, 5)
	for i := range ps {
		ps[i] = &proposal{reqID: uint64(i + 1), data: []byte{testOpPut}, done: make(chan result, 1)}
		l.propose(ps[i])
	}
	l.flushProposals()
	for i, p := range ps {
		select {
		case r := <-p.done:
			if !errors.Is(r.err, ErrProposalDropped) {
				t.Fatalf("proposal %d: %v", i, r.err)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("proposal %d not completed", i)
		}
	}
	if len(l.waiters) != 0 || len(l.batch) != 0 {
		t.Fatalf("%d waiters, %d queued after a refused batch", len(l.waiters), len(l.batch))
	}
}

// TestBatchBounds: a batch closes at maxBatch commands or at
// MaxSizePerMsg bytes, whichever comes first, and a command that would
// take it past the byte bound starts the next one.
func TestBatchBounds(t *testing.T) {
	l := bareLoop(t, 1000)
	sizes := []int{400, 400, 400, 1000, 10} // batches: {400,400} {400} {1000} {10}
	for i, size := range sizes {
		l.propose(&proposal{reqID: uint64(i + 1), data: make([]byte, size), done: make(chan result, 1)})
	}
	l.flushProposals()
	var hm dto.Metric
	if err := l.n.metrics.proposalBatch.Write(&hm); err != nil {
		t.Fatal(err)
	}
	if got := hm.GetHistogram().GetSampleCount(); got != 4 {
		t.Fatalf("%d batches, want 4", got)
	}
	l.cfg.MaxSizePerMsg = 1 << 30
	for i := range maxBatch + 1 {
		l.propose(&proposal{reqID: uint64(100 + i), data: []byte{testOpPut}, done: make(chan result, 1)})
	}
	if len(l.batch) != 1 {
		t.Fatalf("%d commands left queued after %d, want 1 (a batch closes at %d)", len(l.batch), maxBatch+1, maxBatch)
	}
}

// bareLoop is a loop around a lone, unelected raw node that believes it
// leads (so raft itself refuses what it proposes), for tests that drive
// propose and flushProposals by hand; maxSize is Config.MaxSizePerMsg.
func bareLoop(t *testing.T, maxSize uint64) *loop {
	t.Helper()
	rn, err := etcdraft.NewRawNode(&etcdraft.Config{
		ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: etcdraft.NewMemoryStorage(), MaxInflightMsgs: 1,
		DisableProposalForwarding: true, Logger: raftLogger{peertest.Logger()},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := newMetrics(nil)
	return &loop{n: &Node{log: peertest.Logger(), metrics: m}, rn: rn, sm: nopSM{}, cfg: Config{MaxSizePerMsg: maxSize},
		isLeader: true, waiters: map[uint64]*proposal{}}
}

// holdingLeader starts a 3-node cluster, stops its followers from making
// anything durable (their WAL fsyncs block, and with them their loops),
// and has the leader append a write of key "a" that therefore cannot
// commit. It returns once the leader's log holds that entry, with the
// entry's index and the write's outcome.
func holdingLeader(t *testing.T) (*walGate, *testNode, uint64, <-chan error) {
	g := newWALGate()
	cfg := testConfig()
	// CheckQuorum deposes a leader whose followers are silent for an
	// election timeout: 2 s here, to leave the test time to look.
	cfg.ElectionTicks = 100
	cfg.FS = errorfs.Wrap(vfs.Default, &g.inj)
	c := newCluster(t, 3, cfg)
	c.put("warm", "up")
	ld := c.leader()
	var followers []string
	for _, tn := range c.running() {
		if tn != ld {
			followers = append(followers, tn.dir)
		}
	}
	g.close(followers...)
	t.Cleanup(g.open)
	next := lastIndex(t, ld) + 1
	first := putAsync(ld.node, "a")
	wait.For(t, "the leader to append the first write", func() bool { return lastIndex(t, ld) == next })
	return g, ld, next, first
}

func heldCommands(t *testing.T, n *Node) int {
	t.Helper()
	var m dto.Metric
	if err := n.metrics.proposalsHeld.Write(&m); err != nil {
		t.Fatal(err)
	}
	return int(m.GetGauge().GetValue())
}

func outcome(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitTimeout):
		t.Fatal("a write never finished")
		return nil
	}
}

// TestLeaderHoldsBatchWhileOneIsUncommitted: while a batch of the leader's
// is uncommitted, later writes wait, out of the log, and go out together
// as one batch once it commits (batch.go, "Holding a batch").
func TestLeaderHoldsBatchWhileOneIsUncommitted(t *testing.T) {
	g, ld, aIndex, first := holdingLeader(t)
	b0, c0 := batchStats(t, ld.node)
	var later []<-chan error
	for i, key := range []string{"b", "c", "d"} {
		later = append(later, putAsync(ld.node, key))
		wait.For(t, fmt.Sprintf("%d writes held", i+1), func() bool { return heldCommands(t, ld.node) == i+1 })
		if got := lastIndex(t, ld); got != aIndex {
			t.Fatalf("held writes entered the log: last index %d, want %d", got, aIndex)
		}
	}
	g.open()
	for _, done := range append(later, first) {
		if err := outcome(t, done); err != nil {
			t.Fatal(err)
		}
	}
	if b, cmds := batchStats(t, ld.node); b-b0 != 1 || cmds-c0 != 3 {
		t.Fatalf("the held writes went out as %d commands in %d batches, want 3 in 1", cmds-c0, b-b0)
	}
	if n := heldCommands(t, ld.node); n != 0 {
		t.Fatalf("%d commands still held", n)
	}
}

// TestHeldWritesFailWhenLeaderStepsDown: writes held by a leader that
// loses its leadership fail at once, as never proposed (safe to retry),
// rather than waiting for their callers to give up.
func TestHeldWritesFailWhenLeaderStepsDown(t *testing.T) {
	_, ld, _, first := holdingLeader(t)
	held := putAsync(ld.node, "b")
	wait.For(t, "the write held", func() bool { return heldCommands(t, ld.node) == 1 })
	// The followers, stuck in their fsyncs, answer no heartbeat: the
	// leader steps down after an election timeout (CheckQuorum).
	if err := outcome(t, held); !errors.Is(err, ErrProposalDropped) {
		t.Fatalf("held write: %v, want ErrProposalDropped", err)
	}
	if err := outcome(t, first); !errors.Is(err, ErrLeaderChanged) {
		t.Fatalf("uncommitted write: %v, want ErrLeaderChanged", err)
	}
	if ld.node.Status().IsLeader {
		t.Fatal("the leader did not step down")
	}
}
