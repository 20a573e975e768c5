package rangeq

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
)

// Source walks a state: it calls fn for the keys k with start <= k < end
// (an empty end: no upper bound) in ascending key order until fn returns
// false. key and value need be valid only during the call. Pebble's
// applied state (store.Store.Scan), the history at a revision
// (store.Store.RangeAt) and a transaction's Update (store.Update.Range) are
// each one.
type Source func(start, end []byte, fn func(key, value []byte, m revision.Meta) bool) error

// Bounds bound one result.
type Bounds struct {
	// Keys and Bytes bound the entries returned (Bytes counts EntryLen);
	// a result holds at least one entry when one remains.
	Keys, Bytes int
	// SortKeys and SortBytes bound what a Sorted request holds in memory.
	SortKeys, SortBytes int
}

// ReplyBounds are the bounds of one scan reply (internal/limits).
var ReplyBounds = Bounds{Keys: limits.MaxScanKeys, Bytes: limits.MaxScanBytes,
	SortKeys: limits.MaxSortKeys, SortBytes: limits.MaxSortBytes}

// EntryLen is the size an entry of key and value takes in a scan reply
// (wire.ScanEntryLen), as Bounds.Bytes counts it.
func EntryLen(keyLen, valueLen int) int { return wire.ScanEntryLen(keyLen, valueLen) }

// ErrTooLarge: a sorted request matches more than Bounds.SortKeys keys or
// SortBytes bytes. It is a bad request: narrow the range, filter it, or
// read it in key order (which pages).
var ErrTooLarge = errs.Classed(errs.ErrBadRequest, "range too large to sort")

// KV is one entry of a result; Key and Value are its own copies.
type KV struct {
	Key, Value []byte
	Meta       revision.Meta
}

// Result is one evaluation's answer.
type Result struct {
	KVs []KV
	// Count is, with Total or CountOnly, the number of keys in the range
	// (filters and limits aside, as etcd's); otherwise len(KVs).
	Count uint64
	// More: matching entries remain after KVs in the requested order.
	More bool
	// Next, with More in key order, is where the following page starts:
	// ascending, its Start; descending, its End (exclusive).
	Next []byte
	// Bytes is the sum of the entries' EntryLen.
	Bytes int
}

// checkEvery is how many keys a walk visits between looks at its
// context.
const checkEvery = 1024

// Eval evaluates q over src, within b. q.Rev is the caller's to honour
// (it picks src). ctx ends a long walk (a count, a filter, a sort) with
// its error; an evaluation that must be deterministic (inside an applied
// entry) passes one that never ends.
func Eval(ctx context.Context, q *Request, b Bounds, src Source) (Result, error) {
	if err := q.Check(); err != nil {
		return Result{}, err
	}
	if len(q.End) > 0 && bytes.Compare(q.Start, q.End) >= 0 {
		return Result{}, nil
	}
	if q.Limit != 0 && int(q.Limit) < b.Keys {
		b.Keys = int(q.Limit)
	}
	w := walk{ctx: ctx, q: q, b: b}
	var visit func(k, v []byte, m revision.Meta) bool
	switch {
	case q.Flags&CountOnly != 0:
		visit = w.count
	case q.Sorted():
		visit = w.hold
	case q.Descending():
		visit = w.window
	default:
		visit = w.ascend
	}
	err := src(q.Start, q.End, func(k, v []byte, m revision.Meta) bool {
		if w.visited++; w.visited%checkEvery == 0 {
			if w.err = ctx.Err(); w.err != nil {
				return false
			}
		}
		return visit(k, v, m)
	})
	if err == nil {
		err = w.err
	}
	if err != nil {
		return Result{}, err
	}
	return w.result(), nil
}

// walk is one evaluation's state.
type walk struct {
	ctx     context.Context
	q       *Request
	b       Bounds
	visited uint64
	err     error
	kvs     []KV // ascending: the page; descending: the window; sorted: every match
	bytes   int  // the EntryLen of kvs (sorted: the bytes held)
	more    bool
	next    []byte
}

func (w *walk) keysOnly() bool { return w.q.Flags&KeysOnly != 0 }

// entry copies an entry out of the source, its value only if keep.
func (w *walk) entry(k, v []byte, m revision.Meta, keep bool) KV {
	if !keep {
		v = nil
	}
	buf := make([]byte, len(k)+len(v))
	copy(buf, k)
	copy(buf[len(k):], v)
	return KV{Key: buf[:len(k):len(k)], Value: buf[len(k):], Meta: m}
}

func (w *walk) count(k, v []byte, m revision.Meta) bool { return true }

// ascend fills the page in key order; once it is full it only looks for
// a further match (More, Next) and, with Total, counts on.
func (w *walk) ascend(k, v []byte, m revision.Meta) bool {
	if w.more {
		return w.q.Flags&Total != 0 // the page is done: go on only to count
	}
	if !w.q.match(m) {
		return true
	}
	n := EntryLen(len(k), len(v))
	if w.keysOnly() {
		n = EntryLen(len(k), 0)
	}
	if len(w.kvs) == w.b.Keys || (len(w.kvs) > 0 && w.bytes+n > w.b.Bytes) {
		w.more, w.next = true, append([]byte(nil), k...)
		return w.q.Flags&Total != 0
	}
	w.bytes += n
	w.kvs = append(w.kvs, w.entry(k, v, m, !w.keysOnly()))
	return true
}

// window keeps the last page of the range, for a descending key order: it
// drops the lowest entries while the page is over its bounds.
func (w *walk) window(k, v []byte, m revision.Meta) bool {
	if !w.q.match(m) {
		return true
	}
	e := w.entry(k, v, m, !w.keysOnly())
	w.kvs = append(w.kvs, e)
	w.bytes += EntryLen(len(e.Key), len(e.Value))
	for len(w.kvs) > w.b.Keys || (len(w.kvs) > 1 && w.bytes > w.b.Bytes) {
		w.bytes -= EntryLen(len(w.kvs[0].Key), len(w.kvs[0].Value))
		w.kvs[0] = KV{}
		w.kvs = w.kvs[1:]
		w.more = true
	}
	return true
}

// hold keeps every match of a Sorted request, within the sort bounds.
func (w *walk) hold(k, v []byte, m revision.Meta) bool {
	if !w.q.match(m) {
		return true
	}
	keep := !w.keysOnly() || w.q.Target == ByValue // a value sort needs the values
	e := w.entry(k, v, m, keep)
	w.kvs = append(w.kvs, e)
	w.bytes += len(e.Key) + len(e.Value)
	if len(w.kvs) > w.b.SortKeys || w.bytes > w.b.SortBytes {
		w.err = fmt.Errorf("%w: it matches more than %d keys or %d bytes (limits.MaxSortKeys, limits.MaxSortBytes); read it sorted by key, which pages, or narrow it",
			ErrTooLarge, w.b.SortKeys, w.b.SortBytes)
		return false
	}
	return true
}

// result finishes the walk: the page in the requested order.
func (w *walk) result() Result {
	r := Result{More: w.more, Next: w.next}
	switch {
	case w.q.Flags&CountOnly != 0: // no entries
	case w.q.Sorted():
		r.KVs, r.More = w.sortedPage()
	case w.q.Descending():
		r.KVs = w.kvs
		slices.Reverse(r.KVs)
		if r.More {
			r.Next = append([]byte(nil), r.KVs[len(r.KVs)-1].Key...)
		}
	default:
		r.KVs = w.kvs
	}
	for i := range r.KVs {
		if w.keysOnly() {
			r.KVs[i].Value = nil
		}
		r.Bytes += EntryLen(len(r.KVs[i].Key), len(r.KVs[i].Value))
	}
	r.Count = uint64(len(r.KVs))
	if w.q.Flags&(Total|CountOnly) != 0 {
		r.Count = w.visited
	}
	return r
}

// sortedPage sorts the held matches (ties in key order, which they were
// walked in: the sort is stable) and cuts the page at Offset.
func (w *walk) sortedPage() ([]KV, bool) {
	by := w.q.Target
	slices.SortStableFunc(w.kvs, func(a, b KV) int {
		c := compare(by, &a, &b)
		if w.q.Descending() {
			c = -c
		}
		return c
	})
	all := w.kvs
	if int(w.q.Offset) >= len(all) {
		return nil, false
	}
	all = all[w.q.Offset:]
	n, size := 0, 0
	for n < len(all) && n < w.b.Keys {
		v := len(all[n].Value)
		if w.keysOnly() {
			v = 0
		}
		if size += EntryLen(len(all[n].Key), v); n > 0 && size > w.b.Bytes {
			break
		}
		n++
	}
	return all[:n:n], n < len(all)
}

// compare orders two entries by a sort target.
func compare(by Target, a, b *KV) int {
	switch by {
	case ByVersion:
		return cmp.Compare(a.Meta.Version, b.Meta.Version)
	case ByCreate:
		return cmp.Compare(a.Meta.Create, b.Meta.Create)
	case ByMod:
		return cmp.Compare(a.Meta.Mod, b.Meta.Mod)
	case ByValue:
		return bytes.Compare(a.Value, b.Value)
	}
	return bytes.Compare(a.Key, b.Key)
}
