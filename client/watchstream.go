package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/kvd-project/kvd/internal/wire"
)

// watchQueueBytes bounds the messages of one watch that the client holds
// before the watch's goroutine takes them: the connection's read loop,
// shared with every other call, never waits for a watch, so a watch
// whose caller does not drain its channel overflows this queue instead.
// Its server watch is then cancelled, and resumed from the last event
// delivered once the caller catches up (or it fails as compacted, if the
// history moved on meanwhile).
const watchQueueBytes = 4 << 20

// watchStream is one server watch as the read loop sees it: the messages
// that arrived for its request id, in order.
type watchStream struct {
	mu       sync.Mutex
	q        []wire.Response
	bytes    int
	overflow bool
	ready    chan struct{} // a token when messages arrive
}

// push queues a message; once the queue is over its bound it keeps
// nothing more and marks the overflow.
func (st *watchStream) push(resp wire.Response) {
	st.mu.Lock()
	switch {
	case st.overflow:
	case st.bytes > 0 && st.bytes+len(resp.Value) > watchQueueBytes:
		st.overflow = true
	default:
		st.q = append(st.q, resp)
		st.bytes += len(resp.Value)
	}
	st.mu.Unlock()
	select {
	case st.ready <- struct{}{}:
	default:
	}
}

// take returns the queued messages, and whether the queue overflowed
// after them.
func (st *watchStream) take() ([]wire.Response, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	q := st.q
	st.q, st.bytes = nil, 0
	return q, st.overflow
}

// deliverStream hands resp to its watch, if it belongs to one; a message
// that ends the watch unregisters it.
func (n *node) deliverStream(resp *wire.Response) bool {
	n.mu.Lock()
	st := n.streams[resp.ID]
	if st != nil && resp.Status != wire.StatusOK {
		delete(n.streams, resp.ID)
	}
	n.mu.Unlock()
	if st == nil {
		return false
	}
	r := *resp
	r.Value = append([]byte(nil), resp.Value...)
	st.push(r)
	return true
}

// openStream sends a watch request, registered to receive every message
// of its id.
func (n *node) openStream(ctx context.Context, req *wire.Request) (uint64, *watchStream, error) {
	req.ID = n.nextID.Add(1)
	st := &watchStream{ready: make(chan struct{}, 1)}
	n.mu.Lock()
	if n.err != nil {
		err := n.err
		n.mu.Unlock()
		return 0, nil, fmt.Errorf("%w: %w", errNotSent, n.wrapErr(err))
	}
	n.streams[req.ID] = st
	n.mu.Unlock()
	frame := wire.AppendRequest(make([]byte, 0, wire.RequestHeaderLen+len(req.Key)+len(req.Value)), req)
	if err := n.conn.Send(ctx, frame); err != nil {
		n.closeStream(req.ID)
		return 0, nil, n.wrapErr(err)
	}
	return req.ID, st, nil
}

// closeStream unregisters a watch: its later messages are dropped.
func (n *node) closeStream(id uint64) {
	n.mu.Lock()
	delete(n.streams, id)
	n.mu.Unlock()
}
