package peer

import (
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/transport"
)

// clientConn is an accepted connection whose transport authenticated a
// client credential (a TLS client certificate, an RDMA client key).
type clientConn struct {
	transport.Conn // nil: any other method would panic the test
	closed         bool
}

func (c *clientConn) Identity() transport.Identity {
	return transport.Identity{TLS: true, Role: transport.RoleClient}
}
func (c *clientConn) Close() error       { c.closed = true; return nil }
func (c *clientConn) RemoteAddr() string { return "client:1" }

// TestServeRequiresPeerCredential: a connection that authenticated as
// a client may not open a raft session, even with a perfect hello.
func TestServeRequiresPeerCredential(t *testing.T) {
	s := testSet(t, Config{}, newFakeHost())
	before := refusedCount(t, s, RefuseNotPeer)
	conn := &clientConn{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(conn, AppendHello(nil, Hello{From: 2, Cluster: s.ClusterID(), Addr: "client:1", Format: store.DataFormat}))
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a client credential's peer session was not refused")
	}
	if !conn.closed || refusedCount(t, s, RefuseNotPeer) != before+1 {
		t.Fatalf("closed %v, not_peer refusals %v (was %v)", conn.closed, refusedCount(t, s, RefuseNotPeer), before)
	}
}
