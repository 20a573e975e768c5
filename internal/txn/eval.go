package txn

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/kvd-project/kvd/internal/revision"
)

// State is the applied state a transaction reads and writes: on a node,
// the Pebble batch being built for the entries committed so far, which
// shows the batch's own earlier writes.
type State interface {
	// Get returns key's value and revision metadata (ok false: absent).
	// The value need stay valid only until the next call.
	Get(key []byte) (value []byte, m revision.Meta, ok bool, err error)
	// Put stores value under key at the transaction's revision, attached
	// to lease (0: none, and detached from any), and returns the key's
	// metadata after the write.
	Put(key, value []byte, lease uint64) (revision.Meta, error)
	// CheckLease reports whether attaching keys to lease is allowed (keys
	// already attached to it do not count again) while the same branch
	// takes detached off whatever lease they are on (those now on lease
	// make room): an error wrapping ErrLeaseNotFound or ErrLeaseFull if
	// not. What counts is the branch's end: its writes apply together.
	CheckLease(lease uint64, keys, detached [][]byte) error
	// Delete removes key (absent: nothing to do).
	Delete(key []byte) error
}

// Apply evaluates t against s, as of the moment its entry is applied, and
// applies the branch that runs; every PUT gets revision rev. GET results carry
// their values only if keepValues (the node that proposed t answers its
// caller; the others need only the values' sizes, for the read bound).
// It is deterministic: every node applying the same entry to the same
// state makes the same writes and the same response. On ErrReadTooLarge
// it wrote nothing; any other error is s's.
func Apply(s State, t *Txn, rev uint64, keepValues bool) (Response, error) {
	resp := Response{Succeeded: true}
	if len(t.Compares) > 0 {
		resp.Compared = make([]revision.Meta, len(t.Compares))
	}
	for i := range t.Compares {
		c := &t.Compares[i]
		v, m, ok, err := s.Get(c.Key)
		if err != nil {
			return Response{}, err
		}
		resp.Compared[i] = m
		if !c.holds(v, m, ok) {
			resp.Succeeded = false
		}
	}
	ops := t.Then
	if !resp.Succeeded {
		ops = t.Else
	}
	if len(ops) == 0 {
		return resp, nil
	}
	// Every result first, writing nothing, so that a branch over the read
	// bound is refused whole: a GET or DELETE sees the branch's earlier
	// writes (written) before the state.
	resp.Results = make([]Result, len(ops))
	var written map[string]int
	if len(ops) > 1 {
		written = make(map[string]int, len(ops))
	}
	read := 0
	for i := range ops {
		op, res := &ops[i], &resp.Results[i]
		res.Type = op.Type
		if op.Type != Put {
			v, m, ok, err := lookup(s, ops, written, op.Key, rev)
			if err != nil {
				return Response{}, err
			}
			res.Found = ok
			if op.Type == Get && ok {
				if read += len(v); read > MaxReadBytes {
					return Response{}, fmt.Errorf("%w: its GETs return more than %d bytes of values", ErrReadTooLarge, MaxReadBytes)
				}
				res.Meta = m
				if keepValues {
					res.Value = append([]byte{}, v...)
				}
			}
		}
		if op.Type != Get && written != nil {
			written[string(op.Key)] = i
		}
	}
	if err := checkLeases(s, ops); err != nil {
		return Response{}, err
	}
	for i := range ops {
		var err error
		switch op := &ops[i]; op.Type {
		case Put:
			resp.Results[i].Meta, err = s.Put(op.Key, op.Value, op.Lease)
		case Delete:
			err = s.Delete(op.Key)
		}
		if err != nil {
			return Response{}, err
		}
	}
	return resp, nil
}

// checkLeases refuses, before anything is written, a branch whose PUTs
// name a lease that does not exist or cannot take their keys.
func checkLeases(s State, ops []Op) error {
	var keys map[uint64][][]byte
	for i := range ops {
		if ops[i].Type == Put && ops[i].Lease != 0 {
			if keys == nil {
				keys = make(map[uint64][][]byte)
			}
			keys[ops[i].Lease] = append(keys[ops[i].Lease], ops[i].Key)
		}
	}
	var detached [][]byte
	for _, id := range sortedKeys(keys) {
		// The branch's other writes leave their keys off lease id.
		detached = detached[:0]
		for i := range ops {
			if op := &ops[i]; op.Type == Delete || op.Type == Put && op.Lease != id {
				detached = append(detached, op.Key)
			}
		}
		if err := s.CheckLease(id, keys[id], detached); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// lookup reads key as the branch's operation about to run sees it: its
// earlier write in the branch, if any, else the state.
func lookup(s State, ops []Op, written map[string]int, key []byte, rev uint64) ([]byte, revision.Meta, bool, error) {
	j, ok := written[string(key)]
	if !ok {
		return s.Get(key)
	}
	if ops[j].Type != Put {
		return nil, revision.Meta{}, false, nil
	}
	_, prev, _, err := s.Get(key)
	if err != nil {
		return nil, revision.Meta{}, false, err
	}
	return ops[j].Value, prev.Next(rev, ops[j].Lease), true, nil
}

// holds evaluates the compare against the key's state (the zero Meta and
// exists false for an absent key). A value compare on an absent key is
// false; an unknown target or operator (an entry written by a newer
// version) is false on every node alike.
func (c *Compare) holds(value []byte, m revision.Meta, exists bool) bool {
	var r int
	switch c.Target {
	case TargetMod:
		r = cmp.Compare(m.Mod, c.Num)
	case TargetVersion:
		r = cmp.Compare(m.Version, c.Num)
	case TargetCreate:
		r = cmp.Compare(m.Create, c.Num)
	case TargetLease:
		r = cmp.Compare(m.Lease, c.Num)
	case TargetValue:
		if !exists {
			return false
		}
		r = bytes.Compare(value, c.Value)
	default:
		return false
	}
	switch c.Cmp {
	case Equal:
		return r == 0
	case NotEqual:
		return r != 0
	case Less:
		return r < 0
	case Greater:
		return r > 0
	}
	return false
}
