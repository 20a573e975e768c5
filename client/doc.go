// Package client is kvd's Go client library.
//
// A Client routes PUT and DELETE to the leader by RPC (following "not
// leader" answers by itself) and serves GET with one-sided READs of a
// server's table region: the server's CPU is not involved. Every value read
// is verified (checksum, key, liveness, and for linearizable reads the
// leader's lease, an expiry read from the region's header and cached per
// connection, judged after the GET's last READ), so a GET
// never returns a torn, mixed or superseded value; when a read cannot be
// proven good within a few retries, the client asks the server by RPC.
//
// A GET costs at most two network round trips, and one for a small value
// (stored inline in its bucket, on a region with arenas). A cached
// location saves bytes (one bucket read instead of two), not a round trip:
// bytes at a remembered offset prove nothing until a slot read before them
// names them (docs/layout.md, "A cached location").
//
// Writes are retried by the client only while no attempt can have taken
// effect; a write that may have been applied fails with ErrUnavailable.
//
// The data model is etcd's: every write gets the next store revision,
// and every key carries a Meta (CreateRevision, ModRevision, Version,
// Lease) with etcd's meanings. GetMeta returns a key's Meta and the
// revision the read was served at; responses carry the store revision.
//
// PutRevision and Delete take IfModRevision, a compare-and-swap on the
// key's mod revision, which fails with a *ConflictError (ErrConflict)
// naming the mod revision the key had; Txn runs etcd-style transactions
// (compares of a key's version, create or mod revision, value or lease,
// then one list of PUT/DELETE/GET operations or the other) as one Raft
// entry. DeleteRange and DeletePrefix delete a range at one revision.
// Both are decided when the entry is applied, never when it is sent, and
// no GET, one-sided or not, sees part of a transaction.
//
// Range and Prefix scan keys in order, by RPC, from a server's applied
// state (linearizable by default, one ReadIndex per page; serializable on
// request), paging through the server's bounded responses by themselves,
// every page at the first page's revision, so that the pages form one
// snapshot; WithRev reads the state at a past revision, until Compact
// (or the servers' auto-compaction) removes it.
//
// Watch streams a key's or prefix's PUT and DELETE events in commit order,
// from now or from a revision (WithFromRevision), served from the
// cluster's stored history by any member, and resumes by itself across
// node failures with no gap and no duplicate; a revision below the
// compaction ends it with a *CompactedError (ErrCompacted).
//
// A Client talks to one cluster: Config.ClusterID, else the one most of
// its endpoints' hellos name, else the first one named. An endpoint of another cluster is refused with a
// *ClusterMismatchError (ErrClusterMismatch) naming both ids; only Status
// answers from any node, so that a tool can show which cluster each is of.
//
// Errors wrap the package's sentinels (ErrNotFound, ErrValueTooLarge,
// ErrNoSpace, ErrUnavailable, ...); test them with errors.Is. A request no
// endpoint could serve fails with ErrUnavailable naming each endpoint once
// with its cause, and ErrNoLeader when the nodes knew no leader; it fails
// before its deadline when every endpoint refused the connection, is not a
// kvd endpoint (ErrNotEndpoint) or is of another cluster.
package client
