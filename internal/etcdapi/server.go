package etcdapi

import (
	"math"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/putgroup"
	"github.com/kvd-project/kvd/internal/ratelog"
)

// Server implements etcd's v3 services over a kvd client. It holds no
// state of the store's: every answer comes from the cluster.
type Server struct {
	cfg Config
	c   *client.Client

	// clusterID, memberID and term fill response headers; term is the
	// last raft term seen (header.go).
	clusterID atomic.Uint64
	memberID  atomic.Uint64
	term      atomic.Uint64
	// headerNext (unix nanoseconds) is when they are next refreshed;
	// headerBusy: a refresh is under way (headerinfo.go).
	headerNext atomic.Int64
	headerBusy atomic.Bool

	// refusals counts requests refused for a bound; refuseLog limits
	// their log lines (reqsize.go).
	refusals  atomic.Uint64
	refuseLog ratelog.Limiter

	watch *watchService
	// puts commits concurrent plain Puts in batches, each Put at its own
	// revision (kv.go).
	puts *putgroup.Group
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	puts, err := putgroup.New(putgroup.Config{Client: cfg.Client, Revisions: true,
		Knobs: putgroup.Knobs{BeforeCommit: cfg.Knobs.BeforePutGroup}})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, c: cfg.Client, puts: puts}
	s.memberID.Store(cfg.MemberID)
	s.touchHeader() // the first answers' headers then likely carry the ids
	s.watch = &watchService{s: s}
	return s, nil
}

// Register adds every etcd v3 service to r.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	pb.RegisterKVServer(r, &kvService{s: s})
	pb.RegisterWatchServer(r, s.watch)
	pb.RegisterLeaseServer(r, &leaseService{s: s})
	pb.RegisterClusterServer(r, &clusterService{s: s})
	pb.RegisterMaintenanceServer(r, &maintenanceService{s: s})
	pb.RegisterAuthServer(r, &authService{s: s})
}

// ServerOptions are the gRPC options the Server's limits need: a caller
// adds its own (credentials) and passes them all to grpc.NewServer.
func (s *Server) ServerOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(s.cfg.MaxRequestBytes + grpcOverheadBytes),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.MaxConcurrentStreams(s.cfg.MaxConcurrentStreams),
		grpc.ChainUnaryInterceptor(s.limitRequestSize),
	}
	if s.cfg.StreamWorkers > 0 {
		opts = append(opts, grpc.NumStreamWorkers(uint32(s.cfg.StreamWorkers)))
	}
	return opts
}

// NewGRPCServer returns a gRPC server with the Server's limits, extra
// options (credentials) and every service registered.
func (s *Server) NewGRPCServer(extra ...grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(append(s.ServerOptions(), extra...)...)
	s.Register(g)
	return g
}
