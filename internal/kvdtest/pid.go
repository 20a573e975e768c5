package kvdtest

// Pid is the operating-system process id of the running node, or 0 if it is
// not running. Tests use it to signal the process directly, e.g. to freeze
// it with SIGSTOP and thaw it with SIGCONT (Kill still works on a frozen
// process: SIGKILL ends a stopped process too).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
