package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/transport"
)

// TestUnsentWriteIsNotApplied: a write that never reached any node fails
// with ErrUnavailable and ErrNotApplied (safe to retry), and the error names
// the node it last tried; a write that reached a node is never reported as
// not applied (see TestWriteFailures for the maybe-applied cases).
func TestUnsentWriteIsNotApplied(t *testing.T) {
	dead := kvdtest.FreeAddrs(t, 1)[0] // nothing listens there
	c, err := client.New(client.Config{Endpoints: []string{dead}, DialTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = c.Put(ctx, []byte("k"), []byte("v"))
	if !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, client.ErrNotApplied) {
		t.Fatalf("put to a dead endpoint: %v; want ErrUnavailable and ErrNotApplied", err)
	}
	if !strings.Contains(err.Error(), dead) {
		t.Fatalf("error %q does not name the node %s", err, dead)
	}
}

// refusingTransport refuses every Dial as an authenticating transport does
// when the key is wrong, and counts the dials.
type refusingTransport struct{ dials atomic.Int32 }

func (r *refusingTransport) Register(int) (transport.Region, error) {
	return nil, transport.ErrUnsupported
}
func (r *refusingTransport) Listen(string) (transport.Listener, error) {
	return nil, transport.ErrUnsupported
}
func (r *refusingTransport) Dial(_ context.Context, addr string) (transport.Conn, error) {
	r.dials.Add(1)
	return nil, fmt.Errorf("test: %s refused key %q: %w", addr, "alice", transport.ErrAuthRefused)
}
func (r *refusingTransport) Name() string { return "refusing" }
func (r *refusingTransport) Close() error { return nil }

// TestRefusedCredentialFailsFast: a node that refuses the client's key
// cannot be talked round by retrying, so every call fails at the first
// refusal with ErrUnauthenticated (and, being unsent, ErrNotApplied) and the
// transport's reason, instead of dialling until the deadline and reporting
// a timeout.
func TestRefusedCredentialFailsFast(t *testing.T) {
	for _, op := range []string{"put", "get", "get readindex", "getmany"} {
		t.Run(op, func(t *testing.T) {
			tr := &refusingTransport{}
			c, err := client.New(client.Config{Endpoints: []string{"a:1", "b:1", "c:1"}, Transport: tr})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			switch op {
			case "put":
				err = c.Put(ctx, []byte("k"), []byte("v"))
			case "get":
				_, err = c.Get(ctx, []byte("k"))
			case "get readindex":
				_, err = c.Get(ctx, []byte("k"), client.WithConsistency(client.ReadIndex))
			case "getmany":
				_, err = c.GetMany(ctx, [][]byte{[]byte("k"), []byte("l")})
			}
			if !errors.Is(err, client.ErrUnauthenticated) || !errors.Is(err, client.ErrNotApplied) ||
				!errors.Is(err, transport.ErrAuthRefused) || errors.Is(err, client.ErrUnavailable) {
				t.Fatalf("%s = %v; want ErrUnauthenticated, ErrNotApplied and the transport's refusal", op, err)
			}
			if ctx.Err() != nil {
				t.Fatalf("%s waited for its deadline", op)
			}
			if d := tr.dials.Load(); d > 2 {
				t.Fatalf("%s dialled %d times; want it to stop at the first refusal", op, d)
			}
		})
	}
}
