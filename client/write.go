package client

import (
	"context"
	"fmt"

	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
)

// WriteOption adjusts one PutRevision or Delete.
type WriteOption func(*writeOptions)

type writeOptions struct {
	conditional bool
	ifMod       uint64
	lease       LeaseID
	prevKV      bool
	ignoreValue bool
	ignoreLease bool
}

// WithIgnoreValue makes a PUT keep the key's current value (etcd's
// ignore_value): give it no value. The key must exist when the PUT is
// applied, else it fails with ErrNotFound and applies nothing. Useful with
// WithLease, to move a key to a lease without rewriting it.
func WithIgnoreValue() WriteOption {
	return func(o *writeOptions) { o.ignoreValue = true }
}

// WithIgnoreLease makes a PUT keep the key's current lease (etcd's
// ignore_lease): it cannot take WithLease. The key must exist when the PUT
// is applied, else it fails with ErrNotFound and applies nothing.
func WithIgnoreLease() WriteOption {
	return func(o *writeOptions) { o.ignoreLease = true }
}

// IfModRevision makes a write conditional (compare-and-swap): it is
// applied only if, when its Raft entry is applied, the key's mod revision
// (Meta.ModRevision, as GetModRevision returns it) is rev; 0 means the key must
// not exist. Otherwise nothing is applied and the write fails with a
// *ConflictError (errors.Is(err, ErrConflict)) naming the key's mod
// revision then. It is etcd's optimistic update,
// If(Compare(ModRevision(key), "=", rev)).
//
// The condition is checked by every node as it applies the entry, against
// the applied state, so it is exact; it is never checked when the write is
// sent. As for every write, a conditional one that fails with
// ErrUnavailable may or may not have been applied; the client retries it
// by itself only while no attempt can have taken effect, so an
// ErrConflict is never the write meeting its own earlier attempt.
func IfModRevision(rev uint64) WriteOption {
	return func(o *writeOptions) { o.conditional, o.ifMod = true, rev }
}

// WithLease attaches the PUT's key to lease id: the key is deleted when
// the lease expires or is revoked. A PUT without it detaches the key from
// any lease (as in etcd). A PUT naming a lease that does not exist when it
// is applied fails with ErrLeaseNotFound and applies nothing. It has no
// effect on Delete.
func WithLease(id LeaseID) WriteOption {
	return func(o *writeOptions) { o.lease = id }
}

func resolveWrite(opts []WriteOption) writeOptions {
	var o writeOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// PutRevision is Put that also returns the store revision the write got
// (the key's mod revision, as GetModRevision will report it), with options:
// IfModRevision makes it a compare-and-swap.
func (c *Client) PutRevision(ctx context.Context, key, value []byte, opts ...WriteOption) (uint64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	if len(value) > MaxValue {
		return 0, fmt.Errorf("%w: %d bytes (max %d)", ErrValueTooLarge, len(value), MaxValue)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	o := resolveWrite(opts)
	put := txn.Op{Type: txn.Put, Key: key, Value: value, Lease: uint64(o.lease), IgnoreValue: o.ignoreValue, IgnoreLease: o.ignoreLease}
	switch {
	case o.ignoreValue && len(value) != 0:
		return 0, fmt.Errorf("%w: %w", ErrBadRequest, txn.ErrValueProvided)
	case o.ignoreLease && o.lease != 0:
		return 0, fmt.Errorf("%w: %w", ErrBadRequest, txn.ErrLeaseProvided)
	case !o.conditional && o.lease == 0:
		req := &wire.Request{Op: wire.OpPut, Key: key, Value: value}
		if o.ignoreValue {
			req.Flags |= wire.PutIgnoreValue
		}
		if o.ignoreLease {
			req.Flags |= wire.PutIgnoreLease
		}
		resp, err := c.leaderCall(ctx, req, false)
		return resp.Version, err
	case !o.conditional:
		// A PUT with a lease is a transaction of that one PUT: the one
		// write path that attaches keys to leases (internal/txn).
		r, err := c.txn(ctx, &txn.Txn{Then: []txn.Op{put}})
		return r.Revision, err
	}
	r, err := c.conditional(ctx, key, o.ifMod, put)
	if err != nil {
		return 0, err
	}
	if err := r.check(key, o.ifMod); err != nil {
		return 0, err // applied nothing: no revision
	}
	return r.Revision, nil
}

// Delete removes key. It returns ErrNotFound if the key did not exist. Like
// Put, a Delete that fails with ErrUnavailable may or may not have been
// applied; the client retries it only while no attempt can have taken
// effect. With IfModRevision it is a compare-and-delete.
func (c *Client) Delete(ctx context.Context, key []byte, opts ...WriteOption) error {
	if err := checkKey(key); err != nil {
		return err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	o := resolveWrite(opts)
	if !o.conditional {
		_, err := c.leaderCall(ctx, &wire.Request{Op: wire.OpDelete, Key: key}, false)
		return err
	}
	r, err := c.conditional(ctx, key, o.ifMod, txn.Op{Type: txn.Delete, Key: key})
	if err != nil {
		return err
	}
	if err := r.check(key, o.ifMod); err != nil {
		return err
	}
	if !r.Results[0].Found {
		return ErrNotFound // IfModRevision(0) held: there was nothing to delete
	}
	return nil
}

// conditional runs op as a transaction guarded by key's mod revision.
func (c *Client) conditional(ctx context.Context, key []byte, rev uint64, op txn.Op) (casResult, error) {
	r, err := c.txn(ctx, &txn.Txn{
		Compares: []txn.Compare{{Key: key, Target: txn.TargetMod, Cmp: txn.Equal, Num: rev}},
		Then:     []txn.Op{op},
	})
	return casResult(r), err
}

// casResult is a conditional write's transaction outcome.
type casResult txn.Response

// check turns a failed condition into a *ConflictError. (txn checked that
// the reply has one compared key, and one result if it succeeded.)
func (r *casResult) check(key []byte, want uint64) error {
	if !r.Succeeded {
		return &ConflictError{Key: append([]byte(nil), key...), ModRevision: r.Compared[0].Mod, Expected: want}
	}
	return nil
}
