package server

import (
	"context"
	"encoding/binary"

	"github.com/kvd-project/kvd/internal/wire"
)

// compact serves OpCompact: a compaction of the history, replicated
// (kv.Store.Compact). Only the leader proposes it.
func (s *Server) compact(ctx context.Context, req *wire.Request) wire.Response {
	if len(req.Key) != 0 || len(req.Value) != 8 || req.Flags != 0 {
		return badRequest("compact takes an 8-byte revision and nothing else")
	}
	rev, err := s.kv.Compact(ctx, binary.LittleEndian.Uint64(req.Value))
	if err != nil {
		return s.errResponse(err)
	}
	return wire.Response{Version: rev}
}
