package etcdapi

// WaitingPuts is how many plain Puts wait for a group (internal/putgroup).
func (s *Server) WaitingPuts() int { return s.puts.Waiting() }
