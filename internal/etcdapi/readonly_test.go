package etcdapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// certCtx is a call's context from a client that showed a verified
// certificate with common name cn ("" : no certificate).
func certCtx(cn string) context.Context {
	info := credentials.TLSInfo{}
	if cn != "" {
		leaf := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
		info.State = tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}}
	}
	return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: info})
}

// TestReadOnlyCertificatesOnlyRead: a certificate marked read-only may
// range, watch, list and back up, and run a Txn that only ranges; every
// call that may write fails with etcd's permission denied. Other clients
// may do anything.
func TestReadOnlyCertificatesOnlyRead(t *testing.T) {
	readOnly := func(c *x509.Certificate) bool { return c.Subject.CommonName == "reader" }
	rangeOp := &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}
	putOp := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k")}}}
	nested := func(op *pb.RequestOp) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Failure: []*pb.RequestOp{op}}}}
	}
	for _, c := range []struct {
		method string
		req    any
		write  bool
	}{
		{"/etcdserverpb.KV/Range", &pb.RangeRequest{}, false},
		{"/etcdserverpb.KV/Put", &pb.PutRequest{}, true},
		{"/etcdserverpb.KV/DeleteRange", &pb.DeleteRangeRequest{}, true},
		{"/etcdserverpb.KV/Compact", &pb.CompactionRequest{}, true},
		{"/etcdserverpb.KV/Txn", &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp}, Failure: []*pb.RequestOp{nested(rangeOp)}}, false},
		{"/etcdserverpb.KV/Txn", &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp, putOp}}, true},
		{"/etcdserverpb.KV/Txn", &pb.TxnRequest{Success: []*pb.RequestOp{nested(putOp)}}, true},
		{"/etcdserverpb.Lease/LeaseGrant", &pb.LeaseGrantRequest{}, true},
		{"/etcdserverpb.Lease/LeaseTimeToLive", &pb.LeaseTimeToLiveRequest{}, false},
		{"/etcdserverpb.Cluster/MemberList", &pb.MemberListRequest{}, false},
		{"/etcdserverpb.Cluster/MemberAdd", &pb.MemberAddRequest{}, true},
		{"/etcdserverpb.Maintenance/Alarm", &pb.AlarmRequest{Action: pb.AlarmRequest_GET}, false},
		{"/etcdserverpb.Maintenance/Alarm", &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE}, true},
		{"/etcdserverpb.Maintenance/MoveLeader", &pb.MoveLeaderRequest{}, true},
		{"/etcdserverpb.Maintenance/Status", &pb.StatusRequest{}, false},
		{"/etcdserverpb.Auth/UserAdd", &pb.AuthUserAddRequest{}, true},
		{"/etcdserverpb.Future/Unknown", nil, true}, // unlisted: a write
	} {
		for _, cn := range []string{"reader", "writer", ""} {
			called := false
			h := func(context.Context, any) (any, error) { called = true; return nil, nil }
			_, err := readOnlyUnary(readOnly)(certCtx(cn), c.req, &grpc.UnaryServerInfo{FullMethod: c.method}, h)
			denied := c.write && cn == "reader"
			if denied != errors.Is(err, rpctypes.ErrGRPCPermissionDenied) || called == denied {
				t.Errorf("%s %v by %q: err %v, handler called %v; want denied %v", c.method, c.req, cn, err, called, denied)
			}
		}
	}
}

// streamWithCtx is a ServerStream whose context is ctx.
type streamWithCtx struct {
	grpc.ServerStream
	ctx context.Context
}

func (s streamWithCtx) Context() context.Context { return s.ctx }

// TestReadOnlyCertificatesKeepNoLeaseAlive: a read-only certificate may
// watch, but not keep a lease alive (a write).
func TestReadOnlyCertificatesKeepNoLeaseAlive(t *testing.T) {
	readOnly := func(c *x509.Certificate) bool { return c.Subject.CommonName == "reader" }
	for _, c := range []struct {
		method string
		denied bool
	}{
		{"/etcdserverpb.Watch/Watch", false},
		{"/etcdserverpb.Lease/LeaseKeepAlive", true},
	} {
		called := false
		h := func(any, grpc.ServerStream) error { called = true; return nil }
		err := readOnlyStream(readOnly)(nil, streamWithCtx{ctx: certCtx("reader")}, &grpc.StreamServerInfo{FullMethod: c.method}, h)
		if c.denied != errors.Is(err, rpctypes.ErrGRPCPermissionDenied) || called == c.denied {
			t.Errorf("%s by a reader: err %v, handler called %v; want denied %v", c.method, err, called, c.denied)
		}
	}
}
