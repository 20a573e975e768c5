package client

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kvd-project/kvd/internal/wire"
)

// watchSet is the client's open watches, for RequestProgress.
type watchSet struct {
	mu sync.Mutex
	m  map[*watcher]struct{}
}

func (s *watchSet) add(w *watcher) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[*watcher]struct{}{}
	}
	s.m[w] = struct{}{}
	s.mu.Unlock()
}

func (s *watchSet) remove(w *watcher) {
	s.mu.Lock()
	delete(s.m, w)
	s.mu.Unlock()
}

func (s *watchSet) list() []*watcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := make([]*watcher, 0, len(s.m))
	for w := range s.m {
		ws = append(ws, w)
	}
	return ws
}

// streamRef is the server stream a watch is on now (nil between streams),
// and whether a progress request waits for the next one.
type streamRef struct {
	mu      sync.Mutex
	n       *node
	id      uint64
	pending bool
}

// set records the stream now carrying the watch (n nil: none); a
// progress request made between streams is sent on the new one.
func (r *streamRef) set(n *node, id uint64) (pending bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n, r.id = n, id
	pending, r.pending = r.pending && n != nil, r.pending && n == nil
	return pending
}

// RequestProgress asks, for every watch of the client, a progress
// notification (etcd's RequestProgress): once the watch has delivered
// every event up to the store revision its node has applied, its channel
// gets a response whose IsProgressNotify is true and whose Revision it is
// complete through, even if its keys are quiet. A watch between two
// server streams (resuming) asks on its next one. It fails if a server
// predates progress requests (ErrBadRequest, saying so).
func (c *Client) RequestProgress(ctx context.Context) error {
	for _, w := range c.watches.list() {
		if err := w.requestProgress(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (w *watcher) requestProgress(ctx context.Context) error {
	w.cur.mu.Lock()
	n, id := w.cur.n, w.cur.id
	if n == nil {
		w.cur.pending = true
	}
	w.cur.mu.Unlock()
	if n == nil {
		return nil
	}
	return sendProgressRequest(ctx, n, id)
}

func sendProgressRequest(ctx context.Context, n *node, id uint64) error {
	resp, err := n.call(ctx, &wire.Request{Op: wire.OpWatch, Flags: wire.WatchProgressRequest,
		Value: wire.AppendWatchCancel(nil, id)})
	switch {
	case err != nil:
		return err
	case resp.Status == wire.StatusOK, resp.Status == wire.StatusNotFound:
		return nil // NotFound: the stream just ended; its watch resumes
	case predatesFlags(&resp):
		return fmt.Errorf("%w: the server at %s predates watch progress requests: upgrade it", ErrBadRequest, n.addr)
	}
	return statusError(&resp)
}

// predatesFlags reports whether resp is a server's refusal of watch
// flags it does not know (a server older than the flag).
func predatesFlags(resp *wire.Response) bool {
	return resp.Status == wire.StatusBadRequest && strings.Contains(string(resp.Value), "unknown flags")
}

// oldWatchServer is what a node's server was found to lack of the watch
// flags newer than the first watches. A server refuses a request with a
// flag it does not know (without saying which), so the client asks again
// without the newest it asked for: first WatchMeta, then the rest.
type oldWatchServer struct{ age atomic.Int32 }

// Ages of a node's watch server.
const (
	watchCurrent = iota // takes every flag this client sends
	watchNoMeta         // predates WatchMeta (events' metadata)
	watchOld            // predates every flag but WatchPrefix
)

// refused records that the server refused a request with flags.
func (o *oldWatchServer) refused(flags uint16) {
	age := int32(watchOld)
	if flags&wire.WatchMeta != 0 {
		age = watchNoMeta
	}
	for {
		cur := o.age.Load()
		if cur >= age || o.age.CompareAndSwap(cur, age) {
			return
		}
	}
}

// requestFlags are the flags of a watch request to n. A server that
// predates prev_kv and progress_notify fails such a watch rather than run
// it without what it asked for; one that predates events' metadata serves
// events without it (Event's CreateRevision, Version and Lease are 0).
func (w *watcher) requestFlags(n *node) (uint16, error) {
	var f uint16
	if w.prefix {
		f |= wire.WatchPrefix
	}
	switch n.oldWatch.age.Load() {
	case watchCurrent:
		return f | wire.WatchFragment | wire.WatchMeta | w.optionFlags(), nil
	case watchNoMeta:
		return f | wire.WatchFragment | w.optionFlags(), nil
	}
	if w.optionFlags() != 0 {
		return 0, fmt.Errorf("%w: the server at %s predates prev_kv and progress_notify on watches: upgrade it",
			ErrBadRequest, n.addr)
	}
	return f, nil
}

func (w *watcher) optionFlags() uint16 {
	var f uint16
	if w.prevKV {
		f |= wire.WatchPrevKV
	}
	if w.progressNotify {
		f |= wire.WatchProgressNotify
	}
	return f
}

// refused is the error of a message that ended a stream opened with
// flags. A refusal of the flags by an older server marks the node, and
// the watch resumes there without them (or fails, if it needs them).
func (w *watcher) refused(n *node, resp *wire.Response, flags uint16, from uint64) error {
	if flags&^wire.WatchPrefix != 0 && predatesFlags(resp) {
		n.oldWatch.refused(flags)
		if _, err := w.requestFlags(n); err != nil {
			return err
		}
		return errWatchOverflow // resume at once, on the same node
	}
	return watchStatusError(resp, from)
}
