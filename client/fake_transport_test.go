package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
)

// The fake server's answers that a test recognises.
const (
	fakeAddr   = "fake-node:7000"
	rpcMarker  = "rpc-answer" // the value of every OpGet RPC: tells an RPC fallback from a one-sided answer
	rpcVersion = 4242
	// fakeClockBase is where the fake server's monotonic clock starts.
	fakeClockBase = int64(1000 * time.Second)
)

// fakeTransport is a transport.Transport for deterministic tests of the
// client's read protocol. Its connections answer the client's RPCs
// themselves (OpHello with the region's descriptor, OpClock with a server
// clock the test controls, OpGet with rpcMarker) and serve one-sided READs
// from mem, a real table region the test formats and writes with
// internal/table.
//
// READs are served op by op, in order, on the caller's goroutine; before each
// op the hook (if any) runs, with the batch's number (1 for the first Read
// since the hook was installed) and the op's index. A test changes the
// region between two round trips by acting at op 0 of a batch, and inside a
// batch (for example after the header was read but before the buckets) at a
// later op. Because the hook, the table writes it makes and the copies all
// run on the goroutine that called Get, the race detector sees no race.
type fakeTransport struct {
	mem  []byte
	desc transport.Descriptor
	hdr  table.Header // as formatted: where the buckets are (layout 2 or 3)

	clockOrigin time.Time            // the fake server's clock runs at the real rate from here
	clock       func() time.Duration // or, if set, reads this from its base
	clockOffset atomic.Int64         // and jumps by this much

	dials      atomic.Int64
	stallReads atomic.Bool // every Read waits for its context to end
	quiet      bool        // no trace (benchmarks: the trace allocates); set before any Read

	// words, if set, makes READs copy 8 bytes at a time, last word first
	// (a bucket's arena before its slot words), each under this lock,
	// which a concurrent writer holds for each of its writes: a READ may
	// then see a write between any two of its words, in the order that
	// tears an inline record (a NIC promises no order), and the race
	// detector sees no race.
	words *sync.Mutex

	mu      sync.Mutex
	reverse func(batch int) bool // runs that batch's READs last to first (a NIC may run them in any order)
	hook    func(batch, op int)
	batch   int      // Read calls since the hook was installed
	trace   []string // per Read call since then: one letter per op, H header, B bucket, R record
	rpcGets []uint16 // the Flags of every OpGet RPC answered since then
	// scan, if set, answers OpScan (the response's Op and ID are the
	// fake's).
	scan func(req *wire.Request) wire.Response
}

func newFakeTransport(mem []byte) *fakeTransport {
	h, err := table.ParseHeader(mem)
	if err != nil {
		panic(err)
	}
	return &fakeTransport{
		mem:         mem,
		desc:        transport.Descriptor{Addr: 0x7f0000000000, Len: uint64(len(mem)), Key: 0x5eed},
		hdr:         h,
		clockOrigin: time.Now(),
	}
}

// serverClock is the fake server's monotonic clock (what OpClock answers).
func (f *fakeTransport) serverClock() int64 {
	if f.clock != nil {
		return fakeClockBase + int64(f.clock()) + f.clockOffset.Load()
	}
	return fakeClockBase + int64(time.Since(f.clockOrigin)) + f.clockOffset.Load()
}

// simClock is a test's time, which moves only when the test advances it.
// The client's clock (Knobs.Clock) reads it; the fake server's clock reads
// it at serverRate times its pace, so a test sets both how long anything
// took and how fast the server's clock runs against the client's.
type simClock struct {
	t          atomic.Int64 // nanoseconds of the client's clock
	serverRate float64
}

// newSimClock starts at an hour (no reading is zero) with the server's
// clock running at rate times the client's.
func newSimClock(rate float64) *simClock {
	s := &simClock{serverRate: rate}
	s.t.Store(int64(time.Hour))
	return s
}

func (s *simClock) client() time.Duration   { return time.Duration(s.t.Load()) }
func (s *simClock) server() time.Duration   { return time.Duration(float64(s.t.Load()) * s.serverRate) }
func (s *simClock) advance(d time.Duration) { s.t.Add(int64(d)) }

// begin installs hook (nil: none) and starts a fresh trace and batch count.
func (f *fakeTransport) begin(hook func(batch, op int)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook, f.batch, f.trace, f.rpcGets = hook, 0, nil, nil
}

// end removes the hook and returns what happened since begin.
func (f *fakeTransport) end() (trace []string, rpcGets []uint16) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = nil
	return f.trace, f.rpcGets
}

func (f *fakeTransport) Register(int) (transport.Region, error) { return nil, transport.ErrUnsupported }
func (f *fakeTransport) Listen(string) (transport.Listener, error) {
	return nil, transport.ErrUnsupported
}
func (f *fakeTransport) Name() string { return "fake" }
func (f *fakeTransport) Close() error { return nil }

func (f *fakeTransport) Dial(_ context.Context, addr string) (transport.Conn, error) {
	f.dials.Add(1)
	return &fakeConn{f: f, addr: addr, resp: make(chan []byte, 1024), done: make(chan struct{})}, nil
}

// kind names what a READ op reads, for the trace.
func (f *fakeTransport) kind(op transport.ReadOp) byte {
	switch {
	case op.Offset == 0 && len(op.Dst) == table.HeaderSize:
		return 'H'
	case op.Offset >= f.hdr.BucketOffset(0) && op.Offset < f.hdr.RecordBase &&
		(op.Offset-f.hdr.BucketOffset(0))%uint64(f.hdr.BucketBytes) == 0 && len(op.Dst) <= int(f.hdr.BucketBytes):
		return 'B' // a bucket, or (a cached inline GET) its slot words and the start of its arena
	}
	return 'R'
}

type fakeConn struct {
	f         *fakeTransport
	addr      string
	resp      chan []byte
	done      chan struct{}
	closeOnce sync.Once
}

func (c *fakeConn) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Send answers the request at once: the answer waits for Recv.
func (c *fakeConn) Send(ctx context.Context, msg []byte) error {
	if c.closed() {
		return transport.ErrClosed
	}
	var req wire.Request
	if err := wire.DecodeRequest(msg, &req); err != nil {
		return err
	}
	resp := wire.Response{Op: req.Op, ID: req.ID}
	switch req.Op {
	case wire.OpHello:
		h := wire.Hello{NodeID: 1, LeaderID: 1, RegionAddr: c.f.desc.Addr, RegionLen: c.f.desc.Len,
			RegionKey: c.f.desc.Key, LeaderAddr: c.addr}
		resp.Value = wire.AppendHello(nil, &h)
	case wire.OpClock:
		resp.Version = uint64(c.f.serverClock())
	case wire.OpGet:
		c.f.mu.Lock()
		c.f.rpcGets = append(c.f.rpcGets, req.Flags&^wire.GetMeta)
		c.f.mu.Unlock()
		resp.Value, resp.Version = []byte(rpcMarker), rpcVersion
		if req.Flags&wire.GetMeta != 0 { // as a server with revisions answers
			resp.Value = append(revision.Meta{Mod: rpcVersion}.Append(nil), rpcMarker...)
		}
	case wire.OpScan:
		c.f.mu.Lock()
		scan := c.f.scan
		c.f.mu.Unlock()
		if scan == nil {
			resp.Status, resp.Value = wire.StatusBadRequest, []byte("the fake serves no scans")
			break
		}
		resp = scan(&req)
		resp.Op, resp.ID = req.Op, req.ID
	default:
		resp.Status, resp.Value = wire.StatusBadRequest, []byte("the fake serves hello, clock, get and scan")
	}
	select {
	case c.resp <- wire.AppendResponse(nil, &resp):
		return nil
	case <-c.done:
		return transport.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *fakeConn) Recv(ctx context.Context, buf []byte) ([]byte, error) {
	select {
	case m := <-c.resp:
		return append(buf[:0], m...), nil
	case <-c.done:
		return nil, transport.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *fakeConn) Read(ctx context.Context, ops []transport.ReadOp) error {
	if c.closed() {
		return transport.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(ops) > transport.MaxBatch {
		return transport.ErrBatchTooLarge
	}
	f := c.f
	for _, op := range ops {
		switch {
		case op.Remote != f.desc:
			return transport.ErrBadKey
		case op.Offset > uint64(len(f.mem)) || uint64(len(op.Dst)) > uint64(len(f.mem))-op.Offset:
			return transport.ErrOutOfRange
		}
	}
	if f.stallReads.Load() { // a READ that never completes: only ctx ends it
		<-ctx.Done()
		return ctx.Err()
	}
	f.mu.Lock()
	f.batch++
	batch, hook := f.batch, f.hook
	f.mu.Unlock()
	f.mu.Lock()
	backwards := f.reverse != nil && f.reverse(batch)
	f.mu.Unlock()
	var kinds []byte
	if !f.quiet {
		kinds = make([]byte, len(ops))
	}
	for i := range ops {
		j := i // the hook's op counts READs in the order they run
		if backwards {
			j = len(ops) - 1 - i
		}
		if hook != nil {
			hook(batch, i)
		}
		f.copyOp(ops[j])
		if kinds != nil {
			kinds[j] = f.kind(ops[j])
		}
	}
	if kinds == nil {
		return nil
	}
	f.mu.Lock()
	f.trace = append(f.trace, string(kinds))
	f.mu.Unlock()
	return nil
}

// copyOp performs one READ op: in one copy, or a word at a time (words).
func (f *fakeTransport) copyOp(op transport.ReadOp) {
	if f.words == nil {
		copy(op.Dst, f.mem[op.Offset:])
		return
	}
	for i := (len(op.Dst) - 1) &^ 7; i >= 0; i -= 8 {
		f.words.Lock()
		copy(op.Dst[i:min(i+8, len(op.Dst))], f.mem[op.Offset+uint64(i):])
		f.words.Unlock()
	}
}

func (c *fakeConn) MaxMessage() int    { return transport.DefaultMaxMessage }
func (c *fakeConn) RemoteAddr() string { return c.addr }
func (c *fakeConn) Close() error {
	c.closeOnce.Do(func() { close(c.done) })
	return nil
}
