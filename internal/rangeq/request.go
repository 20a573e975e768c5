package rangeq

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/revision"
)

// Request flags.
const (
	KeysOnly  uint8 = 1 << 0 // values are left out
	CountOnly uint8 = 1 << 1 // only the count, no entries
	Meta      uint8 = 1 << 2 // the reply carries each entry's whole revision.Meta (a reply format choice)
	Total     uint8 = 1 << 3 // Count is etcd's: every key of the range, not only the entries returned
	// Current: the reply also carries the store's revision as the read
	// was served, which a read at a past revision does not otherwise
	// tell (etcd's header revision; a reply format choice of OpScan).
	Current  uint8 = 1 << 4
	allFlags       = KeysOnly | CountOnly | Meta | Total | Current
)

// Target is what a range is sorted by; the numbers are etcd's
// RangeRequest.SortTarget.
type Target uint8

// Sort targets.
const (
	ByKey     Target = 0
	ByVersion Target = 1
	ByCreate  Target = 2
	ByMod     Target = 3
	ByValue   Target = 4
)

// Order is the direction of the sort; the numbers are etcd's
// RangeRequest.SortOrder.
type Order uint8

// Sort orders. None is etcd's default: ascending (by key, or by a target
// other than the key).
const (
	None    Order = 0
	Ascend  Order = 1
	Descend Order = 2
)

// ErrMalformed: a request does not decode, or asks for what no range read
// can be (an unknown flag, target or order; keys only with count only; an
// offset for a key-ordered read).
var ErrMalformed = errors.New("malformed range request")

// extLen is the size of the extension (see the package doc).
const extLen = 1 + 1 + 4*8 + 4

// Request is etcd's RangeRequest: the keys k with Start <= k < End (an
// empty Start is the first key, an empty End no upper bound), at store
// revision Rev (0: the latest), filtered, sorted and limited.
type Request struct {
	Flags uint8
	// Limit is the most entries this reply holds (0: the bound of the
	// reply). A client's limit over several replies is the client's.
	Limit      uint32
	Start, End []byte
	Rev        uint64
	Target     Target
	Order      Order
	// The filters keep the keys whose mod and create revisions lie within
	// [MinMod, MaxMod] and [MinCreate, MaxCreate]; 0 is no bound.
	MinMod, MaxMod       uint64
	MinCreate, MaxCreate uint64
	// Offset skips that many entries of a result sorted by a target
	// other than the key: how such a result is paged (Sorted).
	Offset uint32
}

// Sorted reports whether q is sorted by a target other than the key: its
// matching keys are held in memory and sorted, and its pages go by Offset.
// A key-ordered read pages by key instead.
func (q *Request) Sorted() bool { return q.Target != ByKey }

// Descending reports whether q's entries come highest first.
func (q *Request) Descending() bool { return q.Order == Descend }

// Advance makes q ask for the page after one that returned n entries and,
// in key order, the key next to continue from: a sorted read continues
// at its offset, a descending one below next, an ascending one at next.
func (q *Request) Advance(n int, next []byte) {
	switch {
	case q.Sorted():
		q.Offset += uint32(n)
	case q.Descending():
		q.End = next
	default:
		q.Start = next
	}
}

// Filtered reports whether q has a revision filter.
func (q *Request) Filtered() bool {
	return q.MinMod != 0 || q.MaxMod != 0 || q.MinCreate != 0 || q.MaxCreate != 0
}

// Extended reports whether q needs the extension: a sort other than
// ascending key order, a filter or an offset. A server that predates the
// extension refuses such a request (it has trailing bytes).
func (q *Request) Extended() bool {
	return q.Target != ByKey || q.Order != None || q.Filtered() || q.Offset != 0
}

// match reports whether m passes q's filters.
func (q *Request) match(m revision.Meta) bool {
	return (q.MinMod == 0 || m.Mod >= q.MinMod) && (q.MaxMod == 0 || m.Mod <= q.MaxMod) &&
		(q.MinCreate == 0 || m.Create >= q.MinCreate) && (q.MaxCreate == 0 || m.Create <= q.MaxCreate)
}

// Check reports what makes q a request no range read can serve.
func (q *Request) Check() error {
	switch {
	case q.Flags&^allFlags != 0:
		return fmt.Errorf("%w: unknown flags %#x", ErrMalformed, q.Flags&^allFlags)
	case q.Flags&KeysOnly != 0 && q.Flags&CountOnly != 0:
		return fmt.Errorf("%w: keys only and count only", ErrMalformed)
	case q.Target > ByValue:
		return fmt.Errorf("%w: unknown sort target %d", ErrMalformed, q.Target)
	case q.Order > Descend:
		return fmt.Errorf("%w: unknown sort order %d", ErrMalformed, q.Order)
	case q.Offset != 0 && !q.Sorted():
		return fmt.Errorf("%w: an offset in a key-ordered range", ErrMalformed)
	}
	return nil
}

// Append appends q's encoding to b.
func Append(b []byte, q *Request) []byte {
	b = append(b, q.Flags)
	b = binary.LittleEndian.AppendUint32(b, q.Limit)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(q.Start)))
	b = append(b, q.Start...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(q.End)))
	b = append(b, q.End...)
	ext := q.Extended()
	if q.Rev != 0 || ext {
		b = binary.LittleEndian.AppendUint64(b, q.Rev)
	}
	if ext {
		b = append(b, uint8(q.Target), uint8(q.Order))
		for _, v := range [...]uint64{q.MinMod, q.MaxMod, q.MinCreate, q.MaxCreate} {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		b = binary.LittleEndian.AppendUint32(b, q.Offset)
	}
	return b
}

// Decode parses a request and checks it (Check). Start and End alias b.
func Decode(b []byte, out *Request) error {
	var q Request
	r := reader{b: b}
	q.Flags = r.u8()
	q.Limit = r.u32()
	q.Start = r.bytes(int(r.u16()))
	q.End = r.bytes(int(r.u16()))
	switch len(r.b) {
	case 0:
	case 8:
		if q.Rev = r.u64(); q.Rev == 0 {
			return fmt.Errorf("%w: revision 0 is sent by leaving it out", ErrMalformed)
		}
	case 8 + extLen:
		q.Rev = r.u64()
		q.Target, q.Order = Target(r.u8()), Order(r.u8())
		q.MinMod, q.MaxMod, q.MinCreate, q.MaxCreate = r.u64(), r.u64(), r.u64(), r.u64()
		q.Offset = r.u32()
		if !q.Extended() {
			return fmt.Errorf("%w: an extension that asks for nothing is sent by leaving it out", ErrMalformed)
		}
	default:
		if r.short {
			return fmt.Errorf("%w: truncated", ErrMalformed)
		}
		return fmt.Errorf("%w: %d bytes after the range", ErrMalformed, len(r.b))
	}
	if r.short {
		return fmt.Errorf("%w: truncated", ErrMalformed)
	}
	if err := q.Check(); err != nil {
		return err
	}
	*out = q
	return nil
}

// reader reads the fields of a request; past the end it reads zeros and
// sets short.
type reader struct {
	b     []byte
	short bool
}

func (r *reader) take(n int) []byte {
	if len(r.b) < n {
		r.short, r.b = true, nil
		return make([]byte, n)
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8   { return r.take(1)[0] }
func (r *reader) u16() uint16 { return binary.LittleEndian.Uint16(r.take(2)) }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }
func (r *reader) bytes(n int) []byte {
	if r.short {
		return nil
	}
	return r.take(n)
}
