package client_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestKeepAliveStopsOnClose: a LeaseKeeper must stop when its Client is
// closed. Today it goes on "renewing" (every call fails with ErrClosed)
// every TTL/10 until the TTL runs out, then reports ErrLeaseExpired: its
// goroutine outlives Close by up to the TTL (MaxLeaseTTL is a year).
func TestKeepAliveStopsOnClose(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background() // never cancelled: Close is what ends the keeper
	id, err := c.Grant(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	k, err := c.KeepAlive(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-k.Done():
		t.Logf("keeper stopped: %v", k.Err())
	case <-time.After(3 * time.Second):
		t.Fatalf("keeper still running 3s after Client.Close (Err %v); it stops only when the 20s TTL runs out", k.Err())
	}
}

// TestSnapshotAfterClose: every call on a closed Client fails with
// ErrClosed; Snapshot dials the transport directly and, with a Transport
// passed in (not closed by Close), streams a whole backup from a closed
// client.
func TestSnapshotAfterClose(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	tr, err := tcp.New(tcp.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	c, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes), Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := c.Put(ctx, []byte("k"), []byte("v")); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Put after Close: %v, want ErrClosed", err)
	}
	var b bytes.Buffer
	info, err := c.Snapshot(ctx, &b)
	if !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Snapshot after Close = (%d bytes from %s, %v), want ErrClosed", info.Bytes, info.Node, err)
	}
}

// TestValidateRefusesUndialableEndpoints: Validate accepts endpoints no
// transport can dial (no port, port 0 or out of range, a comma-joined list
// passed as one endpoint); New then succeeds and every call retries the
// bad address until its deadline (RequestTimeout, 15s by default) and
// fails as ErrUnavailable. transport.CheckAddr already says which
// addresses are undialable.
func TestValidateRefusesUndialableEndpoints(t *testing.T) {
	t.Parallel()
	for _, ep := range []string{"127.0.0.1", "127.0.0.1:0", "127.0.0.1:70000", "127.0.0.1:7301,127.0.0.1:7302"} {
		cfg := client.Config{Endpoints: []string{ep}}
		if err := cfg.Validate(); err == nil {
			t.Errorf("Validate accepted endpoint %q", ep)
		}
	}
}

// TestCloseEndsCallInDial: Close must make calls in progress fail
// promptly (client.go: "Calls in progress fail with ErrClosed or
// ErrUnavailable"). A call that is dialing a node that does not answer
// goes on until its DialTimeout, after Close returned and even though Close
// closed the client's own transport.
func TestCloseEndsCallInDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never speaks
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		var held []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	c, err := client.New(client.Config{Endpoints: []string{ln.Addr().String()}, DialTimeout: 8 * time.Second, AttemptTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- c.Put(ctx, []byte("k"), []byte("v"))
	}()
	select { // the Put is dialing: connected, its handshake unanswered
	case <-accepted:
	case <-time.After(20 * time.Second):
		t.Fatal("the Put never dialed")
	}
	closed := time.Now()
	c.Close()
	select {
	case err := <-done:
		t.Logf("Put returned %v after Close: %v", time.Since(closed).Round(time.Millisecond), err)
	case <-time.After(2 * time.Second):
		err := <-done
		t.Fatalf("Put still running 2s after Close; it returned %v after Close: %v", time.Since(closed).Round(time.Millisecond), err)
	}
}
