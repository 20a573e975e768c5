package redisapi

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/limits"
	"github.com/kvd-project/kvd/internal/resp"
)

// parseInt parses an integer argument as Redis' string2ll does: the
// canonical decimal form only (no sign +, no spaces, no leading zeros).
func parseInt(b []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != string(b) {
		return 0, false
	}
	return n, true
}

// parseFloat parses a float argument or stored value as Redis does: no
// spaces, no NaN or infinity.
func parseFloat(b []byte) (float64, bool) {
	s := string(b)
	if s == "" || strings.TrimSpace(s) != s || strings.Contains(s, "_") {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func valueOrNull(val []byte, found bool) reply {
	if !found {
		return nullReply{}
	}
	return bulk(val)
}

func execPing(_ *view, args [][]byte) reply {
	switch len(args) {
	case 1:
		return simple("PONG")
	case 2:
		return bulk(args[1])
	}
	return wrongArgs("ping")
}

func execEcho(_ *view, args [][]byte) reply { return bulk(args[1]) }

func execGet(v *view, args [][]byte) reply {
	val, found, _ := v.get(args[1])
	return valueOrNull(val, found)
}

// runGet is GET's fast path: one linearizable (one-sided) read.
func runGet(c *conn, args [][]byte) reply {
	ctx, cancel := c.ctx()
	defer cancel()
	val, err := c.s.c.Get(ctx, args[1])
	if errors.Is(err, client.ErrNotFound) {
		return nullReply{}
	}
	if err != nil {
		return kvdError(err)
	}
	return bulk(val)
}

// setArgs are SET's options.
type setArgs struct {
	nx, xx, get, keepTTL bool
	expire               expiry
}

// parseSet reads SET's options as Redis does (parseExtendedStringArguments).
func parseSet(args [][]byte) (setArgs, reply) {
	var a setArgs
	for i := 3; i < len(args); i++ {
		opt := strings.ToUpper(string(args[i]))
		switch {
		case opt == "NX" && !a.xx:
			a.nx = true
		case opt == "XX" && !a.nx:
			a.xx = true
		case opt == "GET":
			a.get = true
		case opt == "KEEPTTL" && !a.expire.set:
			a.keepTTL = true
		case isExpireOpt(opt) && !a.keepTTL && !a.expire.set && i+1 < len(args):
			e, bad := parseExpiry(opt, args[i+1], "set")
			if bad != nil {
				return a, bad
			}
			a.expire = e
			i++
		default:
			return a, errSyntax
		}
	}
	return a, nil
}

// runSet serves SET: a plain SET is a PUT, committed in a group with
// other connections' (internal/putgroup: two SETs of a key in one group,
// the later wins, as Redis could have ordered them); an expiry needs a lease
// (ttl.go); the other options run on a view.
func runSet(c *conn, args [][]byte) reply {
	a, bad := parseSet(args)
	if bad != nil {
		return bad
	}
	if a.expire.set {
		return c.setWithExpiry(args[1], args[2], a)
	}
	if !a.nx && !a.xx && !a.get && !a.keepTTL {
		ctx, cancel := c.ctx()
		defer cancel()
		if _, err := c.s.sets.Put(ctx, args[1], args[2]); err != nil {
			return kvdError(err)
		}
		return ok
	}
	return c.runAlone(c.s.cmds["set"], args)
}

func execSet(v *view, args [][]byte) reply {
	a, bad := parseSet(args)
	if bad != nil {
		return bad
	}
	if a.expire.set {
		return errReply("ERR kvd: SET with an expiry cannot run inside MULTI (see docs/redis-compatibility.md)")
	}
	old, found, _ := v.get(args[1])
	if (a.nx && found) || (a.xx && !found) {
		if a.get {
			return valueOrNull(old, found)
		}
		return nullReply{}
	}
	v.set(args[1], args[2], a.keepTTL)
	if a.get {
		return valueOrNull(old, found)
	}
	return ok
}

// runSetNX is SETNX's fast path: a PUT on the condition that the key is
// absent.
func runSetNX(c *conn, args [][]byte) reply {
	ctx, cancel := c.ctx()
	defer cancel()
	_, err := c.s.c.PutRevision(ctx, args[1], args[2], client.IfModRevision(0))
	switch {
	case errors.Is(err, client.ErrConflict):
		return intReply(0)
	case err != nil:
		return kvdError(err)
	}
	return intReply(1)
}

func execSetNX(v *view, args [][]byte) reply {
	if _, found, _ := v.get(args[1]); found {
		return intReply(0)
	}
	v.set(args[1], args[2], false)
	return intReply(1)
}

func execGetSet(v *view, args [][]byte) reply {
	old, found, _ := v.get(args[1])
	v.set(args[1], args[2], false)
	return valueOrNull(old, found)
}

func execGetDel(v *view, args [][]byte) reply {
	old, found, _ := v.get(args[1])
	if found {
		v.del(args[1])
	}
	return valueOrNull(old, found)
}

func execMGet(v *view, args [][]byte) reply {
	out := make(array, 0, len(args)-1)
	for _, k := range args[1:] {
		val, found, _ := v.get(k)
		out = append(out, valueOrNull(val, found))
	}
	return out
}

// runMGet reads the keys as one atomic snapshot.
func runMGet(c *conn, args [][]byte) reply {
	keys := args[1:]
	if len(keys) > client.MaxGetMany {
		return errReply("ERR kvd: MGET reads at most " + itoa(client.MaxGetMany) + " keys at once")
	}
	ctx, cancel := c.ctx()
	defer cancel()
	res, _, err := c.s.c.GetManyAtomic(ctx, keys)
	if err != nil {
		return kvdError(err)
	}
	out := make(array, len(res))
	for i, r := range res {
		out[i] = valueOrNull(r.Value, r.Found)
	}
	return out
}

func execMSet(v *view, args [][]byte) reply {
	if len(args)%2 != 1 {
		return wrongArgs(strings.ToLower(string(args[0])))
	}
	for i := 1; i < len(args); i += 2 {
		v.set(args[i], args[i+1], false)
	}
	return ok
}

func execMSetNX(v *view, args [][]byte) reply {
	if len(args)%2 != 1 {
		return wrongArgs("msetnx")
	}
	for i := 1; i < len(args); i += 2 {
		if _, found, _ := v.get(args[i]); found {
			return intReply(0)
		}
	}
	for i := 1; i < len(args); i += 2 {
		v.set(args[i], args[i+1], false)
	}
	return intReply(1)
}

// execIncr is INCR (sign 1) and DECR (-1), with an argument (by) INCRBY
// and DECRBY. The key keeps its expiry, as in Redis.
func execIncr(sign int64, by bool) func(v *view, args [][]byte) reply {
	return func(v *view, args [][]byte) reply {
		delta := sign
		if by {
			d, okInt := parseInt(args[2])
			if !okInt {
				return errNotInt
			}
			if sign < 0 {
				if d == math.MinInt64 {
					return errReply("ERR decrement would overflow")
				}
				d = -d
			}
			delta = d
		}
		old, found, _ := v.get(args[1])
		var n int64
		if found {
			var okInt bool
			if n, okInt = parseInt(old); !okInt {
				return errNotInt
			}
		}
		if (delta > 0 && n > math.MaxInt64-delta) || (delta < 0 && n < math.MinInt64-delta) {
			return errOverflow
		}
		n += delta
		v.set(args[1], strconv.AppendInt(nil, n, 10), true)
		return intReply(n)
	}
}

func execIncrByFloat(v *view, args [][]byte) reply {
	d, okF := parseFloat(args[2])
	if !okF {
		return errNotFloat
	}
	old, found, _ := v.get(args[1])
	var f float64
	if found {
		if f, okF = parseFloat(old); !okF {
			return errNotFloat
		}
	}
	f += d
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return errNaN
	}
	s := resp.FormatFloat(f)
	v.set(args[1], []byte(s), true)
	return bulkString(s)
}

func execAppend(v *view, args [][]byte) reply {
	old, _, _ := v.get(args[1])
	if len(old)+len(args[2]) > limits.MaxValue {
		return errTooBig
	}
	nv := append(append(make([]byte, 0, len(old)+len(args[2])), old...), args[2]...)
	v.set(args[1], nv, true)
	return intReply(len(nv))
}

func execStrlen(v *view, args [][]byte) reply {
	val, _, _ := v.get(args[1])
	return intReply(len(val))
}

func execGetRange(v *view, args [][]byte) reply {
	start, ok1 := parseInt(args[2])
	end, ok2 := parseInt(args[3])
	if !ok1 || !ok2 {
		return errNotInt
	}
	val, _, _ := v.get(args[1])
	n := int64(len(val))
	if start < 0 && end < 0 && start > end {
		return bulk{}
	}
	if start < 0 {
		start = max(n+start, 0)
	}
	if end < 0 {
		end = max(n+end, 0)
	}
	end = min(end, n-1)
	if start > end || n == 0 {
		return bulk{}
	}
	return bulk(val[start : end+1])
}

func execSetRange(v *view, args [][]byte) reply {
	off, okInt := parseInt(args[2])
	if !okInt {
		return errNotInt
	}
	if off < 0 {
		return errOffset
	}
	part := args[3]
	old, found, _ := v.get(args[1])
	if len(part) == 0 {
		return intReply(len(old))
	}
	if off+int64(len(part)) > limits.MaxValue {
		return errTooBig
	}
	size := max(int64(len(old)), off+int64(len(part)))
	nv := make([]byte, size)
	copy(nv, old)
	copy(nv[off:], part)
	v.set(args[1], nv, found)
	return intReply(len(nv))
}

func execDel(v *view, args [][]byte) reply {
	n := 0
	for _, k := range args[1:] {
		if _, found, _ := v.get(k); found {
			v.del(k)
			n++
		}
	}
	return intReply(n)
}

// runDel deletes the keys in one transaction, which counts the ones that
// existed.
func runDel(c *conn, args [][]byte) reply {
	keys := uniqueKeys(args[1:])
	if len(keys) > limits.MaxTxnOps {
		return errReply("ERR " + errTooManyKeys.Error())
	}
	var t client.Txn
	for _, k := range keys {
		t.Then = append(t.Then, client.OpDelete(k))
	}
	ctx, cancel := c.ctx()
	defer cancel()
	res, err := c.s.c.Txn(ctx, t)
	if err != nil {
		return kvdError(err)
	}
	n := 0
	for _, r := range res.Results {
		if r.Found {
			n++
		}
	}
	return intReply(n)
}

func uniqueKeys(keys [][]byte) [][]byte {
	seen := make(map[string]bool, len(keys))
	out := keys[:0:0]
	for _, k := range keys {
		if !seen[string(k)] {
			seen[string(k)] = true
			out = append(out, k)
		}
	}
	return out
}

func execExists(v *view, args [][]byte) reply {
	n := 0
	for _, k := range args[1:] {
		if _, found, _ := v.get(k); found {
			n++
		}
	}
	return intReply(n)
}

// runExists counts the keys (a key named twice counts twice, as in
// Redis) in one atomic snapshot.
func runExists(c *conn, args [][]byte) reply {
	keys := uniqueKeys(args[1:])
	if len(keys) > client.MaxGetMany {
		return errReply("ERR kvd: EXISTS reads at most " + itoa(client.MaxGetMany) + " keys at once")
	}
	ctx, cancel := c.ctx()
	defer cancel()
	res, _, err := c.s.c.GetManyAtomic(ctx, keys)
	if err != nil {
		return kvdError(err)
	}
	found := make(map[string]bool, len(keys))
	for i, r := range res {
		found[string(keys[i])] = r.Found
	}
	n := 0
	for _, k := range args[1:] {
		if found[string(k)] {
			n++
		}
	}
	return intReply(n)
}

func execType(v *view, args [][]byte) reply {
	if _, found, _ := v.get(args[1]); found {
		return simple("string")
	}
	return simple("none")
}
