package cluster

import (
	"bytes"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Process is a child process (a kvd node, a gateway, a server to compare
// with) whose output is kept, its last bytes, to explain a failure.
type Process struct {
	cmd  *exec.Cmd
	out  *tail
	done chan struct{}
	err  error // valid after done is closed
}

// stopGrace is how long Stop waits after SIGTERM before it kills.
const stopGrace = 10 * time.Second

// StartProcess starts bin with args.
func StartProcess(bin string, args []string) (*Process, error) {
	p := &Process{cmd: exec.Command(bin, args...), out: &tail{max: logTail}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Output is the tail of what the process wrote to stdout and stderr.
func (p *Process) Output() string { return p.out.String() }

// Done is closed when the process has exited; Err then says how.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the process's exit status, valid once Done is closed.
func (p *Process) Err() error { return p.err }

// Stop terminates the process (SIGTERM, then SIGKILL after stopGrace) and
// waits for it. It may be called more than once.
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if extra := t.buf.Len() - t.max; extra > 0 {
		t.buf.Next(extra)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
