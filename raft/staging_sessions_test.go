package raft

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/raft/peer"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestSnapshotStagingBoundedAcrossSessions: Config.MaxSnapshotBytes is
// documented as what keeps a member session from filling the node's disk
// ("Without it a peer session could fill the disk"; docs/security.md: one
// "cannot crash a node or fill its disk"). But the bound is kept per
// session: the same member may open any number of sessions (up to the
// listener's MaxConns), and each stages its own transfer of up to
// MaxSnapshotBytes at once. Here 16 sessions of one member each stage
// 800 KiB of a 1 MiB-bounded transfer and keep it: the node holds about 16
// times the bound (in Pebble batches here; on disk past 4 MiB a session).
// TestSnapshotStagingBoundedAcrossSessions: MaxSnapshotBytes bounds one
// session's transfer, and one member opening many sessions must not stage
// that much on each, or 16 sessions would stage 16 times the bound.
func TestSnapshotStagingBoundedAcrossSessions(t *testing.T) {
	const (
		sessions = 16
		frames   = 8
		value    = 100 << 10 // each frame > the transport's keepMsgBuf, so its buffer is not kept
	)
	cfg := testConfig()
	cfg.TickInterval = 50 * time.Millisecond
	cfg.MaxSnapshotBytes = 1 << 20
	c := newClusterOn(t, newTCPNet(), 3, cfg)
	c.leader()
	target := c.nodes[1]
	h := peer.Hello{From: 2, Cluster: target.node.ClusterID()}
	attacker, err := tcp.New(tcp.Config{Node: "attacker"})
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	heap := func() int64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	v := strings.Repeat("v", value)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := heap()
	for i := range sessions {
		conn := rawPeer(t, attacker, target.addr, h)
		id := peer.TransferID{Index: 1 << 30, Term: 1, Nonce: uint64(i + 1)}
		err := conn.Send(ctx, beginFrame(id))
		for j := 0; err == nil && j < frames; j++ {
			err = conn.Send(ctx, chunkFrame(id, 1, string(rune('a'+j)), v))
		}
		// A session the node refused is closed: its sends fail.
	}
	time.Sleep(500 * time.Millisecond) // the sessions handle what they were sent
	// Each transfer is within MaxSnapshotBytes; together they pass twice it.
	if got := droppedCount(t, target.node, peer.DropSnapTooBig); got == 0 {
		t.Errorf("no transfer refused: %d sessions staged %d KiB each against a node-wide bound of %d KiB",
			sessions, frames*value>>10, 2*cfg.MaxSnapshotBytes>>10)
	}
	if got := target.node.peers.(*peer.Set).Staged(); got > 2*int64(cfg.MaxSnapshotBytes) {
		t.Errorf("%d bytes staged, past twice MaxSnapshotBytes", got)
	}
	grown := heap() - base
	t.Logf("%d sessions of member 2, each staging %d KiB of a transfer bounded at %d KiB: node heap grew %d KiB",
		sessions, frames*value>>10, cfg.MaxSnapshotBytes>>10, grown>>10)
	if limit := 2*int64(cfg.MaxSnapshotBytes) + sessions*(64<<10) + 2<<20; grown > limit {
		t.Errorf("one member's sessions stage %d KiB at once; want at most twice MaxSnapshotBytes (%d KiB) plus what idle sessions cost (limit %d KiB)",
			grown>>10, cfg.MaxSnapshotBytes>>10, limit>>10)
	}
}

// TestStagingBoundCountsDeliveredTransfers: a finished transfer stays
// counted against the node-wide bound until the loop installs or discards
// it. Counted only until its 'S' frame, it was forgotten while it waited
// for the loop (busy with an fsync, or here frozen), and one session
// could queue transfer after transfer, each charged from zero: 8 of
// 900 KiB against a bound of 2 MiB. Once the loop runs again, the count
// must fall back to zero: none of it leaks.
func TestStagingBoundCountsDeliveredTransfers(t *testing.T) {
	cfg := testConfig()
	cfg.MaxSnapshotBytes = 1 << 20
	n := openNode1(t, cfg)
	thaw := make(chan struct{})
	if err := n.freeze(time.Hour, thaw); err != nil {
		t.Fatal(err)
	}
	r := reader(t, n, 2)
	value := strings.Repeat("v", 100<<10)
	const transfers, frames = 8, 9 // ~900 KiB each, under MaxSnapshotBytes
	var held int64
	refused := false
	for i := 0; i < transfers && !refused; i++ {
		id := peer.TransferID{Index: uint64(100 + i), Term: 4, Nonce: uint64(i + 1)}
		if err := r.Handle(beginFrame(id)); err != nil {
			t.Fatal(err)
		}
		for j := range frames {
			f := chunkFrame(id, 1, string(rune('a'+j)), value)
			if err := r.Handle(f); err != nil {
				refused = true // the bound held: the session ends
				break
			}
			held += int64(len(f) - peer.SnapshotHeaderLen)
		}
		if !refused {
			if err := r.Handle(endFrame(t, id, snapMsg(uint64(100+i), 4))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if limit := 2 * int64(cfg.MaxSnapshotBytes); !refused || held > limit {
		t.Fatalf("one session staged %d KiB in finished transfers against a node-wide bound of %d KiB (refused: %v)",
			held>>10, limit>>10, refused)
	}
	if droppedCount(t, n, peer.DropSnapTooBig) != 1 {
		t.Fatal("the peer.Refusal was not counted")
	}
	close(thaw)
	waitFor(t, "the staged transfers installed or discarded, and uncounted", func() bool { return n.peers.(*peer.Set).Staged() == 0 })
}
