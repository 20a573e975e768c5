package client

import (
	"context"
	"fmt"

	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
)

// WithPrevKV makes DeleteRange return the keys it deleted with their
// values and metadata (etcd's prev_kv), and a Watch's events carry the
// key as it was just before each (Event.PrevKV). A server that predates
// prev_kv on watches refuses such a watch (ErrBadRequest, saying so)
// rather than send events without it.
func WithPrevKV() WriteOption {
	return func(o *writeOptions) { o.prevKV = true }
}

// DeleteResponse is a range delete's outcome.
type DeleteResponse struct {
	// Deleted is how many keys it deleted.
	Deleted int64
	// PrevKVs are the deleted keys, with WithPrevKV.
	PrevKVs []KV
	// Revision is the store revision after it: its own if it deleted
	// anything.
	Revision uint64
}

// DeleteRange deletes every key k with start <= k < end (an empty end:
// every key from start on, etcd's --from-key) in one Raft entry: all of
// them at one revision, atomically for every reader. Like Put, one that
// fails with ErrUnavailable may or may not have been applied. A range of
// more keys than the server deletes at once is refused whole with
// ErrBadRequest.
func (c *Client) DeleteRange(ctx context.Context, start, end []byte, opts ...WriteOption) (*DeleteResponse, error) {
	if err := checkKey(start); err != nil {
		return nil, err
	}
	if len(end) > MaxKey {
		return nil, fmt.Errorf("%w: range end of %d bytes (max %d)", ErrKeyTooLarge, len(end), MaxKey)
	}
	req := &wire.Request{Op: wire.OpDeleteRange, Key: start, Value: end}
	if resolveWrite(opts).prevKV {
		req.Flags = wire.DeletePrevKV
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.leaderCall(ctx, req, false)
	if err != nil {
		return nil, err
	}
	page, err := decodePrev(resp.Value)
	if err != nil {
		return nil, err
	}
	out := &DeleteResponse{Deleted: int64(page.Count), Revision: resp.Version}
	for _, kv := range page.KVs {
		out.PrevKVs = append(out.PrevKVs, KV{Key: kv.Key, Value: kv.Value, Meta: metaOf(kv.Meta)})
	}
	return out, nil
}

// DeletePrefix deletes every key that starts with prefix, as DeleteRange.
// An empty prefix deletes every key.
func (c *Client) DeletePrefix(ctx context.Context, prefix []byte, opts ...WriteOption) (*DeleteResponse, error) {
	if len(prefix) == 0 {
		return c.DeleteRange(ctx, []byte{0}, nil, opts...)
	}
	return c.DeleteRange(ctx, prefix, PrefixEnd(prefix), opts...)
}

// PutPrev is Put that also returns the key's previous value and metadata
// (nil: it did not exist) and the write's revision (etcd's Put with
// WithPrevKV).
func (c *Client) PutPrev(ctx context.Context, key, value []byte, opts ...WriteOption) (*KV, uint64, error) {
	if err := checkKey(key); err != nil {
		return nil, 0, err
	}
	if len(value) > MaxValue {
		return nil, 0, fmt.Errorf("%w: %d bytes (max %d)", ErrValueTooLarge, len(value), MaxValue)
	}
	req := &wire.Request{Op: wire.OpPut, Flags: wire.PutPrevKV, Key: key, Value: value}
	switch o := resolveWrite(opts); {
	case o.conditional || o.lease != 0 || o.prevKV:
		return nil, 0, fmt.Errorf("%w: PutPrev takes WithIgnoreValue and WithIgnoreLease only", ErrBadRequest)
	case o.ignoreValue && len(value) != 0:
		return nil, 0, fmt.Errorf("%w: %w", ErrBadRequest, txn.ErrValueProvided)
	default:
		if o.ignoreValue {
			req.Flags |= wire.PutIgnoreValue
		}
		if o.ignoreLease {
			req.Flags |= wire.PutIgnoreLease
		}
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.leaderCall(ctx, req, false)
	if err != nil {
		return nil, 0, err
	}
	page, err := decodePrev(resp.Value)
	if err != nil || len(page.KVs) == 0 {
		return nil, resp.Version, err
	}
	kv := page.KVs[0]
	return &KV{Key: kv.Key, Value: kv.Value, Meta: metaOf(kv.Meta)}, resp.Version, nil
}

func decodePrev(b []byte) (wire.ScanResponse, error) {
	var page wire.ScanResponse
	if len(b) == 0 {
		return page, nil
	}
	if err := wire.DecodeScanResponse(b, &page); err != nil {
		return page, fmt.Errorf("%w: %w", errMalformedReply, err)
	}
	return page, nil
}
