package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
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

// endsOnCheck is a context that has been cancelled by the time anybody
// next looks at it once cancel was called: Done is closed by the first Err
// after cancel. It lets a test end a call's context exactly between a
// node's answer arriving and the client looking at its context again (a
// deadline that passes right after the answer), with no timing.
type endsOnCheck struct {
	want atomic.Bool
	once sync.Once
	done chan struct{}
}

func newEndsOnCheck() *endsOnCheck { return &endsOnCheck{done: make(chan struct{})} }

func (c *endsOnCheck) cancel() { c.want.Store(true) }

func (c *endsOnCheck) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }
func (c *endsOnCheck) Done() <-chan struct{}       { return c.done }
func (c *endsOnCheck) Value(any) any               { return nil }
func (c *endsOnCheck) Err() error {
	if !c.want.Load() {
		return nil
	}
	c.once.Do(func() { close(c.done) })
	return context.Canceled
}

// TestRefusedWriteEndsNotApplied: a write that every node refused before
// proposing it ("not leader", leader unknown: an election) and whose
// context then ends provably had no effect, so its error must wrap
// ErrNotApplied (client/errors.go: "every node that saw it refused it
// before proposing it"; leaderCall's comment: "the last error says so").
// It wrapped only ErrUnavailable: "maybe applied", for a write no node
// ever proposed.
func TestRefusedWriteEndsNotApplied(t *testing.T) {
	var cur atomic.Pointer[endsOnCheck]
	a := startFake(t, func(*wire.Request) reaction {
		cur.Load().cancel() // the caller's context ends just after this answer
		return answer(wire.StatusNotLeader, "")
	})
	c, err := client.New(client.Config{Endpoints: []string{a.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		name  string
		write func(context.Context) error
	}{
		{"put", func(ctx context.Context) error { return c.Put(ctx, []byte("k"), []byte("v")) }},
		{"conditional put", func(ctx context.Context) error {
			_, err := c.PutRevision(ctx, []byte("k"), []byte("v"), client.IfModRevision(3))
			return err
		}},
		{"delete", func(ctx context.Context) error { return c.Delete(ctx, []byte("k")) }},
	} {
		ctx := newEndsOnCheck()
		cur.Store(ctx)
		before := a.seen.Load()
		err := tc.write(ctx)
		if a.seen.Load() != before+1 {
			t.Fatalf("%s: the node saw %d attempts, want 1", tc.name, a.seen.Load()-before)
		}
		if !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, context.Canceled) || !errors.Is(err, client.ErrNotLeader) {
			t.Fatalf("%s: %v; want ErrUnavailable wrapping context.Canceled and the node's not-leader answer", tc.name, err)
		}
		if !errors.Is(err, client.ErrNotApplied) {
			t.Errorf("%s: %v; want ErrNotApplied too: the only node that saw the write refused it before proposing it", tc.name, err)
		}
	}
}

// TestConflictReturnsNoVersion: PutVersion returns "the version the write
// got"; a conditional PUT whose condition failed applied nothing and got
// none, so it must return 0 with its ConflictError. It returned the failed
// transaction's Raft index, a number no key ever held, which a caller
// keeping the version for its next IfVersion would then use.
func TestConflictReturnsNoVersion(t *testing.T) {
	a := startFake(t, func(*wire.Request) reaction {
		r := txn.Response{Compared: []revision.Meta{{Mod: 42}}} // the key is at 42: no swap
		return reaction{resp: wire.Response{Version: 99, Value: txn.AppendResponse(nil, &r)}}
	})
	c, err := client.New(client.Config{Endpoints: []string{a.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := c.PutRevision(context.Background(), []byte("k"), []byte("v"), client.IfModRevision(7))
	if !errors.Is(err, client.ErrConflict) {
		t.Fatalf("PutVersion: %v, want a conflict", err)
	}
	if v != 0 {
		t.Fatalf("PutVersion returned version %d with its conflict; the write got no version", v)
	}
}
