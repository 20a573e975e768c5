package redisapi_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/kvd-project/kvd/internal/redisapi"
)

// TestSessionsReplyAsRedis runs scripted sessions, each on a connection
// of its own, and checks every reply's shape and text against Redis'.
func TestSessionsReplyAsRedis(t *testing.T) {
	e := start(t, 1, redisapi.Config{})
	long := strings.Repeat("x", 1<<20)
	sessions := []struct {
		name  string
		steps []step
	}{
		{"connection", []step{
			cmd("PONG", "PING"), cmd(`"hi"`, "PING", "hi"), cmd(`"a b"`, "ECHO", "a b"),
			cmd("(error) ERR wrong number of arguments for 'echo' command", "ECHO"),
			cmd("OK", "SELECT", "0"), cmd("(error) ERR DB index is out of range", "SELECT", "1"),
			cmd("(error) ERR value is not an integer or out of range", "SELECT", "x"),
			cmd("(error) ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?", "AUTH", "pw"),
			cmd("(error) WRONGPASS kvd: the Redis listener has no users or passwords; connect without AUTH", "AUTH", "default", "pw"),
			cmd("(error) WRONGPASS kvd: the Redis listener has no users or passwords; connect without AUTH", "HELLO", "3", "AUTH", "bob", "pw"),
			cmd("RESET", "RESET"),
			cmd("(nil)", "CLIENT", "GETNAME"), cmd("OK", "CLIENT", "SETNAME", "app1"), cmd(`"app1"`, "CLIENT", "GETNAME"),
			cmd("(error) ERR Client names cannot contain spaces, newlines or special characters.", "CLIENT", "SETNAME", "a b"),
			cmd("OK", "CLIENT", "SETINFO", "LIB-NAME", "x"),
			cmd("(error) ERR unknown subcommand 'nope'. Try CLIENT HELP.", "CLIENT", "nope"),
			cmd("(error) ERR unknown command 'FOO', with args beginning with: 'a' 'b' ", "FOO", "a", "b"),
			cmd("(error) ERR unknown command 'lpush', with args beginning with: 'l' ", "lpush", "l"),
			cmd("PONG", "PING"), // still connected after unknown commands
			cmd(`["appendonly", "yes", "save", ""]`, "CONFIG", "GET", "save", "appendonly"),
			cmd("(error) NOPROTO unsupported protocol version", "HELLO", "4"),
		}},
		{"strings", []step{
			cmd("(nil)", "GET", "s:a"), cmd("OK", "SET", "s:a", "1"), cmd(`"1"`, "GET", "s:a"),
			cmd("(nil)", "SET", "s:a", "2", "NX"), cmd("OK", "SET", "s:a", "2", "XX"), cmd(`"2"`, "SET", "s:a", "3", "GET"),
			cmd("(nil)", "SET", "s:b", "1", "XX"), cmd("(nil)", "SET", "s:b", "1", "XX", "GET"),
			cmd("(error) ERR syntax error", "SET", "s:a", "1", "NX", "XX"),
			cmd("(error) ERR syntax error", "SET", "s:a", "1", "EX", "10", "KEEPTTL"),
			cmd("(error) ERR invalid expire time in 'set' command", "SET", "s:a", "1", "EX", "0"),
			cmd("(error) ERR value is not an integer or out of range", "SET", "s:a", "1", "EX", "x"),
			cmd("(integer) 1", "SETNX", "s:c", "v"), cmd("(integer) 0", "SETNX", "s:c", "w"),
			cmd(`"v"`, "GETSET", "s:c", "w"), cmd(`"w"`, "GETDEL", "s:c"), cmd("(nil)", "GETDEL", "s:c"),
			cmd("OK", "MSET", "s:m1", "1", "s:m2", "2"), cmd(`["1", "2", (nil)]`, "MGET", "s:m1", "s:m2", "s:m3"),
			cmd("(error) ERR wrong number of arguments for 'mset' command", "MSET", "s:m1", "1", "s:m2"),
			cmd("(integer) 0", "MSETNX", "s:m2", "x", "s:m3", "3"), cmd("(nil)", "GET", "s:m3"),
			cmd("(integer) 1", "MSETNX", "s:m3", "3", "s:m4", "4"),
			cmd("(integer) 3", "EXISTS", "s:m1", "s:m1", "s:m3", "s:none"),
			cmd("(integer) 2", "DEL", "s:m1", "s:m2", "s:m1", "s:none"), cmd("(integer) 1", "UNLINK", "s:m3"),
			cmd("string", "TYPE", "s:m4"), cmd("none", "TYPE", "s:none"),
			cmd("(integer) 5", "APPEND", "s:ap", "hello"), cmd("(integer) 11", "APPEND", "s:ap", " world"),
			cmd("(integer) 11", "STRLEN", "s:ap"), cmd("(integer) 0", "STRLEN", "s:none"),
			cmd(`"hello"`, "GETRANGE", "s:ap", "0", "4"), cmd(`"world"`, "GETRANGE", "s:ap", "-5", "-1"),
			cmd(`""`, "GETRANGE", "s:ap", "5", "3"), cmd(`"hello world"`, "GETRANGE", "s:ap", "0", "100"),
			cmd("(integer) 11", "SETRANGE", "s:ap", "6", "Redis"), cmd(`"hello Redis"`, "GET", "s:ap"),
			cmd("(integer) 5", "SETRANGE", "s:sr", "2", "abc"), cmd(`"\x00\x00abc"`, "GET", "s:sr"),
			cmd("(integer) 0", "SETRANGE", "s:none", "2", ""),
			cmd("(error) ERR offset is out of range", "SETRANGE", "s:sr", "-1", "x"),
			cmd("(error) ERR string exceeds maximum allowed size (proto-max-bulk-len)", "APPEND", "s:ap", long),
			cmd("(error) ERR kvd: empty keys are not supported", "SET", "", "v"),
		}},
		{"counters", []step{
			cmd("(integer) 1", "INCR", "c:a"), cmd("(integer) 0", "DECR", "c:a"), cmd("(integer) 10", "INCRBY", "c:a", "10"),
			cmd("(integer) 7", "DECRBY", "c:a", "3"), cmd(`"7"`, "GET", "c:a"),
			cmd("(error) ERR value is not an integer or out of range", "INCRBY", "c:a", "1.5"),
			cmd("(error) ERR value is not an integer or out of range", "INCRBY", "c:a", "+1"),
			cmd("OK", "SET", "c:b", "x"), cmd("(error) ERR value is not an integer or out of range", "INCR", "c:b"),
			cmd("OK", "SET", "c:max", "9223372036854775807"),
			cmd("(error) ERR increment or decrement would overflow", "INCR", "c:max"),
			cmd(`"10.5"`, "INCRBYFLOAT", "c:f", "10.5"), cmd(`"10.6"`, "INCRBYFLOAT", "c:f", "0.1"),
			cmd(`"5.6"`, "INCRBYFLOAT", "c:f", "-5"),
			cmd("(error) ERR value is not a valid float", "INCRBYFLOAT", "c:b", "1"),
			cmd("(error) ERR value is not a valid float", "INCRBYFLOAT", "c:f", "abc"),
		}},
		{"expiry", []step{
			cmd("(integer) -2", "TTL", "e:a"), cmd("OK", "SET", "e:a", "v"), cmd("(integer) -1", "TTL", "e:a"),
			cmd("(integer) 1", "EXPIRE", "e:a", "100"), cmd("(integer) 100", "TTL", "e:a"), cmd(`"v"`, "GET", "e:a"),
			cmd("(integer) 0", "EXPIRE", "e:a", "50", "NX"), cmd("(integer) 1", "EXPIRE", "e:a", "50", "XX"),
			cmd("(integer) 50", "TTL", "e:a"),
			cmd("(integer) 3", "INCRBY", "e:n", "3"), cmd("(integer) 1", "PEXPIRE", "e:n", "200000"),
			cmd("(integer) 4", "INCR", "e:n"), cmd("(integer) 200", "TTL", "e:n"), // INCR keeps the expiry
			cmd("(integer) 1", "PERSIST", "e:a"), cmd("(integer) -1", "TTL", "e:a"), cmd("(integer) 0", "PERSIST", "e:a"),
			cmd("OK", "SET", "e:b", "v", "EX", "100"), cmd("(integer) 100", "TTL", "e:b"),
			cmd("OK", "SET", "e:b", "w", "KEEPTTL"), cmd("(integer) 100", "TTL", "e:b"),
			cmd("OK", "SET", "e:b", "w"), cmd("(integer) -1", "TTL", "e:b"), // SET drops it
			cmd("(nil)", "SET", "e:b", "x", "PX", "100000", "NX"), cmd(`"w"`, "SET", "e:b", "x", "PX", "100000", "XX", "GET"),
			cmd("(integer) 100", "TTL", "e:b"),
			cmd("(integer) 1", "EXPIRE", "e:b", "-1"), cmd("(nil)", "GET", "e:b"), // a past time deletes
			cmd("(integer) 0", "EXPIRE", "e:none", "10"),
			cmd("(error) ERR Unsupported option GT", "EXPIRE", "e:a", "10", "GT"),
		}},
		{"multi", []step{
			cmd("(error) ERR EXEC without MULTI", "EXEC"), cmd("(error) ERR DISCARD without MULTI", "DISCARD"),
			cmd("OK", "MULTI"), cmd("(error) ERR MULTI calls can not be nested", "MULTI"),
			cmd("QUEUED", "SET", "m:a", "1"), cmd("QUEUED", "INCR", "m:a"), cmd("QUEUED", "GET", "m:a"),
			cmd("QUEUED", "INCR", "m:str"), cmd("QUEUED", "APPEND", "m:str", "x"), cmd("QUEUED", "INCR", "m:str"),
			cmd(`[OK, (integer) 2, "2", (integer) 1, (integer) 2, (error) ERR value is not an integer or out of range]`, "EXEC"),
			cmd("OK", "MULTI"), cmd("QUEUED", "SET", "m:b", "1"), cmd("OK", "DISCARD"), cmd("(nil)", "GET", "m:b"),
			cmd("OK", "MULTI"), cmd("QUEUED", "SET", "m:b", "1"),
			cmd("(error) ERR wrong number of arguments for 'get' command", "GET"),
			cmd("(error) EXECABORT Transaction discarded because of previous errors.", "EXEC"), cmd("(nil)", "GET", "m:b"),
			cmd("OK", "MULTI"),
			cmd("(error) ERR kvd: 'expire' cannot run inside MULTI (see docs/redis-compatibility.md)", "EXPIRE", "m:a", "1"),
			cmd("(error) EXECABORT Transaction discarded because of previous errors.", "EXEC"),
			cmd("OK", "WATCH", "m:w"), cmd("OK", "MULTI"), cmd("(error) ERR WATCH inside MULTI is not allowed", "WATCH", "m:x"),
			cmd("QUEUED", "SET", "m:w", "1"), cmd("[OK]", "EXEC"), cmd(`"1"`, "GET", "m:w"),
		}},
		{"keys", []step{
			cmd("OK", "MSET", "k:a1", "1", "k:a2", "2", "k:b1", "3", "k:c?", "4"),
			cmd(`["k:a1", "k:a2"]`, "KEYS", "k:a*"), cmd(`["k:a1", "k:b1"]`, "KEYS", "k:?1"),
			cmd(`["k:a1", "k:a2", "k:b1"]`, "KEYS", "k:[a-b]*"), cmd(`["k:c?"]`, "KEYS", `k:c\?`),
			cmd(`["k:c?"]`, "KEYS", "k:[^ab]*"),
			cmd(`["0", ["k:a1", "k:a2", "k:b1", "k:c?"]]`, "SCAN", "0", "MATCH", "k:*", "COUNT", "100"),
			cmd(`["0", []]`, "SCAN", "0", "MATCH", "k:*", "TYPE", "hash"),
			cmd("(error) ERR invalid cursor", "SCAN", "x"), cmd("(error) ERR syntax error", "SCAN", "0", "COUNT", "0"),
			cmd("(error) ERR syntax error", "SCAN", "0", "MATCH"),
		}},
	}
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Add(1)
		t.Run(s.name, func(t *testing.T) {
			defer wg.Done()
			e.dial(t).run(s.steps)
		})
	}
	wg.Wait()
}
