package txn

import (
	"encoding/binary"
	"fmt"

	"github.com/kvd-project/kvd/internal/revision"
)

// Fixed sizes of the encoding (doc.go).
const (
	txnHead        = 6         // nCompares, nThen, nElse
	compareHead    = 4         // target, cmp, keyLen
	opHead         = 7         // type, keyLen, valueLen
	responseHead   = 1 + 2 + 2 // succeeded, nCompares, nResults
	resultHead     = 14        // type, found, version, valueLen
	minCompareLen  = compareHead + 4
	minOpLen       = opHead
	minResultLen   = resultHead
	versionOperand = 8
	leaseOperand   = 8
)

// putLease is the encoded type of a Put with a lease: its value is
// le64 lease ‖ value. A Put without one encodes as before (type 1), so
// every entry written before leases decodes as it did.
const putLease = 4

var le = binary.LittleEndian

// EncodedLen is the length of t's encoding.
func EncodedLen(t *Txn) int {
	n := txnHead
	for i := range t.Compares {
		c := &t.Compares[i]
		n += compareHead + len(c.Key)
		if c.Target.numeric() {
			n += versionOperand
		} else {
			n += 4 + len(c.Value)
		}
	}
	for _, ops := range [2][]Op{t.Then, t.Else} {
		for i := range ops {
			n += opHead + len(ops[i].Key) + len(ops[i].Value)
			if ops[i].Lease != 0 {
				n += leaseOperand
			}
		}
	}
	return n
}

// Append appends t's encoding to b. t must be valid (Validate); a compare
// whose target is not numeric is encoded as a value compare.
func Append(b []byte, t *Txn) []byte {
	b = le.AppendUint16(b, uint16(len(t.Compares)))
	b = le.AppendUint16(b, uint16(len(t.Then)))
	b = le.AppendUint16(b, uint16(len(t.Else)))
	for i := range t.Compares {
		c := &t.Compares[i]
		b = append(b, byte(c.Target), byte(c.Cmp))
		b = le.AppendUint16(b, uint16(len(c.Key)))
		b = append(b, c.Key...)
		if c.Target.numeric() {
			b = le.AppendUint64(b, c.Num)
		} else {
			b = le.AppendUint32(b, uint32(len(c.Value)))
			b = append(b, c.Value...)
		}
	}
	for _, ops := range [2][]Op{t.Then, t.Else} {
		for i := range ops {
			b = appendOp(b, &ops[i])
		}
	}
	return b
}

func appendOp(b []byte, op *Op) []byte {
	if op.Type == Put && op.Lease != 0 {
		b = append(b, putLease)
		b = le.AppendUint16(b, uint16(len(op.Key)))
		b = le.AppendUint32(b, uint32(leaseOperand+len(op.Value)))
		b = append(b, op.Key...)
		b = le.AppendUint64(b, op.Lease)
		return append(b, op.Value...)
	}
	b = append(b, byte(op.Type))
	b = le.AppendUint16(b, uint16(len(op.Key)))
	b = le.AppendUint32(b, uint32(len(op.Value)))
	b = append(b, op.Key...)
	return append(b, op.Value...)
}

// fits reports whether rest bytes can hold nc compares and nops operations.
func fits(nc, nops, rest int) bool { return nc*minCompareLen+nops*minOpLen <= rest }

// Decode parses a transaction from the network and checks it (Validate):
// it returns an error wrapping ErrMalformed or ErrInvalid, never a
// transaction the server should not propose. Keys and values alias b.
func Decode(b []byte) (Txn, error) {
	// The limits first: Parse allocates by the header's counts (up to
	// 65535 each), bounded only by what the bytes could hold.
	r := reader{b: b}
	nc, nt, ne := int(r.u16()), int(r.u16()), int(r.u16())
	switch {
	case len(b) > MaxBytes:
		return Txn{}, fmt.Errorf("%w: %d bytes encoded (at most %d)", ErrInvalid, len(b), MaxBytes)
	case !r.bad && fits(nc, nt+ne, len(r.b)) && (nc > MaxCompares || nt > MaxOps || ne > MaxOps):
		return Txn{}, fmt.Errorf("%w: %d compares, %d then and %d else operations (at most %d and %d each)",
			ErrInvalid, nc, nt, ne, MaxCompares, MaxOps)
	}
	t, err := Parse(b)
	if err != nil {
		return t, err
	}
	return t, t.Validate()
}

// Parse parses a transaction's structure only (errors wrap ErrMalformed):
// it is what a node applying a log entry uses, so that every node applies
// every entry that was admitted, whatever limits it was built with. Keys
// and values alias b.
func Parse(b []byte) (Txn, error) {
	var t Txn
	r := reader{b: b}
	nc, nt, ne := int(r.u16()), int(r.u16()), int(r.u16())
	if r.bad {
		return t, fmt.Errorf("%w: %d bytes, shorter than a header", ErrMalformed, len(b))
	}
	// Bound the allocations by what the bytes can hold.
	if !fits(nc, nt+ne, len(r.b)) {
		return t, fmt.Errorf("%w: %d compares and %d operations cannot fit %d bytes", ErrMalformed, nc, nt+ne, len(r.b))
	}
	if nc > 0 {
		t.Compares = make([]Compare, nc)
	}
	for i := range t.Compares {
		c := &t.Compares[i]
		c.Target, c.Cmp = Target(r.u8()), Cmp(r.u8())
		c.Key = r.bytes(int(r.u16()))
		if c.Target.numeric() {
			c.Num = r.u64()
		} else {
			c.Value = r.bytes(int(r.u32()))
		}
	}
	t.Then, t.Else = r.ops(nt), r.ops(ne)
	switch {
	case r.bad:
		return Txn{}, fmt.Errorf("%w: truncated (%d bytes)", ErrMalformed, len(b))
	case len(r.b) != 0:
		return Txn{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	return t, nil
}

// AppendResponse appends r's encoding to b: the fields every kvd has
// read (each key's mod revision), then an extension with the response's
// revision and the rest of each key's metadata (doc.go).
func AppendResponse(b []byte, r *Response) []byte {
	ok := byte(0)
	if r.Succeeded {
		ok = 1
	}
	b = append(b, ok)
	b = le.AppendUint16(b, uint16(len(r.Compared)))
	for _, m := range r.Compared {
		b = le.AppendUint64(b, m.Mod)
	}
	b = le.AppendUint16(b, uint16(len(r.Results)))
	for i := range r.Results {
		res := &r.Results[i]
		found := byte(0)
		if res.Found {
			found = 1
		}
		b = append(b, byte(res.Type), found)
		b = le.AppendUint64(b, res.Meta.Mod)
		b = le.AppendUint32(b, uint32(len(res.Value)))
		b = append(b, res.Value...)
	}
	b = le.AppendUint64(b, r.Revision)
	for _, m := range r.Compared {
		b = appendMetaRest(b, m)
	}
	for i := range r.Results {
		b = appendMetaRest(b, r.Results[i].Meta)
	}
	return b
}

// metaRest is the length of a Meta's fields besides Mod in the extension.
const metaRest = 24

func appendMetaRest(b []byte, m revision.Meta) []byte {
	b = le.AppendUint64(b, m.Create)
	b = le.AppendUint64(b, m.Version)
	return le.AppendUint64(b, m.Lease)
}

func (r *reader) metaRest(m *revision.Meta) {
	m.Create, m.Version, m.Lease = r.u64(), r.u64(), r.u64()
}

// DecodeResponse parses a response; values alias b. Errors wrap
// ErrMalformed. A response without the extension (from a kvd before
// revisions) leaves Revision 0 and only each Meta's Mod set.
func DecodeResponse(b []byte) (Response, error) {
	var resp Response
	r := reader{b: b}
	ok := r.u8()
	nc := int(r.u16())
	if r.bad || ok > 1 || nc*8 > len(r.b) {
		return resp, fmt.Errorf("%w: response header", ErrMalformed)
	}
	if nc > 0 {
		resp.Compared = make([]revision.Meta, nc)
	}
	for i := range resp.Compared {
		resp.Compared[i].Mod = r.u64()
	}
	nr := int(r.u16())
	if r.bad || nr*minResultLen > len(r.b) {
		return Response{}, fmt.Errorf("%w: %d results cannot fit %d bytes", ErrMalformed, nr, len(r.b))
	}
	if nr > 0 {
		resp.Results = make([]Result, nr)
	}
	for i := range resp.Results {
		decodeResult(&r, &resp.Results[i])
	}
	if !r.bad && len(r.b) > 0 {
		resp.Revision = r.u64()
		for i := range resp.Compared {
			r.metaRest(&resp.Compared[i])
		}
		for i := range resp.Results {
			r.metaRest(&resp.Results[i].Meta)
		}
	}
	switch {
	case r.bad:
		return Response{}, fmt.Errorf("%w: response truncated or with unknown fields (%d bytes)", ErrMalformed, len(b))
	case len(r.b) != 0:
		return Response{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	resp.Succeeded = ok == 1
	return resp, nil
}

func decodeResult(r *reader, res *Result) {
	res.Type = OpType(r.u8())
	found := r.u8()
	res.Meta.Mod = r.u64()
	if res.Value = r.bytes(int(r.u32())); len(res.Value) == 0 {
		res.Value = nil
	}
	if found > 1 || res.Type < Put || res.Type > Get {
		r.bad = true
	}
	res.Found = found == 1
}

// reader consumes b; once a read runs past the end, bad is set and every
// later read returns zero values.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u8() uint8 {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if p := r.take(2); p != nil {
		return le.Uint16(p)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if p := r.take(4); p != nil {
		return le.Uint32(p)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if p := r.take(8); p != nil {
		return le.Uint64(p)
	}
	return 0
}

// bytes returns the next n bytes.
func (r *reader) bytes(n int) []byte { return r.take(n) }

func (r *reader) ops(n int) []Op {
	if n == 0 || r.bad {
		return nil
	}
	ops := make([]Op, n)
	for i := range ops {
		op := &ops[i]
		op.Type = OpType(r.u8())
		kl, vl := int(r.u16()), int(r.u32())
		op.Key, op.Value = r.bytes(kl), r.bytes(vl)
		if op.Type == putLease {
			if len(op.Value) < leaseOperand {
				r.bad = true
				return nil
			}
			op.Type, op.Lease, op.Value = Put, le.Uint64(op.Value), op.Value[leaseOperand:]
			if op.Lease == 0 {
				r.bad = true // encoded as a plain Put; never two encodings of one op
				return nil
			}
		}
	}
	return ops
}
