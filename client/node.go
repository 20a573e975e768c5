package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/transport"
)

// node is one connection to one kvd server: RPCs multiplexed by request id,
// and the server's table region for one-sided READs.
//
// A node is usable until broken is closed; then every pending and later call
// fails and the client dials a fresh node.
type node struct {
	addr string
	// oldWatch: which of the watch flags newer than the first watches its
	// server refused (watchprogress.go).
	oldWatch oldWatchServer
	conn     transport.Conn
	hello    wire.Hello
	geo      atomic.Pointer[geometry] // the region's layout: read after hello, re-read after a rebuild

	nextID  atomic.Uint64
	mu      sync.Mutex
	pending map[uint64]chan rpcResult
	streams map[uint64]*watchStream // open watches, by request id (watchstream.go)
	err     error                   // why the node broke; set once under mu
	broken  chan struct{}

	cache    locationCache
	attempts attempts  // one-sided attempts, for the stall watchdog (stall.go)
	clock    nodeClock // bounds the server's clock, to judge its lease
	counters *counters // the client's, for READs made outside a GET (nil in some tests)
}

type rpcResult struct {
	resp wire.Response // Value is owned by the receiver
	err  error
}

// nodeOptions are the client settings a node uses.
type nodeOptions struct {
	cacheEntries int
	drift        float64
	clockSyncs   *atomic.Uint64 // counts clock RPCs
	counters     *counters      // the client's counters
	now          func() mono    // the client's clock
}

func dialNode(ctx context.Context, tr transport.Transport, addr string, o nodeOptions) (*node, error) {
	conn, err := tr.Dial(ctx, addr)
	if errors.Is(err, transport.ErrAuthRefused) {
		return nil, fmt.Errorf("%w (%w): dial %s: %w", ErrUnauthenticated, errNotSent, addr, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %w", ErrUnavailable, addr, err)
	}
	n := &node{
		addr:    addr,
		conn:    conn,
		pending: make(map[uint64]chan rpcResult),
		streams: make(map[uint64]*watchStream),
		broken:  make(chan struct{}),
		cache:   newLocationCache(o.cacheEntries),
		clock:   nodeClock{now: o.now, drift: o.drift, syncs: o.clockSyncs},

		counters: o.counters,
	}
	go n.readLoop()
	resp, err := n.call(ctx, &wire.Request{Op: wire.OpHello, Flags: wire.HelloClusterID | wire.HelloFeatures})
	if err == nil {
		// A hello refused as a bad request (a node's peer address answers
		// so) is final; other statuses (a node failing, removed) leave
		// the endpoint to the usual retries.
		if err = statusError(&resp); errors.Is(err, ErrBadRequest) {
			err = fmt.Errorf("%w: %w", errHelloRefused, err)
		}
	}
	if err == nil {
		err = wire.DecodeHello(resp.Value, &n.hello)
	}
	if err == nil {
		err = n.loadGeometry(ctx)
	}
	if err != nil {
		n.close(err)
		return nil, fmt.Errorf("%w: hello to %s: %w", ErrUnavailable, addr, err)
	}
	// A first clock sample, so the first linearizable GET need not wait for
	// one; if it fails, that GET samples again.
	_ = n.syncClock(ctx)
	return n, nil
}

func (n *node) readLoop() {
	var buf []byte
	for {
		var err error
		buf, err = n.conn.Recv(context.Background(), buf)
		if err != nil {
			n.close(err)
			return
		}
		var resp wire.Response
		if err := wire.DecodeResponse(buf, &resp); err != nil {
			n.close(fmt.Errorf("bad response from %s: %w", n.addr, err))
			return
		}
		if n.deliverStream(&resp) {
			continue
		}
		n.mu.Lock()
		ch := n.pending[resp.ID]
		delete(n.pending, resp.ID)
		n.mu.Unlock()
		if ch == nil {
			continue // its caller gave up
		}
		resp.Value = append([]byte(nil), resp.Value...)
		ch <- rpcResult{resp: resp}
	}
}

// call sends req (its ID is assigned here) and waits for the response.
func (n *node) call(ctx context.Context, req *wire.Request) (wire.Response, error) {
	req.ID = n.nextID.Add(1)
	ch := make(chan rpcResult, 1)
	n.mu.Lock()
	if n.err != nil {
		err := n.err
		n.mu.Unlock()
		return wire.Response{}, fmt.Errorf("%w: %w", errNotSent, n.wrapErr(err))
	}
	n.pending[req.ID] = ch
	n.mu.Unlock()

	frame := wire.AppendRequest(make([]byte, 0, wire.RequestHeaderLen+len(req.Key)+len(req.Value)), req)
	if err := n.conn.Send(ctx, frame); err != nil {
		n.forget(req.ID)
		if errors.Is(err, transport.ErrMessageTooLarge) {
			return wire.Response{}, fmt.Errorf("%w: %w", ErrValueTooLarge, err)
		}
		return wire.Response{}, n.wrapErr(err)
	}
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-n.broken:
		n.forget(req.ID)
		return wire.Response{}, n.wrapErr(n.brokenErr())
	case <-ctx.Done():
		n.forget(req.ID)
		return wire.Response{}, ctx.Err()
	}
}

func (n *node) forget(id uint64) {
	n.mu.Lock()
	delete(n.pending, id)
	n.mu.Unlock()
}

func (n *node) wrapErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnavailable) {
		return err // a context's, or already says unavailable (and names the node)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, n.addr, err)
}

func (n *node) brokenErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

// close marks the node broken (once) and closes its connection.
func (n *node) close(cause error) {
	n.mu.Lock()
	if n.err != nil {
		n.mu.Unlock()
		return
	}
	if cause == nil {
		cause = ErrClosed
	}
	n.err = cause
	n.pending = map[uint64]chan rpcResult{}
	close(n.broken)
	n.mu.Unlock()
	n.conn.Close()
}

func (n *node) isBroken() bool {
	select {
	case <-n.broken:
		return true
	default:
		return false
	}
}
