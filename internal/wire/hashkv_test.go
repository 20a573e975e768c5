package wire

import (
	"errors"
	"testing"
)

func TestHashKVRoundTrip(t *testing.T) {
	h := HashKV{Hash: 0xdeadbeef, CompactRevision: 7, HashRevision: 1 << 40}
	b := AppendHashKV(nil, h)
	if got, err := DecodeHashKV(b); err != nil || got != h {
		t.Fatalf("DecodeHashKV = %+v, %v; want %+v", got, err, h)
	}
	for _, bad := range [][]byte{nil, b[:len(b)-1], append(b, 0)} {
		if _, err := DecodeHashKV(bad); !errors.Is(err, ErrHashKV) {
			t.Errorf("DecodeHashKV(%d bytes) = %v, want ErrHashKV", len(bad), err)
		}
	}
}
