package server

import (
	"context"
	"strconv"

	"github.com/kvd-project/kvd/internal/wire"
)

// moveLeader serves OpMoveLeader on the leader: it hands leadership to the
// member the key names and answers, once that member leads, with this
// node's id (the former leader's). Elsewhere it is "not leader", which
// sends the client to the leader.
func (s *Server) moveLeader(ctx context.Context, req *wire.Request) wire.Response {
	if len(req.Value) != 0 || req.Flags != 0 {
		return badRequest("move-leader carries a value or flags")
	}
	to, err := strconv.ParseUint(string(req.Key), 10, 64)
	if err != nil || to == 0 {
		return badRequest("member id must be a positive integer, got " + quoteAtMost(req.Key, maxQuoted))
	}
	if err := s.node.TransferLeadership(ctx, to); err != nil {
		return s.errResponse(err)
	}
	return wire.Response{Version: s.cfg.ID}
}
