package wire

// NodeStatus is the JSON payload of an OpStatus response.
type NodeStatus struct {
	ID uint64 `json:"id"`
	// ClusterID is the node's cluster (empty from a node that does not
	// know it yet, or is older than the field).
	ClusterID ClusterID `json:"cluster_id,omitempty"`
	LeaderID  uint64    `json:"leader_id"`
	Term      uint64    `json:"term"`
	Commit    uint64    `json:"commit_index"`
	Applied   uint64    `json:"applied_index"`
	IsLeader  bool      `json:"is_leader"`
	IsLearner bool      `json:"is_learner"`
	// LeaseValid: the node leads and its raft read lease (which lets it
	// serve linearizable reads without a quorum round) has not lapsed.
	// Nothing to do with TTL leases (kvctl lease).
	LeaseValid bool `json:"lease_valid"`
	Keys       int  `json:"keys"`
	// DBSize is the bytes the node's Pebble database takes on disk (log,
	// snapshots and applied state).
	DBSize uint64 `json:"db_size"`
	// TableFill is how full the node's table region is, 0 to 1
	// (kvd_table_fill_ratio): writes are refused at 1.
	TableFill float64 `json:"table_fill"`
	Transport string  `json:"transport"`
	// StorageError is why the node stopped on a storage failure (the
	// disk's error, e.g. "write /data/000012.log: no space left on
	// device"); empty while it runs. A node with one serves nothing more
	// and must be restarted once the disk is fixed.
	StorageError string `json:"storage_error,omitempty"`
}

// Member is one element of an OpMemberList response's JSON array.
type Member struct {
	ID   uint64 `json:"id"`
	Addr string `json:"addr"` // the peer address, which members dial
	// ClientAddr is the address clients reach the member at, as the
	// member announced it to the answering node when it last connected
	// to it (its peer address, unless it listens for peers apart): "" if
	// it has not connected to that node since it started (the leader
	// hears from every member that is up), or from a node of an older
	// version.
	ClientAddr string `json:"client_addr,omitempty"`
	IsLearner  bool   `json:"is_learner"`
}
