package redisapi

import (
	"fmt"
	"strings"
	"time"
)

// redisVersion is the Redis version kvd answers to HELLO and INFO with:
// clients gate features on it, and kvd's replies are Redis 7's.
const redisVersion = "7.0.0"

// authReply refuses AUTH: kvd's Redis listener has no users or passwords
// of its own (it acts with the credential of its kvd client). A password
// alone gets the reply of a Redis without a password configured; a user
// and password get WRONGPASS saying so, rather than being let in unchecked.
func authReply(args [][]byte) reply {
	switch len(args) {
	case 1:
		return errReply("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	case 2:
		return errReply("WRONGPASS kvd: the Redis listener has no users or passwords; connect without AUTH")
	}
	return errSyntax
}

func runAuth(_ *conn, args [][]byte) reply { return authReply(args[1:]) }

// runHello is HELLO [protover [AUTH user pass] [SETNAME name]].
func runHello(c *conn, args [][]byte) reply {
	proto := c.w.Proto
	if len(args) > 1 {
		n, okInt := parseInt(args[1])
		if !okInt {
			return errReply("ERR Protocol version is not an integer or out of range")
		}
		if n != 2 && n != 3 {
			return errReply("NOPROTO unsupported protocol version")
		}
		proto = int(n)
	}
	var name []byte
	setName := false
	for i := 2; i < len(args); i++ {
		switch {
		case strings.EqualFold(string(args[i]), "AUTH") && i+2 < len(args):
			if r := authReply(args[i+1 : i+3]); r != ok {
				return r
			}
			i += 2
		case strings.EqualFold(string(args[i]), "SETNAME") && i+1 < len(args):
			if !validName(args[i+1]) {
				return errBadName
			}
			name, setName = args[i+1], true
			i++
		default:
			return errReply("ERR Syntax error in HELLO option '" + clip(args[i]) + "'")
		}
	}
	c.w.Proto = proto
	if setName {
		c.setName(string(name))
	}
	return mapReply{
		bulkString("server"), bulkString("redis"),
		bulkString("version"), bulkString(redisVersion),
		bulkString("proto"), intReply(proto),
		bulkString("id"), intReply(c.id),
		bulkString("mode"), bulkString("standalone"),
		bulkString("role"), bulkString("master"),
		bulkString("modules"), array{},
	}
}

func runSelect(_ *conn, args [][]byte) reply {
	n, okInt := parseInt(args[1])
	switch {
	case !okInt:
		return errNotInt
	case n != 0:
		return errReply("ERR DB index is out of range")
	}
	return ok
}

func runQuit(c *conn, _ [][]byte) reply {
	c.closed = true
	return ok
}

// runReset is RESET: the connection as it was when it connected.
func runReset(c *conn, _ [][]byte) reply {
	c.endMulti()
	c.w.Proto = 2
	c.setName("")
	return simple("RESET")
}

const errBadName = errReply("ERR Client names cannot contain spaces, newlines or special characters.")

// validName: Redis refuses client names with spaces, newlines or bytes
// outside '!'..'~'.
func validName(b []byte) bool {
	for _, c := range b {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

func (c *conn) setName(n string) {
	c.mu.Lock()
	c.name = n
	c.mu.Unlock()
}

func (c *conn) getName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.name
}

// info is the connection's CLIENT INFO line.
func (c *conn) info() string {
	multi := -1
	if c.multi {
		multi = len(c.queue)
	}
	return fmt.Sprintf("id=%d addr=%s laddr=%s fd=0 name=%s age=%d idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=%d "+
		"qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=client|info user=default redir=-1 resp=%d\n",
		c.id, c.nc.RemoteAddr(), c.nc.LocalAddr(), c.getName(), int(time.Since(c.born).Seconds()), multi, c.w.Proto)
}

// runClient is CLIENT SETNAME, GETNAME, ID, INFO, LIST (this connection
// only), SETINFO (accepted, as clients send it in their handshake) and
// HELP.
func runClient(c *conn, args [][]byte) reply {
	sub := strings.ToUpper(string(args[1]))
	n := len(args)
	switch {
	case sub == "SETNAME" && n == 3:
		if !validName(args[2]) {
			return errBadName
		}
		c.setName(string(args[2]))
		return ok
	case sub == "GETNAME" && n == 2:
		if name := c.getName(); name != "" {
			return bulkString(name)
		}
		return nullReply{}
	case sub == "ID" && n == 2:
		return intReply(c.id)
	case sub == "INFO" && n == 2:
		return verbatim(c.info())
	case sub == "LIST" && n == 2:
		return verbatim(c.info())
	case sub == "SETINFO" && n == 4:
		return ok
	case sub == "HELP":
		return array{simple("CLIENT <subcommand> [<arg> ...]. Subcommands are:"),
			simple("GETNAME"), simple("SETNAME <name>"), simple("ID"), simple("INFO"), simple("LIST"),
			simple("SETINFO <LIB-NAME|LIB-VER> <value>")}
	case sub == "SETNAME" || sub == "GETNAME" || sub == "ID" || sub == "INFO" || sub == "LIST" || sub == "SETINFO":
		return errReply("ERR wrong number of arguments for 'client|" + strings.ToLower(sub) + "' command")
	}
	return unknownSubcommand("CLIENT", args[1])
}
