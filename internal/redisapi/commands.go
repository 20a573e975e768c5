package redisapi

import "sort"

// command is one Redis command kvd serves.
type command struct {
	name  string
	arity int // Redis' convention: n exactly, -n at least n (the name counts)
	flags uint
	group string // COMMAND DOCS' group
	// first, last, step: the key positions COMMAND reports.
	first, last, step int
	// run serves the command outside MULTI when it needs more than a view
	// (a fast path, a lease, a scan, the connection's state).
	run func(c *conn, args [][]byte) reply
	// exec computes the command on a view: it runs alone through runView
	// when run is nil, and inside EXEC. Commands without one cannot be
	// queued by MULTI.
	exec func(v *view, args [][]byte) reply
}

const (
	flagWrite        uint = 1 << iota
	flagReadonly          // reads keys only
	flagMultiControl      // MULTI, EXEC, DISCARD, WATCH...: never queued
	flagFast
)

func (c *command) has(f uint) bool { return c.flags&f != 0 }

func (c *command) arityOK(n int) bool {
	if c.arity >= 0 {
		return n == c.arity
	}
	return n >= -c.arity
}

// flagNames are the flags COMMAND reports.
func (c *command) flagNames() []string {
	var f []string
	if c.has(flagWrite) {
		f = append(f, "write")
	}
	if c.has(flagReadonly) {
		f = append(f, "readonly")
	}
	if c.has(flagFast) {
		f = append(f, "fast")
	}
	if c.has(flagMultiControl) {
		f = append(f, "no-multi")
	}
	return f
}

// commandTable is every command served, by lower-case name.
func commandTable() map[string]*command {
	const (
		w, r, ctl, fast = flagWrite, flagReadonly, flagMultiControl, flagFast
	)
	list := []*command{
		// Connection.
		{name: "ping", arity: -1, flags: fast, group: "connection", exec: execPing},
		{name: "echo", arity: 2, flags: fast, group: "connection", exec: execEcho},
		{name: "hello", arity: -1, flags: fast, group: "connection", run: runHello},
		{name: "auth", arity: -2, flags: fast, group: "connection", run: runAuth},
		{name: "select", arity: 2, flags: fast, group: "connection", run: runSelect},
		{name: "quit", arity: -1, flags: ctl | fast, group: "connection", run: runQuit},
		{name: "client", arity: -2, flags: 0, group: "connection", run: runClient},
		{name: "reset", arity: 1, flags: ctl | fast, group: "connection", run: runReset},
		// Server.
		{name: "command", arity: -1, flags: 0, group: "server", run: runCommand},
		{name: "info", arity: -1, flags: 0, group: "server", run: runInfo},
		{name: "config", arity: -2, flags: 0, group: "server", run: runConfig},
		{name: "dbsize", arity: 1, flags: r, group: "server", run: runDBSize},
		// Strings.
		{name: "get", arity: 2, flags: r | fast, group: "string", first: 1, last: 1, step: 1, run: runGet, exec: execGet},
		{name: "set", arity: -3, flags: w, group: "string", first: 1, last: 1, step: 1, run: runSet, exec: execSet},
		{name: "setnx", arity: 3, flags: w | fast, group: "string", first: 1, last: 1, step: 1, run: runSetNX, exec: execSetNX},
		{name: "getset", arity: 3, flags: w | fast, group: "string", first: 1, last: 1, step: 1, exec: execGetSet},
		{name: "getdel", arity: 2, flags: w | fast, group: "string", first: 1, last: 1, step: 1, exec: execGetDel},
		{name: "mget", arity: -2, flags: r | fast, group: "string", first: 1, last: -1, step: 1, run: runMGet, exec: execMGet},
		{name: "mset", arity: -3, flags: w, group: "string", first: 1, last: -1, step: 2, exec: execMSet},
		{name: "msetnx", arity: -3, flags: w, group: "string", first: 1, last: -1, step: 2, exec: execMSetNX},
		{name: "incr", arity: 2, flags: w | fast, group: "string", first: 1, last: 1, step: 1, exec: execIncr(1, false)},
		{name: "decr", arity: 2, flags: w | fast, group: "string", first: 1, last: 1, step: 1, exec: execIncr(-1, false)},
		{name: "incrby", arity: 3, flags: w | fast, group: "string", first: 1, last: 1, step: 1, exec: execIncr(1, true)},
		{name: "decrby", arity: 3, flags: w | fast, group: "string", first: 1, last: 1, step: 1, exec: execIncr(-1, true)},
		{name: "incrbyfloat", arity: 3, flags: w | fast, group: "string", first: 1, last: 1, step: 1, exec: execIncrByFloat},
		{name: "append", arity: 3, flags: w, group: "string", first: 1, last: 1, step: 1, exec: execAppend},
		{name: "strlen", arity: 2, flags: r | fast, group: "string", first: 1, last: 1, step: 1, exec: execStrlen},
		{name: "getrange", arity: 4, flags: r, group: "string", first: 1, last: 1, step: 1, exec: execGetRange},
		{name: "setrange", arity: 4, flags: w, group: "string", first: 1, last: 1, step: 1, exec: execSetRange},
		// Generic.
		{name: "del", arity: -2, flags: w, group: "generic", first: 1, last: -1, step: 1, run: runDel, exec: execDel},
		{name: "unlink", arity: -2, flags: w | fast, group: "generic", first: 1, last: -1, step: 1, run: runDel, exec: execDel},
		{name: "exists", arity: -2, flags: r | fast, group: "generic", first: 1, last: -1, step: 1, run: runExists, exec: execExists},
		{name: "type", arity: 2, flags: r | fast, group: "generic", first: 1, last: 1, step: 1, exec: execType},
		{name: "expire", arity: -3, flags: w | fast, group: "generic", first: 1, last: 1, step: 1, run: runExpire},
		{name: "pexpire", arity: -3, flags: w | fast, group: "generic", first: 1, last: 1, step: 1, run: runExpire},
		{name: "ttl", arity: 2, flags: r | fast, group: "generic", first: 1, last: 1, step: 1, run: runTTL},
		{name: "pttl", arity: 2, flags: r | fast, group: "generic", first: 1, last: 1, step: 1, run: runTTL},
		{name: "persist", arity: 2, flags: w | fast, group: "generic", first: 1, last: 1, step: 1, run: runPersist},
		{name: "keys", arity: 2, flags: r, group: "generic", run: runKeys},
		{name: "scan", arity: -2, flags: r, group: "generic", run: runScan},
		// Transactions.
		{name: "multi", arity: 1, flags: ctl | fast, group: "transactions", run: runMulti},
		{name: "exec", arity: 1, flags: ctl, group: "transactions", run: runExec},
		{name: "discard", arity: 1, flags: ctl | fast, group: "transactions", run: runDiscard},
		{name: "watch", arity: -2, flags: ctl | fast, group: "transactions", first: 1, last: -1, step: 1, run: runWatch},
		{name: "unwatch", arity: 1, flags: ctl | fast, group: "transactions", run: runUnwatch},
	}
	m := make(map[string]*command, len(list))
	for _, c := range list {
		m[c.name] = c
	}
	return m
}

// sortedCommands lists the table in name order (COMMAND's replies).
func (s *Server) sortedCommands() []*command {
	l := make([]*command, 0, len(s.cmds))
	for _, c := range s.cmds {
		l = append(l, c)
	}
	sort.Slice(l, func(i, j int) bool { return l[i].name < l[j].name })
	return l
}
