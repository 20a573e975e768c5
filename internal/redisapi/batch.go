package redisapi

import "context"

// Commands on one key from many connections of a Server are run in
// batches: while one batch of a key's read-modify-writes commits, the
// next ones wait, and then run together on one view, in arrival order,
// committed as one transaction. So 50 clients incrementing one counter
// cost a transaction per batch, not 50 transactions of which 49 conflict
// and run again. Each command's reply is the one it would have had run
// alone at its place in the batch; the batch applies whole or not at all.

// keyQueue is the commands of one key waiting for the batch in flight.
type keyQueue struct {
	waiting []*pending
}

// pending is one command waiting in a keyQueue. done receives its reply,
// or nil when it is to run the next batch itself.
type pending struct {
	cmd  *command
	args [][]byte
	done chan reply
}

// maxBatch bounds one batch; the rest wait for the next.
const maxBatch = 1024

// runBatched runs a single-key command of the view kind, batched with the
// same key's other commands.
func (s *Server) runBatched(ctx context.Context, cmd *command, args [][]byte) reply {
	key := string(args[1])
	p := &pending{cmd: cmd, args: args, done: make(chan reply, 1)}
	s.qmu.Lock()
	q, busy := s.queues[key]
	if !busy {
		q = &keyQueue{}
		s.queues[key] = q
	}
	q.waiting = append(q.waiting, p)
	s.qmu.Unlock()
	if busy {
		if r := <-p.done; r != nil {
			return r
		}
	}
	s.qmu.Lock()
	n := min(len(q.waiting), maxBatch)
	batch := q.waiting[:n:n]
	q.waiting = q.waiting[n:]
	s.qmu.Unlock()

	replies := make([]reply, len(batch))
	r, _ := s.runView(ctx, nil, func(v *view) reply {
		for i, b := range batch {
			replies[i] = b.cmd.exec(v, b.args)
		}
		return nil
	})
	var mine reply
	for i, b := range batch {
		if r != nil { // the batch failed whole
			replies[i] = r
		}
		if b == p {
			mine = replies[i]
		} else {
			b.done <- replies[i]
		}
	}
	s.qmu.Lock()
	if len(q.waiting) == 0 {
		delete(s.queues, key)
	} else {
		q.waiting[0].done <- nil
	}
	s.qmu.Unlock()
	return mine
}
