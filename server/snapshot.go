package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/internal/backup"
	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/raft"
	"github.com/kvd-project/kvd/transport"
)

// Backups (OpSnapshot). The leader streams its applied state as a
// backup file (internal/backup) in chunks of at most wire.MaxSnapshotChunk
// bytes, all answering the one request. The state is read from one Pebble
// view (raft.Node.View) taken after a ReadIndex, so the backup holds every
// write acknowledged before the request was sent (it is linearizable), and
// the view pins a snapshot rather than a lock: writes go on while it is
// streamed, at the cost of Pebble keeping the versions the view still
// needs until it is closed.
//
// Permissions: a backup is a read. A read-only credential may take one; it
// can read every key with range scans anyway, so a backup discloses
// nothing more, and backup jobs should not need a credential that can
// write. Whoever may connect without TLS may take one too, as with every
// other request.

// MaxSnapshotStreams bounds the backups one node streams at once: each pins
// a Pebble snapshot and reads the whole state, and a few are all that an
// operator needs. A request beyond it is refused at once with StatusRetry
// (the client may try again later), logged (rate-limited) and counted in
// kvd_snapshot_streams_total{outcome="refused_busy"}.
const MaxSnapshotStreams = 1

// minSnapshotChunk is the least data a chunk must be able to carry for a
// backup to be streamed: a connection that accepts only smaller messages
// (its transport's MaxMessage, which the client chooses) is refused the
// backup with StatusBadRequest. Without a floor a tiny limit made the
// chunk size negative (a panic) or zero (empty chunks for ever, holding the
// node's only snapshot slot).
const minSnapshotChunk = 4 << 10

// snapshotChunkReserve is what a snapshot request holds of its connection's
// budget: one chunk, sent before the next is built.
const snapshotChunkReserve = wire.MaxSnapshotChunk + wire.ResponseHeaderLen + 1

// Outcomes of kvd_snapshot_streams_total.
const (
	snapSent    = "sent"
	snapBusy    = "refused_busy"
	snapFailed  = "failed"
	reasonSnapB = "snapshot_busy" // the refusal log's key
)

func newSnapshotCounter() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvd_snapshot_streams_total",
		Help: "Backup streams (kvctl snapshot save) by outcome: sent, refused_busy (over MaxSnapshotStreams), failed.",
	}, []string{"outcome"})
	for _, o := range []string{snapSent, snapBusy, snapFailed} {
		c.WithLabelValues(o)
	}
	return c
}

// snapshotSlots is the node's semaphore of concurrent streams.
type snapshotSlots struct {
	once sync.Once
	ch   chan struct{}
}

func (s *snapshotSlots) tryAcquire() bool {
	s.once.Do(func() { s.ch = make(chan struct{}, MaxSnapshotStreams) })
	select {
	case s.ch <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *snapshotSlots) release() { <-s.ch }

// serveSnapshot answers an OpSnapshot request with its stream. Each chunk
// is sent as respond sends a reply: a client that makes no room for one
// within replyTimeout is closed as a slow reader.
func (s *Server) serveSnapshot(conn transport.Conn, req *wire.Request, slow *sync.Once) {
	start := time.Now()
	st := &snapStream{s: s, conn: conn, id: req.ID, slow: slow}
	resp, denied := permission(conn, req.Op)
	if !denied {
		resp = s.snapshot(st, req)
	}
	s.metrics.observe(req.Op, resp.Status, time.Since(start))
	if resp.Status == wire.StatusOK {
		return // streamed
	}
	st.send(resp) //nolint:errcheck // the stream is over either way
}

// snapshot streams the backup, or returns the error response that ends the
// stream instead (StatusOK: the stream was sent whole).
func (s *Server) snapshot(st *snapStream, req *wire.Request) wire.Response {
	if len(req.Key) != 0 || len(req.Value) != 0 || req.Flags != 0 {
		return badRequest("snapshot carries a key, value or flags")
	}
	if max := st.conn.MaxMessage(); snapshotChunkLimit(max) < minSnapshotChunk {
		return badRequest(fmt.Sprintf("this connection takes messages of at most %d bytes; a backup needs %d",
			max, minSnapshotChunk+wire.ResponseHeaderLen+1))
	}
	if !s.snapSlots.tryAcquire() {
		s.metrics.snapshots.WithLabelValues(snapBusy).Inc()
		if ok, held := s.refusalLog.Allow(reasonSnapB, time.Now()); ok {
			s.log.Warn("backup refused: too many snapshot streams", "max", MaxSnapshotStreams,
				"remote", st.conn.RemoteAddr(), "similar_not_logged", held)
		}
		return wire.Response{Status: wire.StatusRetry,
			Value: fmt.Appendf(nil, "this node already streams %d snapshot(s), its limit; try again later", MaxSnapshotStreams)}
	}
	defer s.snapSlots.release()
	ctx := s.ctx
	if err := s.awaitThaw(ctx); err != nil {
		return s.errResponse(err)
	}
	view, resp, ok := s.snapshotView(ctx)
	if !ok {
		return resp
	}
	defer view.Close()
	err := st.stream(view)
	switch {
	case err == nil:
		s.metrics.snapshots.WithLabelValues(snapSent).Inc()
		rev, _ := view.Revision()
		s.log.Info("backup streamed", "index", view.Applied(), "revision", rev, "remote", st.conn.RemoteAddr(), "bytes", st.bytes)
		return wire.Response{}
	case errors.Is(err, errSnapshotSend):
		s.metrics.snapshots.WithLabelValues(snapFailed).Inc()
		s.log.Info("backup stream not delivered", "remote", st.conn.RemoteAddr(), "err", err)
		return wire.Response{} // the connection is gone or closed: nothing more to send
	}
	s.metrics.snapshots.WithLabelValues(snapFailed).Inc()
	s.log.Warn("backup stream failed", "err", err)
	return s.errResponse(err)
}

// snapshotView opens the view to stream: on the leader, after a ReadIndex,
// and once the region has applied the view's index (as for scans: no read
// that starts after the backup may see older state than the backup holds).
func (s *Server) snapshotView(ctx context.Context) (*kv.View, wire.Response, bool) {
	if st := s.node.Status(); !st.IsLeader {
		return nil, s.errResponse(&raft.NotLeaderError{LeaderID: st.LeaderID, LeaderAddr: s.node.ClientAddr(st.LeaderID)}), false
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if err := s.node.ReadIndex(rctx); err != nil {
		return nil, s.errResponse(err), false
	}
	view, err := s.kv.View()
	if err != nil {
		return nil, s.errResponse(err), false
	}
	if err := s.waitApplied(rctx, view.Applied()); err != nil {
		view.Close()
		return nil, s.errResponse(err), false
	}
	return view, wire.Response{}, true
}

// errSnapshotSend marks a chunk the client did not take.
var errSnapshotSend = errors.New("snapshot chunk not delivered")

// snapStream sends one backup as chunks; it is the io.Writer the backup
// writer writes the file to.
type snapStream struct {
	s     *Server
	conn  transport.Conn
	id    uint64
	slow  *sync.Once
	index uint64
	buf   []byte // the chunk being filled: flags byte, then data
	frame []byte // the response being sent (Send copies it: reused)
	limit int    // data bytes per chunk
	bytes int64
}

// stream writes the view as a backup file into chunks. The header needs
// the key count, so the view is walked twice (it does not change).
func (st *snapStream) stream(view *kv.View) error {
	var keys uint64
	if err := view.ForEach(func(_, _ []byte, _ revision.Meta) error { keys++; return nil }); err != nil {
		return err
	}
	leases, err := view.Leases()
	if err != nil {
		return err
	}
	st.index = view.Applied()
	st.limit = snapshotChunkLimit(st.conn.MaxMessage()) // at least minSnapshotChunk: snapshot checked
	st.buf = make([]byte, 1, 1+st.limit)
	rev, compacted := view.Revision()
	w, err := backup.NewWriter(st, backup.Header{Index: st.index, Keys: keys, Cluster: st.s.node.ClusterID(),
		Leases: uint64(len(leases)), Revision: rev, Compacted: compacted})
	if err != nil {
		return err
	}
	for _, l := range leases {
		if err := w.AddLease(backup.Lease{ID: l.ID, TTL: time.Duration(l.TTL)}); err != nil {
			return err
		}
	}
	if err := view.ForEachMeta(w.Add); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return st.flush(true)
}

// snapshotChunkLimit is the data a chunk may carry on a connection whose
// messages are at most maxMessage bytes.
func snapshotChunkLimit(maxMessage int) int {
	return min(wire.MaxSnapshotChunk, maxMessage-wire.ResponseHeaderLen-1)
}

// Write fills chunks, sending each one that is full.
func (st *snapStream) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		room := 1 + st.limit - len(st.buf)
		if room == 0 {
			if err := st.flush(false); err != nil {
				return n - len(p), err
			}
			continue
		}
		k := min(room, len(p))
		st.buf = append(st.buf, p[:k]...)
		p = p[k:]
	}
	return n, nil
}

func (st *snapStream) flush(last bool) error {
	st.buf[0] = 0
	if last {
		st.buf[0] = wire.SnapshotLast
	}
	st.bytes += int64(len(st.buf) - 1)
	err := st.send(wire.Response{Version: st.index, Value: st.buf})
	st.buf = st.buf[:1]
	return err
}

// send sends one response of the stream; a client that does not make room
// for it within replyTimeout is closed as a slow reader.
func (st *snapStream) send(resp wire.Response) error {
	s := st.s
	resp.Op, resp.ID = wire.OpSnapshot, st.id
	st.frame = wire.AppendResponse(st.frame[:0], &resp)
	if err := s.awaitThaw(s.ctx); err != nil {
		return fmt.Errorf("%w: %w", errSnapshotSend, err)
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Knobs.ReplyTimeout)
	err := st.conn.Send(ctx, st.frame)
	cancel()
	if err != nil && errors.Is(err, context.DeadlineExceeded) && s.ctx.Err() == nil {
		s.closeSlowReader(st.conn, st.slow, "a snapshot chunk")
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errSnapshotSend, err)
	}
	return nil
}
