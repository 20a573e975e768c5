package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/kv"
	"github.com/kvd-project/kvd/internal/mirror"
	"github.com/kvd-project/kvd/internal/ratelog"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/watch"
	"github.com/kvd-project/kvd/raft"
	"github.com/kvd-project/kvd/transport"
)

// Server is one running kvd node.
type Server struct {
	cfg    Config
	log    *slog.Logger
	region transport.Region
	kv     *kv.Store  // the replicated key/value state
	node   *raft.Node // kv's node
	// ln is the client listener (Config.Listen), which also takes peers
	// when there is no peerLn (Config.ListenPeer).
	ln      transport.Listener
	peerLn  transport.Listener
	metrics *metrics
	// hub is the node's event history and its watchers (watch.go).
	hub *watch.Hub
	// mirror keeps the table region equal to the node's applied state.
	mirror *mirror.Mirror
	// frozen is the freeze under way, from Freeze until the thaw; nil
	// when there is none (freeze.go).
	frozen atomic.Pointer[freezeGate]
	// refusal answers every request once the node was removed from the
	// cluster (removeFence); nil until then.
	refusal atomic.Pointer[error]

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	connMu    sync.Mutex
	conns     map[transport.Conn]struct{} // its size is the connection count (Config.MaxConnections)
	// refusalLog rate-limits the logs of refused connections (limits.go).
	refusalLog ratelog.Limiter
	// snapSlots bounds concurrent backup streams (snapshot.go).
	snapSlots snapshotSlots
	// hashSlots bounds concurrent OpHashKV requests (hashkv.go).
	hashSlots hashSlots
}

// New starts a node: it binds its listeners, registers and formats the
// table region, opens (or recovers) the Raft node on Pebble, rebuilds the
// region from the applied state, and only then starts accepting
// connections. The listeners are bound first so that an address that
// cannot be had (a port in use) fails the node before anything is written
// to DataDir: a first start that wrote the cluster's identity there would
// leave a directory that the corrected flags then refuse as another
// cluster's.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger.With("node", cfg.ID),
		ctx:    ctx,
		cancel: cancel,
		conns:  map[transport.Conn]struct{}{},
	}
	var err error
	wcfg := cfg.Watch
	wcfg.Store = history{s}
	if s.hub, err = watch.New(wcfg); err != nil {
		cancel()
		return nil, fmt.Errorf("server: %w", err)
	}
	if err := s.start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	if err := s.listen(); err != nil {
		return err
	}
	var err error
	if s.region, err = s.cfg.Transport.Register(s.cfg.TableMem); err != nil {
		return fmt.Errorf("server: register table region: %w", err)
	}
	if s.mirror, err = mirror.New(s.cfg.mirrorConfig(s.region.Bytes(), s.hub, s.log)); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.metrics = newMetrics(s.cfg.Registerer, s)
	if s.cfg.Restore != "" {
		if err := s.restore(); err != nil {
			return err
		}
	}
	keys, missing, err := s.mirror.Start(s.openNode)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if missing > 0 { // a fresh region that cannot hold the data is a configuration error
		return fmt.Errorf("server: --table-mem %d bytes cannot hold the stored data (%d keys did not fit): %w",
			s.cfg.TableMem, missing, table.ErrNoSpace)
	}
	s.log.Info("kvd node started", "listen", s.ln.Addr(), "listen_peer", cmp.Or(s.peerAddr(), s.ln.Addr()), "transport", s.cfg.Transport.Name(),
		"table_mem", s.cfg.TableMem, "keys", keys, "region", s.region.Descriptor().String())
	s.wg.Add(1)
	go s.acceptLoop(s.ln, s.listenRole())
	if s.peerLn != nil {
		s.wg.Add(1)
		go s.acceptLoop(s.peerLn, listenPeers)
	}
	return nil
}

// listen binds the client listener and, with ListenPeer, the peer
// listener. Nothing is accepted until start has opened the node.
func (s *Server) listen() error {
	var err error
	if s.ln, err = s.cfg.Transport.Listen(s.cfg.Listen); err != nil {
		return fmt.Errorf("server: listen on %s (nothing was written to %s): %w", s.cfg.Listen, s.cfg.DataDir, err)
	}
	if s.cfg.ListenPeer == "" {
		return nil
	}
	if s.peerLn, err = s.cfg.peerTransport().Listen(s.cfg.ListenPeer); err != nil {
		return fmt.Errorf("server: listen for peers on %s (nothing was written to %s): %w", s.cfg.ListenPeer, s.cfg.DataDir, err)
	}
	return nil
}

// peerAddr is where the peer listener listens, "" without one.
func (s *Server) peerAddr() string {
	if s.peerLn == nil {
		return ""
	}
	return s.peerLn.Addr()
}

// openNode opens (or recovers) the Raft node on Pebble, feeding the
// mirror (mirror.Start).
func (s *Server) openNode() (mirror.Store, error) {
	rc := s.cfg.raftConfig()
	rc.OnLease, rc.OnRemoved, rc.Logger = s.mirror.OnLease, s.removeFence, s.log
	rc.ClientAddr = s.clientAddr()
	var err error
	s.kv, err = kv.Open(kv.Config{Raft: rc, Publisher: s.mirror, LeaseClock: s.cfg.LeaseClock,
		AutoCompactionMode: s.cfg.AutoCompactionMode, AutoCompactionRetention: s.cfg.AutoCompactionRetention})
	if err != nil {
		return nil, fmt.Errorf("open raft node: %w", err)
	}
	s.node = s.kv.Node()
	// The event history starts now: what was applied before this process
	// started is compacted here (kv.Publisher.Events).
	s.hub.Reset(s.kv.Revision())
	return store{s.kv}, nil
}

// store is the replicated state as the mirror reads it.
type store struct{ *kv.Store }

func (st store) Leader() uint64 { return st.Node().Status().LeaderID }

// Revision is the store revision of the applied state in Pebble.
func (st store) Revision() (uint64, error) { return st.Store.Revision(), nil }

// Addr is the address the server listens on for clients (and for peers
// too, without a peer listener).
func (s *Server) Addr() string { return s.ln.Addr() }

// PeerAddr is the address the server listens on for peers: its peer
// listener's (Config.ListenPeer), or Addr without one.
func (s *Server) PeerAddr() string {
	if s.peerLn == nil {
		return s.ln.Addr()
	}
	return s.peerLn.Addr()
}

// Region is the server's table region, for tests and tools. Writing to it
// corrupts what clients read (they detect it).
func (s *Server) Region() transport.Region { return s.region }

// TableHeader is the table's header as the server last wrote it.
func (s *Server) TableHeader() table.Header { return s.mirror.Header() }

// KV is the server's replicated key/value store, for tests and tools.
func (s *Server) KV() *kv.Store { return s.kv }

// Node is the server's Raft node, for tests and tools.
func (s *Server) Node() *raft.Node { return s.node }

// Failure returns why the node stopped for good, or nil while it runs:
//
//   - a storage failure (a disk that refused a write, a failed fsync;
//     errors.Is(err, raft.ErrStorage)). The server answers every write,
//     and every read that needs the node, with the failure
//     (wire.StatusStorage), and reports it in Status (StorageError); its
//     process should exit and be restarted once the disk is fixed;
//   - its removal from the cluster (errors.Is(err, raft.ErrRemoved)). The
//     server serves nothing more (removeFence); its process should exit,
//     and its data directory refuses to start again.
//
// cmd/kvd exits naming the failure in both cases.
func (s *Server) Failure() error { return s.node.Failure() }

// Failed is closed when the node fails (Failure becomes non-nil).
func (s *Server) Failed() <-chan struct{} { return s.node.Failed() }

// storageFailure is Failure's cause as text for Status, "" while none.
func (s *Server) storageFailure() string {
	var se *raft.StorageError
	if errors.As(s.node.Failure(), &se) {
		return se.Err.Error()
	}
	return ""
}

// removeFence is the node's raft.Config.OnRemoved: a removed member
// withdraws every read it serves, at once, before its removal is
// acknowledged. The region is zeroed (one-sided readers find nothing they
// could take for a value, and go elsewhere), and every client request
// from now on is refused as not applied, naming the removal, so clients
// try another endpoint (a watch or a backup stream has its connection
// closed, and resumes elsewhere); a reply already being computed still
// goes out (the removed leader's own "member remove").
func (s *Server) removeFence(err error) {
	refusal := errs.Classed(errs.ErrNotApplied, err.Error())
	s.refusal.Store(&refusal)
	s.mirror.Retire()
	s.log.Info("removed from the cluster: the region is withdrawn and every request refused")
}

// Close stops accepting, closes every connection, waits for requests in
// flight, stops the Raft node and frees the region. It is safe to call more
// than once; later calls return nil.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() { err = s.close() })
	return err
}

func (s *Server) close() error {
	s.cancel()
	if s.mirror != nil {
		s.mirror.Close() // its repair loop, and a rebuild's waits
	}
	var errs []error
	if s.ln != nil {
		errs = append(errs, s.ln.Close())
	}
	if s.peerLn != nil {
		errs = append(errs, s.peerLn.Close())
	}
	s.connMu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.connMu.Unlock()
	s.wg.Wait() // connections and their requests
	if s.metrics != nil {
		s.metrics.unregister()
	}
	if s.kv != nil {
		errs = append(errs, s.kv.Close()) // no more applies or lease calls after this
	}
	if s.region != nil {
		errs = append(errs, s.region.Close())
	}
	return errors.Join(errs...)
}

// acceptLoop serves every connection ln accepts on a goroutine of its
// own, as role says, up to Config.MaxConnections at once on ln (so that,
// with a peer listener, clients cannot crowd the members out). A listener
// that enforces the cap itself (transport/tcp's, which refuses before the
// handshake and tells the dialer why) is given it and reports its refusals
// to connRefused; over other transports the connections beyond it are
// closed here at once.
func (s *Server) acceptLoop(ln transport.Listener, role listenRole) {
	defer s.wg.Done()
	lim, limited := ln.(connLimiter)
	if limited {
		lim.SetMaxConns(s.cfg.MaxConnections)
		lim.SetRefusalHook(s.connRefused)
		defer lim.SetRefusalHook(nil)
	}
	open := 0 // ln's connections, under connMu
	for {
		conn, err := ln.Accept(s.ctx)
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("accept failed; no longer accepting", "err", err)
			}
			return
		}
		s.connMu.Lock()
		if !limited && open >= s.cfg.MaxConnections {
			s.connMu.Unlock()
			conn.Close()
			s.connRefused(transport.ReasonMaxConns, conn.RemoteAddr(),
				fmt.Errorf("%d connections open (max %d, --max-connections)", open, s.cfg.MaxConnections))
			continue
		}
		s.conns[conn] = struct{}{}
		open++
		s.connMu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(conn, role)
			s.connMu.Lock()
			delete(s.conns, conn)
			open--
			s.connMu.Unlock()
		}()
	}
}
