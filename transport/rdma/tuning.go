package rdma

// The arithmetic of connection setup and failure detection. Like wire.go,
// this file has no build tag and no cgo, so host tests reach it.

import (
	"sync/atomic"
	"time"
)

// acceptDepths returns the READ depths the accepting side grants: its
// responder resources (READs it serves at once for the dialer) and its
// initiator depth (READs it issues at once to the dialer). The connection
// manager has already turned the request's values round to the acceptor's
// point of view: the event's responder_resources is the dialer's initiator
// depth, its initiator_depth the dialer's responder resources (the kernel
// swaps them, and librdmacm's rdma_accept expects them as they come). So
// each is only capped by this device's own limit for the same role;
// swapping them again would ask the dialer for more READs than it can serve
// whenever a device's two limits differ.
func acceptDepths(maxRdAtom, maxInitRdAtom, reqResp, reqInit int) (resp, init int) {
	return min(maxRdAtom, reqResp), min(maxInitRdAtom, reqInit)
}

// ackTimeoutExp returns the exponent n of the smallest local ACK timeout
// 4.096µs·2^n that is at least d (n ≥ 1: 0 would mean no timeout).
func ackTimeoutExp(d time.Duration) int {
	n := 1
	for n < maxAckExp && ackTimeoutOf(n) < d {
		n++
	}
	return n
}

// ackTimeoutOf is the local ACK timeout of exponent n.
func ackTimeoutOf(n int) time.Duration { return 4096 * time.Nanosecond << n }

// DeadPeerBound returns how long a connection to a host that has died (or
// whose network is gone: nothing answers, not even the connection manager)
// may go unnoticed, as rounded by the device: busy is the bound when work
// is outstanding, idle when the connection had nothing to do (its
// keepalive READ goes out between KeepAlive and 5/4 KeepAlive after its
// last completion: the check runs every KeepAlive/4). The IB specification lets a device wait up to 4 times the ACK
// timeout per attempt; worst gives the bound under that factor. With a
// negative AckTimeout (the connection manager's value) or KeepAlive (off)
// the bounds are unknown or unbounded: 0.
func (c Config) DeadPeerBound() (busy, idle, worst time.Duration) {
	c = c.withDefaults()
	if c.AckTimeout < 0 {
		return 0, 0, 0
	}
	attempts := time.Duration(c.RetryCount + 1)
	busy = ackTimeoutOf(ackTimeoutExp(c.AckTimeout)) * attempts
	worst = 4 * busy
	if c.KeepAlive > 0 {
		idle = keepAliveLatest(c.KeepAlive) + busy
		worst += keepAliveLatest(c.KeepAlive)
	}
	return busy, idle, worst
}

// keepAliveLatest is the longest a connection goes without a completion
// before its keepalive READ is posted.
func keepAliveLatest(k time.Duration) time.Duration { return k + k/4 }

// keepAliveState is a connection's keepalive bookkeeping.
type keepAliveState struct {
	activity atomic.Uint64 // bursts of completions handled (poller)
	out      atomic.Bool   // a keepalive READ is outstanding

	// keepalive goroutine only
	seen uint64
	idle int
}

// keepAliveTicks is how many ticks of KeepAlive/4 without a completion make
// a connection idle.
const keepAliveTicks = 4

// tick is called every KeepAlive/4; it reports whether the connection has
// been idle long enough to need a keepalive.
func (k *keepAliveState) tick(ready bool) bool {
	a := k.activity.Load()
	if a != k.seen || !ready || k.out.Load() {
		k.seen, k.idle = a, 0
		return false
	}
	k.idle++
	if k.idle < keepAliveTicks {
		return false
	}
	k.idle = 0
	return true
}
