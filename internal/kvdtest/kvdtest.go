package kvdtest

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/watch"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport/tcp"
)

// Node is one in-process kvd node.
type Node struct {
	ID   uint64
	Addr string // where clients connect
	// PeerAddr is where peers connect: Addr, or the peer listener's
	// address with Options.PeerListener.
	PeerAddr string
	DataDir  string
	Srv      *server.Server
	Tr       *tcp.Transport
	cfg      server.Config
	cuts     *cutSet // the peers Isolate cut this node off from (partition.go)
}

// Options tune the nodes a test starts.
type Options struct {
	TableMem   int
	TableMems  []int // per node (index = id-1), overriding TableMem
	ReuseGrace time.Duration
	// TableInline is server.Config.TableInline (0: the server's default;
	// server.TableInlineOff: no arenas).
	TableInline   int
	SnapshotCount uint64
	Tick          time.Duration
	Log           bool // send node logs to the test log's stderr
	// LeaseClock, if set, is every node's TTL lease clock
	// (server.Config.LeaseClock): a test advances it by hand.
	LeaseClock func() time.Time
	Watch      watch.Config // the nodes' watch bounds (server.Config.Watch)
	// MaxWatchesPerConn is server.Config.MaxWatchesPerConn.
	MaxWatchesPerConn int
	// Token is the cluster token (server.Config.InitialClusterToken).
	Token string
	// Restore names a backup every node starts the new cluster from
	// (server.Config.Restore); restarts leave it out.
	Restore string
	// Knobs, if set, gives each node its test knobs
	// (server.Config.Knobs), by id.
	Knobs func(id uint64) server.Knobs
	// PeerListener gives every node a listener for peers
	// (server.Config.ListenPeer) beside its client one: the initial
	// cluster names the peer addresses (Node.PeerAddr).
	PeerListener bool
}

// WALSegmentSize is the Raft log's segment size of the nodes StartCluster
// starts (server.Knobs.WALSegmentSize, unless Options.Knobs sets one):
// each segment is zero-filled when made, and tests start many nodes. It
// holds the largest command with room to spare.
const WALSegmentSize = 4 << 20

var _ = [WALSegmentSize - 2*limits.MaxCommand]struct{}{}

// StartCluster starts n nodes that form one cluster, and stops them at the
// end of the test.
func StartCluster(t testing.TB, n int, o Options) []*Node {
	t.Helper()
	addrs, peerAddrs := FreeAddrs(t, n), []string(nil)
	if peerAddrs = addrs; o.PeerListener {
		peerAddrs = FreeAddrs(t, n)
	}
	cluster := map[uint64]string{}
	for i, a := range peerAddrs {
		cluster[uint64(i+1)] = a
	}
	nodes := make([]*Node, n)
	for i := range nodes {
		nodes[i] = &Node{ID: uint64(i + 1), Addr: addrs[i], PeerAddr: peerAddrs[i], DataDir: t.TempDir()}
		nodes[i].cfg = server.Config{
			ID: uint64(i + 1), Listen: addrs[i], DataDir: nodes[i].DataDir, InitialCluster: cluster,
			TableMem: o.TableMem, ReuseGrace: o.ReuseGrace, TableInline: o.TableInline, SnapshotCount: o.SnapshotCount, TickInterval: o.Tick,
			Logger: logger(o.Log), LeaseClock: o.LeaseClock, Watch: o.Watch, MaxWatchesPerConn: o.MaxWatchesPerConn,
			InitialClusterToken: o.Token, Restore: o.Restore,
		}
		if o.PeerListener {
			nodes[i].cfg.ListenPeer = peerAddrs[i]
		}
		if i < len(o.TableMems) {
			nodes[i].cfg.TableMem = o.TableMems[i]
		}
		if o.Knobs != nil {
			nodes[i].cfg.Knobs = o.Knobs(uint64(i + 1))
		}
		nodes[i].cfg.Knobs.WALSegmentSize = cmp.Or(nodes[i].cfg.Knobs.WALSegmentSize, WALSegmentSize)
		if err := nodes[i].Start(); err != nil {
			t.Fatalf("start node %d: %v", i+1, err)
		}
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.Stop()
		}
	})
	return nodes
}

func logger(on bool) *slog.Logger {
	if on {
		return slog.Default()
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Start (re)starts the node with its data directory.
func (n *Node) Start() error {
	tr, err := tcp.New(tcp.Config{Node: n.Addr})
	if err != nil {
		return err
	}
	cuts := newCutSet(tr)
	cfg := n.cfg
	cfg.Transport = tr
	srv, err := server.New(cfg)
	if err != nil {
		tr.Close()
		return fmt.Errorf("node %d: %w", n.ID, err)
	}
	n.Srv, n.Tr, n.cuts = srv, tr, cuts
	n.cfg.Restore = "" // restored once: a restart opens the data directory as it is
	return nil
}

// Stop closes the node (its data directory stays).
func (n *Node) Stop() {
	if n.Srv != nil {
		n.Srv.Close()
		n.Tr.Close()
		n.Srv, n.Tr = nil, nil
	}
}

// Endpoints lists the nodes' addresses.
func Endpoints(nodes []*Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Addr
	}
	return out
}

// WaitLeader waits until some running node is leader with a valid lease,
// and returns it.
func WaitLeader(t testing.TB, nodes []*Node, timeout time.Duration) *Node {
	t.Helper()
	var lead *Node
	wait.Within(t, timeout, "a leader with a valid lease", func() bool {
		for _, n := range nodes {
			if n.Srv == nil {
				continue
			}
			if st := n.Srv.Status(); st.IsLeader && st.LeaseValid {
				lead = n
				return true
			}
		}
		return false
	})
	return lead
}
