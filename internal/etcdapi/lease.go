package etcdapi

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// leaseService implements etcd's Lease service.
type leaseService struct {
	pb.UnimplementedLeaseServer
	s *Server
}
