package redisapi

import (
	"bytes"

	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/putgroup"
)

// Plain SETs pipelined on one connection are committed as a run: the run
// joins the Server's SET groups (internal/putgroup) as one contiguous
// stretch, so that sixteen pipelined SETs cost one transaction, not
// sixteen round trips of one PUT each, and a later SET of the connection
// is never committed before an earlier one. Each SET of a run was sent
// before any of their replies, so they are concurrent, and committing
// them together, in order, is a serial execution the client could have
// seen: each reply (OK, or the error of the group its SET was in) is one
// the SET could have had alone.

// maxSetRunBytes bounds the keys and values a run holds read ahead of
// their replies; the SET that would pass it starts the next run.
const maxSetRunBytes = limits.MaxTxnBytes

// plainSet reports whether args is a SET with no option, outside MULTI:
// the only SET that may join a run (any other runs alone, so that its
// reply, an error included, is exactly the unbatched one).
func (c *conn) plainSet(args [][]byte) bool {
	return !c.multi && len(args) == 3 && bytes.EqualFold(args[0], []byte("set"))
}

// collectSets reads the buffered commands that follow first while they
// are plain SETs, at most max commands and maxSetRunBytes in all. It
// returns the run, the command read that did not join it (nil if none),
// and a read error, which ends the connection once the run is answered.
func (c *conn) collectSets(first [][]byte, max int) (run []putgroup.KV, next [][]byte, err error) {
	run = []putgroup.KV{{Key: first[1], Value: first[2]}}
	size := len(first[1]) + len(first[2])
	for len(run) < max && c.r.Buffered() > 0 {
		args, err := c.r.ReadCommand()
		if err != nil {
			return run, nil, err
		}
		if !c.plainSet(args) || size+len(args[1])+len(args[2]) > maxSetRunBytes {
			return run, args, nil
		}
		size += len(args[1]) + len(args[2])
		run = append(run, putgroup.KV{Key: args[1], Value: args[2]})
	}
	return run, nil, nil
}

// runSets commits a run of plain SETs and writes their replies, in order.
func (c *conn) runSets(run []putgroup.KV) {
	c.s.commands.Add(int64(len(run)))
	c.writing = true
	ctx, cancel := c.ctx()
	errs := c.s.sets.PutAll(ctx, run)
	cancel()
	for _, err := range errs {
		var r reply = ok
		outcome := "ok"
		if err != nil {
			r, outcome = kvdError(err), "error"
		}
		c.s.m.commands.WithLabelValues("set", outcome).Inc()
		c.setWriteDeadline()
		r.writeTo(c.w)
	}
}
