package etcdapi

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// maintenanceService implements etcd's Maintenance service.
type maintenanceService struct {
	pb.UnimplementedMaintenanceServer
	s *Server
}
