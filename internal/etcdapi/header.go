package etcdapi

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// header is the response header for an answer at kvd store revision rev
// (in etcd's numbering, revision.go: an empty store's answers are at 1).
// Term is the last one seen, not necessarily the answer's: etcd's clients
// use it for display only.
func (s *Server) header(rev uint64) *pb.ResponseHeader {
	h := s.bareHeader()
	h.Revision = etcdRev(rev)
	return h
}

// bareHeader is the header of an answer that read no store revision
// (membership, status, alarms): revision 0, which etcd never gives,
// rather than a revision the answer was not at.
func (s *Server) bareHeader() *pb.ResponseHeader {
	s.touchHeader()
	return &pb.ResponseHeader{
		ClusterId: s.clusterID.Load(),
		MemberId:  s.memberID.Load(),
		RaftTerm:  s.term.Load(),
	}
}
