package wire

// NodeStatus is the JSON payload of an OpStatus response.
type NodeStatus struct {
	ID         uint64 `json:"id"`
	LeaderID   uint64 `json:"leader_id"`
	Term       uint64 `json:"term"`
	Commit     uint64 `json:"commit_index"`
	Applied    uint64 `json:"applied_index"`
	IsLeader   bool   `json:"is_leader"`
	LeaseValid bool   `json:"lease_valid"`
	Keys       int    `json:"keys"`
	Transport  string `json:"transport"`
}

// Member is one element of an OpMemberList response's JSON array.
type Member struct {
	ID        uint64 `json:"id"`
	Addr      string `json:"addr"`
	IsLearner bool   `json:"is_learner"`
}
