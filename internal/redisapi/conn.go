package redisapi

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/resp"
)

// conn is one client connection: its protocol version, name and MULTI
// state. Only its own goroutine touches it, but CLIENT INFO of another
// connection is not offered, so no field is shared.
type conn struct {
	s       *Server
	nc      net.Conn
	id      int64
	r       *resp.Reader
	w       *resp.Writer
	born    time.Time
	mu      sync.Mutex // guards name and lastCmd (read by INFO of others)
	name    string
	db      int
	closed  bool // QUIT: close after the reply
	writing bool // the command being run writes (conn.ctx)

	multi    bool
	multiErr bool       // a command failed to queue: EXEC aborts
	queue    [][][]byte // commands queued by MULTI
	watched  map[string]uint64
}

func (s *Server) newConn(nc net.Conn) *conn {
	return &conn{
		s: s, nc: nc, id: s.nextID.Add(1), born: time.Now(),
		r: resp.NewReader(nc, s.cfg.Limits), w: resp.NewWriter(nc),
	}
}

// serve reads commands and answers them in order until the client goes
// away, breaks the protocol or a limit, or QUITs. Replies are written out
// when no more pipelined commands wait, or MaxPipeline are held. Pipelined
// plain SETs are committed as a run (setrun.go), and pipelined plain
// GETs read as one (getrun.go).
func (c *conn) serve() {
	held := 0
	var next [][]byte // read ahead by collectSets, not yet run
	for !c.closed {
		args := next
		next = nil
		if args == nil {
			if c.s.cfg.IdleTimeout > 0 && c.r.Buffered() == 0 {
				c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
			}
			var err error
			if args, err = c.r.ReadCommand(); err != nil {
				c.readFailed(err)
				return
			}
		}
		n := 1
		if c.r.Buffered() > 0 && held+1 < c.s.cfg.MaxPipeline && (c.plainSet(args) || c.plainGet(args)) {
			var err error
			if n, next, err = c.runPipelined(args, c.s.cfg.MaxPipeline-held); err != nil {
				c.readFailed(err)
				return
			}
		} else {
			c.s.commands.Add(1)
			r := c.dispatch(args)
			// A reply larger than the buffer is written out as it is
			// encoded: the client must take it within ReplyTimeout too.
			c.setWriteDeadline()
			r.writeTo(c.w)
		}
		if held += n; held < c.s.cfg.MaxPipeline && (c.r.Buffered() > 0 || next != nil) && !c.closed {
			continue
		}
		held = 0
		if !c.flush() {
			return
		}
	}
}

// runPipelined runs first, a plain SET or GET with more commands
// buffered, with the run of its kind that follows it (at most max
// commands), and writes their replies. It returns how many commands it
// ran, the command read after them (nil if none), and a read error.
func (c *conn) runPipelined(first [][]byte, max int) (n int, next [][]byte, err error) {
	if c.plainSet(first) {
		run, next, err := c.collectSets(first, max)
		c.runSets(run)
		return len(run), next, err
	}
	keys, next, err := c.collectGets(first, max)
	c.runGets(keys)
	return len(keys), next, err
}

// flush writes the held replies out within ReplyTimeout.
func (c *conn) flush() bool {
	c.setWriteDeadline()
	if err := c.w.Flush(); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.s.refused(reasonReply, c.nc.RemoteAddr().String(), err)
		}
		return false
	}
	return true
}

func (c *conn) setWriteDeadline() {
	if c.s.cfg.ReplyTimeout > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.ReplyTimeout))
	}
}

// readFailed ends the connection after a read error: a protocol error
// is answered first, as Redis does, and counted with a timeout.
func (c *conn) readFailed(err error) {
	var pe *resp.ProtocolError
	var ne net.Error
	switch {
	case errors.As(err, &pe):
		c.s.refused(pe.Reason, c.nc.RemoteAddr().String(), err)
		c.w.Error("ERR " + pe.Error())
		c.flush()
	case errors.As(err, &ne) && ne.Timeout():
		c.s.refused(reasonIdle, c.nc.RemoteAddr().String(), err)
		c.flush()
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		c.flush()
	}
}

// ctx bounds one command's work by CommandTimeout. A write waits at a
// node for as long (client.WithAttemptTimeout): the client's shorter
// attempt bound would fail a slow but healthy write (a large value, a
// busy disk) as maybe applied, an answer a Redis client cannot act on.
// Reads keep the bound, which lets them move on from a stalled node.
func (c *conn) ctx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), c.s.cfg.CommandTimeout)
	if c.writing {
		ctx = client.WithAttemptTimeout(ctx, -1)
	}
	return ctx, cancel
}

// dispatch runs one command, or queues it inside MULTI.
func (c *conn) dispatch(args [][]byte) reply {
	name := strings.ToLower(string(args[0]))
	cmd, ok := c.s.cmds[name]
	if !ok {
		c.s.m.commands.WithLabelValues("unknown", "error").Inc()
		c.multiErr = c.multi
		return unknownCommand(args)
	}
	if !cmd.arityOK(len(args)) {
		c.s.m.commands.WithLabelValues(cmd.name, "error").Inc()
		c.multiErr = c.multi
		return wrongArgs(cmd.name)
	}
	c.writing = cmd.has(flagWrite) || cmd.name == "exec"
	var r reply
	switch {
	case c.multi && !cmd.has(flagMultiControl):
		r = c.queueCommand(cmd, args)
	case cmd.run != nil:
		r = cmd.run(c, args)
	default:
		r = c.runAlone(cmd, args)
	}
	outcome := "ok"
	if _, bad := r.(errReply); bad {
		outcome = "error"
	}
	c.s.m.commands.WithLabelValues(cmd.name, outcome).Inc()
	return r
}

// queueCommand queues a command of a MULTI block: one that can run
// inside kvd's transaction (it has an exec function), else Redis'
// queue-time error, which makes EXEC abort.
func (c *conn) queueCommand(cmd *command, args [][]byte) reply {
	if cmd.exec == nil {
		c.multiErr = true
		return errReply("ERR kvd: '" + cmd.name + "' cannot run inside MULTI (see docs/redis-compatibility.md)")
	}
	if len(c.queue) >= maxQueued {
		c.multiErr = true
		return errReply("ERR kvd: a MULTI block holds at most " + itoa(maxQueued) + " commands")
	}
	q := make([][]byte, len(args))
	for i, a := range args {
		q[i] = append([]byte(nil), a...)
	}
	c.queue = append(c.queue, q)
	return simple("QUEUED")
}

// maxQueued bounds a MULTI block: kvd runs it as one transaction, which
// holds at most limits.MaxTxnOps operations anyway.
const maxQueued = 1024
