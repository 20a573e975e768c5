package etcdapi

import (
	"math"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// progressRound is a stream's answer in the making to a progress request
// (etcd's RequestProgress): kvd's client asks every watch for a progress
// notification, and once each watch the stream had when asked has given
// one, the stream gets one response, watch id -1 (as etcd's since 3.5),
// at the lowest revision they gave: every watch of the stream is complete
// through it. One round at a time: a request made meanwhile starts
// another when it ends, so its answer is no older than the request.
type progressRound struct {
	waiting map[*etcdWatch]bool
	rev     uint64 // the lowest revision given so far
	active  bool
	again   bool
}

// requestProgress starts a round, or marks that another is wanted; a
// stream without watches gets no answer, as etcd's.
func (st *watchStream) requestProgress() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.progress.active {
		st.progress.again = true
		return
	}
	st.startRoundLocked()
}

func (st *watchStream) startRoundLocked() {
	p := &st.progress
	if len(st.watches) == 0 {
		return
	}
	p.waiting = make(map[*etcdWatch]bool, len(st.watches))
	for _, w := range st.watches {
		p.waiting[w] = true
	}
	p.rev, p.active = math.MaxUint64, true
	st.wg.Add(1)
	go func() {
		defer st.wg.Done()
		if err := st.s.c.RequestProgress(st.ctx); err != nil {
			// No answer will come for this round: end it, so that the
			// next request starts a fresh one.
			st.mu.Lock()
			st.progress = progressRound{}
			st.mu.Unlock()
		}
	}()
}

// progressOf takes a progress notification of w at rev: forwarded if w
// asked for them (progress_notify), and counted towards the round.
func (st *watchStream) progressOf(w *etcdWatch, rev uint64) {
	w.rev.Store(max(w.rev.Load(), rev))
	if w.notify {
		// A notification is no data: dropped, rather than the watch
		// cancelled, if the queue is full.
		st.q.pushEvents(&pb.WatchResponse{Header: st.s.header(rev), WatchId: w.id}, progressSize, false)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.progress.waiting[w] {
		st.progress.rev = min(st.progress.rev, rev)
		st.progress.drop(st, w)
	}
}

// progressSize is what a progress notification counts against the queue.
const progressSize = 64

// drop takes w out of the round (it answered or ended); the last one out
// sends the stream's answer. Called with st.mu held.
func (p *progressRound) drop(st *watchStream, w *etcdWatch) {
	if !p.active || !p.waiting[w] {
		return
	}
	delete(p.waiting, w)
	if len(p.waiting) > 0 {
		return
	}
	if p.rev != math.MaxUint64 {
		st.q.pushFinal(&pb.WatchResponse{Header: st.s.header(p.rev), WatchId: -1})
	}
	again := p.again
	*p = progressRound{}
	if again {
		st.startRoundLocked()
	}
}
