package txn

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/rangeq"
	"github.com/kvd-project/kvd/internal/revision"
)

// State is the applied state a transaction reads and writes: on a node,
// the Pebble batch being built for the entries committed so far, which
// shows the batch's own earlier writes.
type State interface {
	// Get returns key's value and revision metadata (ok false: absent).
	// The value need stay valid only until the next call.
	Get(key []byte) (value []byte, m revision.Meta, ok bool, err error)
	// Meta returns key's revision metadata (the zero Meta: absent) without
	// its value: what a PUT, a DELETE and a compare of anything but the
	// value need, and cheaper (the store keeps the metadata of recent keys
	// in memory; a value is read from Pebble).
	Meta(key []byte) (revision.Meta, error)
	// Range calls fn for the keys k with start <= k < end (end empty: no
	// bound), in key order, until fn returns false. key and value need
	// stay valid only during the call, and fn calls no other method.
	Range(start, end []byte, fn func(key, value []byte, m revision.Meta) bool) error
	// RangeAt is Range over the state at store revision rev, as it was
	// committed (the history): an error wrapping errs.ErrCompacted for a
	// rev below the compaction revision, errs.ErrFutureRevision for one
	// above the store revision before the transaction. An empty range
	// (end <= start) is checked so too, and visits nothing. Its answer is
	// the same on every node.
	RangeAt(start, end []byte, rev uint64, fn func(key, value []byte, m revision.Meta) bool) error
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
// applies the path that runs (the branch, and the branches of the
// transactions nested in it); every PUT gets revision rev. Read results
// carry their values only if keepValues (the node that proposed t answers
// its caller; the others need only the values' sizes, for the bounds).
// It is deterministic: every node applying the same entry to the same
// state makes the same writes and the same response.
//
// The whole path is evaluated before anything is written, each operation
// seeing the path's earlier writes, so that a path that fails a bound
// (ErrReadTooLarge, ErrDeleteRangeTooLarge), a lease check
// (ErrLeaseNotFound, ErrLeaseFull) or an ignore option (ErrKeyNotFound)
// writes nothing; so does a Range at a revision s cannot read (a compacted
// or future one: errs.ErrCompacted, errs.ErrFutureRevision, from
// s.RangeAt). Any other error is s's.
func Apply(s State, t *Txn, rev uint64, keepValues bool) (Response, error) {
	e := &evaluation{s: s, rev: rev, keep: keepValues}
	resp, err := e.txn(t)
	if err != nil {
		return Response{}, err
	}
	if err := checkLeases(s, e.writes); err != nil {
		return Response{}, err
	}
	for i := range e.writes {
		w := &e.writes[i]
		if w.deleted {
			if err := s.Delete(w.key); err != nil {
				return Response{}, err
			}
			continue
		}
		m, err := s.Put(w.key, w.value, w.lease)
		if err != nil {
			return Response{}, err
		}
		if w.result != nil {
			w.result.Meta = m
		}
	}
	return resp, nil
}

// evaluation is one transaction's evaluation: the state as its path has
// written it so far (its writes over s), and what it will write.
type evaluation struct {
	s      State
	rev    uint64
	keep   bool
	writes []write
	// last is each written key's last write in writes, made once the path
	// writes more than a few keys or a range is read (a short path, the
	// common one, looks its few writes up in place).
	last map[string]int
	read int // keys and values the reads return
	size int // the response's encoding
}

// indexFrom is how many writes a path makes before last is kept.
const indexFrom = 8

// write is one write of the path, in order, and the key as it leaves it.
type write struct {
	key, value []byte
	lease      uint64
	meta       revision.Meta // a put's, as the path sees it
	deleted    bool
	result     *Result // a Put's, to take its final Meta
}

func (e *evaluation) txn(t *Txn) (Response, error) {
	resp := Response{Succeeded: true}
	if err := e.grow(responseHead+8, 0); err != nil {
		return Response{}, err
	}
	if len(t.Compares) > 0 {
		resp.Compared = make([]revision.Meta, len(t.Compares))
	}
	for i := range t.Compares {
		ok, m, err := e.compare(&t.Compares[i])
		if err != nil {
			return Response{}, err
		}
		resp.Compared[i] = m
		resp.Succeeded = resp.Succeeded && ok
		if err := e.grow(metaLen+metaRest, 0); err != nil {
			return Response{}, err
		}
	}
	ops := t.Then
	if !resp.Succeeded {
		ops = t.Else
	}
	if len(ops) > 0 {
		resp.Results = make([]Result, len(ops))
	}
	for i := range ops {
		resp.Results[i].Type = ops[i].Type
		if err := e.grow(resultHead+metaRest, 0); err != nil {
			return Response{}, err
		}
		if err := e.op(&ops[i], &resp.Results[i]); err != nil {
			return Response{}, err
		}
	}
	return resp, nil
}

// grow counts n more bytes of response, of which read are keys and
// values read, against the bounds.
func (e *evaluation) grow(n, read int) error {
	e.size += n
	e.read += read
	switch {
	case e.read > MaxReadBytes:
		return fmt.Errorf("%w: its reads return more than %d bytes of keys and values", ErrReadTooLarge, MaxReadBytes)
	case e.size > MaxResponseBytes:
		return fmt.Errorf("%w: its response would take more than %d bytes", ErrReadTooLarge, MaxResponseBytes)
	}
	return nil
}

func (e *evaluation) op(op *Op, res *Result) error {
	switch op.Type {
	case Put:
		return e.put(op, res)
	case Delete:
		_, ok, err := e.meta(op.Key)
		if err != nil {
			return err
		}
		res.Found = ok
		e.delete(op.Key)
		return nil
	case Get:
		v, m, ok, err := e.get(op.Key)
		if err != nil || !ok {
			return err
		}
		res.Found, res.Meta = true, m
		if e.keep {
			res.Value = append([]byte{}, v...)
		}
		return e.grow(len(v), len(v))
	case DeleteRange:
		return e.deleteRange(op, res)
	case Range:
		return e.rangeRead(op, res)
	case Nested:
		sub, err := e.txn(op.Txn)
		res.Txn = &sub
		return err
	}
	// Parse admits any type; Validate refuses it on the way in. An entry
	// of a newer version applies nothing for it, on every node alike.
	return nil
}

func (e *evaluation) put(op *Op, res *Result) error {
	var (
		v    []byte
		prev revision.Meta
		ok   bool
		err  error
	)
	if op.IgnoreValue {
		v, prev, ok, err = e.get(op.Key)
	} else {
		prev, ok, err = e.meta(op.Key)
	}
	if err != nil {
		return err
	}
	value, lease := op.Value, op.Lease
	if op.IgnoreValue || op.IgnoreLease {
		if !ok {
			return fmt.Errorf("%w: put of %q with ignore_value or ignore_lease", ErrKeyNotFound, op.Key)
		}
		if op.IgnoreValue {
			value = append([]byte{}, v...)
		}
		if op.IgnoreLease {
			lease = prev.Lease
		}
	}
	res.Meta = prev.Next(e.rev, lease)
	e.add(write{key: op.Key, value: value, lease: lease, meta: res.Meta, result: res})
	return nil
}

// add appends w to the path's writes.
func (e *evaluation) add(w write) {
	e.writes = append(e.writes, w)
	if e.last != nil || len(e.writes) > indexFrom {
		e.index()
		e.last[string(w.key)] = len(e.writes) - 1
	}
}

// index makes last, if it is not made yet.
func (e *evaluation) index() {
	if e.last != nil {
		return
	}
	e.last = make(map[string]int, len(e.writes))
	for i := range e.writes {
		e.last[string(e.writes[i].key)] = i
	}
}

// written is key's last write on the path, or nil.
func (e *evaluation) written(key []byte) *write {
	if e.last != nil {
		if i, ok := e.last[string(key)]; ok {
			return &e.writes[i]
		}
		return nil
	}
	for i := len(e.writes) - 1; i >= 0; i-- {
		if bytes.Equal(e.writes[i].key, key) {
			return &e.writes[i]
		}
	}
	return nil
}

func (e *evaluation) delete(key []byte) { e.add(write{key: key, deleted: true}) }

func (e *evaluation) deleteRange(op *Op, res *Result) error {
	sp := opSpan(op.Key, op.RangeEnd)
	if sp.empty() {
		return nil
	}
	keys, prev, err := CollectDeletes(e.rangeFunc, sp.start, sp.end, op.PrevKV)
	if err != nil {
		return err
	}
	for _, k := range keys {
		e.delete(k)
	}
	res.Deleted, res.Found = uint64(len(keys)), len(keys) > 0
	size := 4 + 8
	for i := range prev {
		if err := e.grow(kvHead+len(prev[i].Key)+len(prev[i].Value), len(prev[i].Key)+len(prev[i].Value)); err != nil {
			return err
		}
	}
	if e.keep {
		res.KVs = prev
	}
	return e.grow(size, 0)
}

// CollectDeletes lists the keys a range delete of [start, end) (end
// empty: no bound) deletes, as rangeFn shows the state, and their previous
// values and metadata if prevKV: the one range-delete evaluation, for a
// DeleteRange command and a transaction's. A range over
// limits.MaxDeleteRangeKeys keys or limits.MaxDeleteRangePrevBytes of
// previous keys and values fails with ErrDeleteRangeTooLarge.
func CollectDeletes(rangeFn func(start, end []byte, fn func(k, v []byte, m revision.Meta) bool) error,
	start, end []byte, prevKV bool) (keys [][]byte, prev []KV, err error) {
	size, over := 0, false
	err = rangeFn(start, end, func(k, v []byte, m revision.Meta) bool {
		if prevKV {
			size += len(k) + len(v)
			prev = append(prev, KV{Key: append([]byte(nil), k...), Value: append([]byte{}, v...), Meta: m})
		}
		keys = append(keys, append([]byte(nil), k...))
		over = len(keys) > limits.MaxDeleteRangeKeys || size > limits.MaxDeleteRangePrevBytes
		return !over
	})
	switch {
	case err != nil:
		return nil, nil, err
	case over:
		return nil, nil, fmt.Errorf("%w: more than %d keys or %d bytes of previous values; delete the range in parts",
			ErrDeleteRangeTooLarge, limits.MaxDeleteRangeKeys, limits.MaxDeleteRangePrevBytes)
	}
	return keys, prev, nil
}

// rangeRead evaluates a Range with the one range evaluation
// (rangeq.Eval) over the state as the path has written it, or, with a
// revision (Query.Rev), over the state at that revision as committed
// before the transaction (etcd's read view: none of the path's writes):
// Count is every key of the range (etcd's count), KVs those the options
// select. A range whose entries would not fit the response, or that holds
// more than a sort may (rangeq.ErrTooLarge), fails the transaction whole,
// and so does one at a revision s cannot read.
func (e *evaluation) rangeRead(op *Op, res *Result) error {
	sp := opSpan(op.Key, op.RangeEnd)
	src := e.rangeFunc
	if rev := op.Query.Rev; rev != 0 {
		src = func(start, end []byte, fn func(k, v []byte, m revision.Meta) bool) error {
			return e.s.RangeAt(start, end, rev, fn)
		}
	}
	if sp.empty() {
		if op.Query.Rev != 0 {
			// Its revision is checked all the same, as etcd's is.
			if err := src(sp.start, sp.end, func([]byte, []byte, revision.Meta) bool { return false }); err != nil {
				return err
			}
		}
		return e.grow(8+1+4, 0)
	}
	q := op.Query
	q.Start, q.End, q.Flags, q.Rev = sp.start, sp.end, q.Flags|rangeq.Total, 0
	b := rangeq.Bounds{Keys: math.MaxInt32, Bytes: MaxResponseBytes - e.size + 1,
		SortKeys: limits.MaxSortKeys, SortBytes: limits.MaxSortBytes}
	r, err := rangeq.Eval(context.Background(), &q, b, src)
	switch {
	case errors.Is(err, rangeq.ErrTooLarge):
		return fmt.Errorf("%w: %w", ErrReadTooLarge, err)
	case err != nil:
		return err
	case r.More && (q.Limit == 0 || len(r.KVs) < int(q.Limit)):
		return fmt.Errorf("%w: a range's entries would take more than the %d bytes of a response", ErrReadTooLarge, MaxResponseBytes)
	}
	for i := range r.KVs {
		kv := &r.KVs[i]
		if err := e.grow(kvHead+len(kv.Key)+len(kv.Value), len(kv.Key)+len(kv.Value)); err != nil {
			return err
		}
		if e.keep {
			res.KVs = append(res.KVs, KV{Key: kv.Key, Value: kv.Value, Meta: kv.Meta})
		}
	}
	if q.Flags&rangeq.KeysOnly != 0 {
		for i := range res.KVs {
			res.KVs[i].Value = nil
		}
	}
	res.Count, res.More, res.Found = r.Count, r.More, r.Count > 0
	return e.grow(8+1+4, 0)
}

// get reads key as the path sees it so far.
func (e *evaluation) get(key []byte) ([]byte, revision.Meta, bool, error) {
	if w := e.written(key); w != nil {
		if w.deleted {
			return nil, revision.Meta{}, false, nil
		}
		return w.value, w.meta, true, nil
	}
	return e.s.Get(key)
}

// meta reads key's metadata as the path sees it so far.
func (e *evaluation) meta(key []byte) (revision.Meta, bool, error) {
	if w := e.written(key); w != nil {
		if w.deleted {
			return revision.Meta{}, false, nil
		}
		return w.meta, true, nil
	}
	m, err := e.s.Meta(key)
	return m, m != (revision.Meta{}), err
}

// rangeFunc is State.Range over the state as the path has written it
// so far: the pending keys merged, in key order, with the state's.
func (e *evaluation) rangeFunc(start, end []byte, fn func(k, v []byte, m revision.Meta) bool) error {
	sp := span{start, end}
	if len(end) == 0 {
		sp.end = nil
	}
	var mine []string
	if len(e.writes) > 0 {
		e.index()
	}
	// The callbacks see copies, not e: e stays on the stack.
	writes, last := e.writes, e.last
	for k := range last {
		if sp.contains([]byte(k)) {
			mine = append(mine, k)
		}
	}
	slices.Sort(mine)
	i, stopped := 0, false
	emit := func(k string) bool {
		if w := &writes[last[k]]; !w.deleted && !fn([]byte(k), w.value, w.meta) {
			stopped = true
		}
		return !stopped
	}
	err := e.s.Range(start, end, func(k, v []byte, m revision.Meta) bool {
		for ; i < len(mine) && mine[i] < string(k); i++ {
			if !emit(mine[i]) {
				return false
			}
		}
		if i < len(mine) && mine[i] == string(k) {
			i++
			return emit(string(k))
		}
		if !fn(k, v, m) {
			stopped = true
		}
		return !stopped
	})
	for ; err == nil && !stopped && i < len(mine); i++ {
		emit(mine[i])
	}
	return err
}

// compare evaluates c against the state as the path has written it: on a
// key, or on every key of a range (an empty range compares the absent
// key). m is the key's metadata, or the first of the range it fails on.
func (e *evaluation) compare(c *Compare) (bool, revision.Meta, error) {
	if len(c.RangeEnd) == 0 {
		if c.Target != TargetValue {
			m, ok, err := e.meta(c.Key)
			return c.holds(nil, m, ok), m, err
		}
		v, m, ok, err := e.get(c.Key)
		return c.holds(v, m, ok), m, err
	}
	sp := opSpan(c.Key, c.RangeEnd)
	if sp.empty() {
		return c.holds(nil, revision.Meta{}, false), revision.Meta{}, nil
	}
	found, holds := false, true
	var failed revision.Meta
	err := e.rangeFunc(sp.start, sp.end, func(_, v []byte, m revision.Meta) bool {
		found = true
		if !c.holds(v, m, true) {
			holds, failed = false, m
		}
		return holds
	})
	if err != nil {
		return false, revision.Meta{}, err
	}
	if !found {
		return c.holds(nil, revision.Meta{}, false), revision.Meta{}, nil
	}
	return holds, failed, nil
}

// checkLeases refuses, before anything is written, a path whose PUTs name
// a lease that does not exist or cannot take their keys.
func checkLeases(s State, writes []write) error {
	var keys map[uint64][][]byte
	for i := range writes {
		w := &writes[i]
		if !w.deleted && w.lease != 0 {
			if keys == nil {
				keys = make(map[uint64][][]byte)
			}
			keys[w.lease] = append(keys[w.lease], w.key)
		}
	}
	var detached [][]byte
	for _, id := range sortedKeys(keys) {
		// The path's other writes leave their keys off lease id.
		detached = detached[:0]
		for i := range writes {
			if w := &writes[i]; w.deleted || w.lease != id {
				detached = append(detached, w.key)
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
