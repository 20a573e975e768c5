package client

import (
	"context"
	"fmt"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/wire"
)

// MaxAtomicBytes bounds the values one GetManyAtomic call may return
// together: when they are read by RPC, they travel in one message.
const MaxAtomicBytes = limits.MaxGetManyBytes

// GetManyAtomic reads every key in keys (at most MaxGetMany) like GetMany,
// and returns values that all held at one applied index, which it returns
// too: an atomic snapshot of the keys, as if read by one request.
//
// At the Linearizable level it first tries to prove the snapshot
// one-sided, by a double collect: two GetMany passes, the second started
// after the first ended. If every key is found in both with the same mod
// revision, each key held that value throughout the gap between the
// passes (a key's mod revision is the store revision of its write, so it
// never takes an earlier value back), so at any instant in the gap all the
// values held at once; the revision returned is their greatest mod
// revision, at which they all held. A missing key cannot be proven so (it may have been created and
// deleted between the passes), nor a key that changed: then the keys are
// read by one RPC from one point-in-time view of the applied state, at the
// level's guarantee (the leader behind a ReadIndex; Serializable: one
// node's applied state). Values of more than MaxAtomicBytes together are
// refused with ErrBadRequest.
func (c *Client) GetManyAtomic(ctx context.Context, keys [][]byte, opts ...ReadOption) ([]Result, uint64, error) {
	if err := checkKeys(keys); err != nil {
		return nil, 0, err
	}
	level := resolveLevel(c.cfg.Consistency, opts)
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if level == Linearizable {
		if out, index, ok := c.doubleCollect(ctx, keys); ok {
			c.stats.atomicOneSided.Add(1)
			return out, index, nil
		}
	}
	out, index, err := c.getManyRPC(ctx, keys, level)
	if err != nil {
		return nil, 0, err
	}
	c.stats.atomicRPC.Add(1)
	return out, index, nil
}

// doubleCollect tries the one-sided proof of GetManyAtomic.
func (c *Client) doubleCollect(ctx context.Context, keys [][]byte) ([]Result, uint64, bool) {
	if len(keys) == 0 {
		return nil, 0, false
	}
	first, err := c.GetMany(ctx, keys, WithConsistency(Linearizable))
	if err != nil {
		return nil, 0, false
	}
	second, err := c.GetMany(ctx, keys, WithConsistency(Linearizable))
	if err != nil {
		return nil, 0, false
	}
	var index uint64
	size := 0
	for i := range keys {
		a, b := first[i], second[i]
		if !a.Found || !b.Found || a.ModRevision != b.ModRevision {
			return nil, 0, false
		}
		index = max(index, b.ModRevision)
		size += len(b.Value)
	}
	if size > MaxAtomicBytes {
		return nil, 0, false // the same refusal as by RPC
	}
	return second, index, true
}

// getManyRPC reads keys by one OpGetMany request.
func (c *Client) getManyRPC(ctx context.Context, keys [][]byte, level Consistency) ([]Result, uint64, error) {
	req := &wire.Request{Op: wire.OpGetMany, Value: wire.AppendGetManyRequest(nil, keys)}
	resp, err := c.readCall(ctx, req, level)
	if err != nil {
		return nil, 0, err
	}
	answers, err := wire.DecodeGetManyResponse(resp.Value, make([]wire.GetManyAnswer, 0, len(keys)))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", errMalformedReply, err)
	}
	if len(answers) != len(keys) {
		return nil, 0, fmt.Errorf("%w: %d answers for %d keys", errMalformedReply, len(answers), len(keys))
	}
	out := make([]Result, len(keys))
	for i, a := range answers {
		if a.Found {
			out[i] = Result{Value: a.Value, Meta: Meta{ModRevision: a.Version}, Found: true}
		}
	}
	return out, resp.Version, nil
}
