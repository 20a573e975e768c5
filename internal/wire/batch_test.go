package wire

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestBatchResultsRoundTrip: results decode to what was encoded, and a
// reply over the bounds (too many results, a too long message, trailing
// bytes) is refused.
func TestBatchResultsRoundTrip(t *testing.T) {
	rs := []BatchResult{{Revision: 7}, {Status: StatusLeaseNotFound, Revision: 7, Message: "lease not found"}, {Revision: 1 << 40}}
	got, err := DecodeBatchResults(AppendBatchResults(nil, rs))
	if err != nil || !reflect.DeepEqual(got, rs) {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, rs)
	}
	long := AppendBatchResults(nil, []BatchResult{{Status: StatusInternal, Message: strings.Repeat("x", 2*maxBatchMessage)}})
	if got, err := DecodeBatchResults(long); err != nil || len(got[0].Message) != maxBatchMessage {
		t.Fatalf("long message: %d bytes, %v; want it cut to %d", len(got[0].Message), err, maxBatchMessage)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"too many", AppendBatchResults(nil, make([]BatchResult, MaxBatchResults+1))},
		{"trailing", append(AppendBatchResults(nil, rs), 0)},
		{"truncated", AppendBatchResults(nil, rs)[:5]},
		{"message over its bound", []byte{1, 0, 0, 0, 0x81, 0x08}},
	} {
		if _, err := DecodeBatchResults(tc.b); err == nil {
			t.Errorf("%s: decoded", tc.name)
		}
	}
}

// TestHelloFeaturesRoundTrip: features decode with or without a cluster
// id, a Hello without them decodes to none, and features 0 sent
// explicitly are refused (one encoding per Hello).
func TestHelloFeaturesRoundTrip(t *testing.T) {
	for _, h := range []Hello{
		{NodeID: 1, LeaderAddr: "a", Features: FeaturePutBatch},
		{NodeID: 1, LeaderAddr: "a", ClusterID: 9, Features: FeaturePutBatch},
		{NodeID: 1, LeaderAddr: "a", ClusterID: 9},
	} {
		var got Hello
		if err := DecodeHello(AppendHello(nil, &h), &got); err != nil || got != h {
			t.Errorf("%+v: got %+v, %v", h, got, err)
		}
	}
	b := append(AppendHello(nil, &Hello{ClusterID: 9}), make([]byte, 8)...)
	var got Hello
	if err := DecodeHello(b, &got); !errors.Is(err, ErrLength) {
		t.Fatalf("features 0: %v, want ErrLength", err)
	}
}

func FuzzDecodeBatchResults(f *testing.F) {
	f.Add(AppendBatchResults(nil, []BatchResult{{Revision: 3}, {Status: StatusNotFound, Message: "gone"}}))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := DecodeBatchResults(b)
		if err != nil {
			return
		}
		again, err := DecodeBatchResults(AppendBatchResults(nil, rs))
		if err != nil || !reflect.DeepEqual(again, rs) {
			t.Fatalf("re-decode: %+v, %v; want %+v", again, err, rs)
		}
	})
}
