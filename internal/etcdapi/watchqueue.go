package etcdapi

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// maxQueuedControl bounds the answers to a stream's own requests
// (created, canceled, progress) waiting to be sent: past it the stream
// reads no more requests until its client reads answers, as etcd's
// control channel does.
const maxQueuedControl = 16

// queued is one response waiting to be sent on a watch stream.
type queued struct {
	resp     *pb.WatchResponse
	size     int  // its events' bytes, counted against the bound
	fragment bool // its watch takes fragments
	control  bool // an answer to a request (maxQueuedControl)
}

// sendQueue is a watch stream's responses in the order they are to be
// sent: one FIFO, so a watch's created response precedes its events and
// its events precede its canceled response. Events are bounded by bytes
// (Config.WatchQueueBytes): a response that would go past the bound is
// refused, and its watch is cancelled (watchStream.overflow); answers to
// requests wait for room instead; the final response of a watch that
// ends (compacted, failed, overflowed) is always taken, one per watch.
type sendQueue struct {
	maxBytes int

	mu      sync.Mutex
	items   []queued
	bytes   int
	control int
	wake    chan struct{} // a token when an item is queued
	room    chan struct{} // a token when a control item is sent
}

func newSendQueue(maxBytes int) *sendQueue {
	return &sendQueue{maxBytes: maxBytes, wake: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// pushControl queues an answer to a request, waiting while
// maxQueuedControl of them wait to be sent; false if ctx ends first.
func (q *sendQueue) pushControl(ctx context.Context, r *pb.WatchResponse) bool {
	for {
		q.mu.Lock()
		if q.control < maxQueuedControl {
			q.items = append(q.items, queued{resp: r, control: true})
			q.control++
			q.mu.Unlock()
			signal(q.wake)
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-ctx.Done():
			return false
		}
	}
}

// pushEvents queues a response of size bytes unless the queue holds
// something already and would go past its bound with it.
func (q *sendQueue) pushEvents(r *pb.WatchResponse, size int, fragment bool) bool {
	q.mu.Lock()
	if q.bytes > 0 && q.bytes+size > q.maxBytes {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, queued{resp: r, size: size, fragment: fragment})
	q.bytes += size
	q.mu.Unlock()
	signal(q.wake)
	return true
}

// pushFinal queues a watch's last response, whatever the bound.
func (q *sendQueue) pushFinal(r *pb.WatchResponse) {
	q.mu.Lock()
	q.items = append(q.items, queued{resp: r})
	q.mu.Unlock()
	signal(q.wake)
}

// pop waits for the next response; false once ctx ends.
func (q *sendQueue) pop(ctx context.Context) (queued, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			it := q.items[0]
			q.items[0] = queued{}
			q.items = q.items[1:]
			q.bytes -= it.size
			if it.control {
				q.control--
			}
			q.mu.Unlock()
			if it.control {
				signal(q.room)
			}
			return it, true
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-ctx.Done():
			return queued{}, false
		}
	}
}

// queuedBytes is the events' bytes waiting to be sent.
func (q *sendQueue) queuedBytes() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bytes
}
