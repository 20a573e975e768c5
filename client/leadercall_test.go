package client_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
)

// reaction is what a fake node does with one request.
type reaction struct {
	hang bool // never answer
	drop bool // close the connection instead of answering
	resp wire.Response
}

func answer(st wire.Status, value string) reaction {
	return reaction{resp: wire.Response{Status: st, Value: []byte(value)}}
}

// fakeNode speaks kvd's protocol over the TCP transport, with a table region
// for the client's geometry read. It answers GET, PUT, DELETE and TXN as
// its react function says (counting those for key "k", and transactions:
// the probes a client sends a suspect node read another key), hellos
// always (unless mute), and
// everything else with "bad request".
type fakeNode struct {
	addr  string
	react atomic.Pointer[func(*wire.Request) reaction]
	mute  atomic.Bool  // answer nothing at all, hellos included
	seen  atomic.Int64 // data requests (key "k") received
}

func startFake(t *testing.T, react func(*wire.Request) reaction) *fakeNode {
	t.Helper()
	f := &fakeNode{}
	f.react.Store(&react)
	f.addr = kvdtest.FakeNode(t, f.answer)
	return f
}

func (f *fakeNode) setReact(react func(*wire.Request) reaction) { f.react.Store(&react) }

func (f *fakeNode) answer(req *wire.Request, d transport.Descriptor) (wire.Response, kvdtest.FakeAct) {
	var r reaction
	switch {
	case f.mute.Load():
		r.hang = true
	case req.Op == wire.OpHello:
		h := wire.Hello{NodeID: 1, RegionAddr: d.Addr, RegionLen: d.Len, RegionKey: d.Key}
		r.resp.Value = wire.AppendHello(nil, &h)
	case req.Op == wire.OpGet || req.Op == wire.OpPut || req.Op == wire.OpDelete || req.Op == wire.OpTxn:
		if string(req.Key) == "k" || req.Op == wire.OpTxn {
			f.seen.Add(1)
		}
		r = (*f.react.Load())(req)
		if req.Op == wire.OpGet && req.Flags&wire.GetMeta != 0 && r.resp.Status == wire.StatusOK {
			// As a server with revisions answers (its region is layout 4).
			r.resp.Value = append(revision.Meta{Mod: r.resp.Version}.Append(nil), r.resp.Value...)
		}
	default:
		r = answer(wire.StatusBadRequest, "not supported by the fake")
	}
	switch {
	case r.drop:
		return r.resp, kvdtest.FakeDrop
	case r.hang:
		return r.resp, kvdtest.FakeHang
	}
	return r.resp, kvdtest.FakeReply
}

func always(r reaction) func(*wire.Request) reaction {
	return func(*wire.Request) reaction { return r }
}

// TestWriteFailures is the table of which failures a write is retried
// after, which fail it as they are, and which fail it as "maybe applied"
// (ErrUnavailable) because the node may apply it yet. Node A is the first
// endpoint and misbehaves; node B answers everything. A retried request
// reaches B; one that is not never does.
func TestWriteFailures(t *testing.T) {
	// The attempt timeout covers the dial and hello too: at 200 ms a busy
	// machine let A's dial time out, and the request went to B.
	const attempt = time.Second
	type outcome int
	const (
		retried outcome = iota
		fails
		maybeApplied
	)
	for _, tc := range []struct {
		name    string
		op      wire.Op // OpPut, OpDelete, or OpGet (a ReadIndex GET, for contrast)
		a       reaction
		aDown   bool // nothing listens at A
		aMute   bool // A accepts connections and answers nothing, not even a hello
		want    outcome
		wantErr error // for fails
	}{
		{name: "not leader, leader named", op: wire.OpPut, a: answer(wire.StatusNotLeader, "B"), want: retried},
		{name: "not leader, leader unknown", op: wire.OpPut, a: answer(wire.StatusNotLeader, ""), want: retried},
		{name: "proposal dropped", op: wire.OpPut, a: answer(wire.StatusRetry, "proposal dropped"), want: retried},
		{name: "delete: no leader yet", op: wire.OpDelete, a: answer(wire.StatusRetry, "no leader"), want: retried},
		{name: "node down", op: wire.OpPut, aDown: true, want: retried},
		{name: "node mute: never connected", op: wire.OpPut, aMute: true, want: retried},
		{name: "no answer within the attempt timeout", op: wire.OpPut, a: reaction{hang: true}, want: maybeApplied},
		{name: "delete: no answer within the attempt timeout", op: wire.OpDelete, a: reaction{hang: true}, want: maybeApplied},
		{name: "connection lost after sending", op: wire.OpPut, a: reaction{drop: true}, want: maybeApplied},
		{name: "server unavailable (outcome unknown)", op: wire.OpPut, a: answer(wire.StatusUnavailable, "timed out"), want: maybeApplied},
		{name: "internal error", op: wire.OpPut, a: answer(wire.StatusInternal, "boom"), want: fails, wantErr: nil},
		{name: "no space", op: wire.OpPut, a: answer(wire.StatusNoSpace, "full"), want: fails, wantErr: client.ErrNoSpace},
		{name: "bad request", op: wire.OpPut, a: answer(wire.StatusBadRequest, "no"), want: fails, wantErr: client.ErrBadRequest},
		{name: "delete: not found", op: wire.OpDelete, a: answer(wire.StatusNotFound, ""), want: fails, wantErr: client.ErrNotFound},
		{name: "read: no answer within the attempt timeout", op: wire.OpGet, a: reaction{hang: true}, want: retried},
		{name: "read: connection lost", op: wire.OpGet, a: reaction{drop: true}, want: retried},
		{name: "read: server unavailable", op: wire.OpGet, a: answer(wire.StatusUnavailable, "timed out"), want: retried},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startFake(t, always(answer(wire.StatusOK, "v")))
			a := startFake(t, nil)
			a.mute.Store(tc.aMute)
			aAddr := a.addr
			if tc.aDown {
				aAddr = kvdtest.FreeAddrs(t, 1)[0]
			}
			ar := tc.a
			if ar.resp.Status == wire.StatusNotLeader && string(ar.resp.Value) == "B" {
				ar.resp.Value = []byte(b.addr)
			}
			a.setReact(always(ar))
			c, err := client.New(client.Config{Endpoints: []string{aAddr, b.addr}, AttemptTimeout: attempt, DialTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			switch tc.op {
			case wire.OpPut:
				err = c.Put(ctx, []byte("k"), []byte("v"))
			case wire.OpDelete:
				err = c.Delete(ctx, []byte("k"))
			case wire.OpGet:
				_, err = c.Get(ctx, []byte("k"), client.WithConsistency(client.ReadIndex))
			}
			took := time.Since(start)
			if ctx.Err() != nil {
				t.Fatalf("the request waited out its context (%v): %v", took, err)
			}
			switch tc.want {
			case retried:
				if err != nil || b.seen.Load() != 1 {
					t.Fatalf("want retried at B: err %v, B saw %d", err, b.seen.Load())
				}
			case fails:
				if err == nil || errors.Is(err, client.ErrUnavailable) || tc.wantErr != nil && !errors.Is(err, tc.wantErr) || b.seen.Load() != 0 {
					t.Fatalf("want failed with %v and not retried: err %v, B saw %d", tc.wantErr, err, b.seen.Load())
				}
			case maybeApplied:
				if !errors.Is(err, client.ErrUnavailable) || b.seen.Load() != 0 {
					t.Fatalf("want maybe applied (ErrUnavailable) and not retried: err %v, B saw %d", err, b.seen.Load())
				}
			}
			if !tc.aDown && !tc.aMute && a.seen.Load() != 1 {
				t.Fatalf("A saw %d attempts, want 1", a.seen.Load())
			}
			t.Logf("%v after %v", err, took.Round(time.Millisecond))
		})
	}
}

// TestStalledNodeAvoided: after an attempt at node A times out, requests go
// to B first (a write is not even tried at A) until A answers again, which
// a probe notices.
func TestStalledNodeAvoided(t *testing.T) {
	b := startFake(t, always(answer(wire.StatusOK, "v")))
	a := startFake(t, always(reaction{hang: true}))
	// (RequestTimeout also bounds each probe: the fake never answers the
	// probes it got while stalled, where a real node would at its thaw.)
	c, err := client.New(client.Config{Endpoints: []string{a.addr, b.addr}, AttemptTimeout: time.Second, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Put(ctx, []byte("k"), []byte("1")); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("first put: %v, want ErrUnavailable (maybe applied)", err)
	}
	for i := 0; i < 3; i++ {
		if err := c.Put(ctx, []byte("k"), []byte("2")); err != nil {
			t.Fatalf("put with A stalled: %v", err)
		}
		if _, err := c.Get(ctx, []byte("k"), client.WithConsistency(client.ReadIndex)); err != nil {
			t.Fatalf("get with A stalled: %v", err)
		}
	}
	if n := a.seen.Load(); n != 1 {
		t.Fatalf("A was tried %d times, want only the first", n)
	}
	// A recovers (and names B as leader): the probe clears it, and the
	// client goes back to trying endpoints in order.
	a.setReact(always(answer(wire.StatusNotLeader, b.addr)))
	a.mute.Store(false)
	wait.For(t, "A to be tried again after it recovered", func() bool {
		if a.seen.Load() != 1 {
			return true
		}
		if _, err := c.Get(ctx, []byte("k"), client.WithConsistency(client.ReadIndex)); err != nil {
			t.Fatalf("get after A recovered: %v", err)
		}
		return false
	})
}

func TestAttemptTimeoutConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      time.Duration
		want    time.Duration
		wantErr bool
	}{
		{0, time.Second, false},
		{-1, -1, false},
		{-time.Hour, -1, false},
		{250 * time.Millisecond, 250 * time.Millisecond, false},
		{time.Microsecond, 0, true},
	} {
		cfg := client.Config{Endpoints: []string{"x:1"}, AttemptTimeout: tc.in}
		err := cfg.Validate()
		got := client.WithDefaults(cfg).AttemptTimeout
		if (err != nil) != tc.wantErr || err == nil && got != tc.want {
			t.Errorf("AttemptTimeout %v: got %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestConfigLeaseDrift: a drift outside [0, 0.5] is refused, NaN included
// (it passes "< 0 || > 0.5", and a lease's age times 1+NaN is no bound).
func TestConfigLeaseDrift(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		drift float64
		ok    bool
	}{{0, true}, {0.5, true}, {-0.1, false}, {0.6, false}, {math.NaN(), false}, {math.Inf(1), false}} {
		cfg := client.Config{Endpoints: []string{"x:1"}, LeaseDrift: tc.drift}
		if err := cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("LeaseDrift %v: Validate() = %v, want ok=%v", tc.drift, err, tc.ok)
		}
	}
}
