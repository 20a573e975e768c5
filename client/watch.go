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
// PrevKV, with WithPrevKV, is the key as it was just before the write
// (etcd's prev_kv): nil if it did not exist. CreateRevision, Version and
// Lease are a PUT's key after the write (etcd's event kv); a delete's are
// 0, as are a PUT's from a server that predates them.
type Event struct {
	Type           EventType
	Key            []byte
	Value          []byte
	ModRevision    uint64
	CreateRevision uint64
	Version        uint64
	Lease          LeaseID
	PrevKV         *KV
}

// WatchResponse is the events of one or more whole revisions, in commit
// order (a revision split across server messages is joined first), or a
// progress notification (IsProgressNotify). Revision is the store
// revision through which the watch's stream is complete (etcd's header
// revision): every event up to it was delivered. The last response before
// the channel closes may carry Err instead: why the watch ended.
type WatchResponse struct {
	Events   []Event
	Revision uint64
	Err      error
	progress bool
}

// IsProgressNotify reports whether r is a progress notification: no
// events, only Revision (WithProgressNotify, Client.RequestProgress).
func (r *WatchResponse) IsProgressNotify() bool { return r.progress && r.Err == nil }

// WatchOption adjusts one Watch: WithPrefix, WithFromRevision,
// WithProgressNotify, and WithPrevKV (the one option it shares with
// DeleteRange, as etcd's does; the other write options mean nothing to a
// watch and are ignored).
type WatchOption interface{ applyWatch(*watchOptions) }

// watchOption is a WatchOption of the watch's own.
type watchOption func(*watchOptions)

func (f watchOption) applyWatch(o *watchOptions) { f(o) }

// applyWatch makes WithPrevKV a WatchOption too.
func (f WriteOption) applyWatch(o *watchOptions) {
	var w writeOptions
	f(&w)
	o.prevKV = o.prevKV || w.prevKV
}

type watchOptions struct {
	prefix         bool
	from           uint64
	prevKV         bool
	progressNotify bool
}

// WithProgressNotify asks for a progress notification whenever the watch
// has sent nothing for the servers' --watch-progress-notify-interval
// (default 10m; etcd's progress_notify): a response with no events whose
// IsProgressNotify is true and whose Revision the watch is complete
// through. Refused as WithPrevKV is by a server that predates it.
func WithProgressNotify() WatchOption {
	return watchOption(func(o *watchOptions) { o.progressNotify = true })
}

// WithPrefix watches every key that starts with the key given (an empty
// one: every key).
func WithPrefix() WatchOption { return watchOption(func(o *watchOptions) { o.prefix = true }) }

// WithFromRevision starts the watch at store revision v: every event
// with a revision >= v is delivered (v 0: from now, the default), from
// the stored history if need be, down to the cluster's compaction. To see
// a prefix's keys and then its changes without a gap, read them with
// Prefix (its pages are one snapshot) and watch from the response's
// Revision+1.
func WithFromRevision(v uint64) WatchOption { return watchOption(func(o *watchOptions) { o.from = v }) }

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
		f.applyWatch(&o)
	}
	w := &watcher{c: c, key: append([]byte(nil), key...), prefix: o.prefix, from: o.from,
		prevKV: o.prevKV, progressNotify: o.progressNotify, out: make(chan WatchResponse)}
	c.watches.add(w)
	go func() {
		defer c.watches.remove(w)
		w.run(ctx)
	}()
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

	prevKV, progressNotify bool
	// frag holds the events of a revision the server split, until its
	// last piece arrives; a stream that breaks meanwhile drops them.
	frag []Event
	cur  streamRef // the server stream now carrying it (watchprogress.go)

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
	flags, err := w.requestFlags(n)
	if err != nil {
		return false, err
	}
	req := &wire.Request{Op: wire.OpWatch, Key: w.key, Flags: flags, Value: wire.AppendWatchRequest(nil, from)}
	sctx, cancel := context.WithTimeout(ctx, w.c.cfg.RequestTimeout)
	id, st, err := n.openStream(sctx, req)
	cancel()
	if err != nil {
		return false, err
	}
	w.frag = nil // a revision begun on an earlier stream comes again whole
	open := true // the server's stream is still open
	defer func() {
		w.cur.set(nil, 0)
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
				return ok, w.refused(n, resp, flags, from)
			}
			created := ok
			if err := w.message(ctx, resp, from, &skip, &ok); err != nil {
				return ok, err
			}
			if ok && !created && w.cur.set(n, id) {
				go w.pendingProgress(n, id)
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
	if m.Flags&wire.WatchMsgProgress != 0 {
		return w.deliver(ctx, WatchResponse{Revision: resp.Version, progress: true}, resp.Version)
	}
	for _, e := range m.Events {
		if err := w.checkEvent(&e, from); err != nil {
			return err
		}
		if e.Version == from && *skip > 0 {
			*skip-- // delivered by an earlier stream
			continue
		}
		w.frag = append(w.frag, eventOf(&e))
	}
	if m.Flags&wire.WatchMsgFragment != 0 {
		return nil // the revision continues in the next message
	}
	evs := w.frag
	w.frag = nil
	for _, e := range evs {
		if e.ModRevision == w.last {
			w.atLast++
		} else {
			w.last, w.atLast = e.ModRevision, 1
		}
	}
	if len(evs) == 0 {
		w.complete = max(w.complete, resp.Version)
		return nil
	}
	return w.deliver(ctx, WatchResponse{Events: evs, Revision: resp.Version}, resp.Version)
}

// deliver hands r to the caller, then records that the stream is
// complete through complete.
func (w *watcher) deliver(ctx context.Context, r WatchResponse, complete uint64) error {
	select {
	case w.out <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	w.complete = max(w.complete, complete)
	return nil
}

func eventOf(e *wire.WatchEvent) Event {
	ev := Event{Type: EventType(e.Type), Key: e.Key, Value: e.Value, ModRevision: e.Version,
		CreateRevision: e.Meta.Create, Version: e.Meta.Version, Lease: LeaseID(e.Meta.Lease)}
	if e.HasPrev {
		ev.PrevKV = &KV{Key: e.Key, Value: e.PrevValue, Meta: metaOf(e.PrevMeta)}
	}
	return ev
}

// checkEvent refuses an event the watch did not ask for or out of order.
func (w *watcher) checkEvent(e *wire.WatchEvent, from uint64) error {
	match := bytes.Equal(e.Key, w.key) || (w.prefix && bytes.HasPrefix(e.Key, w.key))
	last := w.last
	if n := len(w.frag); n > 0 {
		last = w.frag[n-1].ModRevision
	}
	if !match || e.Version < from || e.Version < last || e.Version <= w.complete {
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

// pendingProgress sends a progress request made while the watch was
// between streams.
func (w *watcher) pendingProgress(n *node, id uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), w.c.cfg.RequestTimeout)
	defer cancel()
	_ = sendProgressRequest(ctx, n, id)
}
