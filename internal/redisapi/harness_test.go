package redisapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/redisapi"
	"github.com/kvd-project/kvd/internal/resp"
)

// env is a kvd cluster with the Redis protocol served in front of it.
type env struct {
	nodes []*kvdtest.Node
	kvd   *client.Client
	srv   *redisapi.Server
	addr  string
}

// start runs an n-node in-process cluster and serves Redis for it on a
// loopback port, with cfg (Client is filled in).
func start(t testing.TB, n int, cfg redisapi.Config) *env {
	t.Helper()
	// A loaded machine (tests under -race beside others) can hold a
	// healthy node's answer past the default one-second attempt timeout,
	// which fails a read that could have been answered.
	return startAttempt(t, n, cfg, 10*time.Second)
}

// startAttempt is start with the server's kvd client bounding each
// attempt at a node by attempt (client.Config.AttemptTimeout).
func startAttempt(t testing.TB, n int, cfg redisapi.Config, attempt time.Duration) *env {
	t.Helper()
	// A slower tick than the default (elections after 3-6 s instead of
	// 1-2 s): on a loaded machine a delayed heartbeat must not elect a new
	// leader mid-run, which fails writes as maybe applied and stops
	// redis-benchmark at its first error.
	nodes := kvdtest.StartCluster(t, n, kvdtest.Options{Tick: 300 * time.Millisecond})
	kvdtest.WaitLeader(t, nodes, 30*time.Second)
	kc, err := client.New(client.Config{Endpoints: kvdtest.Endpoints(nodes), AttemptTimeout: attempt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kc.Close() })
	cfg.Client = kc
	srv, err := redisapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return &env{nodes: nodes, kvd: kc, srv: srv, addr: l.Addr().String()}
}

// rconn is a raw RESP connection whose replies are rendered as text:
// "OK" (simple), "(error) ...", "(integer) n", "\"bulk\"", "(nil)",
// "[a, b]" (arrays, maps, sets), "(double) f".
type rconn struct {
	t  testing.TB
	nc net.Conn
	br *bufio.Reader
}

func (e *env) dial(t testing.TB) *rconn {
	t.Helper()
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rconn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// send writes one command as a multibulk array.
func (c *rconn) send(args ...string) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	c.write(b.String())
}

func (c *rconn) write(s string) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write([]byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

// do sends one command and returns its rendered reply.
func (c *rconn) do(args ...string) string {
	c.t.Helper()
	c.send(args...)
	return c.read()
}

func (c *rconn) read() string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	s, err := c.readReply()
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

func (c *rconn) line() (string, error) {
	l, err := c.br.ReadString('\n')
	return strings.TrimSuffix(l, "\r\n"), err
}

func (c *rconn) readReply() (string, error) {
	l, err := c.line()
	if err != nil {
		return "", err
	}
	if l == "" {
		return "", fmt.Errorf("empty line")
	}
	switch l[0] {
	case '+':
		return l[1:], nil
	case '-':
		return "(error) " + l[1:], nil
	case ':':
		return "(integer) " + l[1:], nil
	case ',':
		return "(double) " + l[1:], nil
	case '_':
		return "(nil)", nil
	case '$', '=':
		n, _ := strconv.Atoi(l[1:])
		if n < 0 {
			return "(nil)", nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(c.br, b); err != nil {
			return "", err
		}
		return strconv.Quote(string(b[:n])), nil
	case '*', '%', '~':
		n, _ := strconv.Atoi(l[1:])
		if n < 0 {
			return "(nil)", nil
		}
		if l[0] == '%' {
			n *= 2
		}
		var parts []string
		for i := 0; i < n; i++ {
			p, err := c.readReply()
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	}
	return "", fmt.Errorf("bad reply line %q", l)
}

// step is one command of a scripted session and its expected reply.
type step struct {
	args []string
	want string
}

func cmd(want string, args ...string) step { return step{args: args, want: want} }

// run runs a scripted session on one connection.
func (c *rconn) run(steps []step) {
	c.t.Helper()
	for _, s := range steps {
		if got := c.do(s.args...); got != s.want {
			c.t.Errorf("%q: got %s, want %s", s.args, got, s.want)
		}
	}
}

func respLimits(args, inline int) resp.Limits { return resp.Limits{MaxArgs: args, MaxInline: inline} }
