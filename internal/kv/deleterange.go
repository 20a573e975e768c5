package kv

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/raft"
)

// KV is a key with its value and revision metadata: a prev_kv.
type KV = txn.KV

// A range delete (opDeleteRange) is one entry: key is the range's start,
// value a flags byte (deletePrevKV) and the range's end (empty: no end).
const deletePrevKV byte = 1

// ErrDeleteRangeTooLarge: a range delete would delete more than
// limits.MaxDeleteRangeKeys keys, or return more than
// limits.MaxDeleteRangePrevBytes of previous keys and values; it deleted
// nothing. A transaction's range delete fails with the same error.
var ErrDeleteRangeTooLarge = txn.ErrDeleteRangeTooLarge

// deleteResult is a range delete's outcome.
type deleteResult struct {
	rev     uint64
	deleted int
	prev    []KV
}

// DeleteRange replicates the deletion of every key k with start <= k <
// end (an empty end: every key from start on) as one entry, and returns
// how many keys it deleted, their previous values and metadata if prevKV
// (etcd's prev_kv), and the store revision after it (its own if it
// deleted anything). Errors are Put's, and ErrDeleteRangeTooLarge.
func (s *Store) DeleteRange(ctx context.Context, start, end []byte, prevKV bool) (deleted int, prev []KV, rev uint64, err error) {
	if err := checkKV(start, nil); err != nil {
		return 0, nil, 0, err
	}
	if len(end) > limits.MaxKey {
		return 0, nil, 0, fmt.Errorf("%w: range end of %d bytes (max %d)", ErrInvalidKey, len(end), limits.MaxKey)
	}
	flags := byte(0)
	if prevKV {
		flags = deletePrevKV
	}
	c := command{op: opDeleteRange, key: start, value: append([]byte{flags}, end...)}
	r, err := s.node.Propose(ctx, raft.Admission{}, c.encoder())
	res, _ := r.Value.(deleteResult)
	return res.deleted, res.prev, res.rev, err
}

// applyDeleteRange applies a range delete at m.next: every key of the
// range, each recorded in the history, as one atomic group for one-sided
// readers. A range over the limits deletes nothing, on every node alike.
func (m *machine) applyDeleteRange(u *store.Update, index uint64, c command) error {
	if len(c.value) == 0 {
		m.complete(c, raft.Outcome{Index: index, Err: errBadCommand})
		return nil
	}
	prevKV, end := c.value[0]&deletePrevKV != 0, c.value[1:]
	keys, prev, err := txn.CollectDeletes(u.Range, c.key, end, prevKV)
	switch {
	case errors.Is(err, ErrDeleteRangeTooLarge):
		m.complete(c, raft.Outcome{Index: index, Err: err})
		return nil
	case err != nil:
		return err
	}
	for _, k := range keys {
		if _, err := u.Delete(k, m.next); err != nil {
			return err
		}
		if err := m.leaseWrite(u, k, 0, true); err != nil {
			return err
		}
		m.sc.applies = append(m.sc.applies, Write{Meta: revision.Meta{Mod: m.next}, Key: k, Deleted: true})
	}
	m.changed = len(keys) > 0
	if len(keys) > 1 {
		m.sc.atomic = true // the keys go together, for one-sided readers too
	}
	m.complete(c, raft.Outcome{Index: index, Value: deleteResult{rev: m.served(), deleted: len(keys), prev: prev}})
	return nil
}
