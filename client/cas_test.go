package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
)

// clusterClient starts a one-node cluster and returns a client of it.
func clusterClient(t *testing.T) *client.Client {
	t.Helper()
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes), AttemptTimeout: 10 * time.Second, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// wantConflict asserts err is a conflict on key at version current.
func wantConflict(t *testing.T, what string, err error, key string, current, expected uint64) {
	t.Helper()
	var ce *client.ConflictError
	if !errors.Is(err, client.ErrConflict) || !errors.As(err, &ce) {
		t.Fatalf("%s: %v, want a *ConflictError (ErrConflict)", what, err)
	}
	if string(ce.Key) != key || ce.ModRevision != current || ce.Expected != expected {
		t.Fatalf("%s: conflict on %q at version %d expecting %d, want %q at %d expecting %d",
			what, ce.Key, ce.ModRevision, ce.Expected, key, current, expected)
	}
	if errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrNotFound) {
		t.Fatalf("%s: a conflict also matches another sentinel: %v", what, err)
	}
}

// TestCompareAndSwap: conditional PUTs and DELETEs against a real node,
// each outcome checked by reading the key back.
func TestCompareAndSwap(t *testing.T) {
	c := clusterClient(t)
	ctx := context.Background()
	get := func(k string) (string, uint64) {
		t.Helper()
		v, ver, err := c.GetModRevision(ctx, []byte(k))
		if errors.Is(err, client.ErrNotFound) {
			return "<none>", 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(v), ver
	}

	// Create-only: version 0 means "must not exist".
	v1, err := c.PutRevision(ctx, []byte("k"), []byte("one"), client.IfModRevision(0))
	if err != nil || v1 == 0 {
		t.Fatalf("create k: version %d, %v", v1, err)
	}
	if val, ver := get("k"); val != "one" || ver != v1 {
		t.Fatalf("after create: %q at %d, want one at %d", val, ver, v1)
	}
	_, err = c.PutRevision(ctx, []byte("k"), []byte("again"), client.IfModRevision(0))
	wantConflict(t, "create an existing key", err, "k", v1, 0)

	// Swap at the current version; a stale swap fails and changes nothing.
	v2, err := c.PutRevision(ctx, []byte("k"), []byte("two"), client.IfModRevision(v1))
	if err != nil || v2 <= v1 {
		t.Fatalf("swap at %d: version %d, %v", v1, v2, err)
	}
	_, err = c.PutRevision(ctx, []byte("k"), []byte("stale"), client.IfModRevision(v1))
	wantConflict(t, "stale swap", err, "k", v2, v1)
	if val, ver := get("k"); val != "two" || ver != v2 {
		t.Fatalf("after the stale swap: %q at %d, want two at %d", val, ver, v2)
	}
	// A swap of an absent key at some version.
	_, err = c.PutRevision(ctx, []byte("absent"), []byte("x"), client.IfModRevision(v2))
	wantConflict(t, "swap an absent key", err, "absent", 0, v2)
	if val, _ := get("absent"); val != "<none>" {
		t.Fatalf("the failed swap created absent = %q", val)
	}

	// Conditional deletes.
	err = c.Delete(ctx, []byte("k"), client.IfModRevision(v1))
	wantConflict(t, "stale delete", err, "k", v2, v1)
	if val, _ := get("k"); val != "two" {
		t.Fatalf("the stale delete removed k (%q)", val)
	}
	if err := c.Delete(ctx, []byte("k"), client.IfModRevision(v2)); err != nil {
		t.Fatalf("delete at the current version: %v", err)
	}
	if val, _ := get("k"); val != "<none>" {
		t.Fatalf("k = %q after its delete", val)
	}
	err = c.Delete(ctx, []byte("k"), client.IfModRevision(v2))
	wantConflict(t, "delete of a deleted key", err, "k", 0, v2)
	if err := c.Delete(ctx, []byte("k"), client.IfModRevision(0)); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("delete if absent of an absent key: %v, want ErrNotFound", err)
	}

	// The message names the versions.
	_, err = c.PutRevision(ctx, []byte("absent"), []byte("x"), client.IfModRevision(7))
	if !strings.Contains(err.Error(), `kvd: conflict: key "absent" does not exist (expected mod revision 7)`) {
		t.Fatalf("message %q", err)
	}
	// Plain writes are unchanged and report their version too.
	v3, err := c.PutRevision(ctx, []byte("plain"), []byte("p"))
	if _, ver := get("plain"); err != nil || ver != v3 {
		t.Fatalf("plain PutVersion: %d, %v; read back at %d", v3, err, ver)
	}
}

// TestCompareAndSwapRace: many clients increment one counter by CAS; each
// increment that reports success is counted exactly once.
func TestCompareAndSwapRace(t *testing.T) {
	c := clusterClient(t)
	ctx := context.Background()
	const workers, each = 4, 10
	errs := make(chan error, workers)
	conflicts := make(chan int, workers)
	for w := range workers {
		go func() {
			n := 0
			for done := 0; done < each; {
				v, ver, err := c.GetModRevision(ctx, []byte("ctr"))
				count := 0
				switch {
				case errors.Is(err, client.ErrNotFound):
				case err != nil:
					errs <- err
					return
				default:
					fmt.Sscan(string(v), &count)
				}
				_, err = c.PutRevision(ctx, []byte("ctr"), []byte(fmt.Sprint(count+1)), client.IfModRevision(ver))
				switch {
				case errors.Is(err, client.ErrConflict):
					n++
				case err != nil:
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				default:
					done++
				}
			}
			conflicts <- n
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	v, err := c.Get(ctx, []byte("ctr"))
	if err != nil || string(v) != fmt.Sprint(workers*each) {
		t.Fatalf("counter %q, %v; want %d", v, err, workers*each)
	}
	total := 0
	for range workers {
		total += <-conflicts
	}
	t.Logf("%d increments, %d conflicts", workers*each, total)
}

// TestConditionalWriteFailures: a conditional write is not idempotent, so
// the client's retry rules for writes hold for it: retried after answers
// that prove nothing was applied, failed as "maybe applied" after one that
// does not (so an ErrConflict can never come from the write's own earlier
// attempt), and a conflict answer is a conflict.
func TestConditionalWriteFailures(t *testing.T) {
	conflict := func(*wire.Request) reaction {
		r := txn.Response{Compared: []revision.Meta{{Mod: 42}}}
		return reaction{resp: wire.Response{Value: txn.AppendResponse(nil, &r)}}
	}
	for _, tc := range []struct {
		name string
		a    func(*wire.Request) reaction
		want func(error) bool
		toB  bool // the request was retried at B
	}{
		{"not leader", always(answer(wire.StatusNotLeader, "B")), func(err error) bool { return err == nil }, true},
		{"proposal dropped", always(answer(wire.StatusRetry, "proposal dropped")), func(err error) bool { return err == nil }, true},
		{"no answer", always(reaction{hang: true}), func(err error) bool {
			return errors.Is(err, client.ErrUnavailable) && !errors.Is(err, client.ErrNotApplied) && !errors.Is(err, client.ErrConflict)
		}, false},
		{"connection lost", always(reaction{drop: true}), func(err error) bool {
			return errors.Is(err, client.ErrUnavailable) && !errors.Is(err, client.ErrConflict)
		}, false},
		{"conflict", conflict, func(err error) bool {
			var ce *client.ConflictError
			return errors.As(err, &ce) && ce.ModRevision == 42 && ce.Expected == 7
		}, false},
		{"bad request", always(answer(wire.StatusBadRequest, "txn: invalid")), func(err error) bool { return errors.Is(err, client.ErrBadRequest) }, false},
		{"malformed reply", always(answer(wire.StatusOK, "garbage")), func(err error) bool {
			return err != nil && !errors.Is(err, client.ErrConflict) && strings.Contains(err.Error(), "malformed")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok := func(*wire.Request) reaction {
				r := txn.Response{Succeeded: true, Revision: 8, Compared: []revision.Meta{{Mod: 7}}, Results: []txn.Result{{Type: txn.Put, Meta: revision.Meta{Mod: 8}}}}
				return reaction{resp: wire.Response{Version: 8, Value: txn.AppendResponse(nil, &r)}}
			}
			b := startFake(t, ok)
			a := startFake(t, tc.a)
			if tc.name == "not leader" {
				a.setReact(always(answer(wire.StatusNotLeader, b.addr)))
			}
			c, err := client.New(client.Config{Endpoints: []string{a.addr, b.addr}, AttemptTimeout: time.Second, DialTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = c.PutRevision(ctx, []byte("k"), []byte("v"), client.IfModRevision(7))
			if !tc.want(err) {
				t.Fatalf("err %v", err)
			}
			if got := b.seen.Load() == 1; got != tc.toB {
				t.Fatalf("retried at B: %v, want %v (err %v)", got, tc.toB, err)
			}
			if a.seen.Load() != 1 {
				t.Fatalf("A saw %d attempts, want 1", a.seen.Load())
			}
		})
	}
}
