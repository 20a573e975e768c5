package tcp

import (
	"context"
	"errors"
	"sync"
)

// errWindowClosed: the connection closed while a sender waited for room.
var errWindowClosed = errors.New("tcp: connection closed while waiting for the byte window")

// Message credits bound how many messages a receiver queues, not their
// bytes: at the defaults, 64 credits of 4 MiB messages let a client that
// stops reading its replies make a server hold 256 MiB per connection.
// So the bytes in flight each way are bounded too, by a window both ends
// derive from what the handshake settled, with no field of its own on the
// wire: windowBytes of the connection's MaxMessage.
//
// A message's bytes count from when its sender reserves them until the
// credit for it comes back; credits come back in message order, so each
// end keeps the sizes of its messages in flight in order and releases them
// as credits are returned. The receiver keeps the same account, dropping a
// message's bytes when it returns the credit (before the sender learns of
// it), so its count never exceeds the sender's, and a message that would
// take it past the window is a protocol violation only a sender that
// ignores the window commits. One message always fits an empty window,
// however large.

// DefaultQueueBytes is the byte window of a connection whose MaxMessage is
// smaller: the most bytes of messages one end may have sent that the other
// has not returned the credits of.
const DefaultQueueBytes = 16 << 20

// windowBytes is the byte window of a connection of maxMessage.
func windowBytes(maxMessage int) int { return max(maxMessage, DefaultQueueBytes) }

// byteWindow is one direction's account of the bytes in flight.
type byteWindow struct {
	limit int

	mu      sync.Mutex
	sizes   []uint32 // ring of the in-flight messages' sizes, oldest first
	head    int
	n       int
	bytes   int           // the ring's sum, plus a sender's reservations
	wake    chan struct{} // a sender's: closed when bytes drop, if anyone waits
	waiting int           // senders waiting on wake
	credit  int           // a receiver's: bytes consumed, credits not yet returned
}

func (w *byteWindow) init(limit, messages int) {
	w.limit = limit
	w.sizes = make([]uint32, messages)
	w.wake = make(chan struct{})
}

// fits reports whether n more bytes fit: under the limit, or alone.
func (w *byteWindow) fits(n int) bool { return w.bytes == 0 || w.bytes+n <= w.limit }

// reserve waits until n bytes fit the sender's window and counts them;
// beforeWait, if set, runs once before it first waits.
func (w *byteWindow) reserve(ctx context.Context, n int, closed <-chan struct{}, beforeWait func()) error {
	for {
		w.mu.Lock()
		if w.fits(n) {
			w.bytes += n
			w.mu.Unlock()
			return nil
		}
		wake := w.wake
		w.waiting++
		w.mu.Unlock()
		if beforeWait != nil {
			beforeWait()
			beforeWait = nil
		}
		var err error
		select {
		case <-wake:
		case <-ctx.Done():
			err = ctx.Err()
		case <-closed:
			err = errWindowClosed
		}
		w.mu.Lock()
		w.waiting--
		w.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// unreserve gives back a reservation whose message was not written.
func (w *byteWindow) unreserve(n int) {
	w.mu.Lock()
	w.bytes -= n
	w.wakeLocked()
	w.mu.Unlock()
}

// sent records a reserved message as written (under the write lock, so in
// wire order).
func (w *byteWindow) sent(n int) {
	w.mu.Lock()
	w.pushLocked(n)
	w.mu.Unlock()
}

// received counts an arriving message of n bytes against the receiver's
// window; it fails if the sender broke the window.
func (w *byteWindow) received(n int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.fits(n) {
		return protoErr("peer sent a message of %d bytes with %d in flight, beyond the window of %d", n, w.bytes, w.limit)
	}
	w.bytes += n
	w.pushLocked(n)
	return nil
}

func (w *byteWindow) pushLocked(n int) {
	w.sizes[(w.head+w.n)%len(w.sizes)] = uint32(n)
	w.n++
}

// release drops the k oldest messages, whose credits came back (sender)
// or are going back (receiver).
func (w *byteWindow) release(k uint32) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if int(k) > w.n {
		return protoErr("peer returned credits for %d messages with %d in flight", k, w.n)
	}
	for range k {
		size := int(w.sizes[w.head])
		w.head = (w.head + 1) % len(w.sizes)
		w.n--
		w.bytes -= size
	}
	w.wakeLocked()
	return nil
}

// wakeLocked wakes the waiting senders; with none (nearly always) it
// allocates nothing.
func (w *byteWindow) wakeLocked() {
	if w.waiting > 0 {
		close(w.wake)
		w.wake = make(chan struct{})
	}
}

// consumed counts a consumed message's bytes towards returning credits
// early, and reports whether enough are waiting that the credits should go
// back now: a quarter of the window, so that a sender of large messages
// is not held up by the count-based batching of credits.
func (w *byteWindow) consumed(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.credit += n
	return w.credit >= w.limit/4
}

// returning releases the k messages whose credits this end is returning.
func (w *byteWindow) returning(k uint32) {
	w.mu.Lock()
	w.credit = 0
	w.mu.Unlock()
	_ = w.release(k) // k counts consumed messages, all of them received
}
