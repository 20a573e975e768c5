package redisapi

import (
	"bytes"

	"github.com/kvd-project/kvd/client"
)

// Plain GETs pipelined on one connection are read as a run: one
// client.GetMany, whose READs go out in batches, instead of one GET's
// round trip after another. Each GET of a run was sent before any of
// their replies, so they are concurrent; GetMany reads each key
// linearizably on its own, so each reply is one its GET could have had
// alone, and the replies go out in the order sent. A run that fails
// (GetMany fails whole when any key fails) is run again one GET at a
// time, so that each GET gets its own reply, an error included.

// plainGet reports whether args is a GET outside MULTI of a key kvd
// takes: the only GET that may join a run (an empty or too long key runs
// alone, for its own error).
func (c *conn) plainGet(args [][]byte) bool {
	return !c.multi && len(args) == 2 && bytes.EqualFold(args[0], []byte("get")) &&
		len(args[1]) > 0 && len(args[1]) <= client.MaxKey
}

// collectGets reads the buffered commands that follow first while they
// are plain GETs, at most max commands and client.MaxGetMany keys. It
// returns the run's keys, the command read that did not join it (nil if
// none), and a read error, which ends the connection once the run is
// answered.
func (c *conn) collectGets(first [][]byte, max int) (keys [][]byte, next [][]byte, err error) {
	keys = [][]byte{first[1]}
	max = min(max, client.MaxGetMany)
	for len(keys) < max && c.r.Buffered() > 0 {
		args, err := c.r.ReadCommand()
		if err != nil {
			return keys, nil, err
		}
		if !c.plainGet(args) {
			return keys, args, nil
		}
		keys = append(keys, args[1])
	}
	return keys, nil, nil
}

// runGets reads a run of plain GETs and writes their replies, in order.
func (c *conn) runGets(keys [][]byte) {
	c.writing = false
	ctx, cancel := c.ctx()
	res, err := c.s.c.GetMany(ctx, keys)
	cancel()
	if err != nil {
		for _, k := range keys {
			c.s.commands.Add(1)
			r := c.dispatch([][]byte{[]byte("get"), k})
			c.setWriteDeadline()
			r.writeTo(c.w)
		}
		return
	}
	c.s.commands.Add(int64(len(keys)))
	c.s.m.commands.WithLabelValues("get", "ok").Add(float64(len(keys)))
	for _, r := range res {
		c.setWriteDeadline()
		if !r.Found {
			nullReply{}.writeTo(c.w)
			continue
		}
		bulk(r.Value).writeTo(c.w)
	}
}
