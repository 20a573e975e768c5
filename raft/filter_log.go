package raft

import (
	"sync"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// refusalLogEvery is how often each kind of refusal or drop is logged: a
// misconfigured or hostile peer retries without end, and the log must not
// become its amplifier. The counters count every one.
const refusalLogEvery = 10 * time.Second

// logLimiter lets one line per key through per interval and counts the
// lines it held back, so the next line can say how many.
type logLimiter struct {
	mu         sync.Mutex
	next       map[string]time.Time
	suppressed map[string]int
}

// allow reports whether a line for key may be logged now and how many were
// held back since the last one.
func (ll *logLimiter) allow(key string, now time.Time) (bool, int) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.next == nil {
		ll.next, ll.suppressed = map[string]time.Time{}, map[string]int{}
	}
	if now.Before(ll.next[key]) {
		ll.suppressed[key]++
		return false, 0
	}
	n := ll.suppressed[key]
	ll.next[key], ll.suppressed[key] = now.Add(refusalLogEvery), 0
	return true, n
}

// refuse counts and logs (rate-limited) a refused peer session.
func (ps *peerSet) refuse(why refusal, conn transport.Conn, err error) {
	ps.n.metrics.refused(why)
	if ok, held := ps.limit.allow("refused:"+string(why), time.Now()); ok {
		ps.n.log.Warn("refusing peer connection", "reason", string(why), "remote", conn.RemoteAddr(),
			"err", err, "similar_refusals_not_logged", held)
	}
}

// dropped counts and logs (rate-limited) a dropped peer message.
func (ps *peerSet) dropped(why dropReason, peer uint64, err error) {
	ps.n.metrics.dropped(why)
	if ok, held := ps.limit.allow("dropped:"+string(why), time.Now()); ok {
		ps.n.log.Warn("dropping peer message", "reason", string(why), "peer", peer,
			"err", err, "similar_drops_not_logged", held)
	}
}
