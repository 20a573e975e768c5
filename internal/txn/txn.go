package txn

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
)

// Limits (internal/limits says why they are what they are).
const (
	// MaxCompares is the most compares a transaction may have.
	MaxCompares = limits.MaxTxnCompares
	// MaxOps is the most operations each branch (Then, Else) may have.
	MaxOps = limits.MaxTxnOps
	// MaxBytes bounds a transaction's encoding.
	MaxBytes = limits.MaxTxnBytes
	// MaxReadBytes bounds the values a branch's GETs return together.
	MaxReadBytes = limits.MaxTxnReadBytes
	// MaxResponseBytes bounds a response's encoding.
	MaxResponseBytes = responseHead + MaxCompares*8 + MaxOps*resultHead + MaxReadBytes
)

// Sentinel errors, wrapped with detail. The server answers those Classed
// with errs.ErrBadRequest as bad requests.
var (
	// ErrMalformed: the bytes are not a transaction (or a response).
	ErrMalformed = errs.Classed(errs.ErrBadRequest, "txn: malformed")
	// ErrInvalid: the transaction is well formed but not allowed: a limit
	// is exceeded, a key is empty or too long, an operation or compare is
	// unknown, a GET or DELETE carries a value, or a branch writes a key
	// twice.
	ErrInvalid = errs.Classed(errs.ErrBadRequest, "txn: invalid")
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
	Key    []byte
	Target Target
	Cmp    Cmp
	Num    uint64 // the operand of a numeric target (all but TargetValue)
	Value  []byte // TargetValue's operand
}

// OpType is an operation's kind.
type OpType uint8

// Operation kinds.
const (
	Put    OpType = 1
	Delete OpType = 2
	Get    OpType = 3
)

func (t OpType) String() string {
	switch t {
	case Put:
		return "put"
	case Delete:
		return "delete"
	case Get:
		return "get"
	}
	return fmt.Sprintf("op(%d)", uint8(t))
}

// Op is one operation of a branch.
type Op struct {
	Type  OpType
	Key   []byte
	Value []byte // Put only
	// Lease, on a Put only, attaches the key to that TTL lease (0: none;
	// a Put without a lease detaches the key from any lease, as in etcd).
	// A Put naming a lease that does not exist when the transaction is
	// applied fails the transaction whole (ErrLeaseNotFound).
	Lease uint64
}

// Txn is a transaction: if every compare holds, Then runs, else Else.
type Txn struct {
	Compares   []Compare
	Then, Else []Op
}

// Result is one operation's outcome. Put: Meta is the key's after the
// write (Meta.Mod the transaction's revision). Delete: Found tells whether
// the key existed. Get: Found, and if so the key's Value and Meta.
type Result struct {
	Type  OpType
	Found bool
	Meta  revision.Meta
	Value []byte
}

// Response is a transaction's outcome.
type Response struct {
	Succeeded bool
	// Revision is the store revision after the transaction: its own if it
	// wrote anything, else the one it was evaluated at.
	Revision uint64
	// Compared[i] is the metadata Compares[i]'s key had when the
	// transaction was evaluated (the zero Meta: absent).
	Compared []revision.Meta
	// Results are the outcomes of the branch that ran, one per operation.
	Results []Result
}

// Writes reports whether the transaction can change anything (has a PUT or
// DELETE in either branch). One that cannot may be retried freely.
func (t *Txn) Writes() bool {
	for _, ops := range [2][]Op{t.Then, t.Else} {
		for _, op := range ops {
			if op.Type != Get {
				return true
			}
		}
	}
	return false
}

// Validate checks everything the encoding does not: limits, key and value
// sizes, known targets, operators and op types, and no key written twice in
// a branch (as etcd refuses a duplicate key among a transaction's writes).
// Errors wrap ErrInvalid.
func (t *Txn) Validate() error {
	switch {
	case len(t.Compares) > MaxCompares:
		return fmt.Errorf("%w: %d compares (at most %d)", ErrInvalid, len(t.Compares), MaxCompares)
	case len(t.Then) > MaxOps || len(t.Else) > MaxOps:
		return fmt.Errorf("%w: %d then and %d else operations (at most %d each)", ErrInvalid, len(t.Then), len(t.Else), MaxOps)
	}
	for i, c := range t.Compares {
		if err := c.validate(); err != nil {
			return fmt.Errorf("%w: compare %d: %w", ErrInvalid, i+1, err)
		}
	}
	for _, b := range []struct {
		name string
		ops  []Op
	}{{"then", t.Then}, {"else", t.Else}} {
		for i, op := range b.ops {
			if err := op.validate(); err != nil {
				return fmt.Errorf("%w: %s operation %d: %w", ErrInvalid, b.name, i+1, err)
			}
		}
		if k := duplicateWrite(b.ops); k != nil {
			return fmt.Errorf("%w: %s writes key %q more than once", ErrInvalid, b.name, k)
		}
	}
	if n := EncodedLen(t); n > MaxBytes {
		return fmt.Errorf("%w: %d bytes encoded (at most %d)", ErrInvalid, n, MaxBytes)
	}
	return nil
}

func (c *Compare) validate() error {
	if err := checkKey(c.Key); err != nil {
		return err
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
	if err := checkKey(op.Key); err != nil {
		return err
	}
	switch op.Type {
	case Put:
		if len(op.Value) > limits.MaxValue {
			return fmt.Errorf("value of %d bytes (at most %d)", len(op.Value), limits.MaxValue)
		}
	case Delete, Get:
		if len(op.Value) != 0 {
			return fmt.Errorf("%s carries a value", op.Type)
		}
		if op.Lease != 0 {
			return fmt.Errorf("%s carries a lease", op.Type)
		}
	default:
		return fmt.Errorf("unknown operation %d", op.Type)
	}
	return nil
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

// duplicateWrite returns a key that ops write (PUT or DELETE) more than
// once, or nil.
func duplicateWrite(ops []Op) []byte {
	var keys [][]byte
	for _, op := range ops {
		if op.Type != Get {
			keys = append(keys, op.Key)
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	for i := 1; i < len(keys); i++ {
		if bytes.Equal(keys[i-1], keys[i]) {
			return keys[i]
		}
	}
	return nil
}
