package main

import (
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvd-project/kvd/internal/ratelog"
)

// Limits of the metrics/health HTTP listener. It is an operator's port,
// not a data path: a few connections suffice, and none may hold the
// process's file descriptors or goroutines for long.
const (
	// maxHTTPConns bounds the listener's open connections; more are
	// accepted and closed at once (counted in kvd_http_refused_total).
	maxHTTPConns = 64
	// httpReadHeaderTimeout, httpReadTimeout, httpWriteTimeout and
	// httpIdleTimeout bound a slow or idle client.
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second
	httpWriteTimeout      = 30 * time.Second
	httpIdleTimeout       = 60 * time.Second
	// httpMaxHeaderBytes bounds a request's header.
	httpMaxHeaderBytes = 16 << 10
)

// limitListener refuses connections beyond max.
type limitListener struct {
	net.Listener
	sem     chan struct{}
	refused prometheus.Counter
	log     *slog.Logger
	logs    ratelog.Limiter // one refusal line a second
}

func newLimitListener(ln net.Listener, max int, reg prometheus.Registerer, log *slog.Logger) *limitListener {
	l := &limitListener{
		Listener: ln,
		sem:      make(chan struct{}, max),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "kvd_http_refused_total",
			Help: "Connections to the metrics listener closed because it already had its maximum open.",
		}),
		log:  log,
		logs: ratelog.Limiter{Every: time.Second},
	}
	if reg != nil {
		reg.MustRegister(l.refused)
	}
	return l
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
		default:
			// Counted before the close: whoever sees the connection
			// refused can already read the count.
			l.refused.Inc()
			l.logRefusal(c.RemoteAddr())
			c.Close()
		}
	}
}

// logRefusal logs at most once a second.
func (l *limitListener) logRefusal(remote net.Addr) {
	if ok, held := l.logs.Allow("refused", time.Now()); ok {
		l.log.Warn("metrics listener full; connection refused", "remote", remote.String(), "max", cap(l.sem),
			"similar_not_logged", held)
	}
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
