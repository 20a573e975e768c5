package server

import (
	"bytes"
	"cmp"
	"context"
	"strconv"
	"time"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
)

// scanReplyMax is the largest reply a scan can have: a page of
// limits.MaxScanBytes of entries (no entry alone exceeds it), the key to
// continue from, and the page's own fields.
const scanReplyMax = limits.MaxScanBytes + limits.MaxKey + 64

// scan serves OpScan: one page of the keys in [Start, End), in key order,
// from the applied state in Pebble (never the region: it has no order).
// Linearizable and ReadIndex scans first pass a ReadIndex barrier, as RPC
// GETs do; Serializable ones read this node's applied state as it is.
//
// The page is read from one point-in-time view of Pebble (Node.Scan), which
// may be up to one batch ahead of the region; the reply waits until the
// region has applied the view's index (waitApplied), so that no read that
// starts after the scan returned, one-sided GETs included, can see an
// older state than the scan did (docs/consistency.md, "Range scans"). A
// page is the state at that one index, whole: a transaction is in it
// entirely or not at all. A page at a revision (ScanRequest.Rev) is read
// from the history (readRange); the client reads a scan's later pages at
// its first page's revision, so the pages are one snapshot.
func (s *Server) scan(ctx context.Context, req *wire.Request) wire.Response {
	if len(req.Key) != 0 {
		return badRequest("scan carries a key")
	}
	var q wire.ScanRequest
	if err := wire.DecodeScanRequest(req.Value, &q); err != nil {
		return badRequest(err.Error())
	}
	if len(q.Start) > limits.MaxKey || len(q.End) > limits.MaxKey {
		return wire.Response{Status: wire.StatusKeyTooLarge}
	}
	if q.Flags&wire.ScanKeysOnly != 0 && q.Flags&wire.ScanCountOnly != 0 {
		return badRequest("scan asks for keys only and count only")
	}
	if r, failed := s.readBarrier(ctx, req.Flags); failed {
		return r
	}
	page, applied, err := s.scanPage(ctx, &q)
	if err != nil {
		return s.errResponse(err)
	}
	if err := s.waitApplied(ctx, applied); err != nil {
		return s.errResponse(err)
	}
	return wire.Response{Version: page.rev, Value: wire.AppendScanResponse(make([]byte, 0, page.size), &page.ScanResponse)}
}

// countCheckEvery is how many keys a count takes between looks at its
// request's deadline.
const countCheckEvery = 1024

type scanPage struct {
	wire.ScanResponse
	size int    // encoded size
	rev  uint64 // the store revision of the state read
}

// scanPage reads one page of q from Pebble: at most q.Limit (or
// limits.MaxScanKeys) entries of at most limits.MaxScanBytes together, but at
// least one if any remains; with ScanCountOnly, the count of the whole
// range and no entries. applied is the index of the state it read. A
// count walks the whole range, as many keys as the region holds: it stops
// when ctx (the request's deadline) ends.
func (s *Server) scanPage(ctx context.Context, q *wire.ScanRequest) (page scanPage, applied uint64, err error) {
	page.size = 1 + 8 + 2 + 4
	if len(q.End) > 0 && bytes.Compare(q.Start, q.End) >= 0 {
		// An empty range: still report the revision, as any read would.
		page.rev = cmp.Or(q.Rev, s.kv.Revision())
		return page, s.node.Status().Applied, nil
	}
	limit := int(q.Limit)
	if limit == 0 || limit > limits.MaxScanKeys {
		limit = limits.MaxScanKeys
	}
	keysOnly, countOnly := q.Flags&wire.ScanKeysOnly != 0, q.Flags&wire.ScanCountOnly != 0
	var data []byte // keys and values of the page, copied out of the view
	type span struct {
		key, value int // ends in data
		meta       revision.Meta
	}
	var spans []span
	bytesUsed := 0
	var ended error // ctx's error, if a count stopped for it
	applied, page.rev, err = s.readRange(q, func(key, value []byte, m revision.Meta) bool {
		if countOnly {
			page.Count++
			if page.Count%countCheckEvery == 0 {
				ended = ctx.Err()
			}
			return ended == nil
		}
		if keysOnly {
			value = nil
		}
		n := wire.ScanEntryLen(len(key), len(value))
		if len(spans) == limit || (len(spans) > 0 && bytesUsed+n > limits.MaxScanBytes) {
			page.Flags |= wire.ScanMore
			page.Next = append([]byte(nil), key...)
			return false
		}
		bytesUsed += n
		data = append(data, key...)
		k := len(data)
		data = append(data, value...)
		spans = append(spans, span{key: k, value: len(data), meta: m})
		return true
	})
	if err == nil {
		err = ended
	}
	if err != nil {
		return scanPage{}, 0, err
	}
	if !countOnly {
		page.Count = uint64(len(spans))
		page.KVs = make([]wire.ScanKV, len(spans))
		from := 0
		for i, sp := range spans {
			page.KVs[i] = wire.ScanKV{Key: data[from:sp.key:sp.key], Meta: sp.meta, Value: data[sp.key:sp.value:sp.value]}
			from = sp.value
		}
	}
	page.size += len(page.Next) + bytesUsed
	if q.Flags&wire.ScanMeta != 0 {
		page.Flags |= wire.ScanHasMeta
		page.size += len(page.KVs) * 24
	}
	return page, applied, nil
}

// readRange reads q's range from the applied state: the latest, from the
// current keys, whose applied index the caller waits for the region to
// reach; or at q.Rev, from the history, which no later write changes
// (applied 0: nothing to wait for).
func (s *Server) readRange(q *wire.ScanRequest, fn func(key, value []byte, m revision.Meta) bool) (applied, rev uint64, err error) {
	if q.Rev == 0 {
		return s.kv.Scan(q.Start, q.End, fn)
	}
	rev, err = s.kv.RangeAt(q.Start, q.End, q.Rev, fn)
	return 0, rev, err
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
