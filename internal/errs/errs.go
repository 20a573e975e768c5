package errs

import (
	"errors"
	"fmt"
)

// Sentinels a client sees (package client re-exports each under the same
// name). Test with errors.Is.
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("kvd: key not found")
	// ErrEmptyKey: keys must be at least one byte.
	ErrEmptyKey = errors.New("kvd: empty key")
	// ErrKeyTooLarge: the key is longer than limits.MaxKey bytes.
	ErrKeyTooLarge = errors.New("kvd: key too large")
	// ErrValueTooLarge: the value is longer than limits.MaxValue bytes.
	ErrValueTooLarge = errors.New("kvd: value too large")
	// ErrNoSpace: the table region is full (its record area, or both of a
	// key's candidate buckets); nothing was changed.
	ErrNoSpace = errors.New("kvd: no space in table")
	// ErrNotLeader: the node asked is not the leader. See NotLeaderError.
	ErrNotLeader = errors.New("kvd: not leader")
	// ErrUnavailable: no node could serve the request in time. A write
	// that failed this way may or may not have been applied, unless the
	// error also wraps ErrNotApplied.
	ErrUnavailable = errors.New("kvd: unavailable")
	// ErrNotApplied: the request provably had no effect (it was never sent,
	// or every node that saw it refused it before proposing it), so it is
	// safe to retry even if it is a write. An ErrUnavailable without it
	// means "maybe applied". A server-side error Classed with it (a
	// proposal dropped, no leader yet) goes on the wire as StatusRetry.
	ErrNotApplied = errors.New("kvd: not applied")
	// ErrBadRequest: the server refused the request as malformed, or as
	// breaking a limit; retrying it as is cannot help.
	ErrBadRequest = errors.New("kvd: bad request")
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("kvd: client closed")
	// ErrPermissionDenied: the server refused the request because of the
	// client's credential (a read-only TLS client certificate asked for a
	// write). Nothing was applied.
	ErrPermissionDenied = errors.New("kvd: permission denied")
	// ErrUnauthenticated: a node refused the client's credential, or the
	// client refused the node's proof, or the two disagree about
	// authenticating. Retrying with the same configuration cannot help.
	ErrUnauthenticated = errors.New("kvd: unauthenticated")
	// ErrStorage: the node stopped on a storage failure (its disk is full
	// or read-only, or an fsync failed) and serves nothing more until it is
	// restarted. A write that failed this way may or may not have been
	// applied (its entry may have reached other nodes).
	ErrStorage = errors.New("kvd: storage")
	// ErrConflict: a conditional write found the key at another version
	// when it was applied, so it applied nothing.
	ErrConflict = errors.New("kvd: conflict")
	// ErrLeaseNotFound: the TTL lease does not exist (never granted,
	// revoked, or expired), or the leader has begun expiring it. A write
	// naming it applied nothing.
	ErrLeaseNotFound = errors.New("kvd: lease not found")
	// ErrLeaseExists: a lease grant named an id another lease has (etcd's
	// "lease already exists"); nothing was applied. It is also a bad
	// request: retrying it as is cannot help.
	ErrLeaseExists = Classed(ErrBadRequest, "kvd: lease already exists")
	// ErrCompacted: a read at a revision, or a watch from one, needs
	// history the cluster has compacted away (etcd's words).
	ErrCompacted = errors.New("mvcc: required revision has been compacted")
	// ErrFutureRevision: a read at a revision, or a compaction to one,
	// names a revision the store has not reached (etcd's words).
	ErrFutureRevision = errors.New("mvcc: required revision is a future revision")
	// ErrLeaseExpired: a KeepAlive could not renew its lease before the
	// lease's TTL ran out by the holder's own reckoning.
	ErrLeaseExpired = errors.New("kvd: lease expired")
	// ErrSnapshotStream: a backup stream broke off or did not check out.
	ErrSnapshotStream = errors.New("kvd: snapshot stream incomplete")
	// ErrSessionExpired: a concurrency session's lease is gone or may be.
	ErrSessionExpired = errors.New("kvd: session expired")
	// ErrClusterMismatch: an endpoint belongs to another cluster than the
	// client's (see ClusterMismatchError). The client never sends it a
	// request.
	ErrClusterMismatch = errors.New("kvd: wrong cluster")
	// ErrNotEndpoint: the address answers, but not as a kvd client
	// endpoint (a metrics or other HTTP port, some other service).
	ErrNotEndpoint = errors.New("not a kvd endpoint")
	// ErrNoLeader: the nodes that answered know no leader: an election is
	// under way, or too few members are reachable for one (quorum lost).
	ErrNoLeader = errors.New("no leader")
)

// ClusterMismatchError names an endpoint of another cluster and both ids.
// errors.Is(err, ErrClusterMismatch) holds for it.
type ClusterMismatchError struct {
	Endpoint string
	Got      uint64 // the endpoint's cluster
	Want     uint64 // the client's
	// From says where the client's id came from (the endpoints it was
	// learned from), or is "" when the client was configured with it.
	From string
}

func (e *ClusterMismatchError) Error() string {
	from := "the cluster id this client was given"
	if e.From != "" {
		from = "learned from " + e.From
	}
	return fmt.Sprintf("kvd: wrong cluster: %s is a member of cluster %016x, not of cluster %016x (%s)",
		e.Endpoint, e.Got, e.Want, from)
}

// Is makes errors.Is(err, ErrClusterMismatch) hold.
func (e *ClusterMismatchError) Is(target error) bool { return target == ErrClusterMismatch }

// Sentinels of the server side.
var (
	// ErrConfig: a configuration field is invalid. Every component's
	// Validate wraps it (raft.ErrConfig, tcp.ErrConfig, rdma.ErrConfig and
	// the bench packages' ErrConfig are this error).
	ErrConfig = errors.New("kvd: invalid config")
	// ErrTooManyWatchers: the node holds as many watches as it may.
	ErrTooManyWatchers = errors.New("kvd: too many watches on this node")
	// ErrBackupFormat: the bytes are not a backup file.
	ErrBackupFormat = errors.New("kvd: backup file malformed")
	// ErrBackupTruncated: the backup file ends early.
	ErrBackupTruncated = errors.New("kvd: backup file truncated")
	// ErrBackupChecksum: the backup file's checksum does not match.
	ErrBackupChecksum = errors.New("kvd: backup file checksum mismatch (the file is damaged)")
)

// Classed returns a new sentinel with message msg that errors.Is also
// matches as class (one of the sentinels above): how a lower layer says
// what its own error is to a client, e.g. raft's "member already exists"
// is a bad request, without knowing about statuses. Wrap it as any
// sentinel; errors.Is(err, itself) holds as for errors.New.
func Classed(class error, msg string) error { return &classed{msg: msg, class: class} }

type classed struct {
	msg   string
	class error
}

func (e *classed) Error() string        { return e.msg }
func (e *classed) Is(target error) bool { return target == e.class }
