package raft

import (
	"log/slog"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/kvd-project/kvd/internal/store"
)

// StateMachine is what the node replicates. The raft loop calls it, one
// call at a time, from its own goroutine; every call must be quick (every
// write and every heartbeat waits for it). For each Ready that commits
// entries the loop calls Apply (evaluated into the Ready's one Pebble
// batch); it commits the batch, then calls Committed, for every Ready.
// Lead comes as a Ready changes leadership, Tick between Readies.
type StateMachine interface {
	// Open is called once, before the loop starts, with the node's
	// store: load whatever the state machine keeps in memory from the
	// applied state (Store.Applied is the applied index).
	Open(env Env) error
	// Apply evaluates ents, the Ready's committed entries in log order,
	// into u (the Pebble batch that also holds the Ready's log entries,
	// HardState and new applied index, so a restart sees all of it or
	// none). Entries other than pb.EntryNormal, and normal entries with
	// no data (a new leader's empty entry), are the loop's: skip them.
	// It appends to out the outcome of every entry a caller may wait on
	// (the loop completes those proposed on this node, by ReqID) and
	// returns it. If it will publish writes in Committed, it must say so
	// to its cache before returning, because u commits next: the cache
	// may then hold back readers that would see Pebble ahead of it. An
	// error is the store's: the node stops.
	Apply(u *store.Update, ents []*pb.Entry, out []Outcome) ([]Outcome, error)
	// Committed is called once per Ready, after its batch committed (or,
	// pipelined, when Pebble applied it and its fsync covers only newer
	// entries: the committed entries were durable already, see
	// "Pipelining" in doc.go), and before the next batch commits: the
	// state machine publishes what Apply evaluated, so a cache never
	// shows what a restart would lose and Pebble is never more than one
	// batch ahead of it. applied is the node's applied index. installed:
	// the batch installed a snapshot from the leader, which replaced the
	// whole applied state (the in-memory state must be reloaded from the
	// store). The local callers of the batch's entries are completed
	// right after it returns.
	Committed(applied uint64, installed bool)
	// Lead is called when this node becomes the leader (true) and when it
	// stops being the leader (false), before the Ready that changed it is
	// persisted.
	Lead(leader bool)
	// Tick is called while this node leads, each time the loop takes
	// due raft ticks. propose queues a command for the next batch, as a
	// local proposal nobody waits on.
	Tick(propose func(Encode))
}

// Env is the node's side of a StateMachine, given to Open.
type Env struct {
	// ID is this node's id: the proposer of the entries it proposes.
	ID uint64
	// Store is the node's store. Read it from the loop's calls, or
	// elsewhere through Node.Acquire.
	Store *store.Store
	// ElectionTimeout is the election timeout in wall-clock time.
	ElectionTimeout time.Duration
	// Logger is the node's logger.
	Logger *slog.Logger
}

// Encode makes the data of an entry proposed by node proposer for the
// request reqID; the state machine finds both in the entry again when it
// applies it (Outcome), so that the proposer's caller learns its outcome.
// Request ids start at a random value at each Open, so an entry proposed
// by an earlier incarnation of a node cannot complete a new caller's
// request.
type Encode func(proposer, reqID uint64) []byte

// Outcome is the state machine's answer to one applied entry.
type Outcome struct {
	// Proposer and ReqID name the proposal the entry came from (from its
	// data): the loop completes it if Proposer is this node.
	Proposer, ReqID uint64
	// Index is the entry's raft index.
	Index uint64
	// Value is what the caller receives (Proposed.Value); nil for none.
	Value any
	// Err fails the caller's request; the entry still is in the log.
	Err error
}

// Admission is the condition a proposal enters the log under. A caller
// that sizes a write against this node's state before proposing it (the
// server reserves table room) admits it only while Status.LeaderReady and
// passes the term it admitted in (Status.Term): the write then enters the
// log only in that term, with the leader still ready, or fails with
// ErrProposalDropped (never in the log: safe to retry). See "Admission"
// in batch.go. The zero Admission proposes in any term.
type Admission struct {
	// Term is the term of the admission; 0: any; NotAdmitted: none.
	Term uint64
}

// NotAdmitted, as an Admission's Term, marks a write its caller did not
// admit because the node was not the leader when it looked: should the
// node lead by the time the write reaches the loop, it is dropped
// (ErrProposalDropped) rather than proposed without the caller's checks.
const NotAdmitted = ^uint64(0)

// Proposed is the outcome of a proposal: the entry's raft index and the
// state machine's Outcome.Value for it.
type Proposed struct {
	Index uint64
	Value any
}
