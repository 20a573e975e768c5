package etcdapi

import "github.com/kvd-project/kvd/internal/putgroup"

// PutGroup is the group s commits plain Puts in.
func (s *Server) PutGroup() *putgroup.Group { return s.puts }
