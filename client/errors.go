package client

import (
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/errs"
)

// Sentinel errors. Every error the client returns for one of these conditions
// wraps the sentinel, so test with errors.Is. (They are kvd's own, declared
// once in internal/errs, so the server's errors and the client's match.)
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errs.ErrNotFound
	// ErrEmptyKey: keys must be at least one byte.
	ErrEmptyKey = errs.ErrEmptyKey
	// ErrKeyTooLarge: the key is longer than MaxKey bytes.
	ErrKeyTooLarge = errs.ErrKeyTooLarge
	// ErrValueTooLarge: the value is longer than MaxValue bytes.
	ErrValueTooLarge = errs.ErrValueTooLarge
	// ErrNoSpace: the server's table region is full; nothing was changed.
	ErrNoSpace = errs.ErrNoSpace
	// ErrNotLeader: the node asked is not the leader. The client follows the
	// leader by itself; this surfaces only when it cannot. See NotLeaderError.
	ErrNotLeader = errs.ErrNotLeader
	// ErrUnavailable: no endpoint could serve the request in time. A write
	// that failed this way may or may not have been applied, unless the
	// error also wraps ErrNotApplied.
	ErrUnavailable = errs.ErrUnavailable
	// ErrNotApplied: the request provably had no effect (it was never sent,
	// or every node that saw it refused it before proposing it), so it is
	// safe to retry even if it is a write. An ErrUnavailable without it
	// means "maybe applied".
	ErrNotApplied = errs.ErrNotApplied
	// ErrBadRequest: the server refused the request as malformed.
	ErrBadRequest = errs.ErrBadRequest
	// ErrClosed: the client was closed.
	ErrClosed = errs.ErrClosed
	// ErrPermissionDenied: the server refused the request because of the
	// client's credential (a read-only TLS client certificate asked for a
	// PUT, DELETE or membership change). Nothing was applied.
	ErrPermissionDenied = errs.ErrPermissionDenied
	// ErrUnauthenticated: a node refused the client's credential (a wrong
	// or missing key), or the client refused the node's proof, or the two
	// disagree about authenticating. Retrying with the same Config cannot
	// help, so the client does not: it fails at the first such refusal.
	// Nothing was sent, so the error also wraps ErrNotApplied.
	ErrUnauthenticated = errs.ErrUnauthenticated
	// ErrStorage: the node stopped on a storage failure (its disk is full
	// or read-only, or an fsync failed); the error names the cause. The
	// node serves nothing more until it is restarted, and the cluster goes
	// on without it. A write that failed this way may or may not have been
	// applied (its entry may have reached other nodes).
	ErrStorage = errs.ErrStorage
	// ErrConflict: a conditional write (IfModRevision) found the key at
	// another mod revision when it was applied, so it applied nothing.
	// Errors carrying it are *ConflictError values naming the key's mod
	// revision.
	ErrConflict = errs.ErrConflict
	// ErrLeaseNotFound: the TTL lease does not exist (never granted,
	// revoked, or expired). A PUT with it applied nothing.
	ErrLeaseNotFound = errs.ErrLeaseNotFound
	// ErrCompacted: a read at a revision, or a watch from one, below the
	// cluster's compaction revision (Compact, or the servers'
	// auto-compaction); a compaction to a revision already compacted.
	// A watch's error is a *CompactedError naming the oldest revision
	// available.
	ErrCompacted = errs.ErrCompacted
	// ErrFutureRevision: a read at, or a compaction to, a revision the
	// store has not reached.
	ErrFutureRevision = errs.ErrFutureRevision
	// ErrClusterMismatch: an endpoint belongs to another cluster than the
	// client's (the one in Config.ClusterID, else the first one an
	// endpoint named). The client sends it nothing and moves on to the
	// other endpoints. Errors carrying it are *ClusterMismatchError values
	// naming the endpoint and both ids.
	ErrClusterMismatch = errs.ErrClusterMismatch
	// ErrNotEndpoint: an address answered, but not as a kvd client
	// endpoint (a metrics port, say): the error names it.
	ErrNotEndpoint = errs.ErrNotEndpoint

	// errHelloRefused marks a node that refused the client's hello itself:
	// asking it again cannot help (failures.refused).
	errHelloRefused = errors.New("the node refused this client")
	// ErrNoLeader: a request failed (ErrUnavailable) while the nodes that
	// answered knew no leader: an election was under way, or too few
	// members were up to elect one (quorum lost).
	ErrNoLeader = errs.ErrNoLeader
)

// ClusterMismatchError names an endpoint of another cluster, its cluster
// and the client's. errors.Is(err, ErrClusterMismatch) holds for it.
type ClusterMismatchError = errs.ClusterMismatchError

// CompactedError ends a watch whose history is gone: it needed the events
// from revision Requested on, and the history holds them only from Oldest
// on (the compaction revision + 1). Read the keys again (Range, Prefix)
// and watch from the read's Revision+1 (see WithFromRevision).
type CompactedError struct {
	Requested uint64
	Oldest    uint64
	Reason    string // the server's words: compacted, or a slow watcher dropped
}

func (e *CompactedError) Error() string {
	s := fmt.Sprintf("kvd: mvcc: required revision has been compacted: revision %d requested, oldest available %d", e.Requested, e.Oldest)
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

// Is makes errors.Is(err, ErrCompacted) hold.
func (e *CompactedError) Is(target error) bool { return target == ErrCompacted }

// ConflictError is the error of a conditional write whose condition did
// not hold when its entry was applied: Key was at ModRevision (0: it did
// not exist), not at Expected. Nothing was applied. It is definite: the
// client never retries a write that may have been applied, so the conflict
// cannot be with the write's own earlier attempt.
type ConflictError struct {
	Key         []byte
	ModRevision uint64 // the key's mod revision when the write was applied; 0: absent
	Expected    uint64 // the mod revision the write required; 0: absent
}

func (e *ConflictError) Error() string {
	switch {
	case e.ModRevision == 0:
		return fmt.Sprintf("kvd: conflict: key %q does not exist (expected mod revision %d)", e.Key, e.Expected)
	case e.Expected == 0:
		return fmt.Sprintf("kvd: conflict: key %q exists at mod revision %d (expected it absent)", e.Key, e.ModRevision)
	}
	return fmt.Sprintf("kvd: conflict: key %q is at mod revision %d, not %d", e.Key, e.ModRevision, e.Expected)
}

// Is makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// NotLeaderError says which node leads, when the asked node knows.
// errors.Is(err, ErrNotLeader) holds for it.
type NotLeaderError = errs.NotLeaderError
