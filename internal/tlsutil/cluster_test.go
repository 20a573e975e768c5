package tlsutil_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/tlsutil"
	"github.com/kvd-project/kvd/internal/tlsutil/tlstest"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// startTLSCluster starts n in-process nodes whose clients and peers all
// speak TLS with the material p names, and returns their addresses.
func startTLSCluster(t *testing.T, p *pki, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	cluster := map[uint64]string{}
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = ln.Addr().String()
		ln.Close()
		cluster[uint64(i+1)] = addrs[i]
	}
	logs := &logBuf{}
	quiet := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var srvs []*server.Server
	for i, addr := range addrs {
		st, err := tlsutil.NewServer(p.files, quiet)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := tcp.New(tcp.Config{Node: addr, TLS: st.TCP()})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(server.Config{ID: uint64(i + 1), Listen: addr, DataDir: t.TempDir(),
			Transport: tr, InitialCluster: cluster, TableMem: 1 << 20, TickInterval: 50 * time.Millisecond, Logger: quiet})
		if err != nil {
			tr.Close()
			t.Fatal(err)
		}
		srvs = append(srvs, srv)
		t.Cleanup(func() { srv.Close(); tr.Close() })
	}
	wait.NoError(t, "a leader over TLS", func() error {
		for _, s := range srvs {
			if s.Status().IsLeader {
				return nil
			}
		}
		return fmt.Errorf("no leader; logs:\n%s", logs)
	})
	return addrs
}

func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestClusterOverTLS: a 3-node cluster with client and peer certificate
// authentication elects a leader and replicates over TLS; a client
// certificate marked read-only may GET (one-sided READs and RPC) but its
// writes are refused with ErrPermissionDenied; a client without a
// certificate gets nowhere; a connection opened as a peer may not make
// client requests.
func TestClusterOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	p := newPKI(t)
	addrs := startTLSCluster(t, p, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A writer, through client.Config.TLS (the client's own transport).
	alice, err := tlsutil.NewClient(p.clientFiles(t, p.clientCA, "alice", tlstest.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	w := newClient(t, client.Config{Endpoints: addrs, TLS: alice.ClientConfig()})
	if err := w.Put(ctx, []byte("k"), []byte("v1")); err != nil {
		t.Fatalf("PUT with a read-write certificate: %v", err)
	}

	// A reader, through a transport of its own.
	ro, err := tlsutil.NewClient(p.clientFiles(t, p.clientCA, "reader", tlstest.Options{OU: []string{tlsutil.ReadOnlyOU}}))
	if err != nil {
		t.Fatal(err)
	}
	rtr, err := tcp.New(tcp.Config{TLS: ro.TCP()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rtr.Close() })
	if _, err := client.New(client.Config{Endpoints: addrs, Transport: rtr, TLS: ro.ClientConfig()}); err == nil {
		t.Error("client.Config with both TLS and a Transport accepted")
	}
	r := newClient(t, client.Config{Endpoints: addrs, Transport: rtr})
	for _, level := range []client.Consistency{client.Linearizable, client.Serializable, client.ReadIndex} {
		if v, err := r.Get(ctx, []byte("k"), client.WithConsistency(level)); err != nil || string(v) != "v1" {
			t.Fatalf("%v GET with a read-only certificate: %q, %v", level, v, err)
		}
	}
	if st := r.Stats(); st.OneSided == 0 {
		t.Errorf("no GET was one-sided over TLS: %+v", st)
	}
	denied := map[string]error{
		"PUT":           r.Put(ctx, []byte("k"), []byte("v2")),
		"DELETE":        r.Delete(ctx, []byte("k")),
		"member add":    r.AddMember(ctx, 9, "127.0.0.1:1"),
		"member remove": r.RemoveMember(ctx, 3),
	}
	for op, err := range denied {
		if !errors.Is(err, client.ErrPermissionDenied) || !strings.HasPrefix(err.Error(), "kvd: permission denied") {
			t.Errorf("%s with a read-only certificate: %v; want kvd: permission denied", op, err)
		}
	}
	if _, err := r.Members(ctx); err != nil {
		t.Errorf("member list with a read-only certificate: %v", err)
	}
	if v, err := w.Get(ctx, []byte("k"), client.WithConsistency(client.ReadIndex)); err != nil || string(v) != "v1" {
		t.Fatalf("after the refused writes: %q, %v; want v1 untouched", v, err)
	}

	// No certificate: the servers refuse the handshake.
	anon, err := tlsutil.NewClient(tlsutil.ClientFiles{CACert: p.roots})
	if err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	nc := newClient(t, client.Config{Endpoints: addrs, TLS: anon.ClientConfig()})
	if _, err := nc.Get(short, []byte("k")); err == nil {
		t.Error("GET without a client certificate succeeded")
	}

	// A peer's credential, used for client requests, is refused.
	peerTr, err := tcp.New(tcp.Config{TLS: mustServerStore(t, p).TCP()}) // dials as a peer
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peerTr.Close() })
	conn, err := peerTr.Dial(ctx, addrs[0])
	if err != nil {
		t.Fatalf("dial as a peer: %v", err)
	}
	if id := transport.IdentityOf(conn); id.Role != transport.RolePeer {
		t.Fatalf("role %v; want peer", id.Role)
	}
	req := wire.AppendRequest(nil, &wire.Request{Op: wire.OpPut, ID: 1, Key: []byte("k"), Value: []byte("from a peer")})
	if err := conn.Send(ctx, req); err != nil {
		t.Fatal(err)
	}
	b, err := conn.Recv(ctx, nil)
	var resp wire.Response
	if err == nil {
		err = wire.DecodeResponse(b, &resp)
	}
	if err != nil || resp.Status != wire.StatusPermissionDenied {
		t.Errorf("client PUT on a peer connection: status %d (%s), %v; want %d", resp.Status, resp.Value, err, wire.StatusPermissionDenied)
	}
}

func mustServerStore(t *testing.T, p *pki) *tlsutil.Store {
	t.Helper()
	st, err := tlsutil.NewServer(p.files, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
