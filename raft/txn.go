package raft

import (
	"context"
	"errors"

	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/raft/internal/store"
)

// Txn replicates t as one entry and returns once it is committed and
// applied on this node: its outcome, and the entry's raft index (the
// version its PUTs got). The compares are evaluated when the entry is
// applied, on every node alike, against the applied state (the entries
// before it included), never when it is proposed; the branch that runs is
// applied with the compares in the same Pebble batch, so a crash keeps all
// of it or none. A compare-and-swap is a Txn of one version compare and
// one write.
//
// t must be valid (txn.Validate; an invalid one fails with an error
// wrapping txn.ErrInvalid and is not proposed). A branch over the read
// bound fails with txn.ErrReadTooLarge having applied nothing. Otherwise
// errors are Put's: only the leader accepts it, and ErrLeaderChanged or
// the context's error leave the outcome unknown.
func (n *Node) Txn(ctx context.Context, t *txn.Txn) (txn.Response, uint64, error) {
	if err := t.Validate(); err != nil {
		return txn.Response{}, 0, err
	}
	r := n.proposeCommand(ctx, command{op: opTxn, value: txn.Append(make([]byte, 0, txn.EncodedLen(t)), t)})
	return r.tx, r.version, r.err
}

// applyTxn applies a txn command at index: its compares and branch go into
// u like any other write, and a transaction that wrote more than one key
// makes the batch's Apply call atomic (Write.Atomic).
func (l *loop) applyTxn(u *store.Update, index uint64, c command) error {
	t, err := txn.Parse(c.value)
	if err != nil {
		// Admitted transactions always parse; like a malformed command,
		// every node skips it the same way, and its proposer hears why.
		l.n.log.Error("skipping malformed transaction", "index", index, "err", err)
		l.complete(c.proposer, c.reqID, result{err: errors.Join(errBadCommand, err)})
		return nil
	}
	st := &txnState{l: l, u: u, version: index}
	resp, err := txn.Apply(st, &t, index, c.proposer == l.n.id)
	switch {
	case errors.Is(err, txn.ErrReadTooLarge), errors.Is(err, txn.ErrLeaseNotFound), errors.Is(err, txn.ErrLeaseFull):
		l.complete(c.proposer, c.reqID, result{version: index, err: err})
		return nil
	case err != nil:
		return err
	}
	if st.writes > 1 {
		l.scratch.atomic = true
	}
	l.complete(c.proposer, c.reqID, result{version: index, tx: resp})
	return nil
}

// txnState is the state a transaction reads and writes: the Ready's Pebble
// batch, whose writes are also reported to the Applier.
type txnState struct {
	l       *loop
	u       *store.Update
	version uint64
	writes  int
}

func (s *txnState) Get(key []byte) ([]byte, uint64, bool, error) { return s.u.Get(key) }

func (s *txnState) Put(key, value []byte, lease uint64) error {
	if err := s.u.Put(key, value, s.version); err != nil {
		return err
	}
	if err := s.l.leaseWrite(s.u, key, lease, false); err != nil {
		return err
	}
	s.record(Write{Version: s.version, Key: key, Value: value})
	return nil
}

func (s *txnState) Delete(key []byte) error {
	existed, err := s.u.Delete(key)
	if err != nil {
		return err
	}
	if err := s.l.leaseWrite(s.u, key, 0, true); err != nil {
		return err
	}
	s.record(Write{Version: s.version, Key: key, Deleted: true, absent: !existed})
	return nil
}

func (s *txnState) CheckLease(lease uint64, keys, detached [][]byte) error {
	return checkLease(s.u, lease, keys, detached, s.l.cfg.Knobs.MaxLeaseKeys, s.l.n.metrics.leaseRefused)
}

func (s *txnState) record(w Write) {
	s.writes++
	s.l.scratch.applies = append(s.l.scratch.applies, w)
}
