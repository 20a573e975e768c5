package redisapi

import (
	"bytes"
	"strconv"
	"strings"
	"sync"

	"github.com/kvd-project/kvd/client"
)

// globPrefix is the literal start of a glob pattern: every key it matches
// starts with it, so a scan can be limited to that prefix.
func globPrefix(pat []byte) []byte {
	if i := bytes.IndexAny(pat, `*?[\`); i >= 0 {
		return pat[:i]
	}
	return pat
}

// globMatch reports whether s matches pat, Redis' glob syntax: * any
// string, ? any byte, [abc] [^abc] [a-z] one of a class, \x x itself.
// Every token but * matches one byte, so one backtrack point (the last
// *) suffices, and the match is linear in len(pat)*len(s) at worst.
func globMatch(pat, s []byte) bool {
	p, i := 0, 0
	starP, starI := -1, 0
	for i < len(s) {
		if p < len(pat) {
			if pat[p] == '*' {
				starP, starI = p, i
				p++
				continue
			}
			if n, okTok := matchOne(pat[p:], s[i]); okTok {
				p += n
				i++
				continue
			}
		}
		if starP < 0 {
			return false
		}
		starI++
		p, i = starP+1, starI
	}
	for p < len(pat) && pat[p] == '*' {
		p++
	}
	return p == len(pat)
}

// matchOne matches the token at the start of pat against c and returns
// the token's length.
func matchOne(pat []byte, c byte) (int, bool) {
	switch pat[0] {
	case '?':
		return 1, true
	case '\\':
		if len(pat) > 1 {
			return 2, pat[1] == c
		}
		return 1, c == '\\'
	case '[':
		return matchClass(pat, c)
	}
	return 1, pat[0] == c
}

// matchClass matches a [class] (an unterminated one runs to the end of
// the pattern, as in Redis).
func matchClass(pat []byte, c byte) (int, bool) {
	i := 1
	not := i < len(pat) && pat[i] == '^'
	if not {
		i++
	}
	match := false
	for ; i < len(pat) && pat[i] != ']'; i++ {
		switch {
		case pat[i] == '\\' && i+1 < len(pat):
			i++
			match = match || pat[i] == c
		case i+2 < len(pat) && pat[i+1] == '-' && pat[i+2] != ']':
			lo, hi := pat[i], pat[i+2]
			if lo > hi {
				lo, hi = hi, lo
			}
			match = match || (c >= lo && c <= hi)
			i += 2
		default:
			match = match || pat[i] == c
		}
	}
	if i < len(pat) {
		i++ // the ]
	}
	return i, match != not
}

// runKeys lists the keys that match a pattern, from one snapshot.
func runKeys(c *conn, args [][]byte) reply {
	pat := args[1]
	prefix := globPrefix(pat)
	ctx, cancel := c.ctx()
	defer cancel()
	res, err := c.s.c.Range(ctx, prefix, client.PrefixEnd(prefix), client.WithKeysOnly())
	if err != nil {
		return kvdError(err)
	}
	out := array{}
	for _, kv := range res.KVs {
		if globMatch(pat, kv.Key) {
			out = append(out, bulk(kv.Key))
		}
	}
	return out
}

// runDBSize counts every key.
func runDBSize(c *conn, _ [][]byte) reply {
	ctx, cancel := c.ctx()
	defer cancel()
	res, err := c.s.c.Range(ctx, nil, nil, client.WithCountOnly())
	if err != nil {
		return kvdError(err)
	}
	return intReply(res.Count)
}

// scanArgs are SCAN's options.
type scanArgs struct {
	match []byte
	count int
	typ   string
}

func parseScan(args [][]byte) (scanArgs, reply) {
	a := scanArgs{count: 10}
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return a, errSyntax
		}
		switch strings.ToUpper(string(args[i])) {
		case "MATCH":
			a.match = args[i+1]
		case "COUNT":
			n, okInt := parseInt(args[i+1])
			if !okInt {
				return a, errNotInt
			}
			if n < 1 {
				return a, errSyntax
			}
			a.count = int(min(n, client.MaxScanPageKeys))
		case "TYPE":
			a.typ = strings.ToLower(string(args[i+1]))
		default:
			return a, errSyntax
		}
	}
	return a, nil
}

// runScan is SCAN: COUNT keys in key order from the cursor's key, those
// that MATCH returned. A cursor names the key the next page starts at
// (cursors), so a key present throughout a scan is returned exactly once.
func runScan(c *conn, args [][]byte) reply {
	id, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		return errCursor
	}
	a, bad := parseScan(args)
	if bad != nil {
		return bad
	}
	var start []byte
	if id != 0 {
		var found bool
		if start, found = c.s.cursors.get(id); !found {
			return errReply("ERR kvd: unknown or expired SCAN cursor " + string(args[1]) + "; start again from 0")
		}
	}
	prefix := globPrefix(a.match)
	if bytes.Compare(start, prefix) < 0 {
		start = prefix
	}
	ctx, cancel := c.ctx()
	defer cancel()
	res, err := c.s.c.Range(ctx, start, client.PrefixEnd(prefix), client.WithLimit(a.count),
		client.WithKeysOnly(), client.WithoutCount())
	if err != nil {
		return kvdError(err)
	}
	keys := array{}
	for _, kv := range res.KVs {
		if (a.match == nil || globMatch(a.match, kv.Key)) && (a.typ == "" || a.typ == "string") {
			keys = append(keys, bulk(kv.Key))
		}
	}
	next := "0"
	if res.More {
		next = strconv.FormatUint(c.s.cursors.put(res.Next), 10)
	}
	return array{bulkString(next), keys}
}

// cursors remembers where each SCAN cursor handed out continues: Redis'
// clients (redis-cli, redis-py) take a cursor for a 64-bit number, and a
// key is up to 1 KiB, so the key stays here and the cursor names it. The
// oldest are forgotten beyond the bound; a forgotten cursor is refused.
type cursors struct {
	mu    sync.Mutex
	max   int
	next  uint64
	byID  map[uint64][]byte
	order []uint64 // ids in the order handed out (a FIFO)
	head  int
}

func newCursors(max int) *cursors {
	return &cursors{max: max, next: 1, byID: map[uint64][]byte{}}
}

func (c *cursors) put(key []byte) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next++
	c.byID[id] = append([]byte(nil), key...)
	c.order = append(c.order, id)
	for len(c.byID) > c.max {
		delete(c.byID, c.order[c.head])
		c.head++
	}
	if c.head > len(c.order)/2 {
		c.order = append(c.order[:0:0], c.order[c.head:]...)
		c.head = 0
	}
	return id
}

func (c *cursors) get(id uint64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, found := c.byID[id]
	return k, found
}
