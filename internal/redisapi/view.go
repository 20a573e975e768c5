package redisapi

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/limits"
)

// view is what a read-modify-write command (or a MULTI block) sees and
// does: keys read from the cluster, each with the mod revision it had,
// and the writes the command wants. commit turns it into one kvd
// transaction that applies the writes only if every key read still has
// that mod revision.
type view struct {
	ctx    context.Context
	c      *client.Client
	reads  map[string]readRec
	writes map[string]*write
	order  []string // keys written, in first-write order
	err    error    // a read failed: the command fails with it
}

type readRec struct {
	val   []byte
	found bool
	rev   uint64 // mod revision (0: absent)
}

type write struct {
	val  []byte
	del  bool
	keep bool // keep the key's TTL lease (the key exists and was not replaced)
}

func newView(ctx context.Context, c *client.Client) *view {
	return &view{ctx: ctx, c: c, reads: map[string]readRec{}, writes: map[string]*write{}}
}

// get returns key's value as the command sees it: its own writes first,
// then the cluster's (read once, linearizable).
func (v *view) get(key []byte) ([]byte, bool, error) {
	if w, ok := v.writes[string(key)]; ok {
		return w.val, !w.del, nil
	}
	r, err := v.read(key)
	return r.val, r.found, err
}

func (v *view) read(key []byte) (readRec, error) {
	if r, ok := v.reads[string(key)]; ok {
		return r, nil
	}
	if v.err != nil {
		return readRec{}, v.err
	}
	val, rev, err := v.c.GetModRevision(v.ctx, key)
	r := readRec{val: val, found: err == nil, rev: rev}
	if errors.Is(err, client.ErrNotFound) {
		r, err = readRec{}, nil
	}
	if err != nil {
		v.err = err
		return readRec{}, err
	}
	v.reads[string(key)] = r
	return r, nil
}

// set stores val under key; keepTTL keeps the key's expiry if it exists
// (INCR, APPEND...), else the key loses it (SET).
func (v *view) set(key, val []byte, keepTTL bool) {
	keep := false
	if keepTTL {
		if w, ok := v.writes[string(key)]; ok {
			keep = w.keep && !w.del
		} else {
			r, _ := v.read(key)
			keep = r.found
		}
	}
	v.put(key, &write{val: val, keep: keep})
}

func (v *view) del(key []byte) { v.put(key, &write{del: true}) }

func (v *view) put(key []byte, w *write) {
	k := string(key)
	if _, ok := v.writes[k]; !ok {
		v.order = append(v.order, k)
	}
	v.writes[k] = w
}

// txn is the view's transaction: a mod revision compare for every key
// read (and watched), the writes in order.
func (v *view) txn(watched map[string]uint64) (client.Txn, []string) {
	var t client.Txn
	keys := make([]string, 0, len(v.reads)+len(watched))
	for k := range v.reads {
		keys = append(keys, k)
	}
	for k := range watched {
		if _, ok := v.reads[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		rev := v.reads[k].rev
		if w, ok := watched[k]; ok {
			rev = w
		}
		t.If = append(t.If, client.CompareModRevision([]byte(k), client.CmpEqual, rev))
	}
	for _, k := range v.order {
		w := v.writes[k]
		switch {
		case w.del:
			t.Then = append(t.Then, client.OpDelete([]byte(k)))
		case w.keep:
			t.Then = append(t.Then, client.OpPut([]byte(k), w.val, client.WithIgnoreLease()))
		default:
			t.Then = append(t.Then, client.OpPut([]byte(k), w.val))
		}
	}
	return t, keys
}

// errTooManyKeys: a command or MULTI block touches more keys than one
// kvd transaction holds.
var errTooManyKeys = errors.New("kvd: a command or MULTI block may read or write at most 128 keys (one kvd transaction)")

// commitOutcome is what commit found.
type commitOutcome int

const (
	committed commitOutcome = iota
	conflicted
	watchFailed
)

// commit applies the view's writes if nothing it read (or watched)
// changed. A view that only read one key and wrote nothing needs no
// transaction: that read was linearizable.
func (v *view) commit(watched map[string]uint64) (commitOutcome, error) {
	if len(v.writes) == 0 && len(watched) == 0 && len(v.reads) <= 1 {
		return committed, nil
	}
	t, keys := v.txn(watched)
	if len(t.If) > limits.MaxTxnCompares || len(t.Then) > limits.MaxTxnOps {
		return 0, errTooManyKeys
	}
	res, err := v.c.Txn(v.ctx, t)
	if err != nil {
		return 0, err
	}
	if res.Succeeded {
		return committed, nil
	}
	for i, k := range keys {
		if w, ok := watched[k]; ok && res.Compared[i].ModRevision != w {
			return watchFailed, nil
		}
	}
	return conflicted, nil
}

// runView runs fn on fresh views until its transaction commits: each
// conflict means a key it read changed, so it computes again from the
// new values. It gives up when ctx ends. With watched keys a change of
// one of them aborts instead (aborted true).
func (s *Server) runView(ctx context.Context, watched map[string]uint64, fn func(v *view) reply) (r reply, aborted bool) {
	for attempt := 1; ; attempt++ {
		v := newView(ctx, s.c)
		r = fn(v)
		if v.err != nil {
			return kvdError(v.err), false
		}
		if s.cfg.Knobs.BeforeCommit != nil {
			s.cfg.Knobs.BeforeCommit(attempt)
		}
		out, err := v.commit(watched)
		switch {
		case errors.Is(err, errTooManyKeys):
			return errReply("ERR " + err.Error()), false
		case err != nil:
			return kvdError(err), false
		case out == committed:
			return r, false
		case out == watchFailed:
			return nil, true
		}
		s.m.retries.Inc()
		if attempt > 2 {
			// Back off a little, at random, so that writers of one hot key
			// do not all retry in step.
			t := time.NewTimer(time.Duration(rand.IntN(min(attempt, 20)*500)) * time.Microsecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return kvdError(ctx.Err()), false
			case <-t.C:
			}
		}
	}
}

// runAlone runs one command outside MULTI through a view: batched with
// others of its key if it has one key (batch.go).
func (c *conn) runAlone(cmd *command, args [][]byte) reply {
	ctx, cancel := c.ctx()
	defer cancel()
	if cmd.first == 1 && cmd.last == 1 {
		return c.s.runBatched(ctx, cmd, args)
	}
	r, _ := c.s.runView(ctx, nil, func(v *view) reply { return cmd.exec(v, args) })
	return r
}
