package txn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/rangeq"
	"github.com/kvd-project/kvd/internal/revision"
)

func b(s string) []byte { return []byte(s) }

// sample is a transaction using every target, operator and op type.
func sample() Txn {
	return Txn{
		Compares: []Compare{
			{Key: b("a"), Target: TargetMod, Cmp: Equal, Num: 7},
			{Key: b("b"), Target: TargetValue, Cmp: NotEqual, Value: b("x")},
			{Key: b("c"), Target: TargetVersion, Cmp: Less, Num: 1 << 40},
			{Key: b("d"), Target: TargetValue, Cmp: Greater, Value: []byte{}},
		},
		Then: []Op{{Type: Put, Key: b("a"), Value: b("1")}, {Type: Delete, Key: b("b")}, {Type: Get, Key: b("a")}},
		Else: []Op{{Type: Get, Key: b("b")}},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tx := range []Txn{{}, sample(), {Then: []Op{{Type: Put, Key: b("k"), Value: []byte{}}}}} {
		enc := Append(nil, &tx)
		if len(enc) != EncodedLen(&tx) {
			t.Fatalf("encoded %d bytes, EncodedLen says %d", len(enc), EncodedLen(&tx))
		}
		got, err := Decode(enc)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !bytes.Equal(Append(nil, &got), enc) || len(got.Compares) != len(tx.Compares) || len(got.Then) != len(tx.Then) {
			t.Fatalf("round trip changed %+v into %+v", tx, got)
		}
	}
	r := Response{Succeeded: true, Revision: 12, Compared: []revision.Meta{{}, {Create: 2, Mod: 9, Version: 4, Lease: 77}}, Results: []Result{
		{Type: Put, Meta: revision.Meta{Create: 12, Mod: 12, Version: 1}}, {Type: Delete, Found: true},
		{Type: Get, Found: true, Meta: revision.Meta{Create: 1, Mod: 3, Version: 2, Lease: 1 << 62}, Value: b("v")},
	}}
	got, err := DecodeResponse(AppendResponse(nil, &r))
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("response round trip: %+v, %v; want %+v", got, err, r)
	}
}

// TestDecodeMalformed: bytes that are not a transaction fail with
// ErrMalformed, never a panic or a partial transaction.
func TestDecodeMalformed(t *testing.T) {
	good := sample()
	enc := Append(nil, &good)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), enc...)) }
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short header", enc[:5]},
		{"truncated", enc[:len(enc)-1]},
		{"trailing byte", append(append([]byte(nil), enc...), 0)},
		{"counts beyond the bytes", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0}},
		{"key length beyond the frame", mut(func(b []byte) []byte { b[txnHead+2], b[txnHead+3] = 0xff, 0xff; return b })},
		{"value length beyond the frame", mut(func(b []byte) []byte {
			// the second compare is a value compare; its value length follows key "b"
			off := txnHead + compareHead + 1 + versionOperand + compareHead + 1
			b[off+3] = 0x7f
			return b
		})},
		{"one op more than there is", mut(func(b []byte) []byte { b[4]++; return b })},
	} {
		tx, err := Decode(tc.b)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", tc.name, err)
		}
		if tx.Compares != nil || tx.Then != nil || tx.Else != nil {
			t.Errorf("%s: returned a partial transaction %+v", tc.name, tx)
		}
	}
}

// TestValidate: well-formed transactions that break a rule fail with
// ErrInvalid and a message naming the rule.
func TestValidate(t *testing.T) {
	put := func(k string) Op { return Op{Type: Put, Key: b(k), Value: b("v")} }
	nested := func(t Txn) Op { return Op{Type: Nested, Txn: &t} }
	many := func(n int, f func(i int) Op) []Op {
		ops := make([]Op, n)
		for i := range ops {
			ops[i] = f(i)
		}
		return ops
	}
	long := strings.Repeat("k", 1025)
	// The encoding cannot carry this fault (a version compare has no value
	// field), so Decode cannot meet it.
	notOnWire := map[string]bool{"version compare with a value": true, "put with a range end": true, "range options on a delete": true,
		"range with keys only and count only": true}
	for _, tc := range []struct {
		name string
		tx   Txn
		want string // in the message; "" for valid
	}{
		{"sample", sample(), ""},
		{"put and get of one key", Txn{Then: []Op{put("a"), {Type: Get, Key: b("a")}}}, ""},
		{"same key in then and else", Txn{Then: []Op{put("a")}, Else: []Op{put("a")}}, ""},
		{"duplicate put", Txn{Then: []Op{put("a"), put("b"), put("a")}}, `then: duplicate key given in txn request: "a"`},
		{"put and delete of one key", Txn{Else: []Op{put("a"), {Type: Delete, Key: b("a")}}}, `else: duplicate key given in txn request: "a"`},
		{"delete then put of one key", Txn{Else: []Op{{Type: Delete, Key: b("a")}, put("a")}}, `duplicate key given in txn request: "a"`},
		{"two deletes of one key", Txn{Then: []Op{{Type: Delete, Key: b("a")}, {Type: DeleteRange, Key: b("a"), RangeEnd: b("b")}}}, ""},
		{"put inside a deleted range", Txn{Then: []Op{{Type: DeleteRange, Key: b("a"), RangeEnd: b("c")}, put("b")}}, `duplicate key given in txn request: "b"`},
		{"put inside a deleted prefix to the end", Txn{Then: []Op{put("zz"), {Type: DeleteRange, Key: b("z"), RangeEnd: b("\x00")}}}, `duplicate key given in txn request: "zz"`},
		{"put beside a deleted range", Txn{Then: []Op{{Type: DeleteRange, Key: b("a"), RangeEnd: b("c")}, put("c")}}, ""},
		{"put in a nested txn and its parent", Txn{Then: []Op{nested(Txn{Then: []Op{put("a")}}), put("a")}}, `duplicate key given in txn request: "a"`},
		{"put in a nested txn under its parent's delete", Txn{Then: []Op{{Type: DeleteRange, Key: b("a"), RangeEnd: b("b")}, nested(Txn{Else: []Op{put("a")}})}}, `duplicate key given in txn request: "a"`},
		{"put in a nested then under its parent's delete", Txn{Then: []Op{{Type: Delete, Key: b("a")}, nested(Txn{Then: []Op{put("a")}})}}, `duplicate key given in txn request: "a"`},
		{"put in both branches of a nested txn", Txn{Then: []Op{nested(Txn{Then: []Op{put("a")}, Else: []Op{put("a")}})}}, ""},
		{"put in two nested txns", Txn{Then: []Op{nested(Txn{Then: []Op{put("a")}}), nested(Txn{Else: []Op{put("a")}})}}, `duplicate key given in txn request: "a"`},
		{"put in a nested txn before a nested delete", Txn{Then: []Op{nested(Txn{Then: []Op{put("a")}}), nested(Txn{Then: []Op{{Type: Delete, Key: b("a")}}})}}, ""},
		{"too many compares", Txn{Compares: make([]Compare, MaxCompares+1)}, "too many operations in txn request: 129 compares"},
		{"too many ops", Txn{Then: many(MaxOps+1, func(i int) Op { return put(string(rune('a' + i%26))) })}, "129 then"},
		{"128 ops", Txn{Then: many(MaxOps, func(i int) Op { return Op{Type: Get, Key: b("k")} })}, ""},
		{"nested txn within what its parent leaves", Txn{Then: append(many(99, func(int) Op { return Op{Type: Get, Key: b("k")} }),
			nested(Txn{Else: many(MaxOps-100, func(int) Op { return Op{Type: Get, Key: b("k")} })}))}, ""},
		{"nested txn over what its parent leaves", Txn{Then: append(many(99, func(int) Op { return Op{Type: Get, Key: b("k")} }),
			nested(Txn{Else: many(MaxOps-99, func(int) Op { return Op{Type: Get, Key: b("k")} })}))}, "too many operations in txn request: 0 compares, 0 then and 29 else operations (at most 28 each, in a transaction nested 1 deep"},
		{"ignore_value with a value", Txn{Then: []Op{{Type: Put, Key: b("a"), Value: b("v"), IgnoreValue: true}}}, "value is provided"},
		{"ignore_lease with a lease", Txn{Then: []Op{{Type: Put, Key: b("a"), Lease: 7, IgnoreLease: true}}}, "lease is provided"},
		{"nested txn with a key", Txn{Then: []Op{{Type: Nested, Key: b("a"), Txn: &Txn{}}}}, "nested transaction carries a key"},
		{"put with a range end", Txn{Then: []Op{{Type: Put, Key: b("a"), RangeEnd: b("b")}}}, "put carries a range end"},
		{"range options on a delete", Txn{Then: []Op{{Type: DeleteRange, Key: b("a"), Query: rangeq.Request{Limit: 3}}}}, "carries range options"},
		{"range at a revision of its own", Txn{Then: []Op{{Type: Range, Key: b("a"), Query: rangeq.Request{Rev: 3}}, put("a")}}, ""},
		{"range with keys only and count only", Txn{Then: []Op{{Type: Range, Key: b("a"), Query: rangeq.Request{Flags: rangeq.KeysOnly | rangeq.CountOnly}}}}, "keys only and count only"},
		{"invalid op in a nested txn", Txn{Then: []Op{nested(Txn{Then: []Op{{Type: Get}}})}}, "then operation 1: empty key"},
		{"empty key", Txn{Then: []Op{{Type: Get}}}, "then operation 1: empty key"},
		{"long key", Txn{Compares: []Compare{{Key: b(long), Target: TargetVersion, Cmp: Equal}}}, "compare 1: key of 1025 bytes"},
		{"unknown op", Txn{Then: []Op{{Type: 9, Key: b("a")}}}, "unknown operation 9"},
		{"unknown target", Txn{Compares: []Compare{{Key: b("a"), Target: 9, Cmp: Equal}}}, "unknown target 9"},
		{"unknown operator", Txn{Compares: []Compare{{Key: b("a"), Target: TargetVersion, Cmp: 5}}}, "unknown operator 5"},
		{"get with a value", Txn{Then: []Op{{Type: Get, Key: b("a"), Value: b("x")}}}, "get carries a value"},
		{"delete with a value", Txn{Then: []Op{{Type: Delete, Key: b("a"), Value: b("x")}}}, "delete carries a value"},
		{"version compare with a value", Txn{Compares: []Compare{{Key: b("a"), Target: TargetVersion, Cmp: Equal, Value: b("x")}}}, "carries a value"},
		{"value over 1 MiB", Txn{Then: []Op{{Type: Put, Key: b("a"), Value: make([]byte, 1<<20+1)}}}, "value of 1048577 bytes"},
		{"two 1 MiB values", Txn{Then: []Op{{Type: Put, Key: b("a"), Value: make([]byte, 1<<20)}, {Type: Put, Key: b("b"), Value: make([]byte, 1<<20)}}}, "bytes encoded"},
		{"conditional put of the largest value under the longest key", Txn{
			Compares: []Compare{{Key: b(long[1:]), Target: TargetCreate, Cmp: Equal, Num: 3}},
			Then:     []Op{{Type: Put, Key: b(long[1:]), Value: make([]byte, 1<<20)}},
		}, ""},
	} {
		err := tc.tx.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrInvalid saying %q", tc.name, err, tc.want)
		}
		if tc.want != "" && !notOnWire[tc.name] && len(tc.tx.Compares) <= MaxCompares && len(tc.tx.Then) <= MaxOps {
			// The same rule holds for the bytes off the network.
			if _, err := Decode(Append(nil, &tc.tx)); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: Decode: %v, want ErrInvalid", tc.name, err)
			}
		}
	}
}

func TestDecodeResponseMalformed(t *testing.T) {
	r := Response{Succeeded: true, Compared: []revision.Meta{{Mod: 1}}, Results: []Result{{Type: Get, Found: true, Value: b("v")}}}
	enc := AppendResponse(nil, &r)
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), enc...)) }
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"truncated", enc[:len(enc)-1]},
		{"trailing", append(append([]byte(nil), enc...), 1)},
		{"extension truncated", enc[:len(enc)-8]},
		{"succeeded not a bool", mut(func(b []byte) []byte { b[0] = 2; return b })},
		{"unknown op type", mut(func(b []byte) []byte { b[responseHead+8] = 9; return b })},
		{"found not a bool", mut(func(b []byte) []byte { b[responseHead+9] = 3; return b })},
		{"result count beyond the bytes", mut(func(b []byte) []byte { b[3+8] = 0xff; return b })},
	} {
		if _, err := DecodeResponse(tc.b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", tc.name, err)
		}
	}
}

// FuzzDecode feeds arbitrary bytes to the decoders of the network and the
// log: none may panic; whatever parses re-encodes to the same bytes, and
// whatever Decode accepts is valid and within MaxBytes.
func FuzzDecode(f *testing.F) {
	s := sample()
	f.Add(Append(nil, &s))
	f.Add(Append(nil, &Txn{}))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 9, 3, 1, 0, 'k'})
	f.Add(Append(nil, &Txn{Then: []Op{{Type: Put, Key: b("k"), Value: b("v"), Lease: 3}}}))
	for _, tx := range extended() {
		f.Add(Append(nil, &tx))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tx, err := Parse(in)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if out := Append(nil, &tx); !bytes.Equal(out, in) {
			t.Fatalf("re-encode differs:\n%x\n%x", out, in)
		}
		if tx, err := Decode(in); err == nil {
			if tx.Validate() != nil || EncodedLen(&tx) > MaxBytes {
				t.Fatalf("Decode accepted an invalid transaction")
			}
		} else if !errors.Is(err, ErrInvalid) {
			t.Fatalf("Decode error %v wraps neither sentinel", err)
		}
		// Evaluating whatever the log may hold never panics.
		if _, err := Apply(newMapState(), &tx, 1, true); err != nil && !errors.Is(err, ErrReadTooLarge) && !errors.Is(err, ErrLeaseNotFound) && !errors.Is(err, ErrKeyNotFound) {
			t.Fatalf("Apply: %v", err)
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	r := Response{Succeeded: true, Compared: []revision.Meta{{Mod: 1}, {Mod: 2}}, Results: []Result{{Type: Get, Found: true, Meta: revision.Meta{Mod: 5}, Value: b("v")}}}
	f.Add(AppendResponse(nil, &r))
	f.Add(AppendResponse(nil, &Response{}))
	x := extendedResponse()
	f.Add(AppendResponse(nil, &x))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := DecodeResponse(in)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// A response without the extension (an older server's) gains it
		// when re-encoded; one with it re-encodes to the same bytes.
		out := AppendResponse(nil, &r)
		if legacy := !bytes.Equal(out, in); legacy && !bytes.HasPrefix(out, in) {
			t.Fatalf("re-encode differs")
		}
		if r2, err := DecodeResponse(out); err != nil || !bytes.Equal(AppendResponse(nil, &r2), out) {
			t.Fatalf("re-encoded response does not round-trip: %v", err)
		}
	})
}

// TestParseBoundsAllocation: counts in a header are not trusted to size
// allocations before the bytes are there to fill them (a 7-byte frame
// claiming 65535 of each would otherwise cost megabytes).
func TestParseBoundsAllocation(t *testing.T) {
	in := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := Parse(in); !errors.Is(err, ErrMalformed) {
			t.Fatalf("Parse: %v", err)
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Fatalf("10 parses of a 7-byte frame allocated %d bytes", n)
	}
}

// TestDecodeAllocatesWithinLimits: a transaction is refused past
// MaxCompares and MaxOps, but Parse allocates the Compare and Op slices for
// the counts the frame's header claims (up to 65535 each) before Validate
// checks them, bounded only by the frame's length: a 1.4 MiB request that
// names 65535 compares and 2 x 65535 operations makes the server allocate
// about 12 MiB (8.7 times the frame, and far beyond the budget the server
// charges a txn request for) only to refuse it.
func TestDecodeAllocatesWithinLimits(t *testing.T) {
	const n = 1<<16 - 1
	b := binary.LittleEndian.AppendUint16(nil, n) // compares
	b = binary.LittleEndian.AppendUint16(b, n)    // then
	b = binary.LittleEndian.AppendUint16(b, n)    // else
	for range n {                                 // compares: target version, key "", version
		b = append(b, byte(TargetVersion), byte(Equal), 0, 0)
		b = binary.LittleEndian.AppendUint64(b, 0)
	}
	for range 2 * n { // operations: DELETE of "" (7 bytes each)
		b = append(b, byte(Delete), 0, 0, 0, 0, 0, 0)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Decode(b)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Decode of %d compares and 2x%d operations: %v; want ErrInvalid", n, n, err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("refusing a %d KiB transaction of %d compares and 2x%d operations allocated %d KiB", len(b)>>10, n, n, alloc>>10)
	if alloc > uint64(len(b)) {
		t.Errorf("Decode allocated %d KiB to refuse a %d KiB transaction over MaxCompares (%d) and MaxOps (%d); want at most the frame's size",
			alloc>>10, len(b)>>10, MaxCompares, MaxOps)
	}
}
