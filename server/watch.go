package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/watch"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
)

// Watches. Every node serves watches from its own applied
// state: the region mirror (internal/mirror, Events) hands each applied
// batch's writes, in log order, to the node's event history (internal/watch), so a follower's stream is in
// commit order as the leader's is. Each client connection that opens a
// watch gets one watchConn: a goroutine that handles its watch requests
// and cancels in order and sends every watch's events, one bounded
// message at a time (limits.MaxWatchEvents, limits.MaxWatchBytes; a
// revision's events split only when one revision alone is past them,
// flagged for clients that join fragments), round robin between its
// watches. Progress notifications go to a synced watch on its client's
// request and, with progress_notify, every Config.WatchProgressNotifyInterval
// it sent nothing. Nothing is queued per watcher: a watcher's
// pending events are the history past its cursor, so memory is bounded
// by the history (Config.Watch) and one message per connection, however
// slow its client. A watcher the memory's history leaves behind reads
// the stored history (internal/watch, stored.go) and catches up; a client
// that stops reading altogether is closed as a slow reader, as for any
// reply.
//
// A node without a leader refuses new watches and ends its open ones
// (endIfLeaderless), so that clients resume them on a node that is
// applying. Refusals (too many watches on the connection or the node, a
// revision already compacted, no leader; a slow watcher dropped only
// without a stored history) are
// counted in
// kvd_watch_refusals_total{reason} and logged at most once per
// refusalLogEvery per reason.

// Watch refusal reasons.
const (
	watchMaxPerConn = "max_watches_per_conn"
	watchMaxPerNode = "max_watches"
	watchCompacted  = "compacted"
	watchSlow       = "slow_watcher"
	watchNoLeader   = "no_leader"
)

var watchRefusalReasons = []string{watchMaxPerConn, watchMaxPerNode, watchCompacted, watchSlow, watchNoLeader}

// watchCmdQueue bounds the watch requests and cancels read from a
// connection but not yet handled; serveConn waits beyond it.
const watchCmdQueue = 64

func isWatchOp(op wire.Op) bool { return op == wire.OpWatch || op == wire.OpWatchCancel }

// watchConn serves the watches of one client connection.
type watchConn struct {
	s       *Server
	conn    transport.Conn
	budget  *connBudget
	slow    *sync.Once
	cmds    chan *wire.Request // each charged to budget until handled
	ctx     context.Context    // ends with the connection, or when run returns
	done    chan struct{}      // closed when run returns: nothing takes cmds any more
	watches map[uint64]*connWatch
	order   []uint64 // ids in the order they were opened: the send round
	evs     []wire.WatchEvent
	// prevs: the previous values its prev_kv watches read in a round,
	// read once for all of them (many watches of one key).
	prevs watch.PrevReads
	val   []byte // scratch: a message's value
	frame []byte // scratch: a message's frame
	// batcher is conn as a transport.BatchSender, nil if it is not one.
	// batch holds the frames a send round queued, ends where each ends:
	// the batcher takes them in one call (flushBatch).
	batcher transport.BatchSender
	batch   []byte
	ends    []int
	msgs    [][]byte // scratch: batch cut into frames
}

// watchBatchBytes is how many bytes of frames a send round queues before
// it hands them to the connection: the messages of many watches go out in
// one socket write, not one each, yet a connection's round never holds
// more than this beyond one message.
const watchBatchBytes = 256 << 10

// connWatch is one watch of the connection, and the progress its client
// was last told.
type connWatch struct {
	*watch.Watcher
	told   uint64
	toldAt time.Time
	flags  uint16 // the request's: wire.WatchPrevKV, WatchProgressNotify, WatchFragment, WatchMeta
	// notifiedAt: when the watch last sent events or a progress
	// notification (progress_notify waits an interval after either).
	notifiedAt time.Time
	// wantProgress: its client asked for a progress notification, sent
	// once the watch is synced.
	wantProgress bool
}

// progressEvery is how often at most a watch whose key sees no events is
// told how far its stream is complete (an empty message): its client
// then resumes a broken stream from there, not from its last event, which
// the history may have evicted long ago on a busy node. It is
// Knobs.ProgressEvery's default.
const progressEvery = time.Second

// startWatchConn starts serving conn's watches until ctx ends.
func (s *Server) startWatchConn(ctx context.Context, conn transport.Conn, budget *connBudget, slow *sync.Once) *watchConn {
	ctx, stop := context.WithCancel(ctx)
	wc := &watchConn{s: s, conn: conn, budget: budget, slow: slow, ctx: ctx,
		cmds: make(chan *wire.Request, watchCmdQueue), done: make(chan struct{}), watches: map[uint64]*connWatch{}}
	wc.batcher, _ = conn.(transport.BatchSender)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(wc.done)
		defer stop()
		wc.run(ctx)
	}()
	return wc
}

// enqueue hands a watch request or cancel (which it copies) to the
// connection's watch goroutine; false once the server or connection ends,
// or the watch goroutine has (a message it could not send: send closed the
// connection). Without the last, a client that filled the queue while the
// goroutine was stuck on a send it then gave up kept serveConn blocked
// here, and the connection counted, until the server stopped. The copy is
// charged to the connection's budget until handled: a client that reads
// nothing could otherwise queue watchCmdQueue requests of up to a message
// each (256 MiB) beside the budget.
func (wc *watchConn) enqueue(req *wire.Request) bool {
	if wc.budget.acquire(wc.ctx, cmdCharge(req)) != nil {
		return false
	}
	r := *req
	ownKeyValue(&r)
	select {
	case wc.cmds <- &r:
		return true
	case <-wc.ctx.Done():
		return false
	}
}

// cmdCharge is what a queued watch request or cancel holds of its
// connection's budget (all of it at most, or acquire would never return).
func cmdCharge(req *wire.Request) int { return min(len(req.Key)+len(req.Value), maxConnBytes) }

func (wc *watchConn) run(ctx context.Context) {
	defer func() {
		for _, w := range wc.watches {
			w.Close()
		}
	}()
	// A progress_notify watch is checked at the ticks: a quarter of its
	// interval keeps it within a quarter of late.
	tick := time.NewTicker(min(wc.s.cfg.Knobs.ProgressEvery, wc.s.cfg.progressNotifyInterval()/4))
	defer tick.Stop()
	for {
		changed := wc.s.hub.Changed()
		sent, ok := wc.sendRound(ctx)
		if !ok {
			return
		}
		if sent {
			continue // more may be pending: serve every watch again first
		}
		select {
		case <-changed:
		case <-tick.C:
			if !wc.endIfLeaderless(ctx) {
				return
			}
		case req := <-wc.cmds:
			if !wc.command(ctx, req) {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// noLeader is why a node without a leader refuses or ends watches.
const noLeader = "this node has no leader (an election, or it is cut off from the others): " +
	"it may not be applying what the cluster commits; resume the watch on another node"

// endIfLeaderless ends every watch of the connection while the node has
// no leader: a node cut off from the others applies nothing more, and its
// watchers would wait for events without end while the others commit
// them. (A deposed leader loses its leader within an election timeout:
// CheckQuorum; an isolated follower when it starts a pre-vote.) Their
// clients resume elsewhere from their last event. False once the
// connection failed.
func (wc *watchConn) endIfLeaderless(ctx context.Context) bool {
	if len(wc.watches) == 0 || wc.s.node.Status().LeaderID != 0 {
		return true
	}
	wc.s.watchRefused(watchNoLeader, wc.conn.RemoteAddr(), errors.New(noLeader))
	for _, id := range slices.Clone(wc.order) {
		wc.drop(id)
		if !wc.send(ctx, wire.Response{Op: wire.OpWatch, ID: id, Status: wire.StatusUnavailable, Value: []byte(noLeader)}) {
			return false
		}
	}
	return true
}

// sendRound handles the queued commands, then sends each watch at most
// one message of its pending events. sent: some message went out; ok:
// false once the connection failed.
func (wc *watchConn) sendRound(ctx context.Context) (sent, ok bool) {
	defer wc.prevs.Clear()
	for {
		select {
		case req := <-wc.cmds:
			ok := wc.command(ctx, req)
			wc.budget.release(cmdCharge(req))
			if !ok {
				return false, false
			}
			continue
		default:
		}
		break
	}
	for _, id := range slices.Clone(wc.order) {
		w := wc.watches[id]
		var progress uint64
		var err error
		wc.evs, progress, err = w.Next(wc.evs[:0], limits.MaxWatchEvents, limits.MaxWatchBytes)
		if err != nil {
			wc.drop(id)
			if !wc.queue(ctx, wc.s.compacted(id, wire.OpWatch, err)) {
				return sent, false
			}
			continue
		}
		if len(wc.evs) == 0 && wc.progressDue(w) {
			if !wc.sendProgress(ctx, id, w, progress) {
				return sent, false
			}
			continue
		}
		if len(wc.evs) == 0 && (progress == w.told || time.Since(w.toldAt) < wc.s.cfg.Knobs.ProgressEvery) {
			continue
		}
		m := wire.WatchMessage{Events: wc.evs}
		if w.flags&wire.WatchPrevKV != 0 {
			m.Flags |= wire.WatchMsgPrevKV
		}
		if w.flags&wire.WatchMeta != 0 {
			m.Flags |= wire.WatchMsgMeta
		}
		if n := len(wc.evs); n > 0 && w.flags&wire.WatchFragment != 0 && progress < wc.evs[n-1].Version {
			m.Flags |= wire.WatchMsgFragment // Next cut a revision alone past the bounds
		}
		wc.val = wire.AppendWatchMessage(wc.val[:0], &m)
		clear(wc.evs)
		wc.s.metrics.watchEvents.Add(float64(len(wc.evs)))
		events := len(wc.evs) > 0 // before shrink, which may drop wc.evs
		ok := wc.queue(ctx, wire.Response{Op: wire.OpWatch, ID: id, Version: progress, Value: wc.val})
		wc.shrink()
		if !ok {
			return sent, false
		}
		w.told, w.toldAt = progress, time.Now()
		if events {
			w.notifiedAt = w.toldAt
		}
		sent = sent || events
	}
	return sent, wc.flushBatch(ctx)
}

// progressDue reports whether w, which has no events pending, is owed a
// progress notification: one its client asked for, or progress_notify's
// periodic one; either only once it is synced (as etcd sends them).
func (wc *watchConn) progressDue(w *connWatch) bool {
	periodic := w.flags&wire.WatchProgressNotify != 0 &&
		time.Since(w.notifiedAt) >= wc.s.cfg.progressNotifyInterval()
	return (w.wantProgress || periodic) && w.Synced()
}

// sendProgress queues w a progress notification: no events, and the
// revision its stream is complete through.
func (wc *watchConn) sendProgress(ctx context.Context, id uint64, w *connWatch, progress uint64) bool {
	wc.val = wire.AppendWatchMessage(wc.val[:0], &wire.WatchMessage{Flags: wire.WatchMsgProgress})
	if !wc.queue(ctx, wire.Response{Op: wire.OpWatch, ID: id, Version: progress, Value: wc.val}) {
		return false
	}
	w.wantProgress = false
	w.told, w.toldAt = progress, time.Now()
	w.notifiedAt = w.toldAt
	return true
}

// keepWatchEvents is the most events a watch connection's scratch keeps
// between rounds (64 B each).
const keepWatchEvents = 64

// shrink drops scratch a round grew large: one burst of big events must not
// leave an idle connection holding a message's worth (up to
// limits.MaxWatchBytes) for its life.
func (wc *watchConn) shrink() {
	if cap(wc.val) > keepRecvBuf {
		wc.val = nil
	}
	if cap(wc.evs) > keepWatchEvents {
		wc.evs = nil
	}
}

// command handles one watch request or cancel and answers it.
func (wc *watchConn) command(ctx context.Context, req *wire.Request) bool {
	start := time.Now()
	resp, denied := permission(wc.conn, req.Op)
	switch {
	case denied:
	case req.Op == wire.OpWatchCancel:
		resp = wc.cancel(req)
	case req.Flags&wire.WatchProgressRequest != 0:
		resp = wc.requestProgress(req)
	default:
		resp = wc.open(req)
	}
	resp.Op, resp.ID = req.Op, req.ID
	wc.s.metrics.observe(req.Op, resp.Status, time.Since(start))
	return wc.send(ctx, resp)
}

// open registers a watch; its first message (WatchCreated) says from
// which version on it is complete.
func (wc *watchConn) open(req *wire.Request) wire.Response {
	s := wc.s
	from, err := wire.DecodeWatchRequest(req.Value)
	if err == nil {
		err = wire.CheckWatchFlags(req.Flags)
	}
	switch {
	case err != nil:
		return badRequest(err.Error())
	case len(req.Key) == 0 && req.Flags&wire.WatchPrefix == 0:
		return wire.Response{Status: wire.StatusEmptyKey}
	case len(req.Key) > limits.MaxKey:
		return wire.Response{Status: wire.StatusKeyTooLarge}
	case wc.watches[req.ID] != nil:
		return badRequest("watch id " + strconv.FormatUint(req.ID, 10) + " is already open on this connection")
	case len(wc.watches) >= s.cfg.MaxWatchesPerConn:
		err := fmt.Errorf("too many watches on this connection (max %d)", s.cfg.MaxWatchesPerConn)
		s.watchRefused(watchMaxPerConn, wc.conn.RemoteAddr(), err)
		return badRequest(err.Error())
	}
	if s.node.Status().LeaderID == 0 {
		s.watchRefused(watchNoLeader, wc.conn.RemoteAddr(), errors.New(noLeader))
		return wire.Response{Status: wire.StatusRetry, Value: []byte(noLeader)}
	}
	var opts []watch.Option
	if req.Flags&wire.WatchPrevKV != 0 {
		opts = append(opts, watch.PrevKV(), watch.SharePrev(&wc.prevs))
	}
	w, err := s.hub.Watch(req.Key, req.Flags&wire.WatchPrefix != 0, from, opts...)
	switch {
	case errors.Is(err, watch.ErrTooManyWatchers):
		err = fmt.Errorf("too many watches on this node (max %d)", s.cfg.Watch.MaxWatchers)
		s.watchRefused(watchMaxPerNode, wc.conn.RemoteAddr(), err)
		return wire.Response{Status: wire.StatusRetry, Value: []byte(err.Error())}
	case err != nil:
		return s.compacted(req.ID, req.Op, err)
	}
	now := time.Now()
	wc.watches[req.ID] = &connWatch{Watcher: w, told: w.Progress(), toldAt: now, notifiedAt: now, flags: req.Flags}
	wc.order = append(wc.order, req.ID)
	return wire.Response{Version: w.Progress(), Value: wire.AppendWatchMessage(nil, &wire.WatchMessage{Flags: wire.WatchCreated})}
}

func (wc *watchConn) cancel(req *wire.Request) wire.Response {
	id, err := wire.DecodeWatchCancel(req.Value)
	if err != nil {
		return badRequest(err.Error())
	}
	if wc.watches[id] == nil {
		return wire.Response{Status: wire.StatusNotFound}
	}
	wc.drop(id)
	return wire.Response{}
}

// requestProgress marks the watch named by the request's value as owed a
// progress notification (etcd's RequestProgress); sendRound sends it once
// the watch is synced. The request itself is answered at once.
func (wc *watchConn) requestProgress(req *wire.Request) wire.Response {
	id, err := wire.DecodeWatchCancel(req.Value)
	switch {
	case err != nil:
		return badRequest(err.Error())
	case req.Flags != wire.WatchProgressRequest:
		return badRequest("a progress request carries no other watch flag")
	case wc.watches[id] == nil:
		return wire.Response{Status: wire.StatusNotFound}
	}
	wc.watches[id].wantProgress = true
	return wire.Response{}
}

func (wc *watchConn) drop(id uint64) {
	wc.watches[id].Close()
	delete(wc.watches, id)
	wc.order = slices.DeleteFunc(wc.order, func(x uint64) bool { return x == id })
}

// compacted is the message that ends a watch whose history is gone:
// StatusCompacted with the oldest version the node can serve, counted and
// logged.
func (s *Server) compacted(id uint64, op wire.Op, err error) wire.Response {
	var ce *watch.CompactedError
	if !errors.As(err, &ce) {
		return wire.Response{Op: op, ID: id, Status: wire.StatusInternal, Value: []byte(err.Error())}
	}
	reason := watchCompacted
	if ce.Slow {
		reason = watchSlow
	}
	s.watchRefused(reason, "", err)
	return wire.Response{Op: op, ID: id, Status: wire.StatusCompacted, Version: ce.Oldest, Value: []byte(err.Error())}
}

// send writes one message of the connection's watches. The frame is
// charged to the connection's budget until written; a client that makes
// no room for it within replyTimeout is closed as a slow reader.
func (wc *watchConn) send(ctx context.Context, resp wire.Response) bool {
	if wc.s.awaitThaw(ctx) != nil {
		return false
	}
	wc.frame = wire.AppendResponse(wc.frame[:0], &resp)
	ok := wc.transmit(ctx, len(wc.frame), func(ctx context.Context) error { return wc.conn.Send(ctx, wc.frame) })
	if cap(wc.frame) > keepRecvBuf {
		wc.frame = nil
	}
	return ok
}

// transmit runs write, which sends n bytes of frames, with replyTimeout,
// charging them to the connection's budget until written, and judges its
// outcome (sent).
func (wc *watchConn) transmit(ctx context.Context, n int, write func(context.Context) error) bool {
	wc.budget.overdraw(n)
	defer wc.budget.release(n)
	sctx, cancel := context.WithTimeout(ctx, wc.s.cfg.Knobs.ReplyTimeout)
	defer cancel()
	return wc.sent(ctx, write(sctx))
}

// queue adds a message to the round's batch, which goes out when it
// reaches watchBatchBytes or the round ends (flushBatch); over a
// connection that cannot take batches it is sent at once. False once the
// connection failed.
func (wc *watchConn) queue(ctx context.Context, resp wire.Response) bool {
	if wc.batcher == nil {
		return wc.send(ctx, resp)
	}
	wc.batch = wire.AppendResponse(wc.batch, &resp)
	wc.ends = append(wc.ends, len(wc.batch))
	return len(wc.batch) < watchBatchBytes || wc.flushBatch(ctx)
}

// flushBatch sends the queued frames in one call, charged to the
// connection's budget until written, with replyTimeout for them all.
func (wc *watchConn) flushBatch(ctx context.Context) bool {
	if len(wc.ends) == 0 {
		return true
	}
	defer func() {
		clear(wc.msgs) // they point into batch
		wc.batch, wc.ends, wc.msgs = wc.batch[:0], wc.ends[:0], wc.msgs[:0]
		if cap(wc.batch) > keepRecvBuf {
			wc.batch = nil // a burst's: not kept for the connection's life
		}
	}()
	if wc.s.awaitThaw(ctx) != nil {
		return false
	}
	start := 0
	for _, end := range wc.ends {
		wc.msgs = append(wc.msgs, wc.batch[start:end])
		start = end
	}
	return wc.transmit(ctx, len(wc.batch), func(ctx context.Context) error {
		_, err := wc.batcher.SendBatch(ctx, wc.msgs)
		return err
	})
}

// sent judges the outcome err of a send: true if the messages went out;
// else the connection is done, closed here as a slow reader or as one
// that cannot take a message.
func (wc *watchConn) sent(ctx context.Context, err error) bool {
	s := wc.s
	switch {
	case err == nil:
		return true
	case ctx.Err() != nil:
	case errors.Is(err, context.DeadlineExceeded):
		s.closeSlowReader(wc.conn, wc.slow, "a watch message")
	default:
		// Not sent (a message larger than the client takes, say): the
		// connection's watches end with this goroutine, so the
		// connection must too, or its client would wait on them for ever.
		// Counted and rate-limited as every refusal is, so that the
		// operator sees it in the metrics.
		s.connRefused(transport.ReasonTooLarge, wc.conn.RemoteAddr(), fmt.Errorf("a watch message was not delivered: %w", err))
		wc.conn.Close()
	}
	return false
}

// watchRefused counts a refused or dropped watch and logs it, rate-limited.
func (s *Server) watchRefused(reason, remote string, err error) {
	s.metrics.watchRefusals.WithLabelValues(reason).Inc()
	if ok, held := s.refusalLog.Allow("watch_"+reason, time.Now()); ok {
		s.log.Warn("watch refused or dropped by a limit", "reason", reason, "remote", remote, "err", err,
			"similar_not_logged", held)
	}
}
