package client

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/rangeq"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
)

// Transaction limits (the server enforces the same): at most MaxTxnOps
// compares and MaxTxnOps operations in each branch, counted as etcd's
// --max-txn-ops counts them (a nested transaction's lists get what the
// longest list of their parent leaves), MaxTxnBytes encoded (room for a
// conditional PUT of the largest value under the longest key), and at most
// MaxTxnReadBytes of keys and values returned by the reads of the path
// that runs, in a reply of at most MaxTxnResponseBytes (more fails the
// transaction whole, applying nothing).
const (
	MaxTxnCompares      = limits.MaxTxnCompares
	MaxTxnOps           = limits.MaxTxnOps
	MaxTxnBytes         = limits.MaxTxnBytes
	MaxTxnReadBytes     = limits.MaxTxnReadBytes
	MaxTxnResponseBytes = limits.MaxTxnResponseBytes
)

// CmpOp is a compare's operator: the key's version or value on the left,
// the compare's operand on the right; values compare bytewise.
type CmpOp uint8

// Operators.
const (
	CmpEqual    = CmpOp(txn.Equal)
	CmpNotEqual = CmpOp(txn.NotEqual)
	CmpLess     = CmpOp(txn.Less)
	CmpGreater  = CmpOp(txn.Greater)
)

// Cmp is one condition of a transaction; make it with CompareModRevision,
// CompareCreateRevision, CompareVersion, CompareLease, CompareValue,
// KeyExists or KeyMissing. An absent key compares as 0 on every number.
type Cmp struct{ c txn.Compare }

func numCmp(key []byte, t txn.Target, op CmpOp, n uint64) Cmp {
	return Cmp{txn.Compare{Key: key, Target: t, Cmp: txn.Cmp(op), Num: n}}
}

// CompareModRevision compares key's mod revision (Meta.ModRevision: the
// revision of its last write) with rev: etcd's Compare(ModRevision(key)),
// the optimistic update's guard.
func CompareModRevision(key []byte, op CmpOp, rev uint64) Cmp {
	return numCmp(key, txn.TargetMod, op, rev)
}

// CompareCreateRevision compares key's create revision with rev.
func CompareCreateRevision(key []byte, op CmpOp, rev uint64) Cmp {
	return numCmp(key, txn.TargetCreate, op, rev)
}

// CompareVersion compares key's version (Meta.Version: its writes since it
// was created; 1 for a fresh key) with version, as etcd's
// Compare(Version(key)).
func CompareVersion(key []byte, op CmpOp, version uint64) Cmp {
	return numCmp(key, txn.TargetVersion, op, version)
}

// CompareLease compares the lease key is attached to (0: none) with id.
func CompareLease(key []byte, op CmpOp, id LeaseID) Cmp {
	return numCmp(key, txn.TargetLease, op, uint64(id))
}

// CompareValue compares key's value with value, bytewise. It is false,
// whatever op, if the key does not exist (an absent value is not empty).
func CompareValue(key []byte, op CmpOp, value []byte) Cmp {
	return Cmp{txn.Compare{Key: key, Target: txn.TargetValue, Cmp: txn.Cmp(op), Value: value}}
}

// WithRange makes c a compare on every key k with c's key <= k < end, as
// etcd's Compare(...).WithRange(end): it holds if it holds for each of
// them; on a range without keys it compares an absent key (a value
// compare is false, CompareCreateRevision(..., CmpEqual, 0) true). An
// empty end: every key from c's key on (etcd's WithFromKey).
func (c Cmp) WithRange(end []byte) Cmp {
	if len(end) == 0 {
		end = []byte{0}
	}
	c.c.RangeEnd = end
	return c
}

// WithPrefix makes c a compare on every key that starts with c's key, as
// WithRange.
func (c Cmp) WithPrefix() Cmp { return c.WithRange(PrefixEnd(c.c.Key)) }

// KeyExists holds if key exists (its create revision is above 0).
func KeyExists(key []byte) Cmp { return CompareCreateRevision(key, CmpGreater, 0) }

// KeyMissing holds if key does not exist (its create revision is 0, as
// etcd's idiom has it).
func KeyMissing(key []byte) Cmp { return CompareCreateRevision(key, CmpEqual, 0) }

// Op is one operation of a transaction's branch; make it with OpPut,
// OpDelete, OpDeleteRange, OpDeletePrefix, OpGet, OpRange, OpPrefix or
// OpTxn.
type Op struct {
	op  txn.Op
	err error // an option the operation cannot take
}

// OpPut stores value under key. Every PUT of a transaction gets the
// transaction's revision as its mod revision. Options: WithLease,
// WithIgnoreValue (value must be empty), WithIgnoreLease; others are
// refused when the transaction is run.
func OpPut(key, value []byte, opts ...WriteOption) Op {
	o := resolveWrite(opts)
	op := Op{op: txn.Op{Type: txn.Put, Key: key, Value: value, Lease: uint64(o.lease), IgnoreValue: o.ignoreValue, IgnoreLease: o.ignoreLease}}
	if o.conditional || o.prevKV {
		op.err = fmt.Errorf("%w: OpPut takes WithLease, WithIgnoreValue and WithIgnoreLease only", ErrBadRequest)
	}
	return op
}

// OpDelete removes key (its result says whether it existed).
func OpDelete(key []byte) Op { return Op{op: txn.Op{Type: txn.Delete, Key: key}} }

// OpDeleteRange removes every key k with start <= k < end (an empty end:
// every key from start on), as DeleteRange: its result's Deleted says how
// many, and with WithPrevKV its KVs are the deleted keys with their
// values. The transaction's later operations see them gone.
func OpDeleteRange(start, end []byte, opts ...WriteOption) Op {
	o := resolveWrite(opts)
	op := Op{op: txn.Op{Type: txn.DeleteRange, Key: orFirst(start), RangeEnd: orEnd(end), PrevKV: o.prevKV}}
	if o.conditional || o.lease != 0 || o.ignoreValue || o.ignoreLease {
		op.err = fmt.Errorf("%w: OpDeleteRange takes WithPrevKV only", ErrBadRequest)
	}
	return op
}

// OpDeletePrefix removes every key that starts with prefix, as
// OpDeleteRange.
func OpDeletePrefix(prefix []byte, opts ...WriteOption) Op {
	return OpDeleteRange(prefix, PrefixEnd(prefix), opts...)
}

// OpGet reads key as the transaction sees it (after the branch's earlier
// writes): linearizable, since it is applied through Raft.
func OpGet(key []byte) Op { return Op{op: txn.Op{Type: txn.Get, Key: key}} }

// OpRange reads every key k with start <= k < end (an empty end: every
// key from start on) as the transaction sees it, with the one range
// evaluation a Range uses: its result's Count is how many keys the range
// holds (etcd's count), KVs those the options select, More whether a
// limit left some out. Options: WithLimit, WithKeysOnly, WithCountOnly,
// WithSort and the revision filters (WithMinModRev, ...), and WithRev:
// the range reads the state at that revision as committed before the
// transaction (none of its writes), as etcd's range at a revision in a
// transaction does; a compacted revision fails the transaction whole
// with ErrCompacted, one past the store's with ErrFutureRevision.
// WithConsistency is refused when the transaction is run (it is applied
// through Raft). A range whose entries would not fit the reply, or that a
// sort would hold more of than MaxSortKeys, fails the transaction whole
// with ErrBadRequest.
func OpRange(start, end []byte, opts ...ReadOption) Op {
	var o readOptions
	for _, f := range opts {
		f(&o)
	}
	s := &o.scan
	q := rangeq.Request{Limit: uint32(min(s.limit, math.MaxUint32)), Target: rangeq.Target(s.target), Order: rangeq.Order(s.order),
		MinMod: s.minMod, MaxMod: s.maxMod, MinCreate: s.minCreate, MaxCreate: s.maxCreate, Rev: s.rev}
	switch {
	case s.countOnly:
		q.Flags |= rangeq.CountOnly
	case s.keysOnly:
		q.Flags |= rangeq.KeysOnly
	}
	op := Op{op: txn.Op{Type: txn.Range, Key: orFirst(start), RangeEnd: orEnd(end), Query: q}}
	if o.level != 0 {
		op.err = fmt.Errorf("%w: OpRange is applied through Raft: no WithConsistency", ErrBadRequest)
	}
	return op
}

// OpPrefix reads every key that starts with prefix, as OpRange.
func OpPrefix(prefix []byte, opts ...ReadOption) Op {
	return OpRange(prefix, PrefixEnd(prefix), opts...)
}

// OpTxn is a transaction run as an operation (etcd's OpTxn): its compares
// are evaluated against the state as the branch has written it so far,
// and its result's Txn is its response. Its lists share the operation
// limit with its parents (MaxTxnOps).
func OpTxn(cmps []Cmp, thenOps, elseOps []Op) Op {
	t, err := Txn{If: cmps, Then: thenOps, Else: elseOps}.build()
	return Op{op: txn.Op{Type: txn.Nested, Txn: &t}, err: err}
}

// orFirst is a range's start as the encoding takes it: the empty key,
// which no key is, is the smallest one, "\x00".
func orFirst(start []byte) []byte {
	if len(start) == 0 {
		return []byte{0}
	}
	return start
}

// orEnd is a range's end as the encoding takes it: "\x00" for no end
// (an empty end names one key there, as in etcd).
func orEnd(end []byte) []byte {
	if len(end) == 0 {
		return []byte{0}
	}
	return end
}

// Txn is a transaction, etcd's shape: if every compare of If holds when
// the transaction is applied, Then runs, else Else. As in etcd, a branch
// may not put one key twice, nor put a key that it (or a transaction
// nested in it before) deletes.
type Txn struct {
	If   []Cmp
	Then []Op
	Else []Op
}

// TxnResponse is a transaction's outcome.
type TxnResponse struct {
	// Succeeded: every compare held, and Then ran (else Else did).
	Succeeded bool
	// Revision is the store revision after the transaction: the one its
	// writes got if it changed anything, else the one it was evaluated at.
	Revision uint64
	// Compared[i] is the metadata If[i]'s key had when the transaction
	// was evaluated (zero: it did not exist).
	Compared []Meta
	// Results has one entry per operation of the branch that ran.
	Results []OpResult
}

// OpResult is one operation's outcome. PUT: Meta is the key's after the
// write. DELETE: Found tells whether the key existed. GET: Found, and the
// key's Value and Meta. OpDeleteRange: Deleted, and KVs with WithPrevKV.
// OpRange: Count (the keys in the range, whatever the limit), More (a
// limit left some out) and KVs. OpTxn: Txn.
type OpResult struct {
	Found bool
	Meta
	Value   []byte
	Deleted int64
	Count   uint64
	More    bool
	KVs     []KV
	Txn     *TxnResponse
}

// Txn runs t as one Raft entry. Its compares are evaluated when the entry
// is applied, on every node alike, against the applied state (never when
// it is sent), and the branch that runs is applied atomically: a crash
// keeps all of it or none, every read by RPC or through a transaction sees
// all of it or none, and so do one-sided GETs (docs/consistency.md,
// "Transactions").
//
// A transaction that breaks a limit or etcd's duplicate-key rule fails
// with an error wrapping ErrBadRequest and is not sent; one whose path
// fails when applied (a bound, a lease, a put option on a missing key:
// ErrNotFound) applies nothing. Like a PUT, a transaction that can write
// and fails with ErrUnavailable may or may not have been applied, and is
// retried only while no attempt can have taken effect; one that only
// reads (compares and reads) is retried freely.
func (c *Client) Txn(ctx context.Context, t Txn) (*TxnResponse, error) {
	in, err := t.build()
	if err != nil {
		return nil, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	r, err := c.txn(ctx, &in)
	if err != nil {
		return nil, err
	}
	return txnResponse(&r), nil
}

func txnResponse(r *txn.Response) *TxnResponse {
	out := &TxnResponse{Succeeded: r.Succeeded, Revision: r.Revision}
	if len(r.Compared) > 0 {
		out.Compared = make([]Meta, len(r.Compared))
	}
	for i, m := range r.Compared {
		out.Compared[i] = metaOf(m)
	}
	if len(r.Results) > 0 {
		out.Results = make([]OpResult, len(r.Results))
	}
	for i := range r.Results {
		res := &r.Results[i]
		o := OpResult{Found: res.Found, Meta: metaOf(res.Meta), Value: res.Value,
			Deleted: int64(res.Deleted), Count: res.Count, More: res.More}
		for _, kv := range res.KVs {
			o.KVs = append(o.KVs, KV{Key: kv.Key, Value: kv.Value, Meta: metaOf(kv.Meta)})
		}
		if res.Txn != nil {
			o.Txn = txnResponse(res.Txn)
		}
		out.Results[i] = o
	}
	return out
}

// build is t in the encoding's terms, or the first option error of its
// operations.
func (t Txn) build() (txn.Txn, error) {
	in := txn.Txn{Compares: make([]txn.Compare, len(t.If))}
	for i, cmp := range t.If {
		in.Compares[i] = cmp.c
	}
	var err error
	if in.Then, err = ops(t.Then); err == nil {
		in.Else, err = ops(t.Else)
	}
	return in, err
}

func ops(in []Op) ([]txn.Op, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]txn.Op, len(in))
	for i, op := range in {
		if op.err != nil {
			return nil, op.err
		}
		out[i] = op.op
	}
	return out, nil
}

// errMalformedReply: a server's reply does not decode as what was asked.
var errMalformedReply = errors.New("kvd: malformed reply")

// txn validates, sends and decodes a transaction; ctx should carry the
// request timeout.
func (c *Client) txn(ctx context.Context, t *txn.Txn) (txn.Response, error) {
	if err := t.Validate(); err != nil {
		return txn.Response{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	req := &wire.Request{Op: wire.OpTxn, Value: txn.Append(make([]byte, 0, txn.EncodedLen(t)), t)}
	resp, err := c.leaderCall(ctx, req, !t.Writes())
	if err != nil {
		return txn.Response{}, err
	}
	r, err := txn.DecodeResponse(resp.Value)
	if err != nil {
		return txn.Response{}, fmt.Errorf("%w: %w", errMalformedReply, err)
	}
	branch := t.Then
	if !r.Succeeded {
		branch = t.Else
	}
	if len(r.Compared) != len(t.Compares) || len(r.Results) != len(branch) {
		return txn.Response{}, fmt.Errorf("%w: %d compared keys and %d results for %d compares and %d operations",
			errMalformedReply, len(r.Compared), len(r.Results), len(t.Compares), len(branch))
	}
	if r.Revision == 0 {
		r.Revision = resp.Version // a server before revisions: its entry's index
	}
	return r, nil
}
