package kv

import (
	"context"
	"errors"

	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/raft"
)

// BatchResult is the outcome of one PUT of a batch: the revision it wrote
// at, or why it applied nothing.
type BatchResult struct {
	Revision uint64
	Err      error
}

// PutBatch replicates puts (txn.Put operations, options and leases
// included) as one entry, applied as if each were a request of its own
// proposed right after the one before: one after the other, each at the
// next revision, each with its own outcome. A PUT that is refused when it
// is applied (a lease that does not exist or is full, ignore_value or
// ignore_lease of a missing key) fails alone, on every node alike, and
// takes no revision. The results are in puts' order.
//
// puts must be a valid batch (txn.ValidateBatch; else an error wrapping
// txn.ErrInvalid, nothing proposed). Otherwise errors are Put's, and are
// the whole batch's: none of its PUTs has a result then.
func (s *Store) PutBatch(ctx context.Context, puts []txn.Op, adm raft.Admission) ([]BatchResult, error) {
	if err := txn.ValidateBatch(puts); err != nil {
		return nil, err
	}
	c := command{op: opPutBatch, value: txn.AppendBatch(make([]byte, 0, txn.BatchLen(puts)), puts)}
	r, err := s.node.Propose(ctx, adm, c.encoder())
	if err != nil {
		return nil, err
	}
	res, _ := r.Value.([]BatchResult)
	return res, nil
}

// applyPutBatch applies a batch command at index: each PUT as an entry of
// its own would be applied (applyEntry), at the revision after the one
// before it. A plain PUT is applied as a lone one is; one with a lease or
// a put option as a transaction of itself, the one write path for those.
func (m *machine) applyPutBatch(u *store.Update, index uint64, c command) error {
	puts, err := txn.ParseBatch(c.value)
	if err != nil {
		// Admitted batches always parse; every node skips it alike.
		m.log.Error("skipping malformed batch", "index", index, "err", err)
		m.complete(c, raft.Outcome{Err: errors.Join(errBadCommand, err)})
		return nil
	}
	var out []BatchResult
	if c.proposer == m.id {
		out = make([]BatchResult, len(puts))
	}
	for i := range puts {
		rev, err := m.applyBatchPut(u, &puts[i])
		if err != nil && !refusedAtApply(err) {
			return err
		}
		if out != nil {
			out[i] = BatchResult{Revision: rev, Err: err}
		}
	}
	m.complete(c, raft.Outcome{Index: index, Value: out})
	return nil
}

// applyBatchPut applies one PUT of a batch at the next store revision,
// which it takes only if it applied (the revision stays dense), and
// returns the revision it served.
func (m *machine) applyBatchPut(u *store.Update, put *txn.Op) (uint64, error) {
	m.next, m.changed = u.Revision()+1, false
	if put.Lease == 0 && !put.IgnoreValue && !put.IgnoreLease {
		// A plain PUT: what a lone one does (applyCommand), without
		// a transaction's evaluation.
		w, _, err := m.applyWrite(u, command{op: opPut, key: put.Key, value: put.Value})
		if err == nil {
			err = m.leaseWrite(u, put.Key, 0, false)
		}
		if err != nil {
			return 0, err
		}
		m.sc.applies = append(m.sc.applies, w)
	} else {
		t := txn.Txn{Then: []txn.Op{*put}}
		st := &txnState{m: m, u: u, rev: m.next}
		if _, err := txn.Apply(st, &t, m.next, false); err != nil {
			return m.served(), err
		}
	}
	if m.changed {
		if err := u.SetRevision(m.next); err != nil {
			return 0, err
		}
	}
	return m.served(), nil
}

// refusedAtApply reports whether err is a refusal every node makes alike
// when it applies a PUT, having written nothing for it (as applyTxn's).
func refusedAtApply(err error) bool {
	return errors.Is(err, txn.ErrLeaseNotFound) || errors.Is(err, txn.ErrLeaseFull) || errors.Is(err, txn.ErrKeyNotFound)
}
