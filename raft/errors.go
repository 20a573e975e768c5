package raft

import (
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/errs"
)

// Sentinel errors. Errors returned by the Node wrap them (test with
// errors.Is). Those a client also sees are internal/errs' own, or Classed
// with the one a client gets (the server encodes them with errs.Encode).
var (
	// ErrConfig: a Config field is invalid.
	ErrConfig = errs.ErrConfig
	// ErrStopped: the node was closed, or stopped after a storage failure.
	ErrStopped = errors.New("raft: node stopped")
	// ErrNotLeader: the request needs the leader; errors carrying it are
	// *NotLeaderError values naming the leader, if known.
	ErrNotLeader = errs.ErrNotLeader
	// ErrProposalDropped: the proposal never entered the log (e.g. the
	// uncommitted tail is full, or leadership was just lost). It is safe to
	// retry.
	ErrProposalDropped = errs.Classed(errs.ErrNotApplied, "raft: proposal dropped")
	// ErrLeaderChanged: leadership changed while a proposal or read was in
	// flight. A proposal may or may not have been applied; retry only
	// idempotent operations, or check first.
	ErrLeaderChanged = errors.New("raft: leader changed; outcome unknown")
	// ErrNoLeader: no leader is known right now (an election is under way).
	ErrNoLeader = errs.Classed(errs.ErrNotApplied, "raft: no leader")
	// ErrTimeout: a read barrier got no answer from the leader in time.
	ErrTimeout = errors.New("raft: request timed out")
	// ErrMemberExists: AddMember or AddVoter named a node already in the
	// cluster.
	ErrMemberExists = errs.Classed(errs.ErrBadRequest, "raft: member already exists")
	// ErrMemberRemoved: AddMember named an id that was a member and was
	// removed. Ids are never reused (as in etcd): the removed node may
	// still run with that id's log and votes. Add the node under a new id.
	ErrMemberRemoved = errs.Classed(errs.ErrBadRequest, "raft: member id was removed; ids are not reused")
	// ErrAddrInUse: AddMember named an address another member has; the
	// new member would never receive what is sent to it.
	ErrAddrInUse = errs.Classed(errs.ErrBadRequest, "raft: address already in use by another member")
	// ErrMemberNotFound: the member change named a node not in the cluster.
	ErrMemberNotFound = errs.Classed(errs.ErrBadRequest, "raft: no such member")
	// ErrNotLearner: PromoteMember named a voter.
	ErrNotLearner = errs.Classed(errs.ErrBadRequest, "raft: member is not a learner")
	// ErrLearnerNotReady: PromoteMember named a learner the leader has not
	// heard from (its node is not running, or cannot be reached) within a
	// few election timeouts: promoted, it would count towards every quorum
	// without voting. The error says what the leader knows of it.
	ErrLearnerNotReady = errs.Classed(errs.ErrBadRequest, "raft: learner not ready to be promoted")
	// ErrNoQuorum: RemoveMember of a voter, or AddVoter, would leave
	// voters of which fewer than a quorum were heard from lately: nothing
	// would commit any more (until the new voter ran), this change's
	// undoing included. The error names the counts.
	ErrNoQuorum = errs.Classed(errs.ErrBadRequest, "raft: the change would leave no quorum of reachable voters")
	// ErrConfChangeBusy: a configuration change cannot be proposed yet: an
	// earlier one is not yet applied, or the learner to promote has not
	// caught up. AddMember and friends retry until their context ends.
	ErrConfChangeBusy = errs.Classed(errs.ErrNotApplied, "raft: configuration change not possible yet")
	// ErrStorage: the node failed on its durable state (the disk refused a
	// write, an fsync failed, Pebble reported an unrecoverable error) and
	// stopped for good; see Node.Failure. Errors carrying it are
	// *StorageError values naming the cause, and also match ErrStopped.
	// A write that fails with it may or may not have been applied: its
	// entry may have reached other nodes, which go on without this one.
	ErrStorage = errs.ErrStorage
	// ErrRemoved: this node was removed from the cluster (its own removal
	// applied here, or a member told it so) and stopped for good; see
	// Node.Failure. Errors carrying it are *RemovedError values, and also
	// match ErrStopped. The data directory refuses to start again: the
	// machine rejoins only with an empty one, under a new member id.
	ErrRemoved = errors.New("the member has been permanently removed from the cluster")
	// ErrTermOverflow: the data directory's durable state holds a term
	// beyond any a peer may name (maxPeerTerm). Only a build that let a
	// forged message's term in (before peer terms were bounded) wrote one;
	// raft would wrap the term at the node's next election and panic, so
	// Open refuses the directory. Replace the member (remove it, and add it
	// back with an empty data directory); if every member holds such a
	// term, restore the cluster from a backup.
	ErrTermOverflow = errors.New("raft: stored term out of range")
)

// StorageError is the error of every request to a node stopped by a
// storage failure (ErrStorage). Err is the cause, as the disk or Pebble
// reported it, e.g. "write /data/000012.log: no space left on device".
type StorageError struct{ Err error }

func (e *StorageError) Error() string { return "raft: storage: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *StorageError) Unwrap() error { return e.Err }

// Cause makes it an errs.Causer: a client is told the cause alone.
func (e *StorageError) Cause() error { return e.Err }

// Is makes errors.Is hold for ErrStorage and ErrStopped: the node is
// stopped.
func (e *StorageError) Is(target error) bool { return target == ErrStorage || target == ErrStopped }

// RemovedError is the failure of a node removed from the cluster
// (ErrRemoved). By is the member that told it, 0 if the node applied its
// own removal.
type RemovedError struct {
	ID, By uint64
}

func (e *RemovedError) Error() string {
	how := "applied its own removal"
	if e.By != 0 {
		how = fmt.Sprintf("told by member %d", e.By)
	}
	return fmt.Sprintf("raft: member %d: %v (%s); to reuse this machine, wipe its data directory and add it again under a new member id",
		e.ID, ErrRemoved, how)
}

// Is makes errors.Is hold for ErrRemoved and ErrStopped: the node is
// stopped.
func (e *RemovedError) Is(target error) bool { return target == ErrRemoved || target == ErrStopped }

// NotLeaderError is returned by requests that need the leader when this
// node is not it. LeaderID is 0 (and LeaderAddr empty) when no leader is
// known; LeaderAddr may also be empty if the leader's address is not.
type NotLeaderError struct {
	LeaderID   uint64
	LeaderAddr string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == 0 {
		return "raft: not the leader (leader unknown)"
	}
	return fmt.Sprintf("raft: not the leader (leader is %d at %q)", e.LeaderID, e.LeaderAddr)
}

// Leader makes it an errs.Redirect: the client is sent to the leader.
func (e *NotLeaderError) Leader() (uint64, string) { return e.LeaderID, e.LeaderAddr }

// Unwrap makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// Is reports whether target is ErrNotLeader or a *NotLeaderError.
func (e *NotLeaderError) Is(target error) bool {
	_, ok := target.(*NotLeaderError)
	return ok || target == ErrNotLeader
}
