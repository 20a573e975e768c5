package server

import (
	"bytes"
	"context"
	"testing"

	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

func TestGetManyRequestsRefused(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	long := bytes.Repeat([]byte("k"), table.MaxKey+1)
	keys := func(ks ...[]byte) []byte { return wire.AppendGetManyRequest(nil, ks) }
	for _, tc := range []struct {
		name string
		req  wire.Request
		want wire.Status
	}{
		{"empty value", wire.Request{Op: wire.OpGetMany}, wire.StatusBadRequest},
		{"garbage", wire.Request{Op: wire.OpGetMany, Value: []byte{1, 0, 9}}, wire.StatusBadRequest},
		{"trailing bytes", wire.Request{Op: wire.OpGetMany, Value: append(keys([]byte("a")), 0)}, wire.StatusBadRequest},
		{"with a key", wire.Request{Op: wire.OpGetMany, Key: []byte("k"), Value: keys([]byte("a"))}, wire.StatusBadRequest},
		{"unknown level", wire.Request{Op: wire.OpGetMany, Flags: 9, Value: keys([]byte("a"))}, wire.StatusBadRequest},
		{"empty key", wire.Request{Op: wire.OpGetMany, Value: keys([]byte("a"), nil)}, wire.StatusEmptyKey},
		{"long key", wire.Request{Op: wire.OpGetMany, Value: keys(long)}, wire.StatusKeyTooLarge},
		{"no keys", wire.Request{Op: wire.OpGetMany, Flags: wire.Serializable, Value: keys()}, wire.StatusOK},
	} {
		if resp := s.handle(context.Background(), &tc.req); resp.Status != tc.want {
			t.Errorf("%s: status %d %q, want %d", tc.name, resp.Status, resp.Value, tc.want)
		}
	}
}
