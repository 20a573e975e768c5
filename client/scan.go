package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/rangeq"
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
	target              SortTarget
	order               SortOrder
	minMod, maxMod      uint64
	minCreate           uint64
	maxCreate           uint64
	noCount             bool
}

// SortTarget is what WithSort sorts a range by (etcd's names and numbers).
type SortTarget int

// Sort targets.
const (
	SortByKey SortTarget = iota
	SortByVersion
	SortByCreateRevision
	SortByModRevision
	SortByValue
)

// SortOrder is the direction WithSort sorts in (etcd's names and numbers).
type SortOrder int

// Sort orders. SortNone is key order for SortByKey and ascending for the
// other targets, as in etcd.
const (
	SortNone SortOrder = iota
	SortAscend
	SortDescend
)

// WithSort sorts a range by target in order (etcd's WithSort). Key order
// pages like an unsorted range; another target holds every matching key
// in the server's memory to sort it, so such a range may match at most
// MaxSortKeys keys (MaxSortBytes of keys, and of values unless
// WithKeysOnly; the values always for SortByValue): past that it fails
// with ErrBadRequest. Ties come in key order.
func WithSort(target SortTarget, order SortOrder) ReadOption {
	if target == SortByKey && order == SortAscend {
		order = SortNone // key order is what the server gives anyway: no extension for it
	}
	return func(o *readOptions) { o.scan.target, o.scan.order = target, order }
}

// Bounds of a range sorted by anything but the key (WithSort).
const (
	MaxSortKeys  = limits.MaxSortKeys
	MaxSortBytes = limits.MaxSortBytes
)

// WithoutCount makes a scan's Count the number of keys it returns, not
// etcd's count of the whole range: with a limit, a filter or a sort the
// server then stops walking the range at the last key it returns instead
// of counting the rest. kvd's own option (etcd always counts); use it
// for a short page of a long range when the total does not matter.
func WithoutCount() ReadOption { return func(o *readOptions) { o.scan.noCount = true } }

// WithMinModRev keeps the keys whose mod revision is at least rev (0: no
// bound), as etcd's. Count still counts every key of the range.
func WithMinModRev(rev uint64) ReadOption { return func(o *readOptions) { o.scan.minMod = rev } }

// WithMaxModRev keeps the keys whose mod revision is at most rev (0: no
// bound).
func WithMaxModRev(rev uint64) ReadOption { return func(o *readOptions) { o.scan.maxMod = rev } }

// WithMinCreateRev keeps the keys whose create revision is at least rev
// (0: no bound).
func WithMinCreateRev(rev uint64) ReadOption { return func(o *readOptions) { o.scan.minCreate = rev } }

// WithMaxCreateRev keeps the keys whose create revision is at most rev
// (0: no bound).
func WithMaxCreateRev(rev uint64) ReadOption { return func(o *readOptions) { o.scan.maxCreate = rev } }

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
// (the limit and the revision filters are ignored, as in etcd), no keys.
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
	// KVs are the keys found, in key order unless WithSort says otherwise.
	KVs []KV
	// Count is the number of keys in the range at Revision, whatever the
	// limit and the revision filters (etcd's count); with WithoutCount,
	// len(KVs).
	Count uint64
	// More: keys that match remain after the last one returned (a limit
	// stopped the scan). In ascending key order, Range(ctx, Next, end,
	// ...) continues it.
	More bool
	Next []byte
	// Revision is the store revision the response shows the range at:
	// the first page's, at which every later page is read too, so the
	// pages form one snapshot, and a watch from Revision+1 delivers
	// exactly the writes after it.
	Revision uint64
	// CurrentRevision is the store's revision as the first page was
	// served (etcd's header revision): Revision, unless WithRev read a
	// past one. A server that predates it tells only Revision, which it
	// then is.
	CurrentRevision uint64
}

// Range returns the keys k with start <= k < end, with their values and
// revision metadata: etcd's Range. An empty start is the first key; an
// empty (or nil) end is no upper bound; end <= start is an empty range.
// WithSort, the revision filters (WithMinModRev, ...), WithLimit,
// WithKeysOnly, WithCountOnly and WithRev shape it as etcd's options do.
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
// With a limit, a filter or a sort, the first page counts the whole range
// (Count), which walks all of it. Without a limit the whole range is held
// in memory: bound large scans with WithLimit and continue from Next.
func (c *Client) Range(ctx context.Context, start, end []byte, opts ...ReadOption) (*RangeResponse, error) {
	o := readOptions{level: c.cfg.Consistency}
	for _, f := range opts {
		f(&o)
	}
	q, err := c.rangeRequest(ctx, start, end, &o.scan)
	if err != nil {
		return nil, err
	}
	total := q.Flags&rangeq.Total != 0 // the first page counts the range
	out := &RangeResponse{}
	for {
		if o.scan.limit > 0 && !o.scan.countOnly {
			q.Limit = uint32(min(o.scan.limit-len(out.KVs), limits.MaxScanKeys))
		}
		pctx, cancel := c.withTimeout(ctx) // each page gets the request timeout
		page, rev, err := c.scanPage(pctx, &q, o.level)
		cancel()
		if err != nil && q.Flags&rangeq.Current != 0 && refusedFlags(err) && len(out.KVs) == 0 {
			// A server that predates the current revision
			// (docs/upgrading.md): the revision read stands for it.
			q.Flags &^= rangeq.Current
			continue
		}
		if err != nil && errors.Is(err, ErrBadRequest) && q.Flags&rangeq.Total != 0 && !q.Extended() && len(out.KVs) == 0 {
			// A server that predates the total count (docs/upgrading.md):
			// count the pages instead.
			q.Flags &^= rangeq.Total
			total = false
			continue
		}
		if err != nil && errors.Is(err, ErrBadRequest) && q.Extended() && strings.Contains(err.Error(), olderScanRefusal) {
			return nil, fmt.Errorf("%w (the server predates sorts and revision filters: upgrade it, docs/upgrading.md)", err)
		}
		if err != nil {
			return nil, err
		}
		if q.Rev == 0 && q.Flags&rangeq.Meta != 0 {
			q.Rev = rev // the following pages: the same snapshot
		}
		out.Revision = rev
		if q.Flags&(rangeq.Total|rangeq.CountOnly) != 0 {
			out.Count = page.Count
		}
		if out.CurrentRevision == 0 {
			out.CurrentRevision = max(rev, page.Current) // scanPage checked it is not below rev
		}
		q.Flags &^= rangeq.Total | rangeq.Current
		for _, kv := range page.KVs {
			e := KV{Key: kv.Key, Meta: metaOf(kv.Meta)}
			if !o.scan.keysOnly {
				e.Value = kv.Value
			}
			out.KVs = append(out.KVs, e)
		}
		out.More, out.Next = page.Flags&wire.ScanMore != 0, page.Next
		if o.scan.countOnly {
			return out, nil
		}
		if !out.More || (o.scan.limit > 0 && len(out.KVs) >= o.scan.limit) {
			if !total {
				out.Count = uint64(len(out.KVs))
			}
			return out, nil
		}
		q.Advance(len(page.KVs), page.Next)
	}
}

// refusedFlags reports whether err is a server's refusal of range flags
// it does not know (a server older than the flag).
func refusedFlags(err error) bool {
	return errors.Is(err, ErrBadRequest) && strings.Contains(err.Error(), "unknown flags")
}

// olderScanRefusal is how a server that predates rangeq's extension
// refuses a request that carries it.
const olderScanRefusal = "wire: malformed scan"

// rangeRequest is the first page's request for a Range with options o.
// Sorts and filters need a server with revisions; so does the total
// count, which a first page asks for when the pages alone would not give
// it (a limit, a filter, a sort).
func (c *Client) rangeRequest(ctx context.Context, start, end []byte, o *scanOptions) (rangeq.Request, error) {
	q := rangeq.Request{Start: start, End: end, Rev: o.rev, Target: rangeq.Target(o.target), Order: rangeq.Order(o.order),
		MinMod: o.minMod, MaxMod: o.maxMod, MinCreate: o.minCreate, MaxCreate: o.maxCreate}
	if o.target < SortByKey || o.target > SortByValue || o.order < SortNone || o.order > SortDescend {
		return q, fmt.Errorf("%w: sort target %d, order %d", ErrBadRequest, o.target, o.order)
	}
	switch {
	case o.countOnly:
		q.Flags |= rangeq.CountOnly
	case o.keysOnly:
		q.Flags |= rangeq.KeysOnly
	}
	if !c.servesRevisions(ctx) {
		if q.Extended() {
			return q, fmt.Errorf("%w: the servers predate revisions: they can neither sort nor filter a range", ErrBadRequest)
		}
		return q, nil
	}
	q.Flags |= rangeq.Meta
	if o.rev != 0 {
		q.Flags |= rangeq.Current
	}
	if !o.countOnly && !o.noCount && (o.limit > 0 || q.Extended()) {
		q.Flags |= rangeq.Total
	}
	return q, nil
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
func (c *Client) scanPage(ctx context.Context, q *rangeq.Request, level Consistency) (wire.ScanResponse, uint64, error) {
	if len(q.Start) > limits.MaxKey || len(q.End) > limits.MaxKey {
		return wire.ScanResponse{}, 0, fmt.Errorf("%w: scan bound of more than %d bytes", ErrKeyTooLarge, limits.MaxKey)
	}
	req := &wire.Request{Op: wire.OpScan, Value: rangeq.Append(nil, q)}
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
	if page.Flags&wire.ScanHasCurrent != 0 && page.Current < resp.Version {
		return wire.ScanResponse{}, 0, fmt.Errorf("%w: a page read at revision %d when the store was at %d", errMalformedReply, resp.Version, page.Current)
	}
	return page, resp.Version, nil
}

// checkPage rejects a page that breaks what was asked: more keys than the
// limit, keys out of the range or (in key order) out of order, or a
// continuation that would not move on (which would page forever).
func checkPage(q *rangeq.Request, page *wire.ScanResponse) error {
	limit := int(q.Limit)
	if limit == 0 {
		limit = limits.MaxScanKeys
	}
	if len(page.KVs) > limit {
		return fmt.Errorf("%d keys for a limit of %d", len(page.KVs), limit)
	}
	for i, kv := range page.KVs {
		inRange := bytes.Compare(kv.Key, q.Start) >= 0 && (len(q.End) == 0 || bytes.Compare(kv.Key, q.End) < 0)
		ordered := true
		if i > 0 && !q.Sorted() {
			c := bytes.Compare(kv.Key, page.KVs[i-1].Key)
			ordered = c > 0 && !q.Descending() || c < 0 && q.Descending()
		}
		if !inRange || !ordered {
			return fmt.Errorf("key %q out of order or out of the range", kv.Key)
		}
	}
	if page.Flags&wire.ScanMore == 0 || q.Flags&rangeq.CountOnly != 0 {
		return nil
	}
	if len(page.KVs) == 0 {
		return errors.New("more keys after an empty page")
	}
	last := page.KVs[len(page.KVs)-1].Key
	switch {
	case q.Sorted() && int(q.Offset)+len(page.KVs) >= limits.MaxSortKeys:
		// A server refuses a sort of more keys: more after them would page on without end.
		return fmt.Errorf("more than %d sorted keys", limits.MaxSortKeys)
	case q.Sorted():
	case q.Descending() && (len(page.Next) == 0 || bytes.Compare(page.Next, last) > 0):
		return fmt.Errorf("continuation %q does not move below %q", page.Next, last)
	case !q.Descending() && bytes.Compare(page.Next, last) <= 0:
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
