package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/wire"
)

// Scan bounds per server response (the client pages through larger
// results by itself): at most MaxScanPageKeys keys, and no more than
// MaxScanPageBytes of keys and values, but always at least one key.
const (
	MaxScanPageKeys  = limits.MaxScanKeys
	MaxScanPageBytes = limits.MaxScanBytes
)

type scanOptions struct {
	limit               int
	keysOnly, countOnly bool
	rev                 uint64
}

// WithRev makes a scan read the range as it was at store revision rev
// (etcd's WithRev): it fails with ErrCompacted below the cluster's
// compaction revision and with ErrFutureRevision past the store's. 0: the
// latest.
func WithRev(rev uint64) ReadOption {
	return func(o *readOptions) { o.scan.rev = rev }
}

// WithLimit makes a scan return at most n keys (n <= 0: no limit); the
// response's More then says whether the range holds more, and Next where
// to continue.
func WithLimit(n int) ReadOption {
	return func(o *readOptions) { o.scan.limit = max(n, 0) }
}

// WithKeysOnly makes a scan leave out values (versions are still given).
func WithKeysOnly() ReadOption {
	return func(o *readOptions) { o.scan.keysOnly = true }
}

// WithCountOnly makes a scan return only the number of keys in the range
// (the limit is ignored), no keys.
func WithCountOnly() ReadOption {
	return func(o *readOptions) { o.scan.countOnly = true }
}

// KV is one key of a scan, with its revision metadata. Value is nil with
// WithKeysOnly.
type KV struct {
	Key   []byte
	Value []byte
	Meta
}

// RangeResponse is a scan's result.
type RangeResponse struct {
	// KVs are the keys found, in key order.
	KVs []KV
	// Count is len(KVs), or with WithCountOnly the number of keys in the
	// range.
	Count uint64
	// More: the range holds keys after the last one returned (a limit
	// stopped the scan); Range(ctx, Next, end, ...) continues it.
	More bool
	Next []byte
	// Revision is the store revision the response shows the range at:
	// the first page's, at which every later page is read too, so the
	// pages form one snapshot, and a watch from Revision+1 delivers
	// exactly the writes after it.
	Revision uint64
}

// Range returns the keys k with start <= k < end in key order, with their
// values and versions. An empty start is the first key; an empty (or nil)
// end is no upper bound; end <= start is an empty range.
//
// Scans are served from a server's applied state by RPC (they cannot be
// one-sided: the region has no order). At Linearizable and ReadIndex the
// leader first confirms with a quorum that nothing newer is committed
// (ReadIndex), as for an RPC GET; at Serializable any node answers from
// what it has applied, possibly stale. The server answers a page of at
// most MaxScanPageKeys keys and MaxScanPageBytes bytes; Range asks for
// the following pages by itself until the range or the limit
// (WithLimit) is exhausted. The first page is the applied state at one
// revision, whole (a transaction is in it entirely or not at all) and, by
// default, linearizable; the following pages are read at that revision
// (WithRev), so the pages form one snapshot; if the history is compacted
// past it meanwhile, Range fails with ErrCompacted. Without a deadline
// on ctx, each page (not the whole Range) gets Config.RequestTimeout.
// Without a limit the
// whole range is held in memory: bound large scans with WithLimit and
// continue from Next.
func (c *Client) Range(ctx context.Context, start, end []byte, opts ...ReadOption) (*RangeResponse, error) {
	o := readOptions{level: c.cfg.Consistency}
	for _, f := range opts {
		f(&o)
	}
	out := &RangeResponse{}
	for {
		q := wire.ScanRequest{Start: start, End: end, Rev: o.scan.rev}
		revs := c.servesRevisions(ctx)
		if revs {
			q.Flags |= wire.ScanMeta
		}
		switch {
		case o.scan.countOnly:
			q.Flags |= wire.ScanCountOnly
		case o.scan.keysOnly:
			q.Flags |= wire.ScanKeysOnly
		}
		if o.scan.limit > 0 && !o.scan.countOnly {
			q.Limit = uint32(min(o.scan.limit-len(out.KVs), limits.MaxScanKeys))
		}
		pctx, cancel := c.withTimeout(ctx) // each page gets the request timeout
		page, rev, err := c.scanPage(pctx, &q, o.level)
		cancel()
		if err != nil {
			return nil, err
		}
		if o.scan.rev == 0 && revs {
			o.scan.rev = rev // the following pages: the same snapshot
		}
		out.Revision = rev
		for _, kv := range page.KVs {
			e := KV{Key: kv.Key, Meta: metaOf(kv.Meta)}
			if !o.scan.keysOnly {
				e.Value = kv.Value
			}
			out.KVs = append(out.KVs, e)
		}
		out.More, out.Next = page.Flags&wire.ScanMore != 0, page.Next
		if o.scan.countOnly {
			out.Count = page.Count
			return out, nil
		}
		if !out.More || (o.scan.limit > 0 && len(out.KVs) >= o.scan.limit) {
			out.Count = uint64(len(out.KVs))
			return out, nil
		}
		start = page.Next
	}
}

// Prefix returns the keys that start with prefix, as Range does (an empty
// prefix is every key).
func (c *Client) Prefix(ctx context.Context, prefix []byte, opts ...ReadOption) (*RangeResponse, error) {
	// A prefix of only 0xff bytes has no end (nil: no upper bound), and
	// every key from it on starts with it.
	return c.Range(ctx, prefix, PrefixEnd(prefix), opts...)
}

// PrefixEnd is the smallest key above every key that starts with prefix
// (the end to give Range for a prefix), or nil if there is none: prefix
// is empty or all 0xff bytes.
func PrefixEnd(prefix []byte) []byte { return wire.PrefixEnd(prefix) }

// scanPage asks for one page. Linearizable and ReadIndex pages come from
// the leader; Serializable ones from the node one-sided reads would use,
// or, if it fails, from the leader.
func (c *Client) scanPage(ctx context.Context, q *wire.ScanRequest, level Consistency) (wire.ScanResponse, uint64, error) {
	if len(q.Start) > limits.MaxKey || len(q.End) > limits.MaxKey {
		return wire.ScanResponse{}, 0, fmt.Errorf("%w: scan bound of more than %d bytes", ErrKeyTooLarge, limits.MaxKey)
	}
	req := &wire.Request{Op: wire.OpScan, Value: wire.AppendScanRequest(nil, q)}
	resp, err := c.readCall(ctx, req, level)
	if err != nil {
		return wire.ScanResponse{}, 0, err
	}
	var page wire.ScanResponse
	if err := wire.DecodeScanResponse(resp.Value, &page); err != nil {
		return wire.ScanResponse{}, 0, fmt.Errorf("%w: %w", errMalformedReply, err)
	}
	if err := checkPage(q, &page); err != nil {
		return wire.ScanResponse{}, 0, fmt.Errorf("%w: %w", errMalformedReply, err)
	}
	return page, resp.Version, nil
}

// checkPage rejects a page that breaks what was asked: more keys than the
// limit, keys out of order or out of the range, or a continuation that
// would not move on (which would page forever).
func checkPage(q *wire.ScanRequest, page *wire.ScanResponse) error {
	limit := int(q.Limit)
	if limit == 0 {
		limit = limits.MaxScanKeys
	}
	if len(page.KVs) > limit {
		return fmt.Errorf("%d keys for a limit of %d", len(page.KVs), limit)
	}
	last := q.Start
	for i, kv := range page.KVs {
		if c := bytes.Compare(kv.Key, last); c < 0 || (c == 0 && i > 0) || (len(q.End) > 0 && bytes.Compare(kv.Key, q.End) >= 0) {
			return fmt.Errorf("key %q out of order or out of the range", kv.Key)
		}
		last = kv.Key
	}
	if page.Flags&wire.ScanMore != 0 && (len(page.KVs) == 0 || bytes.Compare(page.Next, last) <= 0) {
		return fmt.Errorf("continuation %q does not move past %q", page.Next, last)
	}
	return nil
}

// readCall sends a read request answered from the applied state (a scan, an
// atomic get-many) at level: Serializable to the node reads go to (the
// leader if that fails), the others to the leader behind its ReadIndex.
func (c *Client) readCall(ctx context.Context, req *wire.Request, level Consistency) (wire.Response, error) {
	switch level {
	case Serializable:
		req.Flags = wire.Serializable
		resp, err := c.callAt(ctx, c.readTarget(Serializable), req)
		if err != nil && !errors.Is(err, ErrBadRequest) && !errors.Is(err, ErrKeyTooLarge) && ctx.Err() == nil {
			c.rotateRead()
			resp, err = c.leaderCall(ctx, req, true)
		}
		return resp, err
	case ReadIndex:
		req.Flags = wire.ReadIndex
	default:
		req.Flags = wire.Linearizable
	}
	return c.leaderCall(ctx, req, true)
}
