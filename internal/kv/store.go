package kv

import (
	"context"
	"fmt"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/raft"
)

// Store is a raft node replicating the key/value state machine: writes
// (Put, Delete, Txn, the lease commands) are proposed through the node,
// reads come from its applied state in Pebble. All methods are safe for
// concurrent use.
type Store struct {
	cfg  Config
	node *raft.Node
	m    *machine
}

// Open starts a node replicating the key/value state machine, as
// raft.Open does (it recovers cfg.Raft.DataDir or bootstraps a group).
// Publisher calls may come as soon as Open returns.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	met, err := newMetrics(cfg.Raft.Registerer)
	if err != nil {
		return nil, fmt.Errorf("raft: register metrics: %w", err)
	}
	m := newMachine(cfg, met)
	rc := cfg.Raft
	rc.StateMachine = m
	n, err := raft.Open(rc)
	if err != nil {
		met.unregister(cfg.Raft.Registerer)
		return nil, err
	}
	return &Store{cfg: cfg, node: n, m: m}, nil
}

// Close stops the node (raft.Node.Close). It is idempotent.
func (s *Store) Close() error {
	err := s.node.Close()
	s.m.metrics.unregister(s.cfg.Raft.Registerer)
	return err
}

// Node is the raft node: status, read barriers, membership.
func (s *Store) Node() *raft.Node { return s.node }

// Put replicates key=value and returns once the write is committed and
// applied on this node; rev is the store revision it wrote at (the key's
// mod revision). Only the
// leader accepts writes: elsewhere the error is a *raft.NotLeaderError.
// Errors wrapping raft.ErrLeaderChanged, or the context's, leave the
// outcome unknown. adm is the write's admission (raft.Admission).
func (s *Store) Put(ctx context.Context, key, value []byte, adm raft.Admission) (rev uint64, err error) {
	rev, _, err = s.put(ctx, opPut, key, value, adm)
	return rev, err
}

// PutPrev is Put that also returns the key's previous value and metadata
// (nil: the key did not exist), etcd's prev_kv.
func (s *Store) PutPrev(ctx context.Context, key, value []byte, adm raft.Admission) (rev uint64, prev *KV, err error) {
	return s.put(ctx, opPutPrev, key, value, adm)
}

func (s *Store) put(ctx context.Context, op byte, key, value []byte, adm raft.Admission) (uint64, *KV, error) {
	if err := checkKV(key, value); err != nil {
		return 0, nil, err
	}
	r, err := s.node.Propose(ctx, adm, command{op: op, key: key, value: value}.encoder())
	res, _ := r.Value.(writeResult)
	return res.rev, res.prev, err
}

// Delete replicates the removal of key, like Put. existed tells whether the
// key was present when the delete was applied; rev is the store revision
// after it (its own if it deleted the key: deleting nothing changes no
// revision).
func (s *Store) Delete(ctx context.Context, key []byte) (existed bool, rev uint64, err error) {
	if err := checkKV(key, nil); err != nil {
		return false, 0, err
	}
	r, err := s.node.Propose(ctx, raft.Admission{}, command{op: opDelete, key: key}.encoder())
	res, _ := r.Value.(writeResult)
	return res.existed, res.rev, err
}

func checkKV(key, value []byte) error {
	switch {
	case len(key) == 0 || len(key) > limits.MaxKey:
		return fmt.Errorf("%w: %d bytes (1..%d)", ErrInvalidKey, len(key), limits.MaxKey)
	case len(value) > limits.MaxValue:
		return fmt.Errorf("%w: %d bytes (max %d)", ErrValueTooLarge, len(value), limits.MaxValue)
	}
	return nil
}

// Get returns key's applied value and revision metadata from Pebble. It is not linearizable by itself: call the node's ReadIndex
// first for that.
func (s *Store) Get(key []byte) (value []byte, m revision.Meta, ok bool, err error) {
	st, release, err := s.node.Acquire()
	if err != nil {
		return nil, revision.Meta{}, false, err
	}
	defer release()
	return st.Get(key)
}

// Revision is the store revision of the applied state.
func (s *Store) Revision() uint64 {
	st, release, err := s.node.Acquire()
	if err != nil {
		return 0
	}
	defer release()
	return st.Revision()
}

// ForEach calls fn for every applied key in key order, from a point-in-time
// view of the applied state (key and value are valid only during the call;
// an error from fn stops the walk and is returned). The view includes every
// write whose Publisher.Apply call returned before ForEach was called;
// Apply calls in progress or later may or may not be in it. Because Apply
// reports each key's final state per committed batch, replaying those
// calls over the view is harmless, so "ForEach, then every later Apply"
// rebuilds a cache exactly. It may be called from Publisher.Restore.
func (s *Store) ForEach(fn func(key, value []byte, m revision.Meta) error) error {
	st, release, err := s.node.Acquire()
	if err != nil {
		return err
	}
	defer release()
	return st.ForEach(fn)
}

// GetMany calls fn for each key with its applied value and metadata, all
// from one point-in-time view of the applied state, and returns that view's
// applied index and store revision. Like Get, it is not linearizable by
// itself.
func (s *Store) GetMany(keys [][]byte, fn func(i int, value []byte, m revision.Meta, found bool)) (applied, rev uint64, err error) {
	st, release, err := s.node.Acquire()
	if err != nil {
		return 0, 0, err
	}
	defer release()
	return st.GetMany(keys, fn)
}

// Scan calls fn for the applied keys k with start <= k < end (an empty
// end: no upper bound) in key order, from one point-in-time view of the
// applied state in Pebble, and returns that view's applied index and store
// revision. fn
// returns false to stop; key and value are valid only during the call.
// Like Get, it may run one batch ahead of the Publisher: a caller that
// must not show state ahead of its cache waits until the returned index is
// applied there.
func (s *Store) Scan(start, end []byte, fn func(key, value []byte, m revision.Meta) bool) (applied, rev uint64, err error) {
	st, release, err := s.node.Acquire()
	if err != nil {
		return 0, 0, err
	}
	defer release()
	return st.Scan(start, end, fn)
}

// CompactRevision is the revision the stored history is compacted to.
func (s *Store) CompactRevision() uint64 {
	st, release, err := s.node.Acquire()
	if err != nil {
		return 0
	}
	defer release()
	return st.CompactRevision()
}

// RangeAt calls fn for the keys in [start, end) as they were at revision
// rev (0: the latest), from one point-in-time view, and returns the
// revision read (store.RangeAt: errs.ErrCompacted, errs.ErrFutureRevision).
func (s *Store) RangeAt(start, end []byte, rev uint64, fn func(key, value []byte, m revision.Meta) bool) (uint64, error) {
	st, release, err := s.node.Acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	return st.RangeAt(start, end, rev, fn)
}

// Changes calls fn with every change from revision from on, in revision
// order, from one point-in-time view (store.Changes).
func (s *Store) Changes(from uint64, fn func(c store.Change) bool) (uint64, error) {
	st, release, err := s.node.Acquire()
	if err != nil {
		return 0, err
	}
	defer release()
	return st.Changes(from, fn)
}
