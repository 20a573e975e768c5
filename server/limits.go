package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kvd-project/kvd/internal/ratelog"
	"github.com/kvd-project/kvd/transport"
)

// Connection limits. The transport enforces what it can see
// (the tcp transport: the connection cap, handshake, idle, read and write
// timeouts, protocol violations, oversized READ batches; see
// transport/tcp's Limits), and reports each refusal here; the server
// enforces what only it can see: how much one client connection holds in
// requests and replies (serveConn, respond). Every refusal is counted in
// kvd_connections_refused_total{reason} and logged, at most once per
// refusalLogEvery per reason.

// The reasons counted (the transport's and the server's own) are
// transport.RefusalReasons.

// refusalLogEvery is how often each kind of refusal is logged: a hostile or
// broken client retries without end, and the log must not become its
// amplifier. The counter counts every one.
const refusalLogEvery = ratelog.DefaultEvery

// connLimiter is implemented by listeners that enforce the connection cap
// and report refusals themselves (transport/tcp's, tcp.Limits).
type connLimiter interface {
	SetMaxConns(n int)
	SetRefusalHook(fn func(reason, remote string, err error))
}

// idleTimeouter is implemented by connections whose idle timeout can be
// changed (transport/tcp's, tcp.IdleTimeouter).
type idleTimeouter interface {
	SetIdleTimeout(d time.Duration)
}

// exemptFromIdle lifts conn's idle timeout, if its transport has one: a
// peer's connection may be silent between elections (a follower sends
// nothing to another follower), and must still be there for the next
// vote.
func exemptFromIdle(conn transport.Conn) {
	if c, ok := conn.(idleTimeouter); ok {
		c.SetIdleTimeout(0)
	}
}

// connRefused counts a refused (or limit-closed) connection and logs it,
// rate-limited. The transport calls it from its own goroutines.
func (s *Server) connRefused(reason, remote string, err error) {
	s.metrics.connRefusals.WithLabelValues(reason).Inc()
	if ok, held := s.refusalLog.Allow(reason, time.Now()); ok {
		s.log.Warn("connection refused or closed by a limit", "reason", reason, "remote", remote, "err", err,
			"similar_not_logged", held)
	}
}

// closeSlowReader closes conn, whose client left what (a reply, say)
// unread for replyTimeout, and counts it once (once is the connection's),
// unless a transport limit closed it first: that one counted it.
func (s *Server) closeSlowReader(conn transport.Conn, once *sync.Once, what string) {
	err := fmt.Errorf("%s waited %v for the client to read", what, s.cfg.Knobs.ReplyTimeout)
	if lc, ok := conn.(transport.LimitCloser); ok {
		if !lc.CloseForLimit(err) {
			return
		}
	} else {
		conn.Close()
	}
	once.Do(func() { s.connRefused(transport.ReasonSlowReader, conn.RemoteAddr(), err) })
}

// connCount is how many connections the server holds (kvd_connections).
func (s *Server) connCount() int {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	return len(s.conns)
}

// connBudget is the bytes one client connection may hold in the server
// (maxConnBytes): its requests being served and their replies until they
// are written. serveConn takes a request's share before starting it and
// waits for room; respond may overdraw it for a reply larger than was
// reserved (it exists already), and gives everything back when done.
type connBudget struct {
	mu    sync.Mutex
	free  int
	freed chan struct{} // a token when bytes come back
}

func newConnBudget(n int) *connBudget {
	return &connBudget{free: n, freed: make(chan struct{}, 1)}
}

// acquire takes n bytes, waiting for room until ctx ends. Only serveConn
// waits, so one token per release is enough to wake it.
func (b *connBudget) acquire(ctx context.Context, n int) error {
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
		select {
		case <-b.freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// overdraw takes n bytes whether or not there is room.
func (b *connBudget) overdraw(n int) {
	b.mu.Lock()
	b.free -= n
	b.mu.Unlock()
}

func (b *connBudget) release(n int) {
	b.mu.Lock()
	b.free += n
	b.mu.Unlock()
	select {
	case b.freed <- struct{}{}:
	default:
	}
}
