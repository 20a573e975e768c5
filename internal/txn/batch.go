package txn

import "fmt"

// A batch is a list of independent PUTs (wire.OpPutBatch), each applied
// as a request of its own, one after the other, at revisions of their
// own, with outcomes of their own. It is encoded as a transaction with no
// compares whose Then is the PUTs (so that its codec and bounds are a
// transaction's), but it is not one: two PUTs of a batch may name one
// key, the later one applied after the earlier.

// MaxBatchPuts and MaxBatchBytes bound a batch (limits.MaxBatchPuts,
// limits.MaxBatchBytes).
const (
	MaxBatchPuts  = MaxOps
	MaxBatchBytes = MaxBytes
)

// AppendBatch appends the encoding of the batch puts to b.
func AppendBatch(b []byte, puts []Op) []byte { return Append(b, &Txn{Then: puts}) }

// BatchLen is the length of the encoding of the batch puts.
func BatchLen(puts []Op) int { return EncodedLen(&Txn{Then: puts}) }

// ValidateBatch checks puts as a batch: at least one PUT, at most
// MaxBatchPuts, each a valid PUT, MaxBatchBytes encoded at most. Errors
// wrap ErrInvalid.
func ValidateBatch(puts []Op) error {
	if len(puts) == 0 || len(puts) > MaxBatchPuts {
		return fmt.Errorf("%w: a batch of %d PUTs (1 to %d)", ErrInvalid, len(puts), MaxBatchPuts)
	}
	for i := range puts {
		op := &puts[i]
		if op.Type != Put {
			return fmt.Errorf("%w: batch operation %d is a %s, not a put", ErrInvalid, i+1, op.Type)
		}
		if err := op.validate(); err != nil {
			return fmt.Errorf("%w: batch operation %d: %w", ErrInvalid, i+1, err)
		}
	}
	if n := BatchLen(puts); n > MaxBatchBytes {
		return fmt.Errorf("%w: %w: batch of %d bytes encoded (at most %d)", ErrInvalid, ErrTooLarge, n, MaxBatchBytes)
	}
	return nil
}

// DecodeBatch parses a batch from the network and checks it
// (ValidateBatch): errors wrap ErrMalformed or ErrInvalid. Keys and
// values alias b.
func DecodeBatch(b []byte) ([]Op, error) {
	// The bounds first, as Decode's: Parse allocates by the counts.
	r := reader{b: b}
	nc, nt, ne := int(r.u16()), int(r.u16()), int(r.u16())
	switch {
	case len(b) > MaxBatchBytes:
		return nil, fmt.Errorf("%w: %w: batch of %d bytes encoded (at most %d)", ErrInvalid, ErrTooLarge, len(b), MaxBatchBytes)
	case !r.bad && (nc != 0 || ne != 0):
		return nil, fmt.Errorf("%w: a batch with compares or an else branch", ErrInvalid)
	case !r.bad && fits(0, nt, len(r.b)) && nt > MaxBatchPuts:
		return nil, fmt.Errorf("%w: a batch of %d PUTs (1 to %d)", ErrInvalid, nt, MaxBatchPuts)
	}
	puts, err := ParseBatch(b)
	if err != nil {
		return nil, err
	}
	// Not Txn.Validate: a transaction may not put a key twice, a batch may.
	return puts, ValidateBatch(puts)
}

// ParseBatch parses a batch's structure only, as a node applying a log
// entry does (Parse): errors wrap ErrMalformed.
func ParseBatch(b []byte) ([]Op, error) {
	t, err := Parse(b)
	if err != nil {
		return nil, err
	}
	if len(t.Compares) != 0 || len(t.Else) != 0 {
		return nil, fmt.Errorf("%w: a batch with compares or an else branch", ErrMalformed)
	}
	return t.Then, nil
}
