package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
)

// Transaction limits (the server enforces the same): at most MaxTxnCompares
// compares, MaxTxnOps operations in each branch, MaxTxnBytes encoded (room
// for a conditional PUT of the largest value under the longest key), and
// at most MaxTxnReadBytes of values returned by the GETs of the branch that
// runs (more fails the transaction whole, applying nothing).
const (
	MaxTxnCompares  = limits.MaxTxnCompares
	MaxTxnOps       = limits.MaxTxnOps
	MaxTxnBytes     = limits.MaxTxnBytes
	MaxTxnReadBytes = limits.MaxTxnReadBytes
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

// KeyExists holds if key exists (its create revision is above 0).
func KeyExists(key []byte) Cmp { return CompareCreateRevision(key, CmpGreater, 0) }

// KeyMissing holds if key does not exist (its create revision is 0, as
// etcd's idiom has it).
func KeyMissing(key []byte) Cmp { return CompareCreateRevision(key, CmpEqual, 0) }

// Op is one operation of a transaction's branch; make it with OpPut,
// OpDelete or OpGet.
type Op struct{ op txn.Op }

// OpPut stores value under key. Every PUT of a transaction gets the
// transaction's revision as its mod revision.
func OpPut(key, value []byte) Op { return Op{txn.Op{Type: txn.Put, Key: key, Value: value}} }

// OpDelete removes key (its result says whether it existed).
func OpDelete(key []byte) Op { return Op{txn.Op{Type: txn.Delete, Key: key}} }

// OpGet reads key as the transaction sees it (after the branch's earlier
// writes): linearizable, since it is applied through Raft.
func OpGet(key []byte) Op { return Op{txn.Op{Type: txn.Get, Key: key}} }

// Txn is a transaction, etcd's shape: if every compare of If holds when
// the transaction is applied, Then runs, else Else. A branch may not write
// (PUT or DELETE) one key twice.
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
// key's Value and Meta.
type OpResult struct {
	Found bool
	Meta
	Value []byte
}

// Txn runs t as one Raft entry. Its compares are evaluated when the entry
// is applied, on every node alike, against the applied state (never when
// it is sent), and the branch that runs is applied atomically: a crash
// keeps all of it or none, every read by RPC or through a transaction sees
// all of it or none, and so do one-sided GETs (docs/consistency.md,
// "Transactions").
//
// A transaction that breaks a limit or writes a key twice in a branch
// fails with an error wrapping ErrBadRequest and is not sent. Like a PUT,
// a transaction that can write and fails with ErrUnavailable may or may
// not have been applied, and is retried only while no attempt can have
// taken effect; one that only reads (GETs and compares) is retried freely.
func (c *Client) Txn(ctx context.Context, t Txn) (*TxnResponse, error) {
	in := txn.Txn{
		Compares: make([]txn.Compare, len(t.If)),
		Then:     ops(t.Then),
		Else:     ops(t.Else),
	}
	for i, cmp := range t.If {
		in.Compares[i] = cmp.c
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	r, err := c.txn(ctx, &in)
	if err != nil {
		return nil, err
	}
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
	for i, res := range r.Results {
		out.Results[i] = OpResult{Found: res.Found, Meta: metaOf(res.Meta), Value: res.Value}
	}
	return out, nil
}

func ops(in []Op) []txn.Op {
	if len(in) == 0 {
		return nil
	}
	out := make([]txn.Op, len(in))
	for i, op := range in {
		out[i] = op.op
	}
	return out
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
