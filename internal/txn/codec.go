package txn

import (
	"encoding/binary"
	"fmt"

	"github.com/kvd-project/kvd/internal/rangeq"
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
	rangeEndHead   = 2          // a range compare's or op's endLen
	putOptsHead    = 1 + 8      // a put with options: flags, lease
	kvHead         = 2 + 4 + 32 // keyLen, valueLen, mod, create, version, lease
	metaLen        = 8          // a compare's mod in the response
)

// rangeBody is a Range's body: its options as internal/rangeq encodes a
// request, with Start left empty (it is the op's key) and End the op's
// RangeEnd, as etcd reads it (empty: the key alone; "\x00": every key
// from the key on).
func rangeBody(op *Op) rangeq.Request {
	q := op.Query
	q.Start, q.End = nil, op.RangeEnd
	return q
}

// Encodings that are not an OpType of their own: a Put with a lease
// (le64 lease ‖ value), and a Put with options (flags, le64 lease, value).
// A Put without either encodes as type 1, so every entry written before
// leases decodes as it did; a Put has exactly one encoding.
const (
	putLease = 4
	putOpts  = 8
)

// Flags of the encoding.
const (
	rangeCompare  = 0x80 // on a compare's target: a range end precedes the operand
	flagPrevKV    = 1    // DeleteRange
	flagIgnoreVal = 1    // putOpts
	flagIgnoreLse = 2    // putOpts
	knownPutFlags = flagIgnoreVal | flagIgnoreLse
)

// maxDepth bounds the nesting Parse and DecodeResponse accept: every level
// takes at least one of its parent's MaxOps (Validate), so no admitted
// transaction nests deeper.
const maxDepth = MaxOps

var le = binary.LittleEndian

// EncodedLen is the length of t's encoding.
func EncodedLen(t *Txn) int {
	n := txnHead
	for i := range t.Compares {
		c := &t.Compares[i]
		n += compareHead + len(c.Key)
		if len(c.RangeEnd) != 0 {
			n += 4 + rangeEndHead + len(c.RangeEnd)
		}
		if c.Target.numeric() {
			n += versionOperand
		} else {
			n += 4 + len(c.Value)
		}
	}
	for _, ops := range [2][]Op{t.Then, t.Else} {
		for i := range ops {
			n += opHead + len(ops[i].Key) + opBodyLen(&ops[i])
		}
	}
	return n
}

// opBodyLen is the length of op's body (what valueLen counts).
func opBodyLen(op *Op) int {
	switch op.Type {
	case Put:
		switch {
		case op.IgnoreValue || op.IgnoreLease:
			return putOptsHead + len(op.Value)
		case op.Lease != 0:
			return leaseOperand + len(op.Value)
		}
		return len(op.Value)
	case DeleteRange:
		return 1 + len(op.RangeEnd)
	case Range:
		q := rangeBody(op)
		return len(rangeq.Append(nil, &q))
	case Nested:
		if op.Txn == nil {
			return txnHead
		}
		return EncodedLen(op.Txn)
	}
	return len(op.Value)
}

// Append appends t's encoding to b. t must be valid (Validate); a compare
// whose target is not numeric is encoded as a value compare.
func Append(b []byte, t *Txn) []byte {
	b = le.AppendUint16(b, uint16(len(t.Compares)))
	b = le.AppendUint16(b, uint16(len(t.Then)))
	b = le.AppendUint16(b, uint16(len(t.Else)))
	for i := range t.Compares {
		b = appendCompare(b, &t.Compares[i])
	}
	for _, ops := range [2][]Op{t.Then, t.Else} {
		for i := range ops {
			b = appendOp(b, &ops[i])
		}
	}
	return b
}

func appendCompare(b []byte, c *Compare) []byte {
	target := byte(c.Target)
	if len(c.RangeEnd) != 0 {
		target |= rangeCompare
	}
	b = append(b, target, byte(c.Cmp))
	b = le.AppendUint16(b, uint16(len(c.Key)))
	b = append(b, c.Key...)
	if len(c.RangeEnd) != 0 {
		// Framed as a value operand, so that a kvd that does not know
		// range compares parses the transaction and refuses its target.
		n := rangeEndHead + len(c.RangeEnd) + versionOperand
		if !c.Target.numeric() {
			n = rangeEndHead + len(c.RangeEnd) + 4 + len(c.Value)
		}
		b = le.AppendUint32(b, uint32(n))
		b = le.AppendUint16(b, uint16(len(c.RangeEnd)))
		b = append(b, c.RangeEnd...)
	}
	if c.Target.numeric() {
		return le.AppendUint64(b, c.Num)
	}
	b = le.AppendUint32(b, uint32(len(c.Value)))
	return append(b, c.Value...)
}

func appendOp(b []byte, op *Op) []byte {
	typ := byte(op.Type)
	if op.Type == Put {
		switch {
		case op.IgnoreValue || op.IgnoreLease:
			typ = putOpts
		case op.Lease != 0:
			typ = putLease
		}
	}
	b = append(b, typ)
	b = le.AppendUint16(b, uint16(len(op.Key)))
	b = le.AppendUint32(b, uint32(opBodyLen(op)))
	b = append(b, op.Key...)
	switch typ {
	case putLease:
		b = le.AppendUint64(b, op.Lease)
	case putOpts:
		flags := byte(0)
		if op.IgnoreValue {
			flags |= flagIgnoreVal
		}
		if op.IgnoreLease {
			flags |= flagIgnoreLse
		}
		b = le.AppendUint64(append(b, flags), op.Lease)
	case byte(DeleteRange):
		flags := byte(0)
		if op.PrevKV {
			flags = flagPrevKV
		}
		return append(append(b, flags), op.RangeEnd...)
	case byte(Range):
		q := rangeBody(op)
		return rangeq.Append(b, &q)
	case byte(Nested):
		if op.Txn == nil {
			return append(b, make([]byte, txnHead)...)
		}
		return Append(b, op.Txn)
	}
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
		return Txn{}, fmt.Errorf("%w: %w: %d bytes encoded (at most %d)", ErrInvalid, ErrTooLarge, len(b), MaxBytes)
	case !r.bad && fits(nc, nt+ne, len(r.b)) && max(nc, nt, ne) > MaxOps:
		return Txn{}, fmt.Errorf("%w: too many operations in txn request: %d compares, %d then and %d else operations (at most %d each)",
			ErrInvalid, nc, nt, ne, MaxOps)
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
	r := reader{b: b}
	t := r.txn(0)
	switch {
	case r.bad:
		return Txn{}, fmt.Errorf("%w: truncated, or with counts its %d bytes cannot hold", ErrMalformed, len(b))
	case len(r.b) != 0:
		return Txn{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	return t, nil
}

// txn reads a transaction at nesting depth.
func (r *reader) txn(depth int) Txn {
	var t Txn
	nc, nt, ne := int(r.u16()), int(r.u16()), int(r.u16())
	// Bound the allocations by what the bytes can hold.
	if r.bad || depth > maxDepth || !fits(nc, nt+ne, len(r.b)) {
		r.bad = true
		return t
	}
	if nc > 0 {
		t.Compares = make([]Compare, nc)
	}
	for i := range t.Compares {
		r.compare(&t.Compares[i])
	}
	t.Then, t.Else = r.ops(nt, depth), r.ops(ne, depth)
	return t
}

func (r *reader) compare(c *Compare) {
	target := r.u8()
	c.Target, c.Cmp = Target(target&^rangeCompare), Cmp(r.u8())
	c.Key = r.bytes(int(r.u16()))
	if target&rangeCompare != 0 {
		body := reader{b: r.bytes(int(r.u32()))}
		body.bad = r.bad
		if c.RangeEnd = body.bytes(int(body.u16())); len(c.RangeEnd) == 0 {
			body.bad = true
		}
		body.operand(c)
		r.bad = r.bad || body.bad || len(body.b) != 0
		return
	}
	r.operand(c)
}

func (r *reader) operand(c *Compare) {
	if c.Target.numeric() {
		c.Num = r.u64()
	} else {
		c.Value = r.bytes(int(r.u32()))
	}
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
		b = appendResult(b, &r.Results[i])
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

func appendResult(b []byte, res *Result) []byte {
	found := byte(0)
	if res.Found {
		found = 1
	}
	b = append(b, byte(res.Type), found)
	b = le.AppendUint64(b, res.Meta.Mod)
	switch res.Type {
	case DeleteRange:
		b = le.AppendUint32(b, uint32(8+4+kvsLen(res.KVs)))
		b = le.AppendUint64(b, res.Deleted)
		return appendKVs(b, res.KVs)
	case Range:
		b = le.AppendUint32(b, uint32(8+1+4+kvsLen(res.KVs)))
		b = le.AppendUint64(b, res.Count)
		more := byte(0)
		if res.More {
			more = 1
		}
		return appendKVs(append(b, more), res.KVs)
	case Nested:
		at := len(b)
		b = le.AppendUint32(b, 0)
		if res.Txn != nil {
			b = AppendResponse(b, res.Txn)
		}
		le.PutUint32(b[at:], uint32(len(b)-at-4))
		return b
	}
	b = le.AppendUint32(b, uint32(len(res.Value)))
	return append(b, res.Value...)
}

func kvsLen(kvs []KV) int {
	n := 0
	for i := range kvs {
		n += kvHead + len(kvs[i].Key) + len(kvs[i].Value)
	}
	return n
}

func appendKVs(b []byte, kvs []KV) []byte {
	b = le.AppendUint32(b, uint32(len(kvs)))
	for i := range kvs {
		kv := &kvs[i]
		b = le.AppendUint16(b, uint16(len(kv.Key)))
		b = le.AppendUint32(b, uint32(len(kv.Value)))
		b = append(append(b, kv.Key...), kv.Value...)
		b = le.AppendUint64(b, kv.Meta.Mod)
		b = appendMetaRest(b, kv.Meta)
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
	r := reader{b: b}
	resp := r.response(0)
	switch {
	case r.bad:
		return Response{}, fmt.Errorf("%w: response truncated or with unknown fields (%d bytes)", ErrMalformed, len(b))
	case len(r.b) != 0:
		return Response{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	return resp, nil
}

// response reads a response at nesting depth: all of r's bytes, as the
// extension is optional (a nested response always has it).
func (r *reader) response(depth int) Response {
	var resp Response
	ok := r.u8()
	nc := int(r.u16())
	if r.bad || ok > 1 || nc*metaLen > len(r.b) || depth > maxDepth {
		r.bad = true
		return resp
	}
	if nc > 0 {
		resp.Compared = make([]revision.Meta, nc)
	}
	for i := range resp.Compared {
		resp.Compared[i].Mod = r.u64()
	}
	nr := int(r.u16())
	if r.bad || nr*minResultLen > len(r.b) {
		r.bad = true
		return resp
	}
	if nr > 0 {
		resp.Results = make([]Result, nr)
	}
	for i := range resp.Results {
		r.result(&resp.Results[i], depth)
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
	resp.Succeeded = ok == 1
	return resp
}

func (r *reader) result(res *Result, depth int) {
	res.Type = OpType(r.u8())
	found := r.u8()
	res.Meta.Mod = r.u64()
	body := reader{b: r.bytes(int(r.u32())), bad: r.bad}
	switch res.Type {
	case Put, Delete, Get:
		if res.Value = body.rest(); len(res.Value) == 0 {
			res.Value = nil
		}
	case DeleteRange:
		res.Deleted = body.u64()
		res.KVs = body.kvs()
	case Range:
		res.Count = body.u64()
		more := body.u8()
		res.More, res.KVs = more == 1, body.kvs()
		body.bad = body.bad || more > 1
	case Nested:
		t := body.response(depth + 1)
		res.Txn = &t
	default:
		body.bad = true
	}
	r.bad = r.bad || body.bad || len(body.b) != 0 || found > 1
	res.Found = found == 1
}

func (r *reader) kvs() []KV {
	n := int(r.u32())
	if r.bad || n*kvHead > len(r.b) {
		r.bad = true
		return nil
	}
	if n == 0 {
		return nil
	}
	kvs := make([]KV, n)
	for i := range kvs {
		kv := &kvs[i]
		kl, vl := int(r.u16()), int(r.u32())
		if kv.Key, kv.Value = r.bytes(kl), r.bytes(vl); vl == 0 {
			kv.Value = nil
		}
		kv.Meta.Mod = r.u64()
		r.metaRest(&kv.Meta)
	}
	return kvs
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

func (r *reader) ops(n, depth int) []Op {
	if n == 0 || r.bad {
		return nil
	}
	ops := make([]Op, n)
	for i := range ops {
		op := &ops[i]
		typ := r.u8()
		kl, vl := int(r.u16()), int(r.u32())
		op.Type, op.Key = OpType(typ), r.bytes(kl)
		body := reader{b: r.bytes(vl), bad: r.bad}
		body.opBody(op, typ, depth)
		if r.bad = r.bad || body.bad; r.bad {
			return nil
		}
	}
	return ops
}

// opBody reads an operation's body, which is all of r.
func (r *reader) opBody(op *Op, typ byte, depth int) {
	switch typ {
	case putLease:
		op.Type, op.Lease = Put, r.u64()
		// A lease of 0 is a plain Put: never two encodings of one op.
		r.bad = r.bad || op.Lease == 0
	case putOpts:
		flags := r.u8()
		op.Type, op.Lease = Put, r.u64()
		op.IgnoreValue, op.IgnoreLease = flags&flagIgnoreVal != 0, flags&flagIgnoreLse != 0
		r.bad = r.bad || flags == 0 || flags&^knownPutFlags != 0
	case byte(DeleteRange):
		flags := r.u8()
		op.PrevKV, op.RangeEnd = flags&flagPrevKV != 0, r.rest()
		r.bad = r.bad || flags&^flagPrevKV != 0
		return
	case byte(Range):
		body := r.rest()
		if r.bad || rangeq.Decode(body, &op.Query) != nil || len(op.Query.Start) != 0 {
			r.bad = true
			return
		}
		op.Query.Start = nil
		if op.RangeEnd, op.Query.End = op.Query.End, nil; len(op.RangeEnd) == 0 {
			op.RangeEnd = nil
		}
		return
	case byte(Nested):
		t := r.txn(depth + 1)
		op.Txn = &t
		r.bad = r.bad || len(r.b) != 0
		return
	}
	// A Put's value, or what an unknown type carries (Validate refuses it).
	op.Value = r.rest()
}

// rest returns what remains of r (nil if nothing).
func (r *reader) rest() []byte {
	if r.bad || len(r.b) == 0 {
		return nil
	}
	return r.bytes(len(r.b))
}
