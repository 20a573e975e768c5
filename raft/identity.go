package raft

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

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
	if err := n.checkJoinTarget(); err != nil {
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

// checkJoinTarget refuses Join for a data directory that already belongs
// to a cluster other than the one the node is asked to join: joined, it
// would keep its own cluster, and the members it was told to join would be
// refused at its door for as long as it runs. A restart of a member that
// joined (or was an initial member) with Join still given, as a service
// unit keeps it, is that member restarting, as etcd ignores
// --initial-cluster-state for an existing member: the data directory wins,
// and Join changes nothing.
//
// The directory's address book tells the two apart. Once the node applied
// a configuration, the book holds every member it has known, the removed
// ones as tombstones, so a member of the cluster it was asked to join knows
// one of the members InitialCluster names (or, with none named, some member
// other than itself); a directory that bootstrapped a cluster of its own
// (started once without Join) knows only itself, or members InitialCluster
// does not name. A directory with an empty book (new, or joined and not yet
// sent a configuration) is left to the cluster-id check of the peer layer.
func (n *Node) checkJoinTarget() error {
	if !n.cfg.Join || n.store.ClusterID() == 0 {
		return nil
	}
	var known []uint64 // the members the book holds, other than this node
	for _, m := range n.store.Members() {
		if m.ID != n.cfg.ID {
			known = append(known, m.ID)
		}
	}
	others := 0
	for id := range n.cfg.InitialCluster {
		if id == n.cfg.ID {
			continue
		}
		others++
		if _, ok := n.store.Member(id); ok || n.store.Removed(id) {
			return n.logJoinIgnored()
		}
	}
	switch {
	case n.store.NumMembers() == 0:
		return nil
	case others == 0 && len(known) > 0:
		return n.logJoinIgnored()
	}
	slices.Sort(known)
	how := fmt.Sprintf("which member %d created alone (it was started without --join)", n.cfg.ID)
	if len(known) > 0 {
		how = fmt.Sprintf("whose members %s are none of --initial-cluster's", joinIDs(known))
	}
	target := "the other cluster"
	if len(n.cfg.InitialCluster) > 0 {
		target = "the cluster of --initial-cluster " + describeMembers(n.cfg.InitialCluster)
	}
	return fmt.Errorf("%w: --join, but %s already holds cluster %016x, %s; "+
		"to join %s, wipe the data dir (rm -rf %s) and start again with --join; "+
		"to run as the member it is, drop --join",
		ErrClusterMismatch, n.cfg.DataDir, n.store.ClusterID(), how, target, n.cfg.DataDir)
}

func (n *Node) logJoinIgnored() error {
	n.log.Info("--join ignored: the data directory is already a member of the cluster; restarting as that member",
		"cluster_id", fmt.Sprintf("%016x", n.store.ClusterID()))
	return nil
}

func joinIDs(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

// describeMembers renders a member list as --initial-cluster spells it.
func describeMembers(m map[uint64]string) string {
	parts := make([]string, 0, len(m))
	for _, id := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d=%s", id, m[id]))
	}
	return strings.Join(parts, ",")
}
