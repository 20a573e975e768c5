package raft

import (
	"testing"
	"time"

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

// TestServePeerRequiresPeerCredential: a connection that authenticated as
// a client may not open a raft session, even with a perfect hello.
func TestServePeerRequiresPeerCredential(t *testing.T) {
	cfg := testConfig()
	c := newClusterOn(t, newTCPNet(), 1, cfg)
	n := c.leader().node
	before := refusedCount(t, n, refuseNotPeer)
	conn := &clientConn{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.ServePeer(conn, appendHello(nil, hello{from: 2, cluster: n.ClusterID(), addr: "client:1"}))
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a client credential's peer session was not refused")
	}
	if !conn.closed || refusedCount(t, n, refuseNotPeer) != before+1 {
		t.Fatalf("closed %v, not_peer refusals %v (was %v)", conn.closed, refusedCount(t, n, refuseNotPeer), before)
	}
}
