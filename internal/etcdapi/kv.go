package etcdapi

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// kvService implements etcd's KV service.
type kvService struct {
	pb.UnimplementedKVServer
	s *Server
}
