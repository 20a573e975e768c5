package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/internal/ratelog"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/watch"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/raft"
	"github.com/kvd-project/kvd/transport"
)

// Server is one running kvd node.
type Server struct {
	cfg     Config
	log     *slog.Logger
	region  transport.Region
	node    *raft.Node
	ln      transport.Listener
	metrics *metrics
	// hub is the node's event history and its watchers (watch.go).
	hub *watch.Hub
	// events is the applier's scratch for the hub (raft loop only).
	events []wire.WatchEvent

	// tmu serialises every write to the table (applies, rebuilds,
	// repairs) and the RPC reads that must see it at a batch boundary.
	tmu           sync.Mutex
	tbl           *table.Table
	missing       map[string]uint64 // applied keys the region could not hold: their records' lengths
	missingBytes  uint64            // the sum of missing's lengths (reserveLocked counts them)
	rebuildFailed bool              // the region is partial until a rebuild succeeds
	// Repair passes that placed nothing and compacted nothing, in a row;
	// how many of them bring a repack; the table's Compacted count at the
	// last pass (repair.go).
	stalls, repackAfter int
	compactedSeen       uint64
	// ahead is open while Pebble holds a batch that the region has not
	// applied yet (BatchAhead, atomic.go).
	ahead chan struct{}
	// testPauseRepair, if set (tests only), makes repairLoop skip its passes.
	testPauseRepair atomic.Bool
	// testForEach, if set (tests only), replaces the node's ForEach in
	// rebuilds, to inject failures.
	testForEach func(fn func(key, value []byte, version uint64) error) error
	// testAtomic, if set (tests only), runs after each step of an atomic
	// apply (atomic.go), under the table lock.
	testAtomic func(step string)

	// leaseMu guards the lease word and nothing slow: the lease is
	// published without waiting for tmu. rebuilding is written holding
	// both locks, so either one suffices to read it.
	leaseMu     sync.Mutex
	leaseTerm   uint64
	leaseExpiry time.Time
	rebuilding  bool

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
}

// New starts a node: it registers and formats the table region, opens (or
// recovers) the Raft node on Pebble, rebuilds the region from the applied
// state, and only then starts accepting connections.
func New(cfg Config) (*Server, error) {
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
	s.missing = map[string]uint64{}
	s.repackAfter = repackPasses
	var err error
	if s.hub, err = watch.New(cfg.Watch); err != nil {
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
	var err error
	s.metrics = newMetrics(s.cfg.Registerer, s)
	if s.region, err = s.cfg.Transport.Register(s.cfg.TableMem); err != nil {
		return fmt.Errorf("server: register table region: %w", err)
	}
	if s.tbl, err = table.Format(s.region.Bytes(), s.cfg.tableConfig()); err != nil {
		return fmt.Errorf("server: format table: %w", err)
	}
	if s.cfg.Restore != "" {
		if err := s.restore(); err != nil {
			return err
		}
	}
	// Hold the table until the rebuild below is done: applies that the
	// node delivers meanwhile wait, then land on the rebuilt table.
	s.tmu.Lock()
	s.setRebuilding(true)
	rc := s.cfg.raftConfig()
	rc.Applier, rc.OnLease, rc.Logger = (*applier)(s), s.onLease, s.log
	s.node, err = raft.Open(rc)
	if err != nil {
		s.tmu.Unlock()
		return fmt.Errorf("server: open raft node: %w", err)
	}
	// The event history starts now: what was applied before this process
	// started is compacted here (raft.EventApplier).
	s.hub.Reset(s.node.Status().Applied)
	err = s.rebuildLocked()
	missing, keys := len(s.missing), s.tbl.Len() // the raft loop applies as soon as the lock is free
	s.tmu.Unlock()
	if err != nil {
		return fmt.Errorf("server: rebuild table from stored state: %w", err)
	}
	if missing > 0 { // a fresh region that cannot hold the data is a configuration error
		return fmt.Errorf("server: --table-mem %d bytes cannot hold the stored data (%d keys did not fit): %w",
			s.cfg.TableMem, missing, table.ErrNoSpace)
	}
	if s.ln, err = s.cfg.Transport.Listen(s.cfg.Listen); err != nil {
		return fmt.Errorf("server: listen on %s: %w", s.cfg.Listen, err)
	}
	s.log.Info("kvd node started", "listen", s.ln.Addr(), "transport", s.cfg.Transport.Name(),
		"table_mem", s.cfg.TableMem, "keys", keys, "region", s.region.Descriptor().String())
	s.wg.Add(2)
	go s.acceptLoop()
	go s.repairLoop()
	return nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr() }

// Region is the server's table region, for tests and tools. Writing to it
// corrupts what clients read (they detect it).
func (s *Server) Region() transport.Region { return s.region }

// TableHeader is the table's header as the server last wrote it.
func (s *Server) TableHeader() table.Header {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	return s.tbl.Header()
}

// Node is the server's Raft node, for tests and tools.
func (s *Server) Node() *raft.Node { return s.node }

// Failure returns why the node stopped on a storage failure (a disk that
// refused a write, a failed fsync; errors.Is(err, raft.ErrStorage)), or nil
// while it runs. A failed server answers every write, and every read that
// needs the node, with the failure (wire.StatusStorage), and reports it in
// Status (StorageError); it cannot recover: its process should exit and be
// restarted once the disk is fixed (cmd/kvd does so).
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
	var errs []error
	if s.ln != nil {
		errs = append(errs, s.ln.Close())
	}
	s.connMu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.connMu.Unlock()
	s.wg.Wait() // connections, their requests, the repair loop
	if s.metrics != nil {
		s.metrics.unregister()
	}
	if s.node != nil {
		errs = append(errs, s.node.Close()) // no more applies or lease calls after this
	}
	if s.region != nil {
		errs = append(errs, s.region.Close())
	}
	return errors.Join(errs...)
}

// acceptLoop serves every accepted connection on a goroutine of its own,
// up to Config.MaxConnections at once. A listener that enforces the cap
// itself (transport/tcp's, which refuses before the handshake and tells the
// dialer why) is given it and reports its refusals to connRefused; over
// other transports the connections beyond it are closed here at once.
func (s *Server) acceptLoop() {
	defer s.wg.Done()
	lim, limited := s.ln.(connLimiter)
	if limited {
		lim.SetMaxConns(s.cfg.MaxConnections)
		lim.SetRefusalHook(s.connRefused)
		defer lim.SetRefusalHook(nil)
	}
	for {
		conn, err := s.ln.Accept(s.ctx)
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("accept failed; no longer accepting", "err", err)
			}
			return
		}
		s.connMu.Lock()
		if n := len(s.conns); !limited && n >= s.cfg.MaxConnections {
			s.connMu.Unlock()
			conn.Close()
			s.connRefused(transport.ReasonMaxConns, conn.RemoteAddr(),
				fmt.Errorf("%d connections open (max %d, --max-connections)", n, s.cfg.MaxConnections))
			continue
		}
		s.conns[conn] = struct{}{}
		s.connMu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(conn)
			s.connMu.Lock()
			delete(s.conns, conn)
			s.connMu.Unlock()
		}()
	}
}
