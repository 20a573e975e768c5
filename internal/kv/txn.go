package kv

import (
	"context"
	"errors"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/raft"
)

// Txn replicates t as one entry and returns once it is committed and
// applied on this node: its outcome, and its revision (Response.Revision:
// the store revision its writes got if it wrote anything, else the one it
// was evaluated at). The compares are evaluated when the entry is
// applied, on every node alike, against the applied state (the entries
// before it included), never when it is proposed; the branch that runs is
// applied with the compares in the same Pebble batch, so a crash keeps all
// of it or none. A compare-and-swap is a Txn of one version compare and
// one write.
//
// t must be valid (txn.Validate; an invalid one fails with an error
// wrapping txn.ErrInvalid and is not proposed). A branch over the read
// bound fails with txn.ErrReadTooLarge having applied nothing, and so
// does one with a range at a compacted or future revision
// (errs.ErrCompacted, errs.ErrFutureRevision), on every node alike. Otherwise
// errors are Put's (adm too): only the leader accepts it, and ErrLeaderChanged or
// the context's error leave the outcome unknown.
func (s *Store) Txn(ctx context.Context, t *txn.Txn, adm raft.Admission) (txn.Response, uint64, error) {
	if err := t.Validate(); err != nil {
		return txn.Response{}, 0, err
	}
	r, err := s.node.Propose(ctx, adm, command{op: opTxn, value: txn.Append(make([]byte, 0, txn.EncodedLen(t)), t)}.encoder())
	resp, _ := r.Value.(txn.Response)
	return resp, resp.Revision, err
}

// applyTxn applies a txn command at index: its compares and branch go into
// u like any other write, and a transaction that wrote more than one key
// makes the batch's Apply call atomic (Write.Atomic).
func (m *machine) applyTxn(u *store.Update, index uint64, c command) error {
	t, err := txn.Parse(c.value)
	if err != nil {
		// Admitted transactions always parse; like a malformed command,
		// every node skips it the same way, and its proposer hears why.
		m.log.Error("skipping malformed transaction", "index", index, "err", err)
		m.complete(c, raft.Outcome{Err: errors.Join(errBadCommand, err)})
		return nil
	}
	st := &txnState{m: m, u: u, rev: m.next}
	resp, err := txn.Apply(st, &t, m.next, c.proposer == m.id)
	switch {
	case errors.Is(err, txn.ErrReadTooLarge), errors.Is(err, txn.ErrLeaseNotFound), errors.Is(err, txn.ErrLeaseFull),
		errors.Is(err, txn.ErrDeleteRangeTooLarge), errors.Is(err, txn.ErrKeyNotFound),
		errors.Is(err, errs.ErrCompacted), errors.Is(err, errs.ErrFutureRevision):
		// Refused whole on every node alike (txn.Apply evaluated the path
		// before writing): nothing was applied.
		m.complete(c, raft.Outcome{Index: index, Err: err})
		return nil
	case err != nil:
		return err
	}
	if st.writes > 1 {
		m.sc.atomic = true
	}
	resp.SetRevision(m.served())
	m.complete(c, raft.Outcome{Index: index, Value: resp})
	return nil
}

// txnState is the state a transaction reads and writes: the Ready's Pebble
// batch, whose writes are also reported to the Publisher.
type txnState struct {
	m      *machine
	u      *store.Update
	rev    uint64
	writes int
}

func (s *txnState) Get(key []byte) ([]byte, revision.Meta, bool, error) { return s.u.Get(key) }

func (s *txnState) Meta(key []byte) (revision.Meta, error) { return s.u.Meta(key) }

func (s *txnState) Range(start, end []byte, fn func(k, v []byte, m revision.Meta) bool) error {
	return s.u.Range(start, end, fn)
}

func (s *txnState) RangeAt(start, end []byte, rev uint64, fn func(k, v []byte, m revision.Meta) bool) error {
	_, err := s.u.RangeAt(start, end, rev, fn)
	return err
}

func (s *txnState) Put(key, value []byte, lease uint64) (revision.Meta, error) {
	prev, err := s.u.Meta(key)
	if err != nil {
		return revision.Meta{}, err
	}
	meta := prev.Next(s.rev, lease)
	if err := s.u.Put(key, value, meta); err != nil {
		return revision.Meta{}, err
	}
	if err := s.m.leaseWrite(s.u, key, lease, false); err != nil {
		return revision.Meta{}, err
	}
	s.m.changed = true
	s.record(Write{Meta: meta, Key: key, Value: value})
	return meta, nil
}

func (s *txnState) Delete(key []byte) error {
	existed, err := s.u.Delete(key, s.rev)
	if err != nil {
		return err
	}
	if err := s.m.leaseWrite(s.u, key, 0, true); err != nil {
		return err
	}
	s.m.changed = s.m.changed || existed
	s.record(Write{Meta: revision.Meta{Mod: s.rev}, Key: key, Deleted: true, absent: !existed})
	return nil
}

func (s *txnState) CheckLease(lease uint64, keys, detached [][]byte) error {
	return checkLease(s.u, lease, keys, detached, s.m.cfg.Knobs.MaxLeaseKeys, s.m.metrics.leaseRefused)
}

func (s *txnState) record(w Write) {
	s.writes++
	s.m.sc.applies = append(s.m.sc.applies, w)
}
