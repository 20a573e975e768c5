package raft

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kvd-project/kvd/raft/internal/store"
)

// Cluster identity. Every peer hello carries the sender's cluster id, and a
// node serves only hellos of its own cluster, so a node of another cluster
// (an operator's mistake: a reused address, a wrong --initial-cluster) is
// refused at the door instead of feeding its log and terms to this one.
//
// The id is fixed when the cluster is created. Its initial members bootstrap
// independently, so each derives it from what they all share, as etcd does:
// the cluster token and the sorted initial member list, ids and addresses
// (clusterIDFor). It is stored in the node's Pebble database before the
// bootstrap entries are written, and from then on the stored id is the
// node's: a restart whose token or initial members give another id is
// refused with ErrClusterMismatch, since the flags then describe some other
// cluster than the data.
//
// A joining node has no initial member list to derive from. It learns the
// id from the first peer session it accepts from a member it was told to
// join (Config.InitialCluster), persists it (synced) before that session's
// first message reaches raft, and is as strict as any other node from then on.
// That is safe: before it is added the node has no log, term, vote or
// membership, so the only thing that first session decides is which cluster
// the empty node will belong to, and it comes from a node the operator named
// as a member. The cluster itself only talks to the node once the leader has
// applied its member-add, so in practice the first session is that leader's.
// Were the first session a stranger's (a wrong --initial-cluster, or an
// attacker who got there first), the node would adopt the wrong id and then
// refuse the real cluster, loudly (refusals are logged and counted on both
// sides of the attempt); it cannot take the real cluster's nodes anywhere,
// because they check their own stored id.
//
// The id is not a secret and not authentication: it travels in clear in
// every hello. It stops accidents and blind forgeries (an attacker must
// first learn it and a member id); authenticating peers needs TLS.

// DefaultClusterToken is Config.InitialClusterToken's default.
const DefaultClusterToken = "kvd-cluster"

// maxClusterToken bounds Config.InitialClusterToken.
const maxClusterToken = 256

// ErrClusterMismatch: the node's data belongs to another cluster than its
// configuration describes.
var ErrClusterMismatch = errors.New("raft: data directory belongs to another cluster")

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

// clusterIDFor derives a new cluster's id from its token and initial members
// (id and address of each, in id order): every initial member computes the
// same id. It is never 0, which hellos use for "no cluster".
func clusterIDFor(token string, peers map[uint64]string) uint64 {
	if token == "" {
		token = DefaultClusterToken
	}
	h := sha256.New()
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(token)))
	b = append(b, token...)
	for _, id := range slices.Sorted(maps.Keys(peers)) {
		addr := peers[id]
		b = binary.LittleEndian.AppendUint64(b, id)
		b = binary.AppendUvarint(b, uint64(len(addr)))
		b = append(b, addr...)
	}
	h.Write(b)
	id := binary.LittleEndian.Uint64(h.Sum(nil))
	if id == 0 {
		id = 1
	}
	return id
}

// restoredClusterID is the id of a cluster restored (Restore) from the
// backup whose checksum is sum, for the id base its token and members
// derive: every member restored from that backup computes the same id, and
// members restored from different backups (a state each, at an index each)
// get different ones and refuse each other's sessions. Without the backup in
// the id, raft would take their snapshots at (index, RestoreTerm) for one
// log and the members would serve different states for good. An empty sum
// (not restored) leaves base as it is.
func restoredClusterID(base uint64, sum []byte) uint64 {
	if len(sum) == 0 {
		return base
	}
	h := sha256.New()
	h.Write(binary.LittleEndian.AppendUint64(nil, base))
	h.Write(sum)
	id := binary.LittleEndian.Uint64(h.Sum(nil))
	if id == 0 {
		id = 1
	}
	return id
}

// identity is the node's cluster id as the peer code uses it: known from
// Open on, except on a joining node that has yet to learn it.
type identity struct {
	id atomic.Uint64
	mu sync.Mutex // orders learners
}

func (i *identity) get() uint64 { return i.id.Load() }

// ClusterID is the id of the cluster this node belongs to, or 0 while a
// joining node has not yet been contacted by the cluster.
func (n *Node) ClusterID() uint64 { return n.peers.ident.get() }

// initIdentity settles the node's cluster id before raft starts: the stored
// one, checked against the configuration, or (on a new or pre-identity
// store) the one the configuration derives, stored. A joining node without
// a stored id starts without one (see learnCluster).
func (n *Node) initIdentity() error {
	st, cfg := n.store, n.cfg
	stored := st.ClusterID()
	if cfg.Join {
		n.peers.ident.id.Store(stored)
		if stored == 0 {
			n.log.Info("joining: the cluster id will be learned from the first member that contacts this node")
		}
		return nil
	}
	want := clusterIDFor(cfg.InitialClusterToken, cfg.InitialCluster)
	sum, err := st.RestoredFrom()
	if err != nil {
		return fmt.Errorf("raft: read the backup this node was restored from: %w", err)
	}
	want = restoredClusterID(want, sum)
	switch {
	case stored == 0:
		if err := st.SetClusterID(want); err != nil {
			return fmt.Errorf("raft: record cluster id: %w", err)
		}
		n.log.Info("cluster id recorded", "cluster_id", fmt.Sprintf("%016x", want))
	case stored != want:
		return fmt.Errorf("%w: %s holds data of cluster %016x, but cluster token %q with initial members %s "+
			"make cluster %016x: start it with the token and initial members the cluster was created with "+
			"(or with Join, if it joined the cluster)",
			ErrClusterMismatch, cfg.DataDir, stored, tokenOrDefault(cfg.InitialClusterToken), describePeers(cfg.InitialCluster), want)
	}
	n.peers.ident.id.Store(want)
	return nil
}

// learnCluster adopts id as the cluster of a joining node that has none yet,
// persisting it first; it reports whether id is (now) the node's cluster.
// Callers have checked the session it came from belongs to a member.
func (n *Node) learnCluster(id, from uint64) (bool, error) {
	ident := &n.peers.ident
	ident.mu.Lock()
	defer ident.mu.Unlock()
	if cur := ident.get(); cur != 0 {
		return cur == id, nil
	}
	if err := n.store.SetClusterID(id); err != nil {
		if errors.Is(err, store.ErrClusterID) {
			return false, nil
		}
		return false, err
	}
	ident.id.Store(id)
	n.log.Info("cluster id learned from a member", "cluster_id", fmt.Sprintf("%016x", id), "peer", from)
	return true, nil
}

func tokenOrDefault(token string) string {
	if token == "" {
		return DefaultClusterToken
	}
	return token
}

// describePeers renders a member list as --initial-cluster spells it.
func describePeers(peers map[uint64]string) string {
	parts := make([]string, 0, len(peers))
	for _, id := range slices.Sorted(maps.Keys(peers)) {
		parts = append(parts, fmt.Sprintf("%d=%s", id, peers[id]))
	}
	return strings.Join(parts, ",")
}

// newClusterLoop settles the node's cluster id (initIdentity) before the
// loop is built, since building it may bootstrap the cluster: the id is on
// disk before the first entry is.
func newClusterLoop(n *Node) (*loop, error) {
	if err := n.checkNodeID(); err != nil {
		return nil, err
	}
	if err := n.initIdentity(); err != nil {
		return nil, err
	}
	return newLoop(n)
}
