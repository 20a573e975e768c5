package etcdapi

import (
	"context"
	"crypto/x509"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// readOnlyMethods are the calls that change nothing, open to a read-only
// client certificate (kvd's --read-only-client-cn). Calls not listed
// (those added to etcd's API later included) count as writes, as kvd's
// own protocol counts its ops. A Txn is a read when its every branch only
// ranges (readOnlyTxn); an Alarm when it only lists.
var readOnlyMethods = map[string]bool{
	"/etcdserverpb.KV/Range":              true,
	"/etcdserverpb.Watch/Watch":           true,
	"/etcdserverpb.Lease/LeaseTimeToLive": true,
	"/etcdserverpb.Lease/LeaseLeases":     true,
	"/etcdserverpb.Cluster/MemberList":    true,
	"/etcdserverpb.Maintenance/Status":    true,
	"/etcdserverpb.Maintenance/Hash":      true,
	"/etcdserverpb.Maintenance/HashKV":    true,
	"/etcdserverpb.Maintenance/Snapshot":  true, // a backup reads nothing a range cannot
	"/etcdserverpb.Auth/Authenticate":     true,
	"/etcdserverpb.Auth/AuthStatus":       true,
	"/etcdserverpb.Auth/UserGet":          true,
	"/etcdserverpb.Auth/UserList":         true,
	"/etcdserverpb.Auth/RoleGet":          true,
	"/etcdserverpb.Auth/RoleList":         true,
}

// ReadOnlyInterceptors are the gRPC server options that refuse, with
// etcd's "permission denied", every call that may change something from
// a client whose verified certificate readOnly marks read-only: the same
// rule kvd's own listener applies (tlsutil.Store.ReadOnly), on a listener
// where every etcd client shares the Server's one kvd client.
func ReadOnlyInterceptors(readOnly func(*x509.Certificate) bool) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(readOnlyUnary(readOnly)),
		grpc.ChainStreamInterceptor(readOnlyStream(readOnly)),
	}
}

// readOnlyUnary refuses a unary call that may write from a read-only
// client.
func readOnlyUnary(readOnly func(*x509.Certificate) bool) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !readOnlyRequest(info.FullMethod, req) && isReadOnly(ctx, readOnly) {
			return nil, rpctypes.ErrGRPCPermissionDenied
		}
		return h(ctx, req)
	}
}

// readOnlyStream refuses a stream that may write (LeaseKeepAlive) from a
// read-only client; Watch only reads.
func readOnlyStream(readOnly func(*x509.Certificate) bool) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if !readOnlyRequest(info.FullMethod, nil) && isReadOnly(ss.Context(), readOnly) {
			return rpctypes.ErrGRPCPermissionDenied
		}
		return h(srv, ss)
	}
}

// isReadOnly reports whether the call's client showed a verified
// certificate that readOnly marks.
func isReadOnly(ctx context.Context, readOnly func(*x509.Certificate) bool) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return false
	}
	return readOnly(info.State.VerifiedChains[0][0])
}

// readOnlyRequest reports whether a call of method with req changes
// nothing.
func readOnlyRequest(method string, req any) bool {
	switch r := req.(type) {
	case *pb.TxnRequest:
		return readOnlyTxn(r)
	case *pb.AlarmRequest:
		return r.Action == pb.AlarmRequest_GET
	}
	return readOnlyMethods[method]
}

// readOnlyTxn reports whether every branch of t, nested ones included,
// only ranges.
func readOnlyTxn(t *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			switch r := op.Request.(type) {
			case *pb.RequestOp_RequestRange:
			case *pb.RequestOp_RequestTxn:
				if !readOnlyTxn(r.RequestTxn) {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}
