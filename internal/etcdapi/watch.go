package etcdapi

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// watchService implements etcd's Watch service.
type watchService struct {
	pb.UnimplementedWatchServer
	s *Server
}
