package etcdapi

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// clusterService implements etcd's Cluster service.
type clusterService struct {
	pb.UnimplementedClusterServer
	s *Server
}
