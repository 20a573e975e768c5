package server

import (
	"cmp"
	"context"
	"strconv"
	"time"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/rangeq"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
)

// scanReplyMax is the largest reply a scan can have: a page of
// limits.MaxScanBytes of entries (no entry alone exceeds it), the key to
// continue from, and the page's own fields.
const scanReplyMax = limits.MaxScanBytes + limits.MaxKey + 64

// scan serves OpScan: one page of a range read (internal/rangeq: etcd's
// Range, with its sort, filters and counts) from the applied state in
// Pebble (never the region: it has no order). Linearizable and ReadIndex
// scans first pass a ReadIndex barrier, as RPC GETs do; Serializable ones
// read this node's applied state as it is.
//
// The page is read from one point-in-time view of Pebble (Node.Scan), which
// may be up to one batch ahead of the region; the reply waits until the
// region has applied the view's index (waitApplied), so that no read that
// starts after the scan returned, one-sided GETs included, can see an
// older state than the scan did (docs/consistency.md, "Range scans"). A
// page is the state at that one index, whole: a transaction is in it
// entirely or not at all. A page at a revision (Request.Rev) is read
// from the history (readRange); the client reads a scan's later pages at
// its first page's revision, so the pages are one snapshot.
func (s *Server) scan(ctx context.Context, req *wire.Request) wire.Response {
	if len(req.Key) != 0 {
		return badRequest("scan carries a key")
	}
	var q rangeq.Request
	if err := rangeq.Decode(req.Value, &q); err != nil {
		return badRequest(err.Error())
	}
	if len(q.Start) > limits.MaxKey || len(q.End) > limits.MaxKey {
		return wire.Response{Status: wire.StatusKeyTooLarge}
	}
	if r, failed := s.readBarrier(ctx, req.Flags); failed {
		return r
	}
	page, applied, err := s.scanPage(ctx, &q)
	if err != nil {
		return s.errResponse(err)
	}
	if q.Flags&rangeq.Current != 0 {
		if applied, err = s.currentRevision(&page, applied, q.Rev != 0); err != nil {
			return s.errResponse(err)
		}
	}
	if err := s.waitApplied(ctx, applied); err != nil {
		return s.errResponse(err)
	}
	return wire.Response{Version: page.rev, Value: wire.AppendScanResponse(make([]byte, 0, page.size), &page.ScanResponse)}
}

type scanPage struct {
	wire.ScanResponse
	size int    // encoded size
	rev  uint64 // the store revision of the state read
}

// scanPage evaluates q over the applied state (or the history at q.Rev)
// within one reply's bounds; applied is the index of the state it read.
// A walk that goes on past its page (a count, a filter, a sort, a
// descending page) stops when ctx (the request's deadline) ends.
func (s *Server) scanPage(ctx context.Context, q *rangeq.Request) (page scanPage, applied uint64, err error) {
	var rev uint64
	walked := false
	r, err := rangeq.Eval(ctx, q, s.cfg.Knobs.ScanBounds, func(start, end []byte, fn func(key, value []byte, m revision.Meta) bool) error {
		walked = true
		applied, rev, err = s.readRange(q.Rev, start, end, fn)
		return err
	})
	if err != nil {
		return scanPage{}, 0, err
	}
	if !walked {
		// An empty range: still report the revision, as any read would.
		rev, applied = cmp.Or(q.Rev, s.kv.Revision()), s.node.Status().Applied
	}
	page.rev, page.Count, page.Next = rev, r.Count, r.Next
	if r.More {
		page.Flags |= wire.ScanMore
	}
	page.KVs = make([]wire.ScanKV, len(r.KVs))
	for i, kv := range r.KVs {
		page.KVs[i] = wire.ScanKV{Key: kv.Key, Meta: kv.Meta, Value: kv.Value}
	}
	page.size = 1 + 8 + 2 + 4 + len(page.Next) + r.Bytes
	if q.Flags&rangeq.Meta != 0 {
		page.Flags |= wire.ScanHasMeta
		page.size += len(page.KVs) * 24
	}
	return page, applied, nil
}

// currentRevision adds to page the store's revision now (rangeq.Current):
// the page's own for a read of the latest state; for a read at a past
// revision, that of the applied state after it, which the client may
// take for a lower bound of what it reads next, so the reply waits for
// the region to reach it too (the returned index).
func (s *Server) currentRevision(page *scanPage, applied uint64, past bool) (uint64, error) {
	page.Flags |= wire.ScanHasCurrent
	page.size += 8
	page.Current = page.rev
	if !past {
		return applied, nil // read from the current state: the page's revision is it
	}
	idx, rev, err := s.kv.GetMany(nil, func(int, []byte, revision.Meta, bool) {})
	if err != nil {
		return 0, err
	}
	page.Current = max(rev, page.rev)
	return max(idx, applied), nil
}

// readRange reads [start, end) from the applied state: the latest
// (rev 0), from the current keys, whose applied index the caller waits for
// the region to reach; or at rev, from the history, which no later write
// changes (applied 0: nothing to wait for).
func (s *Server) readRange(rev uint64, start, end []byte, fn func(key, value []byte, m revision.Meta) bool) (applied, atRev uint64, err error) {
	if rev == 0 {
		return s.kv.Scan(start, end, fn)
	}
	atRev, err = s.kv.RangeAt(start, end, rev, fn)
	return 0, atRev, err
}

// readBarrier passes the ReadIndex barrier a read from the applied state
// needs at level (none for Serializable), or returns the response that
// refuses the read.
func (s *Server) readBarrier(ctx context.Context, level uint16) (wire.Response, bool) {
	switch level {
	case wire.Linearizable, wire.ReadIndex:
		if err := s.node.ReadIndex(ctx); err != nil {
			return s.errResponse(err), true
		}
	case wire.Serializable:
	default:
		return badRequest("unknown consistency level " + strconv.Itoa(int(level))), true
	}
	return wire.Response{}, false
}

// waitApplied returns once the node's apply (the region included: the
// node publishes its applied index after the batch's Apply call returned)
// has reached index. A view of Pebble is at most one batch ahead of that,
// so the wait is short and rare.
func (s *Server) waitApplied(ctx context.Context, index uint64) error {
	pause := 20 * time.Microsecond
	for s.node.Status().Applied < index {
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		pause = min(2*pause, time.Millisecond)
	}
	return nil
}
