package server

import (
	"context"
	"strconv"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
)

// getManyReplyMax is the largest reply a get-many can have.
const getManyReplyMax = limits.MaxGetManyBytes + 2 + limits.MaxGetManyKeys*(1+8+4)

// getMany serves OpGetMany: the values of several keys at one applied index
// (an atomic snapshot of them), read from one point-in-time view of Pebble,
// behind a ReadIndex barrier for the linearizable levels and waiting for the
// region to reach the view's index, exactly as a scan page (scan.go).
// Answers travel in one message, so values of more than
// limits.MaxGetManyBytes together are refused.
func (s *Server) getMany(ctx context.Context, req *wire.Request) wire.Response {
	if len(req.Key) != 0 {
		return badRequest("get-many carries a key")
	}
	keys, err := wire.DecodeGetManyRequest(req.Value, nil)
	if err != nil {
		return badRequest(err.Error())
	}
	for _, k := range keys {
		switch {
		case len(k) == 0:
			return wire.Response{Status: wire.StatusEmptyKey}
		case len(k) > limits.MaxKey:
			return wire.Response{Status: wire.StatusKeyTooLarge}
		}
	}
	if r, failed := s.readBarrier(ctx, req.Flags); failed {
		return r
	}
	answers := make([]wire.GetManyAnswer, len(keys))
	var data []byte // the values, copied out of the view
	ends := make([]int, len(keys))
	tooLarge := false
	applied, rev, err := s.kv.GetMany(keys, func(i int, value []byte, m revision.Meta, found bool) {
		version := m.Mod
		if tooLarge = tooLarge || len(data)+len(value) > limits.MaxGetManyBytes; !tooLarge {
			data = append(data, value...)
		}
		answers[i] = wire.GetManyAnswer{Found: found, Version: version}
		ends[i] = len(data)
	})
	if err != nil {
		return s.errResponse(err)
	}
	if tooLarge {
		return badRequest("the values of an atomic get-many exceed " + strconv.Itoa(limits.MaxGetManyBytes) + " bytes together")
	}
	from := 0
	for i := range answers {
		answers[i].Value = data[from:ends[i]:ends[i]]
		from = ends[i]
	}
	if err := s.waitApplied(ctx, applied); err != nil {
		return s.errResponse(err)
	}
	size := 2 + len(answers)*wire.GetManyAnswerLen(0) + len(data)
	return wire.Response{Version: rev, Value: wire.AppendGetManyResponse(make([]byte, 0, size), answers)}
}
