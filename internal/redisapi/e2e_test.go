package redisapi_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/redisapi"
)

// These tests run Redis' own clients against kvd: redis-cli and
// redis-benchmark (Debian's redis-tools) and redis-py (python3-redis, for
// Debian's /usr/bin/python3). scripts/deps.sh installs them; a missing
// one fails the test.

func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed (run scripts/deps.sh, which make test-go runs): %v", name, err)
	}
	return p
}

func (e *env) port() string {
	_, p, _ := net.SplitHostPort(e.addr)
	return p
}

// cli runs redis-cli against the server with args, stdin as its input.
func (e *env) cli(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(tool(t, "redis-cli"), append([]string{"-h", "127.0.0.1", "-p", e.port()}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %q: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestRedisCLISessions runs redis-cli with commands as arguments and as a
// script on its standard input.
func TestRedisCLISessions(t *testing.T) {
	e := start(t, 3, redisapi.Config{})
	argTests := []struct {
		args []string
		want string
	}{
		{[]string{"set", "a", "b"}, "OK\n"},
		{[]string{"get", "a"}, "b\n"},
		{[]string{"ping"}, "PONG\n"},
		{[]string{"set", "n", "10", "EX", "100"}, "OK\n"},
		{[]string{"incrby", "n", "5"}, "15\n"},
		{[]string{"mset", "x", "1", "y", "2"}, "OK\n"},
		{[]string{"mget", "x", "y", "z"}, "1\n2\n\n"},
		{[]string{"del", "x", "y", "z"}, "2\n"},
		{[]string{"dbsize"}, "2\n"},
		{[]string{"nosuch", "k"}, "ERR unknown command 'nosuch', with args beginning with: 'k' \n\n"},
		{[]string{"config", "get", "save"}, "save\n\n"},
	}
	for _, tt := range argTests {
		if got := e.cli(t, "", tt.args...); got != tt.want {
			t.Errorf("redis-cli %q: %q, want %q", tt.args, got, tt.want)
		}
		if tt.args[0] == "incrby" {
			// INCRBY keeps the key's expiry (Redis does): TTL is what is
			// left of 100 s, less the time the commands took on a
			// machine that may be loaded.
			got := strings.TrimSpace(e.cli(t, "", "ttl", "n"))
			if ttl, err := strconv.Atoi(got); err != nil || ttl < 90 || ttl > 100 {
				t.Errorf("redis-cli ttl n after incrby: %q, want 90..100", got)
			}
		}
	}
	script := "SET s 1\nINCR s\nAPPEND s x\nGET s\nMULTI\nINCR c\nINCR c\nEXEC\nGETRANGE s 0 0\nQUIT\n"
	want := "OK\n2\n2\n2x\nOK\nQUEUED\nQUEUED\n1\n2\n2\n" // redis-cli takes QUIT itself
	if got := e.cli(t, script); got != want {
		t.Errorf("scripted session: %q, want %q", got, want)
	}
	if got := e.cli(t, "", "info", "replication"); !strings.Contains(got, "role:master") || !strings.Contains(got, "kvd_members:3") {
		t.Errorf("INFO replication: %q", got)
	}
}

// TestRedisCLIPipeAndScan: redis-cli --pipe mass insert, then --scan
// --pattern lists exactly the keys inserted under the pattern.
func TestRedisCLIPipeAndScan(t *testing.T) {
	e := start(t, 1, redisapi.Config{})
	var in bytes.Buffer
	var want []string
	for i := range 1000 {
		k, v := fmt.Sprintf("user:%04d", i), fmt.Sprint(i)
		fmt.Fprintf(&in, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(v), v)
		want = append(want, k)
		fmt.Fprintf(&in, "*3\r\n$3\r\nSET\r\n$%d\r\nother:%d\r\n$1\r\nx\r\n", len(fmt.Sprint("other:", i)), i)
	}
	out := e.cli(t, in.String(), "--pipe")
	if !strings.Contains(out, "errors: 0, replies: 2000") {
		t.Fatalf("--pipe: %s", out)
	}
	got := strings.Fields(e.cli(t, "", "--scan", "--pattern", "user:*"))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("--scan --pattern user:* listed %d keys (want %d): %.200q", len(got), len(want), got)
	}
	if got := e.cli(t, "", "--scan", "--pattern", "user:00[0-1]?"); len(strings.Fields(got)) != 20 {
		t.Fatalf("--scan --pattern user:00[0-1]?: %q", got)
	}
}

// TestRedisBenchmark runs redis-benchmark's ping, set, get, incr and mset
// tests, unpipelined and with -P 16, with 50 connections: every request
// must succeed, and INCR's counter must count every one.
func TestRedisBenchmark(t *testing.T) {
	e := start(t, 3, redisapi.Config{})
	bench := tool(t, "redis-benchmark")
	for i, extra := range [][]string{nil, {"-P", "16"}} {
		args := append([]string{"-h", "127.0.0.1", "-p", e.port(), "-t", "ping,set,get,incr,mset", "-n", "2000", "-c", "50", "--csv"}, extra...)
		out, err := exec.Command(bench, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-benchmark %q: %v\n%s", extra, err, out)
		}
		s := string(out)
		if strings.Contains(s, "ERR") || strings.Contains(strings.ToLower(s), "error") {
			t.Fatalf("redis-benchmark %q reported errors:\n%s", extra, s)
		}
		for _, test := range []string{"PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "MSET (10 keys)"} {
			if !strings.Contains(s, `"`+test+`"`) {
				t.Errorf("redis-benchmark %q: no result for %s:\n%s", extra, test, s)
			}
		}
		if got, want := e.cli(t, "", "get", "counter:__rand_int__"), fmt.Sprintf("%d\n", 2000*(i+1)); got != want {
			t.Errorf("after %d benchmark runs the INCR counter is %q, want %q", i+1, got, want)
		}
	}
}

// pySession is a redis-py session: a pipeline, a WATCH transaction that
// another client's write makes retry, scan_iter, expiry and errors.
const pySession = `
import sys, redis
port = int(sys.argv[1])
r = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
o = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
assert r.ping()
p = r.pipeline(transaction=False)
for i in range(50):
    p.set("py:%02d" % i, i)
p.incr("py:n")
p.get("py:07")
res = p.execute()
assert res[:50] == [True]*50 and res[50] == 1 and res[51] == "7", res
p = r.pipeline()  # MULTI/EXEC
p.incr("py:n").incrby("py:n", 10).get("py:n")
assert p.execute() == [2, 12, "12"]
tries = 0
with r.pipeline() as p:
    while True:
        try:
            p.watch("py:n")
            v = int(p.get("py:n"))
            tries += 1
            if tries == 1:
                o.incr("py:n")  # someone else writes in between
            p.multi()
            p.set("py:n", v * 2)
            p.execute()
            break
        except redis.WatchError:
            continue
assert tries == 2 and r.get("py:n") == "26", (tries, r.get("py:n"))
keys = sorted(r.scan_iter(match="py:[0-9]*", count=7))
assert keys == ["py:%02d" % i for i in range(50)], keys
assert r.set("py:ttl", "v", ex=100) and 99 <= r.ttl("py:ttl") <= 100
assert r.set("py:nx", "1", nx=True) and r.set("py:nx", "2", nx=True) is None
assert r.mget("py:01", "py:none") == ["1", None]
assert r.delete("py:01", "py:02", "py:none") == 2
assert r.exists("py:03", "py:03") == 2
try:
    r.incr("py:ttl")
    raise SystemExit("INCR of a string did not fail")
except redis.ResponseError as e:
    assert str(e) == "value is not an integer or out of range", str(e)
try:
    r.lpush("py:list", "x")
    raise SystemExit("LPUSH did not fail")
except redis.ResponseError as e:
    assert "unknown command 'LPUSH'" in str(e), str(e)
assert r.ping()  # the connection is kept
r.client_setname("pyclient")
assert r.client_getname() == "pyclient"
print("ok")
`

// TestPythonRedisSession runs a redis-py session (python3-redis).
func TestPythonRedisSession(t *testing.T) {
	e := start(t, 3, redisapi.Config{})
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import redis").CombinedOutput(); err != nil {
		t.Fatalf("redis-py is not installed for %s (run scripts/deps.sh): %v\n%s", py, err, out)
	}
	script := filepath.Join(t.TempDir(), "session.py")
	if err := os.WriteFile(script, []byte(pySession), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, script, e.port()).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("python session: %v\n%s", err, out)
	}
}
