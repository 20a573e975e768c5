package client

import (
	"context"
	"errors"
	"sync"
	"time"
)

// KeepAlive keeps lease id alive in the background, as etcd's KeepAlive
// does, until ctx ends, the lease is lost or the Client is closed; Done is
// closed then, and Err says why (nil if ctx ended, ErrLeaseNotFound if the
// lease is gone, ErrLeaseExpired if it could not be renewed in time,
// ErrClosed if the Client was closed).
//
// Validity from the holder's side: a keepalive sent at time s and
// answered renews the lease until at least s + TTL (internal/kv/lessor.go), so
// ValidUntil is the send time of the last answered keepalive plus TTL, by
// this process's clock. Once it has passed the lease may be gone and the
// keeper stops with ErrLeaseExpired; anything relying on the lease (a
// lock) must stop before ValidUntil, whatever Done says. It renews every
// TTL/3, and after a failure every TTL/10 until ValidUntil.
type LeaseKeeper struct {
	id   LeaseID
	done chan struct{}

	mu         sync.Mutex
	validUntil time.Time
	err        error
}

// KeepAlive starts keeping lease id alive; the first renewal is made
// before it returns, so a lease already gone is reported at once.
func (c *Client) KeepAlive(ctx context.Context, id LeaseID) (*LeaseKeeper, error) {
	k := &LeaseKeeper{id: id, done: make(chan struct{})}
	sent := time.Now()
	ttl, err := c.KeepAliveOnce(ctx, id)
	if err != nil {
		return nil, err
	}
	k.validUntil = sent.Add(ttl)
	go k.run(ctx, c, ttl)
	return k, nil
}

func (k *LeaseKeeper) run(ctx context.Context, c *Client, ttl time.Duration) {
	defer close(k.done)
	wait := ttl / 3
	for {
		t := time.NewTimer(min(wait, time.Until(k.ValidUntil())))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.life.Done():
			t.Stop()
			k.stop(ErrClosed)
			return
		case <-t.C:
		}
		if !time.Now().Before(k.ValidUntil()) {
			k.stop(ErrLeaseExpired)
			return
		}
		sent := time.Now()
		actx, cancel := context.WithDeadline(ctx, k.ValidUntil())
		got, err := c.KeepAliveOnce(actx, k.id)
		cancel()
		switch {
		case err == nil:
			k.mu.Lock()
			k.validUntil = sent.Add(got)
			k.mu.Unlock()
			wait = got / 3
		case errors.Is(err, ErrLeaseNotFound), errors.Is(err, ErrClosed):
			k.stop(err)
			return
		case ctx.Err() != nil:
			return
		default:
			wait = ttl / 10
		}
	}
}

func (k *LeaseKeeper) stop(err error) {
	k.mu.Lock()
	k.err = err
	k.mu.Unlock()
}

// ID is the lease kept alive.
func (k *LeaseKeeper) ID() LeaseID { return k.id }

// Done is closed when the keeper stops.
func (k *LeaseKeeper) Done() <-chan struct{} { return k.done }

// Err is why the keeper stopped (nil while it runs, or if ctx ended).
func (k *LeaseKeeper) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// ValidUntil is when the lease may end, as far as this holder can tell:
// the send time of the last answered keepalive plus the TTL.
func (k *LeaseKeeper) ValidUntil() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.validUntil
}
