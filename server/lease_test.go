package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/server"
)

// fakeClock is the nodes' TTL lease clock, moved only by the test, so
// that expiry is decided by the test's steps, never by how fast the
// machine runs.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const leaseTTL = 10 * time.Second // on the fake clock

// settle lets every node's raft loop take a few real ticks (and with them
// its expiry check) at the fake clock's current time.
func settle() { time.Sleep(5 * server.DefaultTickInterval) }

func mustGet(t *testing.T, c *client.Client, key string, present bool) {
	t.Helper()
	_, err := c.Get(context.Background(), []byte(key))
	switch {
	case present && err != nil:
		t.Fatalf("%s: %v, want it present", key, err)
	case !present && !errors.Is(err, client.ErrNotFound):
		t.Fatalf("%s: %v, want it gone", key, err)
	}
}

func waitGone(t *testing.T, c *client.Client, key string) {
	t.Helper()
	wait.For(t, key+" deleted by expiry", func() bool {
		_, err := c.Get(context.Background(), []byte(key))
		return errors.Is(err, client.ErrNotFound)
	})
}

// leaseSetup grants two leases at the fake clock's now and attaches a key
// to each: doomed (never kept alive) and kept.
func leaseSetup(t *testing.T, c *client.Client) (doomed, kept client.LeaseID) {
	t.Helper()
	ctx := context.Background()
	var err error
	for _, id := range []*client.LeaseID{&doomed, &kept} {
		if *id, err = c.Grant(ctx, leaseTTL); err != nil {
			t.Fatal(err)
		}
	}
	for key, id := range map[string]client.LeaseID{"doomed": doomed, "kept": kept} {
		if _, err := c.PutRevision(ctx, []byte(key), []byte("v"), client.WithLease(id)); err != nil {
			t.Fatal(err)
		}
	}
	return doomed, kept
}

// TestLeaseExpiryAcrossLeaderChange: a lease 8s into its 10s TTL when the
// leader dies is given its full TTL again by the new leader: its key is
// still there 5s later (past the old deadline), and gone once 10s have
// passed since the election. A lease kept alive through the new leader
// keeps its key.
func TestLeaseExpiryAcrossLeaderChange(t *testing.T) {
	skipShort(t)
	clk := newFakeClock()
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{LeaseClock: clk.Now})
	old := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	doomed, kept := leaseSetup(t, c)
	clk.Advance(8 * time.Second)
	settle()
	mustGet(t, c, "doomed", true)
	old.Stop()
	kvdtest.WaitLeader(t, othersThan(nodes, old), 20*time.Second) // elected at +8s
	ctx := context.Background()
	clk.Advance(5 * time.Second) // +13s: past the old leader's deadline
	if _, err := c.KeepAliveOnce(ctx, kept); err != nil {
		t.Fatal(err)
	}
	settle()
	mustGet(t, c, "doomed", true)
	if info, err := c.TimeToLive(ctx, doomed); err != nil || info.Keys != 1 || info.Remaining > leaseTTL-5*time.Second {
		t.Fatalf("doomed lease after the election: %+v, %v", info, err)
	}
	clk.Advance(5 * time.Second) // +18s: the new leader's deadline
	waitGone(t, c, "doomed")
	mustGet(t, c, "kept", true)
	if _, err := c.TimeToLive(ctx, doomed); !errors.Is(err, client.ErrLeaseNotFound) {
		t.Fatalf("expired lease: %v", err)
	}
	if _, err := c.PutRevision(ctx, []byte("late"), []byte("v"), client.WithLease(doomed)); !errors.Is(err, client.ErrLeaseNotFound) {
		t.Fatalf("PUT with an expired lease: %v", err)
	}
	if _, err := c.KeepAliveOnce(ctx, doomed); !errors.Is(err, client.ErrLeaseNotFound) {
		t.Fatalf("keepalive of an expired lease: %v", err)
	}
}

// TestLeaseExpiryAcrossFullRestart: the leases and their keys survive a
// restart of every node, and the leader after the restart starts each at
// its full TTL.
func TestLeaseExpiryAcrossFullRestart(t *testing.T) {
	skipShort(t)
	clk := newFakeClock()
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{LeaseClock: clk.Now})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	doomed, kept := leaseSetup(t, c)
	clk.Advance(8 * time.Second)
	for _, n := range nodes {
		n.Stop()
	}
	for _, n := range nodes {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
	}
	kvdtest.WaitLeader(t, nodes, 20*time.Second)
	ctx := context.Background()
	for _, id := range []client.LeaseID{doomed, kept} {
		if info, err := c.TimeToLive(ctx, id); err != nil || info.Keys != 1 || info.TTL != leaseTTL {
			t.Fatalf("lease %v after the restart: %+v, %v", id, info, err)
		}
	}
	clk.Advance(5 * time.Second)
	if _, err := c.KeepAliveOnce(ctx, kept); err != nil {
		t.Fatal(err)
	}
	settle()
	mustGet(t, c, "doomed", true)
	clk.Advance(5 * time.Second)
	waitGone(t, c, "doomed")
	mustGet(t, c, "kept", true)
	if err := c.Revoke(ctx, kept); err != nil {
		t.Fatal(err)
	}
	mustGet(t, c, "kept", false)
	for _, n := range nodes {
		wait.For(t, fmt.Sprintf("node %d to apply the revokes", n.ID), func() bool { return server.LeaseCount(n.Srv) == 0 })
	}
}

// TestLeaseAttachDetach: a PUT without a lease detaches the key (the
// lease's revoke leaves it), a DELETE detaches it, a PUT with another
// lease moves it, and a compare-and-swap may attach a lease too.
func TestLeaseAttachDetach(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx := context.Background()
	a, err := c.Grant(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Grant(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, opts ...client.WriteOption) uint64 {
		t.Helper()
		v, err := c.PutRevision(ctx, []byte(key), []byte("v"), opts...)
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		return v
	}
	keys := func(id client.LeaseID) uint64 {
		t.Helper()
		info, err := c.TimeToLive(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return info.Keys
	}
	put("plain", client.WithLease(a))
	put("plain")
	put("deleted", client.WithLease(a))
	if err := c.Delete(ctx, []byte("deleted")); err != nil {
		t.Fatal(err)
	}
	put("moved", client.WithLease(a))
	put("moved", client.WithLease(b))
	if _, err := c.PutRevision(ctx, []byte("cas"), []byte("v"), client.IfModRevision(0), client.WithLease(a)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutRevision(ctx, []byte("cas"), []byte("w"), client.IfModRevision(0), client.WithLease(a)); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("second create: %v", err)
	}
	if got := keys(a); got != 1 {
		t.Fatalf("lease a holds %d keys, want 1 (cas)", got)
	}
	if got := keys(b); got != 1 {
		t.Fatalf("lease b holds %d keys, want 1 (moved)", got)
	}
	put("deleted") // recreated without a lease: a's revoke must leave it
	if err := c.Revoke(ctx, a); err != nil {
		t.Fatal(err)
	}
	mustGet(t, c, "plain", true)
	mustGet(t, c, "deleted", true)
	mustGet(t, c, "moved", true)
	mustGet(t, c, "cas", false)
	if err := c.Revoke(ctx, a); !errors.Is(err, client.ErrLeaseNotFound) {
		t.Fatalf("second revoke: %v", err)
	}
	if _, err := c.PutRevision(ctx, []byte("x"), []byte("v"), client.WithLease(a)); !errors.Is(err, client.ErrLeaseNotFound) {
		t.Fatalf("PUT with a revoked lease: %v", err)
	}
	mustGet(t, c, "x", false)
}

// TestLeaseRequestsRefused: malformed lease requests are bad requests,
// never proposed; a follower answers "not leader" to a keepalive; a
// revoke of an unknown lease is StatusLeaseNotFound.
func TestLeaseRequestsRefused(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	lead := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	id := wire.AppendLeaseID(nil, 77)
	for _, tc := range []struct {
		req  wire.Request
		want wire.Status
	}{
		{wire.Request{Op: wire.OpLeaseGrant, Value: []byte{1, 2}}, wire.StatusBadRequest},
		{wire.Request{Op: wire.OpLeaseGrant, Value: wire.AppendLeaseGrant(nil, &wire.LeaseGrant{TTL: time.Millisecond})}, wire.StatusBadRequest},
		{wire.Request{Op: wire.OpLeaseRevoke, Key: []byte("k"), Value: id}, wire.StatusBadRequest},
		{wire.Request{Op: wire.OpLeaseKeepAlive, Value: wire.AppendLeaseID(nil, 0)}, wire.StatusBadRequest},
		{wire.Request{Op: wire.OpLeaseTimeToLive, Flags: 1, Value: id}, wire.StatusBadRequest},
		{wire.Request{Op: wire.OpLeaseRevoke, Value: id}, wire.StatusLeaseNotFound},
		{wire.Request{Op: wire.OpLeaseKeepAlive, Value: id}, wire.StatusLeaseNotFound},
	} {
		resp, err := askRequest(t, lead.Addr, &tc.req, 5*time.Second)
		if err != nil || resp.Status != tc.want {
			t.Errorf("%v %x: %+v, %v; want status %d", tc.req.Op, tc.req.Value, resp, err, tc.want)
		}
	}
	f := othersThan(nodes, lead)[0]
	resp, err := askRequest(t, f.Addr, &wire.Request{Op: wire.OpLeaseKeepAlive, Value: id}, 5*time.Second)
	if err != nil || resp.Status != wire.StatusNotLeader {
		t.Errorf("keepalive at a follower: %+v, %v", resp, err)
	}
}

// TestLeaseKeeper: a background keeper renews its lease (ValidUntil moves
// on) and stops with ErrLeaseNotFound once the lease is revoked.
func TestLeaseKeeper(t *testing.T) {
	skipShort(t)
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx := context.Background()
	id, err := c.Grant(ctx, client.MinLeaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	k, err := c.KeepAlive(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	first := k.ValidUntil()
	wait.For(t, "a renewal", func() bool { return k.ValidUntil().After(first) })
	if err := c.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case <-k.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("keeper still running after its lease was revoked")
	}
	if !errors.Is(k.Err(), client.ErrLeaseNotFound) {
		t.Fatalf("keeper stopped with %v", k.Err())
	}
	if _, err := c.KeepAlive(ctx, id); !errors.Is(err, client.ErrLeaseNotFound) {
		t.Fatalf("KeepAlive of a revoked lease: %v", err)
	}
}

// TestLeaseExpiryReachesWatchers: the deletes a lease's expiry makes
// through Raft reach a watcher as DELETE events, one per attached key, at
// the expiry entry's version, after the PUTs that attached them.
func TestLeaseExpiryReachesWatchers(t *testing.T) {
	clk := newFakeClock()
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{LeaseClock: clk.Now})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := c.Grant(ctx, leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	var from uint64
	for _, k := range []string{"exp/a", "exp/b"} {
		v, err := c.PutRevision(ctx, []byte(k), []byte("v"), client.WithLease(id))
		if err != nil {
			t.Fatal(err)
		}
		if from == 0 {
			from = v
		}
	}
	ch := c.Watch(ctx, []byte("exp/"), client.WithPrefix(), client.WithFromRevision(from))
	clk.Advance(leaseTTL + time.Second)
	var evs []client.Event
	for r := range ch {
		if r.Err != nil {
			t.Fatalf("watch: %v", r.Err)
		}
		if evs = append(evs, r.Events...); len(evs) >= 4 {
			break
		}
	}
	cancel()
	if len(evs) != 4 || evs[0].Type != client.EventPut || evs[1].Type != client.EventPut ||
		evs[2].Type != client.EventDelete || evs[3].Type != client.EventDelete ||
		evs[2].ModRevision != evs[3].ModRevision || evs[2].ModRevision <= evs[1].ModRevision {
		t.Fatalf("events %+v; want the two PUTs, then both keys deleted by one later entry", evs)
	}
	mustGet(t, c, "exp/a", false)
}

// TestLeaseList: Client.Leases lists every lease in id order, across
// pages (the page lowered to 2 by Knobs), through a follower given first;
// a revoked lease is gone from the list; a malformed request is refused
// and a follower answers "not leader".
func TestLeaseList(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{Knobs: func(uint64) server.Knobs { return server.Knobs{LeaseListPage: 2} }})
	lead := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	f := othersThan(nodes, lead)[0]
	c := newClient(t, []string{f.Addr, lead.Addr}, client.Linearizable)
	ctx := context.Background()
	if ids, err := c.Leases(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("no leases: %v, %v", ids, err)
	}
	var want []client.LeaseID
	for range 5 {
		id, err := c.Grant(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	slices.Sort(want)
	if ids, err := c.Leases(ctx); err != nil || !slices.Equal(ids, want) {
		t.Fatalf("Leases: %v, %v; want %v", ids, err, want)
	}
	if err := c.Revoke(ctx, want[2]); err != nil {
		t.Fatal(err)
	}
	want = slices.Delete(want, 2, 3)
	if ids, err := c.Leases(ctx); err != nil || !slices.Equal(ids, want) {
		t.Fatalf("Leases after a revoke: %v, %v; want %v", ids, err, want)
	}
	for _, tc := range []struct {
		addr  string
		value []byte
		want  wire.Status
	}{
		{lead.Addr, []byte{1, 2}, wire.StatusBadRequest},
		{f.Addr, wire.AppendLeaseID(nil, 0), wire.StatusNotLeader},
	} {
		resp, err := askRequest(t, tc.addr, &wire.Request{Op: wire.OpLeaseList, Value: tc.value}, 5*time.Second)
		if err != nil || resp.Status != tc.want {
			t.Errorf("lease list %x at %s: %+v, %v; want status %d", tc.value, tc.addr, resp, err, tc.want)
		}
	}
}

// TestLeaseGrantWithChosenID: a grant WithLeaseID creates the lease with
// that id (a follower given first forwards nothing: the client finds the
// leader), a second grant of the id fails with ErrLeaseExists (also a bad
// request) and changes nothing, and the lease works as any other.
func TestLeaseGrantWithChosenID(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	lead := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, []string{othersThan(nodes, lead)[0].Addr, lead.Addr}, client.Linearizable)
	ctx := context.Background()
	const chosen client.LeaseID = 777
	tests := []struct {
		name    string
		ttl     time.Duration
		wantErr error
	}{
		{"first grant", time.Minute, nil},
		{"second grant", 2 * time.Minute, client.ErrLeaseExists},
	}
	for _, tc := range tests {
		id, err := c.Grant(ctx, tc.ttl, client.WithLeaseID(chosen))
		switch {
		case tc.wantErr == nil && (err != nil || id != chosen):
			t.Fatalf("%s: %v, %v; want lease %v", tc.name, id, err, chosen)
		case tc.wantErr != nil && (!errors.Is(err, tc.wantErr) || !errors.Is(err, client.ErrBadRequest)):
			t.Fatalf("%s: %v, %v; want %v, a bad request", tc.name, id, err, tc.wantErr)
		}
	}
	if info, err := c.TimeToLive(ctx, chosen); err != nil || info.TTL != time.Minute {
		t.Fatalf("the chosen lease: %+v, %v; want the first grant's TTL", info, err)
	}
	if _, err := c.PutRevision(ctx, []byte("chosen"), []byte("v"), client.WithLease(chosen)); err != nil {
		t.Fatal(err)
	}
	if err := c.Revoke(ctx, chosen); err != nil {
		t.Fatal(err)
	}
	mustGet(t, c, "chosen", false)
	if id, err := c.Grant(ctx, time.Minute, client.WithLeaseID(chosen)); err != nil || id != chosen {
		t.Fatalf("grant of a revoked id: %v, %v; want it granted again", id, err)
	}
}
