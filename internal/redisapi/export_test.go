package redisapi

// WaitingSets is how many plain SETs wait for a group (internal/putgroup).
func (s *Server) WaitingSets() int { return s.sets.Waiting() }
