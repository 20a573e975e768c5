package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestRequestRoundTrip(t *testing.T) {
	for _, r := range []Request{
		{Op: OpPut, ID: 1, Key: []byte("k"), Value: []byte("v")},
		{Op: OpGet, Flags: Serializable, ID: 1 << 60, Key: []byte("key"), Value: []byte{}},
		{Op: OpDelete, ID: 7, Key: []byte("gone"), Value: []byte{}},
		{Op: OpHello, ID: 0, Key: []byte{}, Value: []byte{}},
		{Op: OpTxn, ID: 3, Key: []byte{}, Value: []byte{1, 0, 0, 0, 0, 0}},
	} {
		b := AppendRequest(nil, &r)
		var got Request
		if err := DecodeRequest(b, &got); err != nil {
			t.Fatalf("%v: %v", r.Op, err)
		}
		if got.Op != r.Op || got.Flags != r.Flags || got.ID != r.ID ||
			!bytes.Equal(got.Key, r.Key) || !bytes.Equal(got.Value, r.Value) {
			t.Fatalf("round trip: got %+v want %+v", got, r)
		}
	}
}

func TestResponseRoundTrip(t *testing.T) {
	r := Response{Op: OpGet, Status: StatusNotLeader, ID: 99, Version: 12, Value: []byte("127.0.0.1:1")}
	var got Response
	if err := DecodeResponse(AppendResponse(nil, &r), &got); err != nil {
		t.Fatal(err)
	}
	if got.Op != r.Op || got.Status != r.Status || got.ID != r.ID || got.Version != r.Version ||
		!bytes.Equal(got.Value, r.Value) {
		t.Fatalf("got %+v want %+v", got, r)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := AppendRequest(nil, &Request{Op: OpPut, ID: 1, Key: []byte("k"), Value: []byte("v")})
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"short", good[:10], ErrShort},
		{"version", mut(func(b []byte) []byte { b[0] = 9; return b }), ErrVersion},
		{"op zero", mut(func(b []byte) []byte { b[1] = 0; return b }), ErrOp},
		{"op unknown", mut(func(b []byte) []byte { b[1] = 200; return b }), ErrOp},
		{"truncated", good[:len(good)-1], ErrLength},
		{"trailing", append(append([]byte(nil), good...), 0), ErrLength},
		{"huge value length", mut(func(b []byte) []byte { b[17] = 0xff; return b }), ErrLength},
	} {
		var r Request
		if err := DecodeRequest(tc.b, &r); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	var resp Response
	if err := DecodeResponse(good, &resp); err == nil {
		t.Errorf("request decoded as response")
	}
}

// TestHelloRoundTrip: a Hello with and without a cluster id decodes to
// itself, and one without encodes exactly as before the field, so a
// client that knows nothing of it (its decoder refuses trailing bytes)
// still decodes what a server sends it when it does not ask for the id.
func TestHelloRoundTrip(t *testing.T) {
	base := Hello{NodeID: 1, LeaderID: 2, RegionAddr: 0x7f0000, RegionLen: 1 << 20, RegionKey: 0xabc, LeaderAddr: "127.0.0.1:7000"}
	withID := base
	withID.ClusterID = 0x8e9e05c52164694d
	for _, tc := range []struct {
		name string
		h    Hello
		len  int
	}{
		{"without cluster id", base, helloFixed + len(base.LeaderAddr)},
		{"with cluster id", withID, helloFixed + len(base.LeaderAddr) + 8},
		{"no leader, with cluster id", Hello{NodeID: 3, ClusterID: 7}, helloFixed + 8},
	} {
		b := AppendHello(nil, &tc.h)
		if len(b) != tc.len {
			t.Errorf("%s: %d bytes, want %d", tc.name, len(b), tc.len)
		}
		var got Hello
		if err := DecodeHello(b, &got); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.h {
			t.Fatalf("%s: got %+v want %+v", tc.name, got, tc.h)
		}
	}
	var got Hello
	if err := DecodeHello(AppendHello(nil, &base)[:10], &got); !errors.Is(err, ErrShort) {
		t.Fatalf("short hello: %v", err)
	}
	for _, extra := range [][]byte{{1}, {1, 2, 3, 4, 5, 6, 7}, make([]byte, 8), make([]byte, 9)} {
		b := append(AppendHello(nil, &base), extra...)
		if err := DecodeHello(b, &got); !errors.Is(err, ErrLength) {
			t.Errorf("hello with %d trailing bytes %x: %v, want ErrLength", len(extra), extra, err)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add(AppendRequest(nil, &Request{Op: OpPut, ID: 1, Key: []byte("k"), Value: []byte("v")}))
	f.Add(AppendRequest(nil, &Request{Op: OpHello}))
	f.Add(AppendRequest(nil, &Request{Op: OpPutBatch, ID: 2, Value: []byte{0, 0, 1, 0, 0, 0}}))
	f.Add([]byte{1, 3, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		if err := DecodeRequest(b, &r); err != nil {
			return
		}
		// Whatever decodes must re-encode to the same bytes.
		if out := AppendRequest(nil, &r); !bytes.Equal(out, b) {
			t.Fatalf("re-encode differs:\n%x\n%x", out, b)
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add(AppendResponse(nil, &Response{Op: OpGet, Value: []byte("v")}))
	f.Add(AppendResponse(nil, &Response{Op: OpHello, Value: AppendHello(nil, &Hello{LeaderAddr: "x"})}))
	f.Add(AppendResponse(nil, &Response{Op: OpHello, Value: AppendHello(nil, &Hello{LeaderAddr: "x", ClusterID: 0x8e9e05c52164694d})}))
	f.Add(AppendResponse(nil, &Response{Op: OpHello, Value: AppendHello(nil, &Hello{LeaderAddr: "x", Features: FeaturePutBatch})}))
	f.Add(AppendResponse(nil, &Response{Op: OpPutBatch, Value: AppendBatchResults(nil, []BatchResult{{Revision: 5}})}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Response
		if err := DecodeResponse(b, &r); err != nil {
			return
		}
		if out := AppendResponse(nil, &r); !bytes.Equal(out, b) {
			t.Fatalf("re-encode differs")
		}
		var h Hello
		if DecodeHello(r.Value, &h) == nil {
			if out := AppendHello(nil, &h); !bytes.Equal(out, r.Value) {
				t.Fatalf("hello re-encode differs")
			}
		}
	})
}

func BenchmarkRequestCodec(b *testing.B) {
	req := Request{Op: OpPut, ID: 1, Key: []byte("key-000001"), Value: make([]byte, 256)}
	buf := make([]byte, 0, 512)
	var out Request
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendRequest(buf[:0], &req)
		if err := DecodeRequest(buf, &out); err != nil {
			b.Fatal(err)
		}
	}
}
