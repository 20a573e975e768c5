package server

import (
	"context"

	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/wire"
)

// deleteRange serves OpDeleteRange through Raft (kv.Store.DeleteRange).
func (s *Server) deleteRange(ctx context.Context, req *wire.Request) wire.Response {
	switch {
	case len(req.Key) == 0:
		return wire.Response{Status: wire.StatusEmptyKey}
	case len(req.Key) > limits.MaxKey || len(req.Value) > limits.MaxKey:
		return wire.Response{Status: wire.StatusKeyTooLarge}
	case req.Flags&^wire.DeletePrevKV != 0:
		return badRequest("delete-range carries unknown flags")
	}
	n, prev, rev, err := s.kv.DeleteRange(ctx, req.Key, req.Value, req.Flags&wire.DeletePrevKV != 0)
	if err != nil {
		return s.errResponse(err)
	}
	return wire.Response{Version: rev, Value: prevKVs(uint64(n), prev)}
}

// prevKVs is a write's previous keys as a ScanResponse with metadata.
func prevKVs(count uint64, prev []kv.KV) []byte {
	page := wire.ScanResponse{Flags: wire.ScanHasMeta, Count: count, KVs: make([]wire.ScanKV, len(prev))}
	for i, p := range prev {
		page.KVs[i] = wire.ScanKV{Key: p.Key, Value: p.Value, Meta: p.Meta}
	}
	return wire.AppendScanResponse(nil, &page)
}
