package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	kvstore "github.com/kvd-project/kvd/internal/store"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/raft/peer"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestPeerListener: nodes with a listener for peers apart from their
// client one elect and replicate over the peer addresses, and serve
// clients at the client addresses; a client told of a follower only
// follows the leader's address it is given to the leader's client
// address, not its peer one; member lists show both.
func TestPeerListener(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{PeerListener: true})
	lead := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	follower := othersThan(nodes, lead)[0]
	ctx := context.Background()
	c := newPatientClient(t, []string{follower.Addr}, client.Linearizable)
	if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatalf("put through follower %d's client address: %v", follower.ID, err)
	}
	for _, n := range nodes {
		nc := newClient(t, []string{n.Addr}, client.Serializable)
		wait.NoError(t, "the write on every node", func() error {
			v, err := nc.Get(ctx, []byte("k"))
			if err == nil && string(v) != "v" {
				err = errors.New("k = " + string(v))
			}
			return err
		})
	}
	ms, err := c.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if n := nodes[i]; m.ID != n.ID || m.Addr != n.PeerAddr || m.ClientAddr != n.Addr {
			t.Errorf("member %+v, want id %d, peer address %s, client address %s", m, n.ID, n.PeerAddr, n.Addr)
		}
	}
}

// TestWrongListenerRefused: with a listener each, a client request on
// the peer listener is answered with where clients go, and a peer hello
// on the client listener is not served.
func TestWrongListenerRefused(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{PeerListener: true})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	n := nodes[0]
	resp, err := askRequest(t, n.PeerAddr, &wire.Request{Op: wire.OpHello}, 10*time.Second)
	if err != nil || resp.Status != wire.StatusBadRequest || !strings.Contains(string(resp.Value), "clients connect to "+n.Addr) {
		t.Errorf("hello on the peer listener: %+v (%q), %v; want a bad request naming %s", resp, resp.Value, err, n.Addr)
	}

	// A client given only the peer address is told where to go at once:
	// waiting cannot turn the peer listener into a client one.
	c, err := client.New(client.Config{Endpoints: []string{n.PeerAddr}, RequestTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Get(context.Background(), []byte("k"))
	if !errors.Is(err, client.ErrBadRequest) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "clients connect to "+n.Addr) {
		t.Errorf("a client at the peer address: %v; want the refusal at once, naming %s", err, n.Addr)
	}

	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := tr.Dial(ctx, n.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hello := peer.AppendHello(nil, peer.Hello{From: 2, Cluster: n.Srv.Node().ClusterID(), Addr: nodes[1].PeerAddr, Format: kvstore.DataFormat})
	if err := conn.Send(ctx, hello); err != nil {
		t.Fatal(err)
	}
	// A served session stays open (a peer hello gets no answer); a
	// refused one is closed.
	if _, err := conn.Recv(ctx, nil); err == nil || ctx.Err() != nil {
		t.Fatalf("peer hello on the client listener: the connection stayed open (%v)", err)
	}
}
