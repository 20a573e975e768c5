package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
)

func k(s string) []byte { return []byte(s) }

// TestTxn: both branches against a real node, with results, versions and
// what one-sided GETs read afterwards.
func TestTxn(t *testing.T) {
	c := clusterClient(t)
	ctx := context.Background()
	va, err := c.PutRevision(ctx, k("a"), k("1"))
	if err != nil {
		t.Fatal(err)
	}
	// Then: a is at va and b is missing: move a's value to b, delete a.
	r, err := c.Txn(ctx, client.Txn{
		If:   []client.Cmp{client.CompareModRevision(k("a"), client.CmpEqual, va), client.KeyMissing(k("b")), client.CompareValue(k("a"), client.CmpEqual, k("1"))},
		Then: []client.Op{client.OpGet(k("a")), client.OpPut(k("b"), k("1")), client.OpDelete(k("a")), client.OpGet(k("b"))},
		Else: []client.Op{client.OpPut(k("else"), k("ran"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Succeeded || r.Revision <= va || len(r.Results) != 4 ||
		!r.Results[0].Found || string(r.Results[0].Value) != "1" || r.Results[0].ModRevision != va ||
		r.Results[1].ModRevision != r.Revision || !r.Results[2].Found ||
		!r.Results[3].Found || string(r.Results[3].Value) != "1" || r.Results[3].ModRevision != r.Revision {
		t.Fatalf("then branch: %+v", r)
	}
	if got := []uint64{r.Compared[0].ModRevision, r.Compared[1].ModRevision, r.Compared[2].ModRevision}; fmt.Sprint(got) != fmt.Sprint([]uint64{va, 0, va}) {
		t.Fatalf("compared mod revisions %v, want [%d 0 %d]", got, va, va)
	}
	if _, err := c.Get(ctx, k("a")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a after the move: %v", err)
	}
	if v, ver, err := c.GetModRevision(ctx, k("b")); err != nil || string(v) != "1" || ver != r.Revision {
		t.Fatalf("b after the move: %q at %d, %v", v, ver, err)
	}
	// Else: a no longer exists.
	r2, err := c.Txn(ctx, client.Txn{
		If:   []client.Cmp{client.KeyExists(k("a"))},
		Then: []client.Op{client.OpDelete(k("b"))},
		Else: []client.Op{client.OpGet(k("a")), client.OpPut(k("else"), k("ran"))},
	})
	if err != nil || r2.Succeeded || len(r2.Results) != 2 || r2.Results[0].Found || r2.Results[1].ModRevision != r2.Revision {
		t.Fatalf("else branch: %+v, %v", r2, err)
	}
	if v, err := c.Get(ctx, k("else")); err != nil || string(v) != "ran" {
		t.Fatalf("else's put: %q, %v", v, err)
	}
	if _, err := c.Get(ctx, k("b")); err != nil {
		t.Fatalf("then's delete ran in the else case: %v", err)
	}
	// A read-only transaction is a linearizable multi-key read.
	r3, err := c.Txn(ctx, client.Txn{Then: []client.Op{client.OpGet(k("b")), client.OpGet(k("else")), client.OpGet(k("none"))}})
	if err != nil || !r3.Succeeded || string(r3.Results[0].Value) != "1" || string(r3.Results[1].Value) != "ran" || r3.Results[2].Found {
		t.Fatalf("read-only transaction: %+v, %v", r3, err)
	}
}

// TestTxnRefused: transactions that are not allowed fail with
// ErrBadRequest and a message naming the rule, and apply nothing.
func TestTxnRefused(t *testing.T) {
	c := clusterClient(t)
	ctx := context.Background()
	if err := c.Put(ctx, k("big"), make([]byte, client.MaxValue)); err != nil {
		t.Fatal(err)
	}
	many := make([]client.Op, client.MaxTxnOps+1)
	for i := range many {
		many[i] = client.OpGet(k("x"))
	}
	for _, tc := range []struct {
		name string
		t    client.Txn
		want string
	}{
		{"duplicate key", client.Txn{Then: []client.Op{client.OpPut(k("w"), k("1")), client.OpDelete(k("w"))}}, `then: duplicate key given in txn request: "w"`},
		{"too many ops", client.Txn{Else: many}, "129 else operations"},
		{"empty key", client.Txn{If: []client.Cmp{client.KeyExists(nil)}}, "compare 1: empty key"},
		{"too large", client.Txn{Then: []client.Op{client.OpPut(k("w"), make([]byte, client.MaxValue)), client.OpPut(k("w2"), make([]byte, 8<<10))}}, "bytes encoded"},
		{"reads too much", client.Txn{Then: []client.Op{client.OpPut(k("w"), k("1")), client.OpGet(k("big")), client.OpGet(k("w"))}}, "reads too much"},
	} {
		_, err := c.Txn(ctx, tc.t)
		if !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrBadRequest saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := c.Get(ctx, k("w")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a refused transaction wrote w: %v", err)
	}
}

// TestReadOnlyTxnRetried: a transaction that cannot write is idempotent,
// so an attempt with no answer is retried elsewhere; one that can write
// fails as maybe applied.
func TestReadOnlyTxnRetried(t *testing.T) {
	okGet := func(*wire.Request) reaction {
		r := txn.Response{Succeeded: true, Results: []txn.Result{{Type: txn.Get, Found: true, Meta: revision.Meta{Mod: 3}, Value: k("v")}}}
		return reaction{resp: wire.Response{Version: 9, Value: txn.AppendResponse(nil, &r)}}
	}
	for _, tc := range []struct {
		name    string
		op      client.Op
		retried bool
	}{
		{"read-only", client.OpGet(k("k")), true},
		{"writes", client.OpDelete(k("k")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startFake(t, okGet)
			a := startFake(t, always(reaction{hang: true}))
			c, err := client.New(client.Config{Endpoints: []string{a.addr, b.addr}, AttemptTimeout: time.Second, DialTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := c.Txn(ctx, client.Txn{Then: []client.Op{tc.op}})
			if tc.retried {
				if err != nil || b.seen.Load() != 1 || !bytes.Equal(r.Results[0].Value, k("v")) {
					t.Fatalf("want retried at B: %+v, %v, B saw %d", r, err, b.seen.Load())
				}
				return
			}
			if !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrNotApplied) || b.seen.Load() != 0 {
				t.Fatalf("want maybe applied, not retried: %v, B saw %d", err, b.seen.Load())
			}
		})
	}
}
