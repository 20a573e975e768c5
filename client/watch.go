package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvd-project/kvd/internal/wire"
)

// EventType is what a watch event did to its key.
type EventType uint8

// Event types.
const (
	EventPut    = EventType(wire.EventPut)
	EventDelete = EventType(wire.EventDelete)
)

func (t EventType) String() string { return wire.EventType(t).String() }

// Event is one committed write of a watched key. ModRevision is the
// write's store revision: the mod revision GetModRevision returns for a
// PUT (a transaction's writes share one). Value is nil for a delete.
type Event struct {
	Type        EventType
	Key         []byte
	Value       []byte
	ModRevision uint64
}

// WatchResponse is a batch of events, in commit order. The last response
// before the channel closes may carry Err instead: why the watch ended.
type WatchResponse struct {
	Events []Event
	Err    error
}

// WatchOption adjusts one Watch.
type WatchOption func(*watchOptions)

type watchOptions struct {
	prefix bool
	from   uint64
}

// WithPrefix watches every key that starts with the key given (an empty
// one: every key).
func WithPrefix() WatchOption { return func(o *watchOptions) { o.prefix = true } }

// WithFromRevision starts the watch at store revision v: every event
// with a revision >= v is delivered (v 0: from now, the default), from
// the stored history if need be, down to the cluster's compaction. To see
// a prefix's keys and then its changes without a gap, read them with
// Prefix (its pages are one snapshot) and watch from the response's
// Revision+1.
func WithFromRevision(v uint64) WatchOption { return func(o *watchOptions) { o.from = v } }

// Watch streams the PUT and DELETE events of key (with WithPrefix, of
// every key under it) in commit order, from now or from a revision
// (WithFromRevision), until ctx ends; then the channel is closed. A
// delete of a key that did not exist is no event.
//
// Any node serves a watch from its own applied state, the leader first.
// When the stream breaks (a node fails, the leader changes, the
// connection drops, the caller falls behind), the client resumes it by
// itself, on the same or another node, from the last event delivered:
// every event is delivered once, in order, with no gap. Every node serves
// the events since the cluster's compaction revision (recent ones from
// memory, older ones from its stored history); a watch from a compacted
// revision ends with an error wrapping ErrCompacted (a *CompactedError
// naming the oldest revision available): read the keys again and watch
// from there. Other
// errors that end a watch: ErrEmptyKey, ErrKeyTooLarge, ErrBadRequest,
// ErrPermissionDenied, ErrUnauthenticated, ErrClosed.
//
// The caller must drain the channel: the client holds at most a few MiB
// of a watch's undelivered events; beyond that it stops the server's
// stream and resumes it once the caller catches up, which fails as
// compacted if the history moved on meanwhile.
func (c *Client) Watch(ctx context.Context, key []byte, opts ...WatchOption) <-chan WatchResponse {
	var o watchOptions
	for _, f := range opts {
		f(&o)
	}
	w := &watcher{c: c, key: append([]byte(nil), key...), prefix: o.prefix, from: o.from,
		out: make(chan WatchResponse)}
	go w.run(ctx)
	return w.out
}

// watcher is one Watch: where its stream is, across the server streams
// that carry it.
type watcher struct {
	c      *Client
	key    []byte
	prefix bool
	from   uint64 // the option; 0: from now
	out    chan WatchResponse

	started  bool   // complete is known (a first stream was created)
	complete uint64 // every event up to this version was delivered
	last     uint64 // the version of the last event delivered
	atLast   int    // how many events of version last were delivered
}

// errWatchOverflow: the caller fell behind; the stream is resumed.
var errWatchOverflow = errors.New("watch queue overflowed")

func (w *watcher) check() error {
	switch {
	case len(w.key) == 0 && !w.prefix:
		return ErrEmptyKey
	case len(w.key) > MaxKey:
		return fmt.Errorf("%w: %d bytes (max %d)", ErrKeyTooLarge, len(w.key), MaxKey)
	}
	return nil
}

func (w *watcher) run(ctx context.Context) {
	defer close(w.out)
	if err := w.check(); err != nil {
		w.fail(ctx, err)
		return
	}
	backoff := minBackoff
	compacted := map[string]error{}
	for ctx.Err() == nil {
		progressed := false
		for _, addr := range w.c.targets() {
			ok, err := w.stream(ctx, addr)
			if ok {
				progressed, backoff = true, minBackoff
				clear(compacted)
			}
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, ErrCompacted):
				compacted[addr] = err
			case errors.Is(err, errWatchOverflow):
				progressed = true
			case watchTerminal(err):
				w.fail(ctx, fromNode(addr, err))
				return
			}
			if err != nil && !errors.Is(err, errWatchOverflow) {
				if l := w.c.leader.Load(); l != nil && *l == addr {
					w.c.setLeader("") // look elsewhere first next time
				}
			}
			if everyEndpoint(w.c.cfg.Endpoints, compacted) {
				w.fail(ctx, compacted[w.c.cfg.Endpoints[0]])
				return
			}
			if errors.Is(err, errWatchOverflow) {
				break // resume on the same node at once
			}
		}
		if progressed {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func everyEndpoint(eps []string, m map[string]error) bool {
	for _, e := range eps {
		if m[e] == nil {
			return false
		}
	}
	return true
}

// watchTerminal: errors that resuming cannot cure.
func watchTerminal(err error) bool {
	for _, t := range []error{ErrEmptyKey, ErrKeyTooLarge, ErrBadRequest, ErrPermissionDenied, ErrUnauthenticated, ErrClosed} {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

func (w *watcher) fail(ctx context.Context, err error) {
	select {
	case w.out <- WatchResponse{Err: err}:
	case <-ctx.Done():
	}
}

// resumeAt is the version the next stream starts from, and how many of
// its first events (of that version) were delivered already: a stream
// may break in the middle of a transaction's events.
func (w *watcher) resumeAt() (from uint64, skip int) {
	switch {
	case !w.started:
		return w.from, 0
	case w.complete >= w.last:
		return w.complete + 1, 0
	}
	return w.last, w.atLast
}

// stream runs one server stream at addr until it ends; ok: it was
// created (the watch made progress).
func (w *watcher) stream(ctx context.Context, addr string) (ok bool, err error) {
	n, err := w.c.nodeFor(ctx, addr)
	if err != nil {
		return false, err
	}
	from, skip := w.resumeAt()
	req := &wire.Request{Op: wire.OpWatch, Key: w.key, Value: wire.AppendWatchRequest(nil, from)}
	if w.prefix {
		req.Flags = wire.WatchPrefix
	}
	sctx, cancel := context.WithTimeout(ctx, w.c.cfg.RequestTimeout)
	id, st, err := n.openStream(sctx, req)
	cancel()
	if err != nil {
		return false, err
	}
	open := true // the server's stream is still open
	defer func() {
		n.closeStream(id)
		if open {
			// Before the channel closes or the stream reopens: until the
			// cancel arrives the server counts this watch against the
			// connection's limit, and a caller that replaces a watch at
			// the limit would be refused for good.
			w.cancelStream(n, id)
		}
	}()
	for {
		select {
		case <-st.ready:
		case <-n.broken:
			open = false
			return ok, n.wrapErr(n.brokenErr())
		case <-ctx.Done():
			return ok, ctx.Err()
		}
		msgs, overflow := st.take()
		for i := range msgs {
			resp := &msgs[i]
			if resp.Status != wire.StatusOK {
				open = false
				return ok, watchStatusError(resp, from)
			}
			if err := w.message(ctx, resp, from, &skip, &ok); err != nil {
				return ok, err
			}
		}
		if overflow {
			return ok, errWatchOverflow
		}
	}
}

// message delivers one message of a stream started at from. The first
// message says the stream was created; the others carry events.
func (w *watcher) message(ctx context.Context, resp *wire.Response, from uint64, skip *int, created *bool) error {
	var m wire.WatchMessage
	if err := wire.DecodeWatchMessage(resp.Value, &m); err != nil {
		return fmt.Errorf("%w: %w", errMalformedReply, err)
	}
	if !*created {
		if m.Flags&wire.WatchCreated == 0 || len(m.Events) > 0 {
			return fmt.Errorf("%w: watch stream without its created message", errMalformedReply)
		}
		*created = true
		if !w.started {
			w.started, w.complete = true, resp.Version
		}
		return nil
	}
	evs := make([]Event, 0, len(m.Events))
	for _, e := range m.Events {
		if err := w.checkEvent(&e, from); err != nil {
			return err
		}
		if e.Version == from && *skip > 0 {
			*skip-- // delivered by an earlier stream
			continue
		}
		if e.Version == w.last {
			w.atLast++
		} else {
			w.last, w.atLast = e.Version, 1
		}
		evs = append(evs, Event{Type: EventType(e.Type), Key: e.Key, Value: e.Value, ModRevision: e.Version})
	}
	if len(evs) > 0 {
		select {
		case w.out <- WatchResponse{Events: evs}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w.complete = max(w.complete, resp.Version)
	return nil
}

// checkEvent refuses an event the watch did not ask for or out of order.
func (w *watcher) checkEvent(e *wire.WatchEvent, from uint64) error {
	match := bytes.Equal(e.Key, w.key) || (w.prefix && bytes.HasPrefix(e.Key, w.key))
	if !match || e.Version < from || e.Version < w.last || e.Version <= w.complete {
		return fmt.Errorf("%w: watch event %q at version %d out of order or not watched", errMalformedReply, e.Key, e.Version)
	}
	return nil
}

// cancelStream tells the server to end a stream the client gave up on.
func (w *watcher) cancelStream(n *node, id uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), w.c.cfg.RequestTimeout)
	defer cancel()
	_, _ = n.call(ctx, &wire.Request{Op: wire.OpWatchCancel, Value: wire.AppendWatchCancel(nil, id)})
}

// watchStatusError is the error of a message that ends a stream.
func watchStatusError(resp *wire.Response, from uint64) error {
	if resp.Status == wire.StatusCompacted {
		return &CompactedError{Requested: from, Oldest: resp.Version, Reason: string(resp.Value)}
	}
	return statusError(resp)
}
