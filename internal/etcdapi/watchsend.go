package etcdapi

import (
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// overflow cancels w, whose response did not fit in its stream's queue:
// its client reads more slowly than its watches produce. etcd would keep
// it as an unsynced watcher; here the bytes a stream holds are bounded,
// and the client is told why, to re-create the watch from the revision
// it is complete through (its last response's header revision + 1).
func (st *watchStream) overflow(w *etcdWatch) {
	if !st.remove(w) {
		return
	}
	n := st.svc.overflows.Add(1)
	reason := fmt.Sprintf("kvd: watch cancelled: its stream's client reads too slowly (more than %d bytes of responses waiting to be sent); watch again from revision %d",
		st.s.cfg.WatchQueueBytes, w.rev.Load()+1)
	if ok, held := st.svc.logLimit.Allow("overflow", time.Now()); ok {
		st.s.cfg.Logger.Warn("etcd watch cancelled: slow client", "watch_id", w.id,
			"queue_bytes", st.q.queuedBytes(), "overflows_total", n, "suppressed", held)
	}
	st.q.pushFinal(&pb.WatchResponse{Header: st.s.header(w.rev.Load()), WatchId: w.id, Canceled: true,
		CancelReason: reason})
}

// WatchOverflows is the number of watches cancelled because their
// stream's client read too slowly (Config.WatchQueueBytes).
func (s *Server) WatchOverflows() uint64 { return s.watch.overflows.Load() }

// reason is err's words for a cancel_reason: its gRPC status's message.
func reason(err error) string { return status.Convert(toStatus(err)).Message() }

// sender is what sendResponse needs of a stream.
type sender interface{ Send(*pb.WatchResponse) error }

// sendResponse sends it, in fragments if its watch takes them and it is
// larger than maxBytes: as etcd's, each fragment but the last is flagged
// Fragment, holds at least one event, and stays under maxBytes unless one
// event alone is larger.
func sendResponse(s sender, it queued, maxBytes int) error {
	r := it.resp
	if !it.fragment || len(r.Events) < 2 || proto.Size(r) < maxBytes {
		return s.Send(r)
	}
	base := proto.Size(&pb.WatchResponse{Header: r.Header, WatchId: r.WatchId, Fragment: true})
	evs := r.Events
	for len(evs) > 0 {
		n, size := 0, base
		for n < len(evs) {
			es := eventSize(evs[n])
			if n > 0 && size+es >= maxBytes {
				break
			}
			size += es
			n++
		}
		frag := &pb.WatchResponse{Header: r.Header, WatchId: r.WatchId, Events: evs[:n], Fragment: n < len(evs)}
		if err := s.Send(frag); err != nil {
			return err
		}
		evs = evs[n:]
	}
	return nil
}

// eventSize is what ev adds to a WatchResponse's encoding.
func eventSize(ev *mvccpb.Event) int {
	n := proto.Size(ev)
	return protowire.SizeTag(11) + protowire.SizeBytes(n)
}
