package raft

import (
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/raft/peer"
)

// A node's identity: the member its data directory belongs to (here) and
// the cluster it belongs to (the peer layer's: raft/peer/identity.go).

// DefaultClusterToken is Config.InitialClusterToken's default.
const DefaultClusterToken = peer.DefaultClusterToken

// maxClusterToken bounds Config.InitialClusterToken.
const maxClusterToken = 256

// ErrClusterMismatch: the node's data belongs to another cluster than its
// configuration describes.
var ErrClusterMismatch = peer.ErrClusterMismatch

// ErrNodeMismatch: the node's data directory belongs to another member of
// the cluster than its configured id (two nodes' directories swapped, or a
// copy of one node's directory started as another): its log, term and vote
// are that member's, and raft's safety rests on each member's vote being
// its own.
var ErrNodeMismatch = errors.New("raft: data directory belongs to another member")

// checkNodeID records the node's id in a store that has none (new, or from
// before ids were recorded) and refuses a store that belongs to another id.
func (n *Node) checkNodeID() error {
	stored, err := n.store.NodeID()
	switch {
	case err != nil:
		return fmt.Errorf("raft: read the member id this data directory belongs to: %w", err)
	case stored == 0:
		if err := n.store.SetNodeID(n.cfg.ID); err != nil {
			return fmt.Errorf("raft: record the member id: %w", err)
		}
	case stored != n.cfg.ID:
		return fmt.Errorf("%w: %s holds the data of member %d, but this node is member %d: start member %d from its own data directory",
			ErrNodeMismatch, n.cfg.DataDir, stored, n.cfg.ID, n.cfg.ID)
	}
	return nil
}

// newClusterLoop settles the node's identity, member and cluster, and
// starts its peer layer before the loop is built, since building it may
// bootstrap the cluster: the ids are on disk before the first entry is.
func newClusterLoop(n *Node, newNet newNetwork) (*loop, error) {
	if err := n.checkNodeID(); err != nil {
		return nil, err
	}
	if err := n.checkNotRemoved(); err != nil {
		return nil, err
	}
	cfg := n.cfg
	cluster, err := peer.SettleClusterID(n.store,
		peer.Cluster{Token: cfg.InitialClusterToken, Peers: cfg.InitialCluster, Join: cfg.Join, DataDir: cfg.DataDir}, n.log)
	if err != nil {
		return nil, err
	}
	if n.peers, err = newNet(n, cluster); err != nil {
		return nil, err
	}
	return newLoop(n)
}
