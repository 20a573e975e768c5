package redisapi

import (
	"errors"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/limits"
)

func runMulti(c *conn, _ [][]byte) reply {
	if c.multi {
		return errReply("ERR MULTI calls can not be nested")
	}
	c.multi, c.multiErr, c.queue = true, false, nil
	return ok
}

// endMulti leaves MULTI and forgets the watched keys (EXEC, DISCARD).
func (c *conn) endMulti() {
	c.multi, c.multiErr, c.queue = false, false, nil
	c.watched = nil
}

// runExec runs the queued commands as one kvd transaction: they are
// computed on one view and committed together, only if no key they read
// changed (else computed again) and every watched key still has the mod
// revision it had when watched (else EXEC aborts with a null reply).
func runExec(c *conn, _ [][]byte) reply {
	if !c.multi {
		return errReply("ERR EXEC without MULTI")
	}
	queue, watched, multiErr := c.queue, c.watched, c.multiErr
	c.endMulti()
	if multiErr {
		return errExecAbort
	}
	ctx, cancel := c.ctx()
	defer cancel()
	r, aborted := c.s.runView(ctx, watched, func(v *view) reply {
		out := make(array, 0, len(queue))
		for _, args := range queue {
			out = append(out, c.s.cmds[lowerName(args[0])].exec(v, args))
		}
		return out
	})
	if aborted {
		return nullArray{}
	}
	return r
}

func lowerName(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return string(out)
}

func runDiscard(c *conn, _ [][]byte) reply {
	if !c.multi {
		return errReply("ERR DISCARD without MULTI")
	}
	c.endMulti()
	return ok
}

// runWatch records each key's mod revision (0: absent) now; EXEC
// compares them.
func runWatch(c *conn, args [][]byte) reply {
	if c.multi {
		return errReply("ERR WATCH inside MULTI is not allowed")
	}
	if c.watched == nil {
		c.watched = map[string]uint64{}
	}
	ctx, cancel := c.ctx()
	defer cancel()
	for _, k := range args[1:] {
		if _, done := c.watched[string(k)]; done {
			continue
		}
		if len(c.watched) >= limits.MaxTxnCompares {
			return errReply("ERR " + errTooManyKeys.Error())
		}
		_, rev, err := c.s.c.GetModRevision(ctx, k)
		if errors.Is(err, client.ErrNotFound) {
			rev, err = 0, nil
		}
		if err != nil {
			return kvdError(err)
		}
		c.watched[string(k)] = rev
	}
	return ok
}

func runUnwatch(c *conn, _ [][]byte) reply {
	c.watched = nil
	return ok
}
