package redisapi

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/resp"
	"github.com/kvd-project/kvd/internal/version"
)

// commandInfo is one command's COMMAND reply (Redis 7's ten fields).
func commandInfo(c *command) reply {
	flags := array{}
	for _, f := range c.flagNames() {
		flags = append(flags, simple(f))
	}
	return array{bulkString(c.name), intReply(c.arity), flags, intReply(c.first), intReply(c.last), intReply(c.step),
		array{simple("@" + c.group)}, array{}, array{}, array{}}
}

// commandDoc is one command's COMMAND DOCS entry.
func commandDoc(c *command) reply {
	return mapReply{bulkString("summary"), bulkString("served by kvd (docs/redis-compatibility.md)"),
		bulkString("since"), bulkString("1.0.0"), bulkString("group"), bulkString(c.group)}
}

// runCommand is COMMAND, COMMAND COUNT, LIST, INFO and DOCS.
func runCommand(c *conn, args [][]byte) reply {
	all := c.s.sortedCommands()
	if len(args) == 1 {
		out := make(array, len(all))
		for i, cmd := range all {
			out[i] = commandInfo(cmd)
		}
		return out
	}
	sub := strings.ToUpper(string(args[1]))
	named := func(f func(*command) reply, missing reply, pairs bool) reply {
		var out []reply
		if len(args) == 2 {
			for _, cmd := range all {
				if pairs {
					out = append(out, bulkString(cmd.name))
				}
				out = append(out, f(cmd))
			}
		}
		for _, a := range args[2:] {
			cmd, found := c.s.cmds[lowerName(a)]
			switch {
			case found && pairs:
				out = append(out, bulkString(cmd.name), f(cmd))
			case found:
				out = append(out, f(cmd))
			case !pairs:
				out = append(out, missing)
			}
		}
		if pairs {
			return mapReply(out)
		}
		return array(out)
	}
	switch {
	case sub == "COUNT" && len(args) == 2:
		return intReply(len(all))
	case sub == "LIST" && len(args) == 2:
		out := make(array, len(all))
		for i, cmd := range all {
			out[i] = bulkString(cmd.name)
		}
		return out
	case sub == "INFO":
		return named(commandInfo, nullReply{}, false)
	case sub == "DOCS":
		return named(commandDoc, nil, true)
	case sub == "HELP":
		return array{simple("COMMAND [<subcommand> [<arg> ...]]. Subcommands are:"),
			simple("(no subcommand)"), simple("COUNT"), simple("LIST"), simple("INFO [<command-name> ...]"), simple("DOCS [<command-name> ...]")}
	}
	return unknownSubcommand("COMMAND", args[1])
}

// configParams are the parameters CONFIG GET answers: what clients and
// redis-benchmark ask about, with kvd's equivalents (every write is
// committed to a quorum's disks before it is acknowledged: appendfsync
// always, in Redis' terms).
func (s *Server) configParams() [][2]string {
	idle := int64(0)
	if s.cfg.IdleTimeout > 0 {
		idle = int64(s.cfg.IdleTimeout / time.Second)
	}
	return [][2]string{
		{"appendfsync", "always"},
		{"appendonly", "yes"},
		{"databases", "1"},
		{"maxclients", strconv.Itoa(s.cfg.MaxConns)},
		{"maxmemory", "0"},
		{"proto-max-bulk-len", strconv.Itoa(resp.MaxBulk)},
		{"save", ""},
		{"timeout", strconv.FormatInt(idle, 10)},
	}
}

// runConfig is CONFIG GET (glob patterns, as Redis); CONFIG SET and the
// rest are refused: kvd is configured by its flags.
func runConfig(c *conn, args [][]byte) reply {
	sub := strings.ToUpper(string(args[1]))
	switch sub {
	case "GET":
		if len(args) < 3 {
			return errReply("ERR wrong number of arguments for 'config|get' command")
		}
		out := mapReply{}
		for _, p := range c.s.configParams() {
			for _, pat := range args[2:] {
				if globMatch([]byte(strings.ToLower(string(pat))), []byte(p[0])) {
					out = append(out, bulkString(p[0]), bulkString(p[1]))
					break
				}
			}
		}
		return out
	case "SET", "RESETSTAT", "REWRITE":
		return errReply("ERR kvd: CONFIG " + sub + " is not supported; kvd is configured by its flags")
	}
	return unknownSubcommand("CONFIG", args[1])
}

// runInfo is INFO with the server, clients, replication and keyspace
// sections (all of them by default, or those named).
func runInfo(c *conn, args [][]byte) reply {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["default"] || want["everything"]
	var b strings.Builder
	section := func(name string, f func(b *strings.Builder)) {
		if all || want[strings.ToLower(name)] {
			if b.Len() > 0 {
				b.WriteString("\r\n")
			}
			b.WriteString("# " + name + "\r\n")
			f(&b)
		}
	}
	s := c.s
	section("Server", func(b *strings.Builder) {
		up := time.Since(s.started)
		fmt.Fprintf(b, "redis_version:%s\r\nkvd_version:%s\r\nredis_mode:standalone\r\narch_bits:64\r\nprocess_id:%d\r\n"+
			"tcp_port:%s\r\nuptime_in_seconds:%d\r\nuptime_in_days:%d\r\n",
			redisVersion, version.Get().Version, os.Getpid(), port(c), int64(up.Seconds()), int64(up.Hours()/24))
	})
	section("Clients", func(b *strings.Builder) {
		fmt.Fprintf(b, "connected_clients:%d\r\nmaxclients:%d\r\n", s.Conns(), s.cfg.MaxConns)
	})
	section("Stats", func(b *strings.Builder) {
		fmt.Fprintf(b, "total_connections_received:%d\r\ntotal_commands_processed:%d\r\n", s.served.Load(), s.commands.Load())
		// The kvd client's GETs, by how they were answered: one-sided
		// (RDMA READs of the leader's region, no server CPU) or by RPC.
		// The client is shared by everything this process serves.
		st := s.c.Stats()
		fmt.Fprintf(b, "kvd_client_gets:%d\r\nkvd_client_gets_one_sided:%d\r\nkvd_client_gets_rpc:%d\r\nkvd_client_gets_fallback:%d\r\n",
			st.Gets, st.OneSided, st.RPCGets, st.Fallbacks)
	})
	section("Replication", func(b *strings.Builder) { s.replicationInfo(b) })
	section("Keyspace", func(b *strings.Builder) { s.keyspaceInfo(b) })
	return verbatim(b.String())
}

func port(c *conn) string {
	a := c.nc.LocalAddr().String()
	return a[strings.LastIndexByte(a, ':')+1:]
}

// replicationInfo reports every kvd endpoint as a master (each serves
// writes, through the cluster's leader) with kvd's own view beside it:
// this server's role, the members and the leader.
func (s *Server) replicationInfo(b *strings.Builder) {
	fmt.Fprintf(b, "role:master\r\nconnected_slaves:0\r\nkvd_role:%s\r\n", s.cfg.Role)
	ctx, cancel := contextWithTimeout(s.cfg.CommandTimeout)
	defer cancel()
	members, err := s.c.Members(ctx)
	if err != nil {
		fmt.Fprintf(b, "kvd_members_error:%s\r\n", strings.ReplaceAll(err.Error(), "\r\n", " "))
		return
	}
	fmt.Fprintf(b, "kvd_members:%d\r\n", len(members))
	for i, m := range members {
		kind := "voter"
		if m.IsLearner {
			kind = "learner"
		}
		fmt.Fprintf(b, "kvd_member%d:id=%d,addr=%s,client_addr=%s,kind=%s\r\n", i, m.ID, m.Addr, m.ClientAddr, kind)
	}
}

// keyspaceInfo reports db0 as Redis does; expires counts the TTL leases
// (one per key with an expiry).
func (s *Server) keyspaceInfo(b *strings.Builder) {
	ctx, cancel := contextWithTimeout(s.cfg.CommandTimeout)
	defer cancel()
	res, err := s.c.Range(ctx, nil, nil, client.WithCountOnly())
	if err != nil || res.Count == 0 {
		return
	}
	leases, _ := s.c.Leases(ctx)
	fmt.Fprintf(b, "db0:keys=%d,expires=%d,avg_ttl=0\r\n", res.Count, len(leases))
}
