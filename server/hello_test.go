package server

import (
	"testing"

	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport/tcp"
)

// helloLenBefore is a Hello's length, but its leader address, before the
// cluster id was added.
const helloLenBefore = 8 + 8 + 8 + 8 + 4 + 2

// TestHelloClusterIDOnlyWhenAsked: a hello request without
// wire.HelloClusterID (a client older than the field, whose decoder
// refuses trailing bytes) gets a Hello of exactly the older length; one
// with it gets the node's cluster id.
func TestHelloClusterIDOnlyWhenAsked(t *testing.T) {
	s := floodServer(t, Config{}, tcp.Config{})
	if s.node.ClusterID() == 0 {
		t.Fatal("the node has no cluster id")
	}
	for _, tc := range []struct {
		flags uint16
		want  uint64
	}{{0, 0}, {wire.HelloClusterID, s.node.ClusterID()}} {
		nc := dialRaw(t, s.Addr(), 64)
		if _, err := nc.Write(rawRequest(&wire.Request{Op: wire.OpHello, ID: 1, Flags: tc.flags})); err != nil {
			t.Fatal(err)
		}
		var resp wire.Response
		for {
			typ, p := readRawFrame(t, nc)
			if typ != 1 {
				continue
			}
			if err := wire.DecodeResponse(p, &resp); err != nil {
				t.Fatal(err)
			}
			break
		}
		var h wire.Hello
		if err := wire.DecodeHello(resp.Value, &h); err != nil {
			t.Fatal(err)
		}
		if h.ClusterID != tc.want || tc.want == 0 && len(resp.Value) != helloLenBefore+len(h.LeaderAddr) {
			t.Errorf("flags %#x: cluster id %016x in %d bytes, want %016x", tc.flags, h.ClusterID, len(resp.Value), tc.want)
		}
	}
}
