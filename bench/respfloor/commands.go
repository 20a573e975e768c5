package respfloor

import (
	"bytes"
	"math"
	"strconv"
)

func (c *conn) get(args [][]byte) {
	if len(args) != 2 {
		c.arity("get")
		return
	}
	s := c.server
	s.mu.Lock()
	v, ok := s.values[string(args[1])]
	s.mu.Unlock()
	if !ok {
		c.out.WriteString("$-1\r\n")
		return
	}
	c.bulk(v)
}

func (c *conn) set(args [][]byte) {
	switch {
	case len(args) < 3:
		c.arity("set")
		return
	case len(args) > 3:
		// SET's options (EX, NX, ...) are beyond the floor.
		c.errorReply("ERR syntax error")
		return
	}
	v := bytes.Clone(args[2])
	s := c.server
	s.mu.Lock()
	s.values[string(args[1])] = v
	s.mu.Unlock()
	c.out.WriteString("+OK\r\n")
}

func (c *conn) mset(args [][]byte) {
	if len(args) < 3 || len(args)%2 == 0 {
		c.arity("mset")
		return
	}
	s := c.server
	s.mu.Lock()
	for i := 1; i < len(args); i += 2 {
		s.values[string(args[i])] = bytes.Clone(args[i+1])
	}
	s.mu.Unlock()
	c.out.WriteString("+OK\r\n")
}

func (c *conn) incr(args [][]byte) {
	if len(args) != 2 {
		c.arity("incr")
		return
	}
	var n int64
	var err error
	s := c.server
	s.mu.Lock()
	if v, ok := s.values[string(args[1])]; ok {
		n, err = strconv.ParseInt(string(v), 10, 64)
	}
	switch {
	case err != nil:
		s.mu.Unlock()
		c.errorReply("ERR value is not an integer or out of range")
		return
	case n == math.MaxInt64:
		s.mu.Unlock()
		c.errorReply("ERR increment or decrement would overflow")
		return
	}
	n++
	s.values[string(args[1])] = strconv.AppendInt(nil, n, 10)
	s.mu.Unlock()
	c.out.WriteByte(':')
	c.out.Write(strconv.AppendInt(c.num[:0], n, 10))
	c.out.WriteString("\r\n")
}

func (c *conn) ping(args [][]byte) {
	switch len(args) {
	case 1:
		c.out.WriteString("+PONG\r\n")
	case 2:
		c.bulk(args[1])
	default:
		c.arity("ping")
	}
}

// config answers CONFIG GET for the two parameters redis-benchmark asks
// for before it starts, as a server without persistence would; other
// parameters match nothing.
func (c *conn) config(args [][]byte) {
	if len(args) != 3 || !bytes.EqualFold(args[1], []byte("GET")) {
		c.errorReply("ERR CONFIG: only CONFIG GET parameter is served")
		return
	}
	switch {
	case bytes.EqualFold(args[2], []byte("save")):
		c.out.WriteString("*2\r\n$4\r\nsave\r\n$0\r\n\r\n")
	case bytes.EqualFold(args[2], []byte("appendonly")):
		c.out.WriteString("*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n")
	default:
		c.out.WriteString("*0\r\n")
	}
}

// maxEcho bounds how much of an unknown command's name its error reply
// repeats.
const maxEcho = 64

func (c *conn) unknown(name []byte) {
	if len(name) > maxEcho {
		name = name[:maxEcho]
	}
	// Quoted, so that no CR or LF of the name ends the reply early.
	c.errorReply("ERR unknown command " + strconv.Quote(string(name)))
}

func (c *conn) arity(name string) {
	c.errorReply("ERR wrong number of arguments for '" + name + "' command")
}

// errorReply writes msg, which has no CR or LF, as an error.
func (c *conn) errorReply(msg string) {
	c.out.WriteByte('-')
	c.out.WriteString(msg)
	c.out.WriteString("\r\n")
}

func (c *conn) bulk(b []byte) {
	c.out.WriteByte('$')
	c.out.Write(strconv.AppendInt(c.num[:0], int64(len(b)), 10))
	c.out.WriteString("\r\n")
	c.out.Write(b)
	c.out.WriteString("\r\n")
}
