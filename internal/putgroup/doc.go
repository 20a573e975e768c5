// Package putgroup commits concurrent PUTs in groups, for a front that
// serves another protocol over kvd's client (internal/redisapi's plain
// SET). While a group is being committed the PUTs that arrive wait; the
// first one back from the cluster hands the waiting ones on as one kvd
// transaction of puts. Fifty clients writing cost a few transactions per
// Raft round instead of fifty requests, each with its own proposal, apply,
// reply and wake-ups on the leader: most of a small PUT's cost is there,
// not in its bytes. A lone PUT is still a PUT.
//
// A caller may also give a run of PUTs at once (PutAll: a connection's
// pipelined SETs): they queue contiguously, in order, so they share
// groups and a later one never commits before an earlier one.
//
// A group is atomic, and every PUT in it was waiting for its reply while
// it committed, so the PUTs are concurrent and applying them together is
// a serial order the cluster could have chosen: linearizable. What shows
// is that the keys of a group share one revision, as a transaction's do,
// and that of two PUTs of one key in a group only the later value is put
// (the earlier one is overwritten at the same instant, and no read can
// fall between them). So it suits Redis' SET, which shows no revisions,
// and not etcd's Put, whose every write has a revision of its own (the
// model internal/chaos checks etcd's API against).
//
// With Config.Revisions a group is instead one batch (client.PutBatch):
// one request and one Raft entry whose PUTs are applied one after the
// other, each at a revision of its own and with an outcome of its own,
// exactly as PUTs proposed back to back would be. That suits etcd's Put
// (internal/etcdapi), and two PUTs of one key in a group are two writes.
//
// A group that fails fails each of its PUTs with the error a lone PUT
// would have had, a write that may have been applied included. A PUT that
// kvd would refuse (an empty or too long key, a too large value) is sent
// alone, so that the refusal is its own. A group commits under its
// committer's deadline but not its cancellation: a caller that gives up on
// its own PUT fails no other.
package putgroup
