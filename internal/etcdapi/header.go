package etcdapi

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// header is the response header for an answer at store revision rev.
// Term is the last one seen, not necessarily the answer's: etcd's clients
// use it for display only.
func (s *Server) header(rev uint64) *pb.ResponseHeader {
	s.touchHeader()
	return &pb.ResponseHeader{
		ClusterId: s.clusterID.Load(),
		MemberId:  s.memberID.Load(),
		Revision:  int64(rev),
		RaftTerm:  s.term.Load(),
	}
}
