package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
)

// Range scans (OpScan). The request's Flags carry the consistency level, its
// Key is empty and its Value is a range request (internal/rangeq's
// encoding, which owns its fields and flags); the response's Version is
// the store revision the page was read at, its Value a ScanResponse.
//
//	scan response = flags:u8 count:u64 nextLen:u16 next n:u32 n*(keyLen:u16 mod:u64 valueLen:u32 key value)
//	                [n*(create:u64 version:u64 lease:u64)] [current:u64]
//
// The metadata after the entries is there when the request set
// rangeq.Meta (ScanHasMeta in the response): a client of a kvd before
// revisions neither asks for it nor gets it. current, the store's
// revision as the page was served (at least the revision read), is there
// when the request set rangeq.Current (ScanHasCurrent). Count and Next
// mean what rangeq.Result's do.
//
// A page holds at most MaxScanKeys keys and stops before the entry that
// would take its keys and values past MaxScanBytes, but always holds at
// least one entry when one remains (one full-size value fits in a message).

// Scan bounds per response.
const (
	MaxScanKeys  = limits.MaxScanKeys
	MaxScanBytes = limits.MaxScanBytes
)

// Scan response flags.
const (
	ScanMore    uint8 = 1 << 0 // entries remain after this page (rangeq.Result.More)
	ScanHasMeta uint8 = 1 << 1 // the entries' metadata follows them
	// ScanHasCurrent: the store's current revision ends the page.
	ScanHasCurrent uint8 = 1 << 2
	scanRespFlag         = ScanMore | ScanHasMeta | ScanHasCurrent
)

// ErrScan: a scan response does not decode.
var ErrScan = errors.New("wire: malformed scan")

// ScanKV is one entry of a page. Key and Value alias the frame. Meta is
// the key's revision metadata: Meta.Mod always, the rest with ScanHasMeta.
type ScanKV struct {
	Key   []byte
	Meta  revision.Meta
	Value []byte
}

// ScanResponse is one page. Count: with rangeq.CountOnly or rangeq.Total,
// the number of keys in the whole range; otherwise len(KVs). With ScanMore
// set, Next is where the following page continues (rangeq.Result.Next;
// empty for a page of a sort by another target than the key, which
// continues at an offset). With ScanHasCurrent, Current is the store's
// revision as the page was served.
type ScanResponse struct {
	Flags   uint8
	Count   uint64
	Next    []byte
	KVs     []ScanKV
	Current uint64
}

// scanReader reads the fields of a scan frame, remembering the first error.
type scanReader struct {
	b   []byte
	err error
}

func (r *scanReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrScan, what)
	}
	r.b = nil
}

// take returns the next n (at most 8) bytes, or zeros once the frame is
// short.
func (r *scanReader) take(n int, what string) []byte {
	if len(r.b) < n {
		r.fail("short " + what)
		return make([]byte, 8)[:n]
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *scanReader) u8(what string) uint8 { return r.take(1, what)[0] }

func (r *scanReader) u16(what string) uint16 { return binary.LittleEndian.Uint16(r.take(2, what)) }

func (r *scanReader) u32(what string) uint32 { return binary.LittleEndian.Uint32(r.take(4, what)) }

func (r *scanReader) u64(what string) uint64 { return binary.LittleEndian.Uint64(r.take(8, what)) }

func (r *scanReader) bytes(n uint64, what string) []byte {
	if uint64(len(r.b)) < n {
		r.fail(what + " longer than the frame")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *scanReader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Sprintf("%d trailing bytes", len(r.b)))
	}
	return r.err
}

// ScanEntryLen is the encoded size of one entry.
func ScanEntryLen(keyLen, valueLen int) int { return 2 + 8 + 4 + keyLen + valueLen }

// AppendScanResponse appends r's encoding to b.
func AppendScanResponse(b []byte, r *ScanResponse) []byte {
	b = append(b, r.Flags)
	b = binary.LittleEndian.AppendUint64(b, r.Count)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(r.Next)))
	b = append(b, r.Next...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.KVs)))
	for _, kv := range r.KVs {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(kv.Key)))
		b = binary.LittleEndian.AppendUint64(b, kv.Meta.Mod)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(kv.Value)))
		b = append(b, kv.Key...)
		b = append(b, kv.Value...)
	}
	if r.Flags&ScanHasMeta != 0 {
		for _, kv := range r.KVs {
			b = binary.LittleEndian.AppendUint64(b, kv.Meta.Create)
			b = binary.LittleEndian.AppendUint64(b, kv.Meta.Version)
			b = binary.LittleEndian.AppendUint64(b, kv.Meta.Lease)
		}
	}
	if r.Flags&ScanHasCurrent != 0 {
		b = binary.LittleEndian.AppendUint64(b, r.Current)
	}
	return b
}

// DecodeScanResponse parses a page. Keys, values and Next alias b. The
// entry count is checked against the bytes present before anything is
// allocated for it.
func DecodeScanResponse(b []byte, out *ScanResponse) error {
	r := scanReader{b: b}
	var p ScanResponse
	p.Flags = r.u8("flags")
	p.Count = r.u64("count")
	p.Next = r.bytes(uint64(r.u16("next length")), "next")
	n := r.u32("entry count")
	if r.err == nil && uint64(n)*uint64(ScanEntryLen(0, 0)) > uint64(len(r.b)) {
		r.fail(fmt.Sprintf("%d entries in %d bytes", n, len(r.b)))
	}
	if r.err == nil && n > 0 {
		p.KVs = make([]ScanKV, n)
	}
	for i := range p.KVs {
		kl := r.u16("key length")
		p.KVs[i].Meta.Mod = r.u64("mod revision")
		vl := r.u32("value length")
		p.KVs[i].Key = r.bytes(uint64(kl), "key")
		p.KVs[i].Value = r.bytes(uint64(vl), "value")
		if r.err != nil {
			break
		}
	}
	if p.Flags&ScanHasMeta != 0 {
		for i := range p.KVs {
			m := &p.KVs[i].Meta
			m.Create, m.Version, m.Lease = r.u64("create revision"), r.u64("version"), r.u64("lease")
		}
	}
	if p.Flags&ScanHasCurrent != 0 {
		p.Current = r.u64("current revision")
	}
	if err := r.done(); err != nil {
		return err
	}
	if p.Flags&^scanRespFlag != 0 {
		return fmt.Errorf("%w: unknown flags %#x", ErrScan, p.Flags)
	}
	*out = p
	return nil
}

// PrefixEnd is the exclusive upper bound of the keys starting with prefix:
// prefix with its last byte below 0xff incremented and what follows it cut
// off. A prefix of only 0xff bytes (or an empty one) has no upper bound, so
// it returns nil, which a ScanRequest's End takes as "no bound".
func PrefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] < 0xff {
			end := append([]byte(nil), prefix[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}
