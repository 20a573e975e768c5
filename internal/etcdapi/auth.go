package etcdapi

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// authService implements etcd's Auth service.
type authService struct {
	pb.UnimplementedAuthServer
	s *Server
}
