package redisapi

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/promreg"
	"github.com/kvd-project/kvd/internal/putgroup"
	"github.com/kvd-project/kvd/internal/ratelog"
)

// Refusal reasons besides the protocol's (resp.Reason*).
const (
	reasonMaxConns = "max_conns"
	reasonIdle     = "idle_timeout"
	reasonReply    = "reply_timeout"
)

// Server serves the Redis protocol over a kvd client. It holds no state
// of the store's: every answer comes from the cluster.
type Server struct {
	cfg     Config
	c       *client.Client
	m       *metrics
	cursors *cursors
	cmds    map[string]*command
	started time.Time

	refusalLog ratelog.Limiter
	nextID     atomic.Int64
	nconns     atomic.Int64
	served     atomic.Int64 // connections accepted since start
	commands   atomic.Int64 // commands processed since start

	qmu    sync.Mutex // guards queues
	queues map[string]*keyQueue

	sets *putgroup.Group // commits plain SETs in groups

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	wg        sync.WaitGroup
}

// New returns a Server for cfg, its metrics registered with
// cfg.Registerer.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, c: cfg.Client, m: newMetrics(), cursors: newCursors(cfg.MaxScanCursors), cmds: commandTable(), started: time.Now(),
		listeners: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{}, queues: map[string]*keyQueue{},
	}
	sets, err := putgroup.New(putgroup.Config{Client: cfg.Client, Knobs: putgroup.Knobs{BeforeCommit: cfg.Knobs.BeforeSetGroup}})
	if err != nil {
		return nil, fmt.Errorf("redisapi: %w", err)
	}
	s.sets = sets
	if err := promreg.Register(cfg.Registerer, s.m.cs); err != nil {
		return nil, fmt.Errorf("redisapi: metrics: %w", err)
	}
	return s, nil
}

// Serve accepts connections on l until Close (then it returns nil) or
// until l fails.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			delete(s.listeners, l)
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		s.accept(nc)
	}
}

// accept starts serving nc, or refuses it as Redis does when MaxConns are
// open.
func (s *Server) accept(nc net.Conn) {
	if s.nconns.Add(1) > int64(s.cfg.MaxConns) {
		s.nconns.Add(-1)
		s.refused(reasonMaxConns, nc.RemoteAddr().String(), fmt.Errorf("%d connections open", s.cfg.MaxConns))
		nc.SetWriteDeadline(time.Now().Add(time.Second))
		nc.Write([]byte("-ERR max number of clients reached\r\n"))
		nc.Close()
		return
	}
	c := s.newConn(nc)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.nconns.Add(-1)
		nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.served.Add(1)
	s.m.conns.Inc()
	go func() {
		defer s.wg.Done()
		c.serve()
		nc.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.nconns.Add(-1)
		s.m.conns.Dec()
	}()
}

// Close stops every Serve, closes every connection and waits for their
// goroutines; the metrics are unregistered.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	promreg.Unregister(s.cfg.Registerer, s.m.cs)
	return nil
}

// refused counts a refused or limit-closed connection and logs it,
// rate-limited.
func (s *Server) refused(reason, remote string, err error) {
	s.m.refusals.WithLabelValues(reason).Inc()
	if ok, held := s.refusalLog.Allow(reason, time.Now()); ok {
		s.cfg.Logger.Warn("redis connection refused or closed by a limit", "reason", reason, "remote", remote,
			"err", err, "similar_not_logged", held)
	}
}

// Conns is how many connections are open.
func (s *Server) Conns() int { return int(s.nconns.Load()) }
