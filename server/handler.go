package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/monoclock"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/txn"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/raft"
	"github.com/kvd-project/kvd/transport"
)

// maxInflightPerConn bounds the requests one connection may have being
// served at once; a client beyond it waits (its later requests are simply
// not read yet), so one connection cannot exhaust the server.
const maxInflightPerConn = 256

// maxConnBytes bounds the memory one client connection holds in the
// server: its requests being served or queued (watch requests), and their
// replies and watch messages until written. A
// request is read only once there is room for it and for the largest reply
// its op can have (a GET's: a whole value, wire.ResponseHeaderLen +
// limits.MaxValue), so at most 15 GETs of unknown size are served at once
// per connection; a reply's room shrinks to its real size once known.
const maxConnBytes = 16 << 20

// smallReply is the room reserved for the reply of an op other than GET
// (status, member lists, errors); a larger one overdraws the budget.
const smallReply = 4 << 10

// requestTimeout bounds how long the server works on one request. Like
// replyTimeout it is kept coarsely (deadline.go): a request ends up to a
// sixteenth later than this.
const requestTimeout = 30 * time.Second

// replyTimeout bounds how long a reply waits for the client to make room
// for it by reading earlier ones (its credits, over the tcp transport): a
// client that reads no reply for this long is closed (slow_reader), and so
// releases what it holds. A client whose socket stops draining is closed by
// the transport's write timeout instead. It is Knobs.ReplyTimeout's
// default, and read when a connection starts.
const replyTimeout = 10 * time.Second

// keepRecvBuf is the largest request buffer serveConn keeps between
// requests; after a larger request it lets the buffer go.
const keepRecvBuf = 64 << 10

// serveConn routes a new connection that came to a listener of role: a
// Raft peer's goes to the node, a client's is served here until it
// closes; either is refused on a listener that is not for it.
func (s *Server) serveConn(conn transport.Conn, role listenRole) {
	defer conn.Close()
	first, err := conn.Recv(s.ctx, nil)
	if err != nil {
		return
	}
	peer := raft.IsPeerHello(first)
	if peer && role != listenClients {
		// Raft sends nothing between some peers for long. Exempt before a
		// freeze is waited out: the stall it stands for would stop the
		// transport's idle timer too.
		exemptFromIdle(conn)
	}
	if s.awaitThaw(s.ctx) != nil || s.refuseWrongListener(conn, role, peer, first) {
		return
	}
	if peer {
		s.node.ServePeer(conn, first)
		return
	}
	sem := make(chan struct{}, maxInflightPerConn)
	budget := newConnBudget(maxConnBytes)
	var slow sync.Once // the connection is closed as a slow reader once

	// The connection's requests and watches (watch.go, started at its
	// first watch request) end with it: a reply has nowhere to go then.
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	rc := &replyConn{conn: conn, budget: budget, slow: &slow,
		work: newCoarseTimeout(ctx, requestTimeout), wait: newCoarseTimeout(ctx, s.cfg.Knobs.ReplyTimeout)}
	w := s.connWorkers(rc, sem)
	defer close(w.jobs) // the idle workers end with the connection
	var watches *watchConn
	buf := first
	for {
		var req wire.Request
		if err := wire.DecodeRequest(buf, &req); err != nil {
			s.connRefused(transport.ReasonMalformed, conn.RemoteAddr(), err)
			return
		}
		if s.refusal.Load() != nil && (isWatchOp(req.Op) || req.Op == wire.OpSnapshot) {
			return // removed (removeFence): the client resumes elsewhere
		}
		if isWatchOp(req.Op) {
			if watches == nil {
				watches = s.startWatchConn(ctx, conn, budget, &slow)
			}
			if !watches.enqueue(&req) {
				return
			}
			if buf, err = conn.Recv(s.ctx, buf[:0]); err != nil {
				return
			}
			continue
		}
		reserve := replyReserve(&req)
		if budget.acquire(s.ctx, reserve) != nil {
			return
		}
		ownKeyValue(&req) // the request outlives buf, which the next Recv reuses
		select {
		case sem <- struct{}{}: // room: no select over the server's end
		default:
			select {
			case sem <- struct{}{}:
			case <-s.ctx.Done():
				return
			}
		}
		w.hand(&job{req: req, reserve: reserve})
		if cap(buf) > keepRecvBuf {
			buf = nil
		}
		if buf, err = conn.Recv(s.ctx, buf[:0]); err != nil {
			return
		}
	}
}

// maxIdleWorkers bounds the goroutines a connection keeps waiting for its
// next request (workers): a client with one request in flight at a time
// reuses one, and one that had many in flight at once keeps only this many
// afterwards (a few KiB each once the GC has shrunk their stacks), so an
// idle connection holds little more than before it was used.
const maxIdleWorkers = 2

// workers serve a connection's requests, each on a goroutine of its own,
// as many at once as the connection may have in flight (sem). A goroutine
// that has served a request waits for the next one rather than exit: a new
// goroutine per request cost the leader about 5% of its CPU per PUT (its
// start, its exit, and growing its stack again to the depth of a PUT).
type workers struct {
	wg    *sync.WaitGroup // the server's: counts every worker
	sem   chan struct{}   // held while a request is served
	jobs  chan *job       // unbuffered: a send succeeds only to an idle worker
	serve func(*job)
	idle  atomic.Int32 // workers committed to receive from jobs, not yet handed one
	// started counts the goroutines started (tests read it).
	started atomic.Int64
}

// job is one request for a worker, with the room it holds of the
// connection's budget (replyReserve).
type job struct {
	req     wire.Request
	reserve int
}

// connWorkers returns the workers of the client connection rc, which may
// have cap(sem) requests served at once.
func (s *Server) connWorkers(rc *replyConn, sem chan struct{}) *workers {
	return &workers{wg: &s.wg, sem: sem, jobs: make(chan *job), serve: func(j *job) {
		if j.req.Op == wire.OpSnapshot { // many replies (snapshot.go)
			defer rc.budget.release(j.reserve)
			s.serveSnapshot(rc.conn, &j.req, rc.slow)
			return
		}
		s.respond(rc, &j.req, j.reserve)
	}}
}

// hand gives j to an idle worker, or to a new one; the caller holds a slot
// of sem for it, which the worker releases once j is served. Only the
// connection's reading goroutine hands jobs.
func (w *workers) hand(j *job) {
	for n := w.idle.Load(); n > 0; n = w.idle.Load() {
		if w.idle.CompareAndSwap(n, n-1) {
			// An idle worker is claimed: it receives next, if it is not
			// receiving already.
			w.jobs <- j
			return
		}
	}
	w.wg.Add(1)
	w.started.Add(1)
	go w.run(j)
}

// run serves j, then the jobs handed to it while it waits, until jobs is
// closed (the connection ended), or until it finds enough other workers
// idle.
func (w *workers) run(j *job) {
	defer w.wg.Done()
	for {
		w.serve(j)
		<-w.sem
		if !w.goIdle() {
			return
		}
		var ok bool
		if j, ok = <-w.jobs; !ok {
			return
		}
	}
}

// goIdle counts the caller among the idle workers, which commits it to
// receive one job (or the end), unless maxIdleWorkers are idle already.
func (w *workers) goIdle() bool {
	for {
		n := w.idle.Load()
		if n >= maxIdleWorkers {
			return false
		}
		if w.idle.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// replyReserve is what a request may hold of its connection's budget
// while it is served: its own bytes and the largest reply it may get.
func replyReserve(req *wire.Request) int {
	reserve := len(req.Key) + len(req.Value) + wire.ResponseHeaderLen + smallReply
	switch req.Op {
	case wire.OpGet:
		reserve += limits.MaxValue
	case wire.OpTxn:
		reserve += txn.MaxResponseBytes
	case wire.OpScan:
		reserve += scanReplyMax
	case wire.OpGetMany:
		reserve += getManyReplyMax
	case wire.OpSnapshot:
		reserve += snapshotChunkReserve
	case wire.OpLeaseList:
		reserve += 1 + 8*wire.MaxLeaseListIDs // a LeaseList page
	case wire.OpPutBatch:
		reserve += wire.MaxBatchResultsLen
	}
	return min(reserve, maxConnBytes)
}

// ownKeyValue copies req's key and value, which alias a receive buffer,
// into one allocation of req's own.
func ownKeyValue(req *wire.Request) {
	kv := make([]byte, len(req.Key)+len(req.Value))
	k := copy(kv, req.Key)
	copy(kv[k:], req.Value)
	req.Key, req.Value = kv[:k:k], kv[k:]
}

// replyConn is what respond needs of a client connection. The connection
// is a named field, never embedded: an embedded transport.Conn would hide
// the optional interfaces of the real one (transport.Identified), and
// permission would see a plaintext connection.
type replyConn struct {
	conn   transport.Conn
	budget *connBudget
	slow   *sync.Once // the connection is closed as a slow reader once
	// work bounds the serving of one request (requestTimeout), wait how
	// long its reply waits for room (replyTimeout); both end with the
	// connection.
	work, wait *coarseTimeout
}

// respond serves req and sends the reply. It holds reserved bytes of the
// connection's budget, more if the reply is larger, and gives them back
// when the reply is written or dropped. A reply the client makes no room
// for within replyTimeout closes the connection.
func (s *Server) respond(c *replyConn, req *wire.Request, reserved int) {
	defer func() { c.budget.release(reserved) }()
	start := time.Now()
	ctx := c.work.get(start)
	if s.awaitThaw(ctx) != nil { // a frozen server (Freeze) answers nothing
		return
	}
	resp, denied := permission(c.conn, req.Op)
	if !denied {
		resp = s.handle(ctx, req)
	}
	resp.Op, resp.ID = req.Op, req.ID
	done := time.Now()
	s.metrics.observe(req.Op, resp.Status, done.Sub(start))
	size := wire.ResponseHeaderLen + len(resp.Value)
	if size > reserved {
		c.budget.overdraw(size - reserved)
		reserved = size
	}
	frame := wire.AppendResponse(make([]byte, 0, size), &resp)
	if limit := c.conn.MaxMessage(); len(frame) > limit {
		// The client would wait out its own timeout for a reply its
		// transport cannot take: tell it why instead, or, if even
		// that does not fit, close the connection.
		big := len(frame)
		resp = badRequest(fmt.Sprintf("reply of %d bytes exceeds this connection's max message of %d", big, limit))
		resp.Op, resp.ID = req.Op, req.ID
		if frame = wire.AppendResponse(frame[:0], &resp); len(frame) > limit {
			s.connRefused(transport.ReasonTooLarge, c.conn.RemoteAddr(),
				fmt.Errorf("a reply of %d bytes exceeds the connection's max message of %d", big, limit))
			c.conn.Close()
			return
		}
	}
	if s.awaitThaw(ctx) != nil {
		return
	}
	err := c.conn.Send(c.wait.get(done), frame)
	switch {
	case err == nil || s.ctx.Err() != nil:
	case errors.Is(err, context.DeadlineExceeded):
		s.closeSlowReader(c.conn, c.slow, "a reply")
	default:
		s.log.Debug("response not delivered", "remote", c.conn.RemoteAddr(), "err", err)
	}
}

func (s *Server) handle(ctx context.Context, req *wire.Request) wire.Response {
	if r := s.refusal.Load(); r != nil { // removed (removeFence)
		return s.errResponse(*r)
	}
	switch req.Op {
	case wire.OpHello:
		return s.hello(req.Flags)
	case wire.OpStatus:
		return jsonResponse(s.Status())
	case wire.OpMemberList:
		return jsonResponse(s.members())
	case wire.OpClock:
		return wire.Response{Version: uint64(monoclock.Now())}
	case wire.OpTxn:
		return s.txn(ctx, req)
	case wire.OpScan:
		return s.scan(ctx, req)
	case wire.OpGetMany:
		return s.getMany(ctx, req)
	case wire.OpLeaseGrant, wire.OpLeaseRevoke, wire.OpLeaseKeepAlive, wire.OpLeaseTimeToLive, wire.OpLeaseList:
		return s.lease(ctx, req) // lease.go
	case wire.OpMoveLeader:
		return s.moveLeader(ctx, req) // leader.go
	case wire.OpCompact:
		return s.compact(ctx, req)
	case wire.OpDeleteRange:
		return s.deleteRange(ctx, req) // deleterange.go
	case wire.OpHashKV:
		return s.hashKV(ctx, req) // hashkv.go
	case wire.OpPutBatch:
		return s.putBatch(ctx, req) // batch.go
	}
	if r, bad := checkKey(req); bad {
		return r
	}
	switch req.Op {
	case wire.OpPut:
		if req.Flags&(wire.PutIgnoreValue|wire.PutIgnoreLease) != 0 {
			return s.putIgnore(ctx, req) // txn.go
		}
		return s.putPrev(ctx, req.Key, req.Value, req.Flags&wire.PutPrevKV != 0)
	case wire.OpDelete:
		existed, _, err := s.kv.Delete(ctx, req.Key)
		if err == nil && !existed {
			return wire.Response{Status: wire.StatusNotFound}
		}
		return s.errResponse(err)
	case wire.OpGet:
		return s.get(ctx, req.Key, req.Flags)
	case wire.OpMemberAdd, wire.OpMemberAddVoter, wire.OpMemberUpdate, wire.OpMemberRemove, wire.OpMemberPromote:
		return s.memberChange(ctx, req)
	}
	return badRequest("unsupported op " + req.Op.String())
}

func checkKey(req *wire.Request) (wire.Response, bool) {
	switch {
	case isMemberChange(req.Op):
		return wire.Response{}, false
	case len(req.Key) == 0:
		return wire.Response{Status: wire.StatusEmptyKey}, true
	case len(req.Key) > limits.MaxKey:
		return wire.Response{Status: wire.StatusKeyTooLarge}, true
	case len(req.Value) > limits.MaxValue:
		return wire.Response{Status: wire.StatusValueTooLarge}, true
	case req.Op != wire.OpPut && len(req.Value) != 0:
		return badRequest(req.Op.String() + " carries a value"), true
	case req.Op == wire.OpPut && !wire.KnownPutFlags(req.Flags) || req.Op == wire.OpDelete && req.Flags != 0:
		// A flag a later client sets (a condition, say) must not be
		// ignored and the write applied as if unset.
		return badRequest(fmt.Sprintf("%s carries unknown flags %#x", req.Op, req.Flags)), true
	}
	return wire.Response{}, false
}

// put admits a PUT on the leader: the mirror reserves the room its apply
// will take (mirror.Reserve) until the proposal ends, applied or not. Only
// the leader admits writes; a follower's region (fuller or more
// fragmented, perhaps) must not refuse what the leader has room for, so a
// follower lets the node answer "not leader".
func (s *Server) put(ctx context.Context, key, value []byte) wire.Response {
	return s.putPrev(ctx, key, value, false)
}

// putPrev is put that, with prevKV, answers with the key's previous value
// and metadata (wire.PutPrevKV).
func (s *Server) putPrev(ctx context.Context, key, value []byte, prevKV bool) wire.Response {
	var adm raft.Admission
	if st := s.node.Status(); st.IsLeader {
		if !st.LeaderReady {
			return s.errResponse(errLeaderNotReady)
		}
		if err := s.mirror.Reserve(key, len(value)); err != nil {
			return s.errResponse(err)
		}
		defer s.mirror.Unreserve(key, len(value))
		ctx, adm = s.admitted(st.Term)
	} else {
		// Not admitted: should the node lead by the time the write reaches
		// its raft loop, the write is dropped (the client retries) rather
		// than proposed with no room reserved.
		adm = raft.Admission{Term: raft.NotAdmitted}
	}
	if prevKV {
		rev, prev, err := s.kv.PutPrev(ctx, key, value, adm)
		if err != nil {
			return s.errResponse(err)
		}
		var kvs []kv.KV
		if prev != nil {
			kvs = append(kvs, *prev)
		}
		return wire.Response{Version: rev, Value: prevKVs(uint64(len(kvs)), kvs)}
	}
	rev, err := s.kv.Put(ctx, key, value, adm)
	if err != nil {
		return s.errResponse(err)
	}
	return wire.Response{Version: rev}
}

func (s *Server) get(ctx context.Context, key []byte, flags uint16) wire.Response {
	switch flags &^ wire.GetMeta {
	case wire.Linearizable, wire.ReadIndex:
		if err := s.node.ReadIndex(ctx); err != nil {
			return s.errResponse(err)
		}
	case wire.Serializable:
	default:
		return badRequest("unknown consistency level " + strconv.Itoa(int(flags)))
	}
	// The revision the region showed before the read: the key had no
	// write between its mod revision and then, so the value is the
	// key's at max(rev, Mod) (as a one-sided GET's, docs/layout.md).
	rev := s.mirror.Header().Revision
	value, meta, ok, err := s.mirror.Get(ctx, key) // the region's state (mirror.Get)
	switch {
	case err != nil:
		return s.errResponse(err)
	case !ok:
		return wire.Response{Status: wire.StatusNotFound}
	case flags&wire.GetMeta != 0:
		return wire.Response{Version: max(rev, meta.Mod), Value: append(meta.Append(make([]byte, 0, revision.Size+len(value))), value...)}
	}
	return wire.Response{Version: meta.Mod, Value: value}
}

// hello answers OpHello. The cluster id goes only to a client that asks
// (wire.HelloClusterID): an older client refuses a Hello longer than it
// knows.
func (s *Server) hello(flags uint16) wire.Response {
	d := s.region.Descriptor()
	st := s.node.Status()
	h := wire.Hello{NodeID: s.cfg.ID, LeaderID: st.LeaderID, RegionAddr: d.Addr, RegionLen: d.Len, RegionKey: d.Key}
	if flags&wire.HelloClusterID != 0 {
		h.ClusterID = s.node.ClusterID()
	}
	if flags&wire.HelloFeatures != 0 {
		h.Features = wire.FeaturePutBatch
	}
	switch {
	case st.LeaderID == s.cfg.ID:
		h.LeaderAddr = cmp.Or(s.clientAddr(), s.ln.Addr()) // the configured address may say port 0
	case st.LeaderID != 0:
		h.LeaderAddr = s.node.ClientAddr(st.LeaderID)
	}
	return wire.Response{Value: wire.AppendHello(nil, &h)}
}

// isMemberChange reports whether op changes the membership.
func isMemberChange(op wire.Op) bool {
	switch op {
	case wire.OpMemberAdd, wire.OpMemberAddVoter, wire.OpMemberUpdate, wire.OpMemberRemove, wire.OpMemberPromote:
		return true
	}
	return false
}

func (s *Server) memberChange(ctx context.Context, req *wire.Request) wire.Response {
	id, err := strconv.ParseUint(string(req.Key), 10, 64)
	if err != nil || id == 0 {
		// Quoted whole, a 64 KiB id of 0xff bytes is a 256 KiB reply.
		return badRequest("member id must be a positive integer, got " + quoteAtMost(req.Key, maxQuoted))
	}
	switch req.Op {
	case wire.OpMemberAdd, wire.OpMemberAddVoter, wire.OpMemberUpdate:
		if err := transport.CheckAddr(string(req.Value)); err != nil {
			return badRequest(req.Op.String() + ": " + err.Error())
		}
		switch req.Op {
		case wire.OpMemberAddVoter:
			return s.errResponse(s.node.AddVoter(ctx, id, string(req.Value)))
		case wire.OpMemberUpdate:
			return s.errResponse(s.node.UpdateMember(ctx, id, string(req.Value)))
		}
		return s.errResponse(s.node.AddMember(ctx, id, string(req.Value)))
	case wire.OpMemberPromote:
		return s.errResponse(s.node.PromoteMember(ctx, id))
	}
	return s.errResponse(s.node.RemoveMember(ctx, id))
}

// maxQuoted is the most bytes of a client's input an error quotes back.
const maxQuoted = 64

// quoteAtMost quotes b's first n bytes, marking a cut.
func quoteAtMost(b []byte, n int) string {
	if len(b) <= n {
		return strconv.Quote(string(b))
	}
	return strconv.Quote(string(b[:n])) + fmt.Sprintf("... (%d bytes)", len(b))
}

// errResponse maps an error onto a wire status; nil is OK. The table is
// internal/errs', which the client decodes with. A read refused for want
// of a leader is answered "not leader, leader unknown", which a client of
// any version retries as it does a refusal, and from which the client says
// "no leader" when it gives up.
func (s *Server) errResponse(err error) wire.Response {
	if errors.Is(err, raft.ErrNoLeader) {
		return errs.Encode(&raft.NotLeaderError{})
	}
	return errs.Encode(err)
}

func badRequest(msg string) wire.Response {
	return wire.Response{Status: wire.StatusBadRequest, Value: []byte(msg)}
}

func jsonResponse(v any) wire.Response {
	b, err := json.Marshal(v)
	if err != nil {
		return wire.Response{Status: wire.StatusInternal, Value: []byte(err.Error())}
	}
	return wire.Response{Value: b}
}

// Status is the node's view of the cluster, as served to kvctl status.
func (s *Server) Status() wire.NodeStatus {
	st := s.node.Status()
	ts := s.mirror.Stats()
	return wire.NodeStatus{
		ID: st.ID, ClusterID: wire.ClusterID(s.node.ClusterID()), LeaderID: st.LeaderID, Term: st.Term,
		Commit: st.Commit, Applied: st.Applied, IsLeader: st.IsLeader, IsLearner: s.isLearner(),
		LeaseValid: st.LeaseValid, Keys: ts.Keys, DBSize: s.dbSize(), TableFill: ts.Fill(),
		Transport: s.cfg.Transport.Name(), StorageError: s.storageFailure(),
	}
}

func (s *Server) isLearner() bool {
	for _, m := range s.node.Members() {
		if m.ID == s.cfg.ID {
			return m.IsLearner
		}
	}
	return false
}

// dbSize is the node's database size on disk; 0 once the store is closed.
func (s *Server) dbSize() uint64 {
	st, release, err := s.node.Acquire()
	if err != nil {
		return 0
	}
	defer release()
	return st.DiskSize()
}

func (s *Server) members() []wire.Member {
	ms := s.node.Members()
	out := make([]wire.Member, len(ms))
	for i, m := range ms {
		out[i] = wire.Member{ID: m.ID, Addr: m.Addr, IsLearner: m.IsLearner}
		out[i].ClientAddr, _ = s.node.KnownClientAddr(m.ID)
	}
	return out
}

// permission refuses what the connection's credential (its transport
// Identity, from TLS) does not allow: client requests on a connection that
// was opened as a cluster peer, and anything but reads from a read-only
// client certificate. Plaintext connections are allowed everything.
func permission(conn transport.Conn, op wire.Op) (wire.Response, bool) {
	id := transport.IdentityOf(conn)
	switch {
	case !id.ClientAllowed():
		return wire.Response{Status: wire.StatusPermissionDenied,
			Value: []byte("connection opened as a cluster peer, not a client")}, true
	case id.ReadOnly && !readOnlyOp(op):
		return wire.Response{Status: wire.StatusPermissionDenied,
			Value: []byte("credential " + strconv.Quote(id.Name()) + " is read-only: " + op.String() + " refused")}, true
	}
	return wire.Response{}, false
}

// readOnlyOp reports whether op changes nothing. Ops not listed (those
// added later included) are writes as far as read-only credentials go.
func readOnlyOp(op wire.Op) bool {
	switch op {
	case wire.OpHello, wire.OpGet, wire.OpStatus, wire.OpMemberList, wire.OpClock, wire.OpScan, wire.OpGetMany, wire.OpLeaseTimeToLive, wire.OpLeaseList,
		wire.OpWatch, wire.OpWatchCancel,
		wire.OpSnapshot, // a backup reads nothing a scan cannot (snapshot.go)
		wire.OpHashKV:
		return true
	}
	return false
}
