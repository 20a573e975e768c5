package etcdapi_test

// These need the KV service (Txn, Range, Delete) beside Watch and Lease.

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/kvd-project/kvd/internal/etcdapi"
)

func newSession(t *testing.T, c *clientv3.Client) *concurrency.Session {
	t.Helper()
	s, err := concurrency.NewSession(c, concurrency.WithTTL(10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConcurrencyMutexHandsTheLockOver(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx := t.Context()
	m1 := concurrency.NewMutex(newSession(t, e.etcd), "/lock")
	m2 := concurrency.NewMutex(newSession(t, e.etcd), "/lock")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m2.TryLock(ctx); err != concurrency.ErrLocked {
		t.Fatalf("second TryLock while held: %v, want ErrLocked", err)
	}
	locked := make(chan error, 1)
	go func() { locked <- m2.Lock(ctx) }()
	select {
	case err := <-locked:
		t.Fatalf("second Lock returned %v while the first holds it", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-locked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter never got the lock after Unlock (it watches the holder's key for its delete)")
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrencyElectionCampaignAndObserve(t *testing.T) {
	e := start(t, 1, etcdapi.Config{})
	ctx := t.Context()
	e1 := concurrency.NewElection(newSession(t, e.etcd), "/election")
	s2 := newSession(t, e.etcd)
	e2 := concurrency.NewElection(s2, "/election")
	obs := concurrency.NewElection(newSession(t, e.etcd), "/election").Observe(ctx)
	if err := e1.Campaign(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	expectLeader(t, obs, "one")
	won := make(chan error, 1)
	go func() { won <- e2.Campaign(ctx, "two") }()
	if err := e1.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-won:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the second candidate never won after the first resigned")
	}
	expectLeader(t, obs, "two")
	if err := e2.Proclaim(ctx, "two again"); err != nil {
		t.Fatal(err)
	}
	expectLeader(t, obs, "two again")
}

// expectLeader reads observations until the leader's value is want.
func expectLeader(t *testing.T, obs <-chan *clientv3.GetResponse, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		select {
		case r, ok := <-obs:
			if !ok {
				t.Fatal("observe channel closed")
			}
			if len(r.Kvs) > 0 && string(r.Kvs[0].Value) == want {
				return
			}
		case <-ctx.Done():
			t.Fatalf("never observed leader %q", want)
		}
	}
}
