package etcdapi

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/ratelog"
)

// watchService implements etcd's Watch service: each stream carries any
// number of watches, each a watch of kvd's client (which resumes it
// across node failures by itself), their responses sent in one bounded
// queue (watchqueue.go).
type watchService struct {
	pb.UnimplementedWatchServer
	s *Server

	// overflows counts watches cancelled because their stream's queue
	// was full; logged at most once per ratelog.DefaultEvery.
	overflows atomic.Uint64
	logLimit  ratelog.Limiter
}

// Watch serves one watch stream until its client ends it or a send
// fails. As etcd's, a stream whose client closed its sending side keeps
// sending its watches' responses.
func (ws *watchService) Watch(stream pb.Watch_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	st := &watchStream{svc: ws, s: ws.s, ctx: ctx, q: newSendQueue(ws.s.cfg.WatchQueueBytes),
		watches: map[int64]*etcdWatch{}}
	sent := make(chan error, 1)
	go func() {
		sent <- st.sendLoop(stream)
		cancel()
	}()
	err := st.recvLoop(stream)
	if err == nil {
		<-ctx.Done()
	}
	cancel()
	st.stopAll()
	if serr := <-sent; err == nil && !errors.Is(serr, context.Canceled) {
		err = serr
	}
	return err
}

// watchStream is one Watch stream: its watches by id, the next id it
// assigns (from 0, as etcd's), its progress request and its queue.
type watchStream struct {
	svc *watchService
	s   *Server
	ctx context.Context
	q   *sendQueue
	wg  sync.WaitGroup // the watches' goroutines and progress rounds

	mu       sync.Mutex
	watches  map[int64]*etcdWatch
	nextID   int64
	progress progressRound
}

// etcdWatch is one watch of a stream.
type etcdWatch struct {
	id     int64
	r      keyRange
	noPut  bool
	noDel  bool
	prevKV bool
	// notify: progress_notify; fragment: responses larger than
	// MaxRequestBytes are split.
	notify, fragment bool
	rev              atomic.Uint64   // the revision it is complete through
	ctx              context.Context // its kvd watches'
	cancel           context.CancelFunc
	done             chan struct{} // closed when its goroutine returns
}

func (st *watchStream) recvLoop(stream pb.Watch_WatchServer) error {
	for {
		req, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		switch u := req.RequestUnion.(type) {
		case *pb.WatchRequest_CreateRequest:
			if u.CreateRequest != nil {
				st.create(u.CreateRequest)
			}
		case *pb.WatchRequest_CancelRequest:
			if u.CancelRequest != nil {
				st.cancelWatch(u.CancelRequest.WatchId)
			}
		case *pb.WatchRequest_ProgressRequest:
			st.requestProgress()
		}
		if st.ctx.Err() != nil {
			return nil
		}
	}
}

func (st *watchStream) sendLoop(stream pb.Watch_WatchServer) error {
	for {
		it, ok := st.q.pop(st.ctx)
		if !ok {
			return st.ctx.Err()
		}
		if g := st.s.cfg.Knobs.WatchSendGate; g != nil {
			select {
			case <-g:
			case <-st.ctx.Done():
				return st.ctx.Err()
			}
		}
		if err := sendResponse(stream, it, st.s.cfg.MaxRequestBytes); err != nil {
			return err
		}
	}
}

// Cancel reasons, etcd's words where etcd has the case.
const (
	reasonEmptyRange  = "mvcc: watcher range is empty"
	reasonDuplicateID = "mvcc: duplicate watch ID provided on the WatchStream"
	reasonNegativeID  = "kvd: watch id must not be negative"
	reasonNegativeRev = "kvd: start revision must not be negative"
)

// create opens the watch creq asks for and queues its created response:
// created and, if it could not be opened, canceled with the reason (as
// etcd answers, watch id -1).
func (st *watchStream) create(creq *pb.WatchCreateRequest) {
	rev, err := st.s.currentRevision(st.ctx)
	if err != nil {
		st.refuse(st.s.bareHeader(), reason(err))
		return
	}
	r, ok := rangeOf(creq)
	switch {
	case !ok:
		st.refuse(st.s.header(rev), reasonEmptyRange)
		return
	case creq.WatchId < 0:
		st.refuse(st.s.header(rev), reasonNegativeID)
		return
	case creq.StartRevision < 0:
		st.refuse(st.s.header(rev), reasonNegativeRev)
		return
	}
	w := &etcdWatch{r: r, prevKV: creq.PrevKv, notify: creq.ProgressNotify, fragment: creq.Fragment,
		done: make(chan struct{})}
	for _, f := range creq.Filters {
		w.noPut = w.noPut || f == pb.WatchCreateRequest_NOPUT
		w.noDel = w.noDel || f == pb.WatchCreateRequest_NODELETE
	}
	w.rev.Store(rev)
	if !st.add(w, creq.WatchId) {
		st.refuse(st.s.header(rev), reasonDuplicateID)
		return
	}
	from := watchFrom(creq.StartRevision, rev)
	w.ctx, w.cancel = context.WithCancel(st.ctx)
	// Opened here, not in its goroutine: a progress request read next
	// must find it among the client's watches.
	resps := st.s.c.Watch(w.ctx, w.r.watchKey, w.options(from)...)
	if !st.q.pushControl(st.ctx, &pb.WatchResponse{Header: st.s.header(rev), WatchId: w.id, Created: true}) {
		w.cancel()
		close(w.done)
		return
	}
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		defer close(w.done)
		st.run(w, resps)
	}()
}

// watchFrom is the kvd revision a watch from etcd revision start (0: from
// now, the store being at kvd revision cur) starts at. Nothing happened at
// etcd's revision 1 (kvd's empty store): a watch from it starts at kvd's
// first write, as one from etcd's 2.
func watchFrom(start int64, cur uint64) uint64 {
	if start == 0 {
		return cur + 1
	}
	return max(kvdRev(start), 1)
}

// options are the kvd watch's options: always prev_kv, which gives a
// PUT's create revision and version where the server predates events'
// metadata (convert.go).
func (w *etcdWatch) options(from uint64) []client.WatchOption {
	opts := []client.WatchOption{client.WithFromRevision(from), client.WithPrevKV()}
	if w.r.prefix {
		opts = append(opts, client.WithPrefix())
	}
	if w.notify {
		opts = append(opts, client.WithProgressNotify())
	}
	return opts
}

// add registers w under id, or under the next free id if id is 0 (etcd's
// auto-assignment); false if id is taken.
func (st *watchStream) add(w *etcdWatch, id int64) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if id == 0 {
		for st.watches[st.nextID] != nil {
			st.nextID++
		}
		id = st.nextID
		st.nextID++
	} else if st.watches[id] != nil {
		return false
	}
	w.id = id
	st.watches[id] = w
	return true
}

func (st *watchStream) refuse(h *pb.ResponseHeader, reason string) {
	st.q.pushControl(st.ctx, &pb.WatchResponse{Header: h, WatchId: -1, Created: true,
		Canceled: true, CancelReason: reason})
}

// remove unregisters w; false if it was already (whoever removes a watch
// sends its last response).
func (st *watchStream) remove(w *etcdWatch) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.watches[w.id] != w {
		return false
	}
	delete(st.watches, w.id)
	st.progress.drop(st, w)
	return true
}

// cancelWatch ends watch id at its client's request; as etcd, an id not
// open gets no answer.
func (st *watchStream) cancelWatch(id int64) {
	st.mu.Lock()
	w := st.watches[id]
	st.mu.Unlock()
	if w == nil || !st.remove(w) {
		return
	}
	w.cancel()
	<-w.done // none of its events is queued after the canceled response
	st.q.pushControl(st.ctx, &pb.WatchResponse{Header: st.s.header(w.rev.Load()), WatchId: id, Canceled: true})
}

// stopAll ends every watch of a stream that is over.
func (st *watchStream) stopAll() {
	st.mu.Lock()
	for _, w := range st.watches {
		w.cancel()
	}
	st.mu.Unlock()
	st.wg.Wait()
}

// run forwards the responses of w's kvd watches until they end.
func (st *watchStream) run(w *etcdWatch, resps <-chan client.WatchResponse) {
	defer w.cancel() // a watch that ends here ends kvd's too
	for resps != nil {
		resps = st.forward(w, resps)
	}
}

// forward forwards the responses of one kvd watch of w until it ends:
// nil, or the kvd watch that goes on after a compaction to exactly the
// revision it needed next (atCompaction).
func (st *watchStream) forward(w *etcdWatch, resps <-chan client.WatchResponse) <-chan client.WatchResponse {
	for resp := range resps {
		var ce *client.CompactedError
		switch {
		case errors.As(resp.Err, &ce) && ce.Requested+1 == ce.Oldest:
			return st.atCompaction(w, ce)
		case resp.Err != nil:
			st.end(w, resp.Err)
			return nil
		case resp.IsProgressNotify():
			st.progressOf(w, resp.Revision)
			continue
		}
		w.rev.Store(max(w.rev.Load(), resp.Revision))
		evs, size := w.events(resp.Events)
		if len(evs) == 0 {
			continue
		}
		out := &pb.WatchResponse{Header: st.s.header(resp.Revision), WatchId: w.id, Events: evs}
		if !st.q.pushEvents(out, size, w.fragment) {
			st.overflow(w)
			return nil
		}
	}
	return nil
}

// atCompaction goes on with w, whose kvd watch needs the events of the
// compaction revision itself (ce.Requested), which kvd's watches do not
// start from (its deletes may be gone from the history), though etcd's
// do: as etcd's once its compaction has run, it sends that revision's
// puts, read from the state at it (the keys it last modified), without
// previous values (the revision before is compacted) and without its
// deletes (the compaction dropped them), then watches from the revision
// after. nil: it ended w (the history was compacted further meanwhile).
func (st *watchStream) atCompaction(w *etcdWatch, ce *client.CompactedError) <-chan client.WatchResponse {
	rev := ce.Requested
	end := w.r.end
	switch {
	case end == nil:
		end = singleEnd(w.r.start)
	case len(end) == 0:
		end = nil // every key from start on
	}
	res, err := st.s.c.Range(w.ctx, w.r.start, end, client.WithRev(rev), client.WithMinModRev(rev), client.WithMaxModRev(rev), client.WithoutCount())
	switch {
	case errors.Is(err, client.ErrCompacted):
		st.end(w, ce) // its client starts again from there, and learns of the next
		return nil
	case err != nil:
		st.end(w, err)
		return nil
	}
	evs := make([]client.Event, len(res.KVs))
	for i, kv := range res.KVs {
		evs[i] = client.Event{Type: client.EventPut, Key: kv.Key, Value: kv.Value, ModRevision: kv.ModRevision,
			CreateRevision: kv.CreateRevision, Version: kv.Version, Lease: kv.Lease}
	}
	w.rev.Store(max(w.rev.Load(), rev))
	if out, size := w.events(evs); len(out) > 0 {
		resp := &pb.WatchResponse{Header: st.s.header(max(res.CurrentRevision, rev)), WatchId: w.id, Events: out}
		if !st.q.pushEvents(resp, size, w.fragment) {
			st.overflow(w)
			return nil
		}
	}
	return st.s.c.Watch(w.ctx, w.r.watchKey, w.options(rev+1)...)
}

// events are the etcd events of evs that w's range and filters keep, and
// their size in bytes.
func (w *etcdWatch) events(evs []client.Event) ([]*mvccpb.Event, int) {
	var out []*mvccpb.Event
	size := 0
	for i := range evs {
		e := &evs[i]
		if !w.r.contains(e.Key) || (w.noPut && e.Type == client.EventPut) || (w.noDel && e.Type == client.EventDelete) {
			continue
		}
		ev := event(e, w.prevKV)
		size += proto.Size(ev)
		out = append(out, ev)
	}
	return out, size
}

// end sends the last response of a watch that kvd ended: compacted (as
// etcd, compact_revision set, canceled and header revision 0:
// compact_revision is the compaction revision, in etcd's numbering, the
// oldest a watch may start from), or canceled with the reason.
func (st *watchStream) end(w *etcdWatch, err error) {
	if !st.remove(w) {
		return
	}
	resp := &pb.WatchResponse{Header: st.s.header(w.rev.Load()), WatchId: w.id, Canceled: true}
	var ce *client.CompactedError
	if errors.As(err, &ce) {
		// etcd's compacted answer is at no revision (header revision 0).
		resp.Header = st.s.bareHeader()
		resp.CompactRevision = etcdRev(max(ce.Oldest, 1) - 1)
	} else {
		resp.CancelReason = reason(err)
	}
	st.q.pushFinal(resp)
}
