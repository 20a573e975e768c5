package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/raft"
)

// putBatch serves OpPutBatch: independent PUTs proposed as one Raft entry
// and applied one after the other, each at its own revision (kv.PutBatch).
// A batch over its bounds (limits.MaxBatchPuts, limits.MaxBatchBytes) or
// holding anything but valid PUTs is a bad request, counted with the
// requests (kvd_requests_total{op="put-batch",status="status_6"}) and
// logged rate-limited. Each PUT is admitted as a lone one would be (room
// in the table reserved on the leader): one the table has no room for
// fails alone, and the others are proposed.
func (s *Server) putBatch(ctx context.Context, req *wire.Request) wire.Response {
	if len(req.Key) != 0 || req.Flags != 0 {
		return s.batchRefused(errors.New("put batch carries a key or flags"))
	}
	puts, err := txn.DecodeBatch(req.Value)
	if err != nil {
		return s.batchRefused(err)
	}
	results := make([]wire.BatchResult, len(puts))
	adm := raft.Admission{Term: raft.NotAdmitted} // see putPrev
	admitted, at := puts, []int(nil)
	if st := s.node.Status(); st.IsLeader {
		if !st.LeaderReady {
			return s.errResponse(errLeaderNotReady)
		}
		var release func()
		admitted, at, release = s.admitBatch(puts, results)
		defer release()
		if len(admitted) == 0 {
			return wire.Response{Value: wire.AppendBatchResults(nil, results)}
		}
		ctx, adm = s.admitted(st.Term)
	}
	out, err := s.kv.PutBatch(ctx, admitted, adm)
	if err != nil {
		if errors.Is(err, txn.ErrInvalid) {
			return s.batchRefused(err)
		}
		return s.errResponse(err)
	}
	if len(out) != len(admitted) {
		return wire.Response{Status: wire.StatusInternal, Value: []byte(fmt.Sprintf("put batch: %d outcomes for %d PUTs", len(out), len(admitted)))}
	}
	var last uint64
	for j, r := range out {
		i := j
		if at != nil {
			i = at[j]
		}
		if r.Err != nil {
			s.leaseRefused(r.Err)
			e := s.errResponse(r.Err)
			results[i] = wire.BatchResult{Status: e.Status, Revision: r.Revision, Message: string(e.Value)}
			continue
		}
		results[i] = wire.BatchResult{Revision: r.Revision}
		last = max(last, r.Revision)
	}
	return wire.Response{Version: last, Value: wire.AppendBatchResults(nil, results)}
}

// admitBatch reserves table room for each PUT of puts, as for a lone one;
// a PUT refused there gets its error in results and is left out. It
// returns the admitted PUTs, the index in puts of each (nil: all were
// admitted), and what ends the reservations.
func (s *Server) admitBatch(puts []txn.Op, results []wire.BatchResult) ([]txn.Op, []int, func()) {
	var releases []func()
	release := func() {
		for _, r := range releases {
			r()
		}
	}
	var admitted []txn.Op
	var at []int // nil while every PUT so far was admitted
	for i := range puts {
		r, err := s.mirror.ReserveAll(txnPuts(nil, &txn.Txn{Then: puts[i : i+1]}))
		if err != nil {
			e := s.errResponse(err)
			results[i] = wire.BatchResult{Status: e.Status, Message: string(e.Value)}
			if at == nil {
				admitted, at = append(admitted, puts[:i]...), make([]int, i, len(puts))
				for j := range at {
					at[j] = j
				}
			}
			continue
		}
		releases = append(releases, r)
		if at != nil {
			admitted, at = append(admitted, puts[i]), append(at, i)
		}
	}
	if at == nil {
		return puts, nil, release
	}
	return admitted, at, release
}

// batchRefused answers a batch refused before proposing, logged
// rate-limited (a client that sends one sends many).
func (s *Server) batchRefused(err error) wire.Response {
	if ok, held := s.refusalLog.Allow("put_batch", time.Now()); ok {
		s.log.Warn("put batch refused", "err", err, "similar_not_logged", held)
	}
	return badRequest(err.Error())
}
