package redisapi

// WaitingSets is how many plain SETs wait for a group (setbatch.go).
func (s *Server) WaitingSets() int {
	s.sets.mu.Lock()
	defer s.sets.mu.Unlock()
	return len(s.sets.waiting)
}
