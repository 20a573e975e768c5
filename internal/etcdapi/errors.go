package etcdapi

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/raft"
)

// toStatus maps an error from kvd's client onto the gRPC status etcd
// returns for the same condition. clientv3 recognises its errors by these
// exact messages (rpctypes), so the text matters, not only the code.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, m := range statusMap {
		if errors.Is(err, m.kvd) {
			return m.grpc
		}
	}
	for _, m := range raftStatusMap {
		if isRaftErr(err, m.kvd) {
			return m.grpc
		}
	}
	if errors.Is(err, client.ErrBadRequest) {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

var statusMap = []struct {
	kvd  error
	grpc error
}{
	{client.ErrEmptyKey, rpctypes.ErrGRPCEmptyKey},
	{client.ErrCompacted, rpctypes.ErrGRPCCompacted},
	{client.ErrFutureRevision, rpctypes.ErrGRPCFutureRev},
	{client.ErrLeaseNotFound, rpctypes.ErrGRPCLeaseNotFound},
	{client.ErrLeaseExists, rpctypes.ErrGRPCLeaseExist},
	{client.ErrNoSpace, rpctypes.ErrGRPCNoSpace},
	{client.ErrNoLeader, rpctypes.ErrGRPCNoLeader},
	{client.ErrNotLeader, rpctypes.ErrGRPCNoLeader},
	{client.ErrUnavailable, rpctypes.ErrGRPCTimeout},
	{client.ErrPermissionDenied, rpctypes.ErrGRPCPermissionDenied},
	{client.ErrUnauthenticated, rpctypes.ErrGRPCInvalidAuthToken},
	{client.ErrStorage, rpctypes.ErrGRPCCorrupt},
	{client.ErrKeyTooLarge, rpctypes.ErrGRPCRequestTooLarge},
	{client.ErrValueTooLarge, rpctypes.ErrGRPCRequestTooLarge},
	{client.ErrClosed, rpctypes.ErrGRPCStopped},
	{context.Canceled, rpctypes.ErrGRPCCanceled},
	{context.DeadlineExceeded, rpctypes.ErrGRPCDeadlineExceeded},
}

// raftStatusMap maps raft's membership and leadership errors, which reach kvd's client
// as bad requests in raft's words (isRaftErr), onto etcd's.
var raftStatusMap = []struct {
	kvd  error
	grpc error
}{
	{raft.ErrMemberNotFound, rpctypes.ErrGRPCMemberNotFound},
	{raft.ErrMemberExists, rpctypes.ErrGRPCMemberExist},
	{raft.ErrMemberRemoved, rpctypes.ErrGRPCMemberExist},
	{raft.ErrAddrInUse, rpctypes.ErrGRPCPeerURLExist},
	{raft.ErrNotLearner, rpctypes.ErrGRPCMemberNotLearner},
	{raft.ErrLearnerNotReady, rpctypes.ErrGRPCLearnerNotReady},
	{raft.ErrNoQuorum, rpctypes.ErrGRPCMemberNotEnoughStarted},
	{raft.ErrLastVoter, rpctypes.ErrGRPCMemberNotEnoughStarted},
	{raft.ErrTransferTarget, rpctypes.ErrGRPCBadLeaderTransferee},
}

// invalid is an InvalidArgument status in etcd's wording.
func invalid(msg string) error {
	return status.Error(codes.InvalidArgument, "etcdserver: "+msg)
}

// notSupported answers an RPC kvd does not implement, saying why.
func notSupported(rpc, why string) error {
	return status.Errorf(codes.Unimplemented, "kvd: %s is not supported: %s (docs/etcd-compatibility.md)", rpc, why)
}
