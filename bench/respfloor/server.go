package respfloor

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
)

// writeBufSize is each connection's reply buffer.
const writeBufSize = 16 << 10

// Server keeps the values its connections share. Values are never
// changed in place (SET and INCR store new slices), so a GET writes its
// value after releasing the lock.
type Server struct {
	mu     sync.Mutex
	values map[string][]byte
}

// NewServer returns a server with no keys.
func NewServer() *Server {
	return &Server{values: make(map[string][]byte)}
}

// Serve accepts connections on ln, each served by its own goroutine,
// until ctx ends (then it closes ln and returns nil, leaving the
// connections to their clients: the process is about to exit) or Accept
// fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			defer c.Close()
			_ = s.serve(c, c)
		}()
	}
}

// serve answers the commands read from r on w until r ends (nil) or
// fails, or a request is malformed (then the error reply is written and
// the protocolError returned, for the caller to close the connection).
// Replies are flushed when r has nothing more buffered, so a pipeline's
// replies leave in one write.
func (s *Server) serve(r io.Reader, w io.Writer) error {
	c := conn{server: s, in: newReader(r), out: bufio.NewWriterSize(w, writeBufSize)}
	for {
		args, err := c.in.next()
		var pe protocolError
		if errors.As(err, &pe) {
			c.errorReply("ERR " + pe.Error())
			return errors.Join(err, c.out.Flush())
		}
		if err == io.EOF {
			return c.out.Flush()
		}
		if err != nil {
			return err
		}
		if len(args) > 0 {
			c.exec(args)
		}
		if c.in.br.Buffered() == 0 {
			if err := c.out.Flush(); err != nil {
				return err
			}
		}
	}
}

// conn is one connection's state.
type conn struct {
	server *Server
	in     *reader
	out    *bufio.Writer
	// num is scratch space for formatting a number.
	num [20]byte
}

// maxName is the longest command name exec knows (CONFIG).
const maxName = len("CONFIG")

// exec runs one command and writes its reply.
func (c *conn) exec(args [][]byte) {
	var name [maxName]byte
	n := len(args[0])
	if n > maxName {
		c.unknown(args[0])
		return
	}
	for i, b := range args[0] {
		if 'a' <= b && b <= 'z' {
			b -= 'a' - 'A'
		}
		name[i] = b
	}
	switch string(name[:n]) {
	case "GET":
		c.get(args)
	case "SET":
		c.set(args)
	case "INCR":
		c.incr(args)
	case "MSET":
		c.mset(args)
	case "PING":
		c.ping(args)
	case "CONFIG":
		c.config(args)
	default:
		c.unknown(args[0])
	}
}
