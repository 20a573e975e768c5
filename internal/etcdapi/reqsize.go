package etcdapi

import (
	"context"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// limitRequestSize refuses a request larger than MaxRequestBytes with
// etcd's "request is too large", as etcd's server refuses a request whose
// raft entry would exceed --max-request-bytes. gRPC's own receive limit
// is higher (MaxRequestBytes plus grpcOverheadBytes, as etcd's), so the
// requests between the two get etcd's error, which clientv3 knows
// (rpctypes.ErrRequestTooLarge), and not gRPC's ResourceExhausted. kvd's
// key and value bounds (internal/limits) map to the same error
// (errors.go).
func (s *Server) limitRequestSize(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if m, ok := req.(proto.Message); ok {
		if n := proto.Size(m); n > s.cfg.MaxRequestBytes {
			s.refuse("request_too_large", "refused a request larger than --max-request-bytes",
				"method", info.FullMethod, "bytes", n, "max", s.cfg.MaxRequestBytes)
			return nil, rpctypes.ErrGRPCRequestTooLarge
		}
	}
	return handler(ctx, req)
}

// refuse counts a refused request under reason and logs it, at most once
// per ratelog interval per reason.
func (s *Server) refuse(reason, msg string, args ...any) {
	s.refusals.Add(1)
	if ok, held := s.refuseLog.Allow(reason, time.Now()); ok {
		s.cfg.Logger.Warn(msg, append(args, slog.Int("similar_refusals_not_logged", held))...)
	}
}

// Refusals is how many requests the Server refused for exceeding a bound
// (MaxRequestBytes).
func (s *Server) Refusals() uint64 { return s.refusals.Load() }
