package txn

import (
	"bytes"
	"errors"
	"testing"
)

// TestDecodeBatch: a batch of PUTs decodes, two of one key included (a
// batch is not a transaction); one over its bounds, holding anything but
// PUTs, or with compares or an else branch is refused as invalid.
func TestDecodeBatch(t *testing.T) {
	put := func(k string) Op { return Op{Type: Put, Key: b(k), Value: b("v")} }
	ok := []Op{put("a"), put("a"), {Type: Put, Key: b("b"), Lease: 7}, {Type: Put, Key: b("c"), IgnoreValue: true}}
	got, err := DecodeBatch(AppendBatch(nil, ok))
	if err != nil || len(got) != len(ok) || !bytes.Equal(got[1].Key, b("a")) || got[2].Lease != 7 || !got[3].IgnoreValue {
		t.Fatalf("DecodeBatch = %+v, %v", got, err)
	}
	many := make([]Op, MaxBatchPuts+1)
	for i := range many {
		many[i] = put("k")
	}
	big := []Op{{Type: Put, Key: b("k"), Value: make([]byte, 1<<20)}, {Type: Put, Key: b("l"), Value: make([]byte, 1<<20)}}
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", AppendBatch(nil, nil)},
		{"too many", AppendBatch(nil, many)},
		{"too large", AppendBatch(nil, big)},
		{"a delete", AppendBatch(nil, []Op{put("a"), {Type: Delete, Key: b("a")}})},
		{"a compare", Append(nil, &Txn{Compares: []Compare{{Key: b("a"), Target: TargetMod}}, Then: []Op{put("a")}})},
		{"an else", Append(nil, &Txn{Then: []Op{put("a")}, Else: []Op{put("b")}})},
		{"an invalid put", AppendBatch(nil, []Op{{Type: Put, Key: b("a"), Value: b("v"), IgnoreValue: true}})},
	} {
		if _, err := DecodeBatch(tc.in); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, err := DecodeBatch([]byte{0, 0, 1}); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated: %v, want ErrMalformed", err)
	}
}

// FuzzDecodeBatch: DecodeBatch never panics, accepts only valid batches,
// and what it accepts re-encodes to the same bytes.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(AppendBatch(nil, []Op{{Type: Put, Key: b("k"), Value: b("v")}, {Type: Put, Key: b("k"), Lease: 3}}))
	f.Add([]byte{0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		puts, err := DecodeBatch(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v wraps neither sentinel", err)
			}
			return
		}
		if ValidateBatch(puts) != nil || !bytes.Equal(AppendBatch(nil, puts), in) {
			t.Fatalf("accepted %x: invalid or re-encodes differently", in)
		}
	})
}
