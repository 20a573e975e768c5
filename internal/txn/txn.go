package txn

import (
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/rangeq"
	"github.com/kvd-project/kvd/internal/revision"
)

// Limits (internal/limits says why they are what they are).
const (
	// MaxCompares is the most compares a transaction may have.
	MaxCompares = limits.MaxTxnCompares
	// MaxOps is the most operations each branch (Then, Else) may have,
	// and compares (etcd's --max-txn-ops): a nested transaction's lists
	// get what the longest list of their parent leaves.
	MaxOps = limits.MaxTxnOps
	// MaxBytes bounds a transaction's encoding.
	MaxBytes = limits.MaxTxnBytes
	// MaxReadBytes bounds the keys and values the executed path's reads
	// (GETs, ranges, prev_kv) return together.
	MaxReadBytes = limits.MaxTxnReadBytes
	// MaxResponseBytes bounds a response's encoding: evaluation refuses a
	// transaction whose response would exceed it (ErrReadTooLarge).
	MaxResponseBytes = limits.MaxTxnResponseBytes
)

// Sentinel errors, wrapped with detail. The server answers those Classed
// with errs.ErrBadRequest as bad requests.
var (
	// ErrMalformed: the bytes are not a transaction (or a response).
	ErrMalformed = errs.Classed(errs.ErrBadRequest, "txn: malformed")
	// ErrInvalid: the transaction is well formed but not allowed: a limit
	// is exceeded, a key is empty or too long, an operation or compare is
	// unknown, an operation carries what its kind does not take, or it
	// breaks etcd's rule on duplicate keys (ErrDuplicateKey).
	ErrInvalid = errs.Classed(errs.ErrBadRequest, "txn: invalid")
	// ErrDuplicateKey: a branch puts a key twice, or puts a key that it
	// deletes, counting the transactions nested in it as etcd does
	// (checkIntervals). Wrapped in ErrInvalid.
	ErrDuplicateKey = errors.New("duplicate key given in txn request")
	// ErrValueProvided and ErrLeaseProvided: a Put with IgnoreValue
	// carries a value, or one with IgnoreLease a lease (etcd's texts).
	// Wrapped in ErrInvalid.
	ErrValueProvided = errors.New("value is provided")
	// ErrTooLarge: the transaction's encoding exceeds MaxBytes. Wrapped
	// in ErrInvalid.
	ErrTooLarge      = errors.New("transaction too large")
	ErrLeaseProvided = errors.New("lease is provided")
	// ErrKeyNotFound: a Put with IgnoreValue or IgnoreLease of the branch
	// that ran names a key that does not exist; nothing was applied.
	ErrKeyNotFound = errs.ErrNotFound
	// ErrDeleteRangeTooLarge: a DeleteRange (in a transaction or alone)
	// would delete more than limits.MaxDeleteRangeKeys keys, or return
	// more than limits.MaxDeleteRangePrevBytes of previous keys and
	// values; nothing was applied.
	ErrDeleteRangeTooLarge = errs.Classed(errs.ErrBadRequest, "range delete too large")
	// ErrReadTooLarge: the branch that ran would have returned more than
	// MaxReadBytes of values; nothing was applied.
	ErrReadTooLarge = errs.Classed(errs.ErrBadRequest, "txn: reads too much")
	// ErrLeaseNotFound: a PUT of the branch that ran names a lease that
	// does not exist (never granted, revoked or expired); nothing was
	// applied.
	ErrLeaseNotFound = errs.ErrLeaseNotFound
	// ErrLeaseFull: a PUT of the branch that ran would attach more keys to
	// its lease than a lease may hold (the State's bound); nothing was
	// applied.
	ErrLeaseFull = errs.Classed(errs.ErrBadRequest, "lease holds too many keys")
)

// Target is what a compare looks at.
type Target uint8

// Targets, as etcd's compares have them. An absent key compares as the
// zero revision.Meta (version, create and mod revision 0, no lease), except
// on its value: a value compare on an absent key is false.
const (
	TargetMod     Target = 1 // the key's mod_revision
	TargetValue   Target = 2 // the key's value
	TargetVersion Target = 3 // the key's version: writes since its creation
	TargetCreate  Target = 4 // the key's create_revision
	TargetLease   Target = 5 // the TTL lease the key is attached to (0: none)
)

// numeric reports whether the target compares an integer (Compare.Num).
func (t Target) numeric() bool { return t == TargetMod || t >= TargetVersion && t <= TargetLease }

func (t Target) String() string {
	switch t {
	case TargetMod:
		return "mod"
	case TargetValue:
		return "value"
	case TargetVersion:
		return "version"
	case TargetCreate:
		return "create"
	case TargetLease:
		return "lease"
	}
	return fmt.Sprintf("target(%d)", uint8(t))
}

// Cmp is a compare's operator.
type Cmp uint8

// Operators: the key's target on the left, the compare's operand on the
// right (values compare bytewise).
const (
	Equal    Cmp = 1
	NotEqual Cmp = 2
	Less     Cmp = 3
	Greater  Cmp = 4
)

func (c Cmp) String() string {
	switch c {
	case Equal:
		return "="
	case NotEqual:
		return "!="
	case Less:
		return "<"
	case Greater:
		return ">"
	}
	return fmt.Sprintf("cmp(%d)", uint8(c))
}

// Compare is one condition.
type Compare struct {
	Key []byte
	// RangeEnd, if set, makes the compare one on a range, as etcd's
	// range_end does: it holds if it holds for every key k with
	// Key <= k < RangeEnd ("\x00": every key from Key on). On a range with
	// no key it compares the absent key (so a value compare is false).
	RangeEnd []byte
	Target   Target
	Cmp      Cmp
	Num      uint64 // the operand of a numeric target (all but TargetValue)
	Value    []byte // TargetValue's operand
}

// OpType is an operation's kind.
type OpType uint8

// Operation kinds. The numbers are the encoding's (doc.go): 4 and 8 are
// encodings of a Put, never an OpType.
const (
	Put         OpType = 1
	Delete      OpType = 2 // one key
	Get         OpType = 3 // one key
	DeleteRange OpType = 5 // a key or a range, with the number deleted and prev_kv
	Nested      OpType = 6 // a transaction as an operation
	Range       OpType = 7 // a key or a range read with options
)

func (t OpType) String() string {
	switch t {
	case Put:
		return "put"
	case Delete:
		return "delete"
	case Get:
		return "get"
	case DeleteRange:
		return "delete-range"
	case Nested:
		return "txn"
	case Range:
		return "range"
	}
	return fmt.Sprintf("op(%d)", uint8(t))
}

// Op is one operation of a branch.
type Op struct {
	Type OpType
	Key  []byte
	// RangeEnd, on a DeleteRange or a Range, makes it cover every key k
	// with Key <= k < RangeEnd ("\x00": every key from Key on; empty: Key
	// alone), as etcd's range_end.
	RangeEnd []byte
	Value    []byte // Put only
	// Lease, on a Put only, attaches the key to that TTL lease (0: none;
	// a Put without a lease detaches the key from any lease, as in etcd).
	// A Put naming a lease that does not exist when the transaction is
	// applied fails the transaction whole (ErrLeaseNotFound).
	Lease uint64
	// IgnoreValue and IgnoreLease, on a Put, keep the key's current value
	// or lease (etcd's ignore_value, ignore_lease): the key must exist
	// (else the transaction fails whole with errs.ErrNotFound), and the
	// Put must carry no value, or no lease, respectively.
	IgnoreValue, IgnoreLease bool
	// PrevKV, on a DeleteRange, returns the deleted keys with their values.
	PrevKV bool
	// Query is a Range's options, as a range read outside a transaction
	// takes them (internal/rangeq): limit, keys only, count only, sort and
	// revision filters, and Rev: 0 reads the state as the path has
	// written it, any other the state at that store revision, as
	// committed before the transaction (State.RangeAt; etcd's range at a
	// revision in a transaction). Its Start and End are left empty (the
	// range is Key and RangeEnd), and so is Offset: a Range is read whole.
	Query rangeq.Request
	// Txn is a Nested operation's transaction: evaluated against the
	// state as the branch has written it so far.
	Txn *Txn
}

// Txn is a transaction: if every compare holds, Then runs, else Else.
type Txn struct {
	Compares   []Compare
	Then, Else []Op
}

// KV is a key with its value and metadata, as a Range or a DeleteRange's
// prev_kv returns it.
type KV struct {
	Key, Value []byte
	Meta       revision.Meta
}

// Result is one operation's outcome. Put: Meta is the key's after the
// write (Meta.Mod the transaction's revision). Delete: Found tells whether
// the key existed. Get: Found, and if so the key's Value and Meta.
// DeleteRange: Deleted, and the deleted KVs if PrevKV. Range: Count (the
// keys in the range, whatever the limit), More (the limit left some out)
// and KVs. Nested: Txn.
type Result struct {
	Type    OpType
	Found   bool
	Meta    revision.Meta
	Value   []byte
	Deleted uint64
	Count   uint64
	More    bool
	KVs     []KV
	Txn     *Response
}

// Response is a transaction's outcome.
type Response struct {
	Succeeded bool
	// Revision is the store revision after the transaction: its own if it
	// wrote anything, else the one it was evaluated at.
	Revision uint64
	// Compared[i] is the metadata Compares[i]'s key had when the
	// transaction was evaluated (the zero Meta: absent). For a compare on
	// a range: the first key of the range it does not hold for (zero if
	// it holds for all).
	Compared []revision.Meta
	// Results are the outcomes of the branch that ran, one per operation.
	Results []Result
}

// SetRevision sets r's revision, and that of every response nested in
// it: they were all evaluated at one revision.
func (r *Response) SetRevision(rev uint64) {
	r.Revision = rev
	for i := range r.Results {
		if r.Results[i].Txn != nil {
			r.Results[i].Txn.SetRevision(rev)
		}
	}
}

// Writes reports whether the transaction can change anything (has a PUT,
// DELETE or a nested transaction that has one, in either branch). One that
// cannot may be retried freely.
func (t *Txn) Writes() bool {
	for _, ops := range [2][]Op{t.Then, t.Else} {
		for i := range ops {
			switch op := &ops[i]; op.Type {
			case Get, Range:
			case Nested:
				if op.Txn != nil && op.Txn.Writes() {
					return true
				}
			default:
				return true
			}
		}
	}
	return false
}

// Validate checks everything the encoding does not: limits, key and value
// sizes, known targets, operators and op types, and etcd's rules on
// duplicate keys (checkIntervals). Errors wrap ErrInvalid.
func (t *Txn) Validate() error {
	if err := t.validate(MaxOps, 0); err != nil {
		return err
	}
	for _, b := range []struct {
		name string
		ops  []Op
	}{{"then", t.Then}, {"else", t.Else}} {
		if _, _, err := checkIntervals(b.ops); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalid, b.name, err)
		}
	}
	if n := EncodedLen(t); n > MaxBytes {
		return fmt.Errorf("%w: %w: %d bytes encoded (at most %d)", ErrInvalid, ErrTooLarge, n, MaxBytes)
	}
	return nil
}

// opCount is what etcd's operation limit counts of a transaction's own
// level: the longest of its compares and its two branches.
func (t *Txn) opCount() int { return max(len(t.Compares), len(t.Then), len(t.Else)) }

// validate checks t within budget operations, as etcd does: the longest
// of t's compares and branches may not exceed it, and a nested transaction
// gets what its parent's longest list leaves of it.
func (t *Txn) validate(budget, depth int) error {
	if n := t.opCount(); n > budget {
		return fmt.Errorf("%w: too many operations in txn request: %d compares, %d then and %d else operations (at most %d each%s)",
			ErrInvalid, len(t.Compares), len(t.Then), len(t.Else), budget, nestedNote(depth))
	}
	for i := range t.Compares {
		if err := t.Compares[i].validate(); err != nil {
			return fmt.Errorf("%w: compare %d: %w", ErrInvalid, i+1, err)
		}
	}
	for _, b := range []struct {
		name string
		ops  []Op
	}{{"then", t.Then}, {"else", t.Else}} {
		for i := range b.ops {
			op := &b.ops[i]
			if err := op.validate(); err != nil {
				return fmt.Errorf("%w: %s operation %d: %w", ErrInvalid, b.name, i+1, err)
			}
			if op.Type == Nested {
				if err := op.Txn.validate(budget-t.opCount(), depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func nestedNote(depth int) string {
	if depth == 0 {
		return ""
	}
	return fmt.Sprintf(", in a transaction nested %d deep: what its parents' longest lists leave of %d", depth, MaxOps)
}

func (c *Compare) validate() error {
	if err := checkKey(c.Key); err != nil {
		return err
	}
	if len(c.RangeEnd) > limits.MaxKey {
		return fmt.Errorf("range end of %d bytes (at most %d)", len(c.RangeEnd), limits.MaxKey)
	}
	if c.Cmp < Equal || c.Cmp > Greater {
		return fmt.Errorf("unknown operator %d", c.Cmp)
	}
	switch {
	case c.Target.numeric():
		if len(c.Value) != 0 {
			return fmt.Errorf("a %s compare carries a value", c.Target)
		}
	case c.Target == TargetValue:
		if c.Num != 0 {
			return errors.New("a value compare carries a number")
		}
		if len(c.Value) > limits.MaxValue {
			return fmt.Errorf("value of %d bytes (at most %d)", len(c.Value), limits.MaxValue)
		}
	default:
		return fmt.Errorf("unknown target %d", c.Target)
	}
	return nil
}

func (op *Op) validate() error {
	if op.Type == Nested {
		if op.Txn == nil || len(op.Key) != 0 || len(op.Value) != 0 || len(op.RangeEnd) != 0 || op.Lease != 0 ||
			op.IgnoreValue || op.IgnoreLease || op.PrevKV || !queryZero(&op.Query) {
			return errors.New("a nested transaction carries a key, value or option")
		}
		return nil
	}
	if err := checkKey(op.Key); err != nil {
		return err
	}
	if op.Txn != nil {
		return fmt.Errorf("%s carries a transaction", op.Type)
	}
	if len(op.RangeEnd) > limits.MaxKey {
		return fmt.Errorf("range end of %d bytes (at most %d)", len(op.RangeEnd), limits.MaxKey)
	}
	switch op.Type {
	case Put, Delete, Get:
		if len(op.RangeEnd) != 0 {
			return fmt.Errorf("%s carries a range end", op.Type)
		}
	case DeleteRange, Range:
	default:
		return fmt.Errorf("unknown operation %d", op.Type)
	}
	if op.Type != Put && (len(op.Value) != 0 || op.Lease != 0 || op.IgnoreValue || op.IgnoreLease) {
		return fmt.Errorf("%s carries a value, a lease or a put option", op.Type)
	}
	if op.Type != DeleteRange && op.PrevKV {
		return fmt.Errorf("%s carries prev_kv", op.Type)
	}
	if op.Type != Range && !queryZero(&op.Query) {
		return fmt.Errorf("%s carries range options", op.Type)
	}
	if op.Type == Range {
		if err := checkQuery(&op.Query); err != nil {
			return err
		}
	}
	switch {
	case len(op.Value) > limits.MaxValue:
		return fmt.Errorf("value of %d bytes (at most %d)", len(op.Value), limits.MaxValue)
	case op.IgnoreValue && len(op.Value) != 0:
		return ErrValueProvided
	case op.IgnoreLease && op.Lease != 0:
		return ErrLeaseProvided
	}
	return nil
}

func queryZero(q *rangeq.Request) bool {
	return q.Flags == 0 && q.Limit == 0 && len(q.Start) == 0 && len(q.End) == 0 && q.Rev == 0 &&
		!q.Extended()
}

// checkQuery refuses a Range's options that a transaction cannot take.
func checkQuery(q *rangeq.Request) error {
	switch {
	case len(q.Start) != 0 || len(q.End) != 0:
		return errors.New("a range's options carry a start or end (the range is the operation's key and range end)")
	case q.Offset != 0:
		return errors.New("a range in a transaction is read whole: no offset")
	case q.Flags&^(rangeq.KeysOnly|rangeq.CountOnly) != 0:
		return fmt.Errorf("range flags %#x (keys only and count only are a transaction's)", q.Flags)
	}
	return q.Check()
}

func checkKey(k []byte) error {
	switch {
	case len(k) == 0:
		return errors.New("empty key")
	case len(k) > limits.MaxKey:
		return fmt.Errorf("key of %d bytes (at most %d)", len(k), limits.MaxKey)
	}
	return nil
}
