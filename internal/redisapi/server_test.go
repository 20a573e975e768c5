package redisapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/errs"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/redisapi"
)

// TestIncrFromManyConnectionsLosesNoIncrement: INCR is a read and a
// compare-and-swap; 50 connections incrementing one key must end at the
// number of increments acknowledged.
func TestIncrFromManyConnectionsLosesNoIncrement(t *testing.T) {
	e := start(t, 3, redisapi.Config{})
	const conns, each = 50, 10
	var wg sync.WaitGroup
	acked := make([]int, conns)
	for i := range conns {
		c := e.dial(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				c.send("INCR", "ctr")
				c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
				r, err := c.readReply()
				if err != nil {
					t.Error(err)
					return
				}
				if strings.HasPrefix(r, "(integer) ") {
					acked[i]++
				} else {
					t.Errorf("INCR: %s", r)
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range acked {
		total += n
	}
	if got := e.dial(t).do("GET", "ctr"); got != strconv.Quote(strconv.Itoa(total)) {
		t.Fatalf("counter %s after %d acknowledged increments", got, total)
	}
}

// TestReadModifyWriteRetriesOnConflict: a key changed between an APPEND's
// read and its commit makes the commit apply nothing and the APPEND run
// again on the new value.
func TestReadModifyWriteRetriesOnConflict(t *testing.T) {
	var kc *client.Client
	var once sync.Once
	cfg := redisapi.Config{Knobs: redisapi.Knobs{BeforeCommit: func(attempt int) {
		if attempt == 1 {
			once.Do(func() {
				if err := kc.Put(context.Background(), []byte("rmw"), []byte("B")); err != nil {
					panic(err)
				}
			})
		}
	}}}
	e := start(t, 1, cfg)
	kc = e.kvd
	c := e.dial(t)
	if err := kc.Put(context.Background(), []byte("rmw"), []byte("A")); err != nil {
		t.Fatal(err)
	}
	if got := c.do("APPEND", "rmw", "x"); got != "(integer) 2" {
		t.Fatalf("APPEND: %s", got)
	}
	if got := c.do("GET", "rmw"); got != `"Bx"` {
		t.Fatalf("after a concurrent write: %s, want \"Bx\"", got)
	}
}

// TestWatchedKeyChangedAbortsExec: EXEC returns a null array when a
// watched key was written by someone else, and applies nothing.
func TestWatchedKeyChangedAbortsExec(t *testing.T) {
	e := start(t, 1, redisapi.Config{})
	a, b := e.dial(t), e.dial(t)
	for _, proto := range []struct {
		hello, null string
	}{{"2", "(nil)"}, {"3", "(nil)"}} {
		a.do("HELLO", proto.hello)
		a.run([]step{cmd("OK", "SET", "w", "0"), cmd("OK", "WATCH", "w", "other"), cmd("OK", "MULTI"),
			cmd("QUEUED", "SET", "w", "mine"), cmd("QUEUED", "SET", "w2", "mine")})
		b.run([]step{cmd("OK", "SET", "w", "theirs")})
		a.run([]step{cmd(proto.null, "EXEC"), cmd(`"theirs"`, "GET", "w"), cmd("(nil)", "GET", "w2")})
		// Unchanged watched keys let it through; EXEC forgets the watches.
		a.run([]step{cmd("OK", "WATCH", "w"), cmd("OK", "MULTI"), cmd("QUEUED", "SET", "w", "mine"),
			cmd("[OK]", "EXEC"), cmd("OK", "MULTI"), cmd("QUEUED", "DEL", "w")})
		b.run([]step{cmd("OK", "SET", "w", "theirs")})
		a.run([]step{cmd("[(integer) 1]", "EXEC")})
		// UNWATCH too.
		a.run([]step{cmd("OK", "WATCH", "w"), cmd("OK", "UNWATCH")})
		b.run([]step{cmd("OK", "SET", "w", "x")})
		a.run([]step{cmd("OK", "MULTI"), cmd("QUEUED", "GET", "w"), cmd(`["x"]`, "EXEC")})
	}
}

// TestRESP3 checks the replies whose shape differs after HELLO 3.
func TestRESP3(t *testing.T) {
	e := start(t, 1, redisapi.Config{})
	c := e.dial(t)
	c.send("HELLO", "3", "SETNAME", "n3")
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, _ := c.line()
	if line != "%7" {
		t.Fatalf("HELLO 3 reply starts %q, want a map of 7", line)
	}
	for range 14 {
		c.readReply()
	}
	c.send("GET", "none")
	if line, _ := c.line(); line != "_" {
		t.Fatalf("GET of a missing key in RESP3: %q, want _", line)
	}
	c.send("CLIENT", "INFO")
	if b, _ := c.br.Peek(1); string(b) != "=" {
		t.Fatalf("CLIENT INFO in RESP3 starts %q, want a verbatim string", b)
	}
	if r := c.read(); !strings.Contains(r, "resp=3") {
		t.Fatalf("CLIENT INFO: %s", r)
	}
	c.run([]step{cmd(`"n3"`, "CLIENT", "GETNAME"), cmd(`["appendonly", "yes"]`, "CONFIG", "GET", "appendonly")})
	c.send("HELLO", "2")
	if line, _ := c.line(); line != "*14" {
		t.Fatalf("HELLO 2 reply starts %q, want an array of 14", line)
	}
}

// TestScanPagesReturnEveryKeyOnce: SCAN's cursor names the next key, so
// small pages return every key once, and a key written mid-scan behind
// the cursor does not make another come back.
func TestScanPagesReturnEveryKeyOnce(t *testing.T) {
	e := start(t, 1, redisapi.Config{})
	c := e.dial(t)
	want := map[string]bool{}
	for i := range 25 {
		k := fmt.Sprintf("sc:%02d", i)
		c.do("SET", k, "v")
		want[k] = true
	}
	c.do("SET", "other", "v")
	seen := map[string]int{}
	cursor := "0"
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("SCAN does not end")
		}
		c.send("SCAN", cursor, "MATCH", "sc:*", "COUNT", "3")
		c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		c.line() // *2
		cur, _ := c.readReply()
		cursor, _ = strconv.Unquote(cur)
		keys, _ := c.readReply()
		for _, k := range strings.Split(strings.Trim(keys, "[]"), ", ") {
			if k != "" {
				k, _ = strconv.Unquote(k)
				seen[k]++
			}
		}
		if pages == 2 {
			c.do("SET", "sc:00a", "v") // behind the cursor
		}
		if cursor == "0" {
			break
		}
	}
	for k := range want {
		if seen[k] != 1 {
			t.Errorf("%s returned %d times", k, seen[k])
		}
	}
	if seen["other"] != 0 {
		t.Error("MATCH let other through")
	}
	if got := c.do("SCAN", "999999"); !strings.Contains(got, "unknown or expired SCAN cursor") {
		t.Errorf("unknown cursor: %s", got)
	}
}

// TestLimitsRefuseAndCount: each bound refuses with Redis' reply, closes
// the connection where Redis does, and is counted.
func TestLimitsRefuseAndCount(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := start(t, 1, redisapi.Config{MaxConns: 2, IdleTimeout: 300 * time.Millisecond, ReplyTimeout: 300 * time.Millisecond,
		Limits: respLimits(4, 64), Registerer: reg})
	refusals := func(reason string) float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "kvd_redis_refusals_total" {
				for _, m := range mf.Metric {
					if m.Label[0].GetValue() == reason {
						return m.Counter.GetValue()
					}
				}
			}
		}
		return 0
	}
	closed := func(c *rconn) bool {
		c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := c.br.ReadByte()
		return errors.Is(err, io.EOF)
	}
	t.Run("protocol error", func(t *testing.T) {
		c := e.dial(t)
		c.write("*1\r\n$x\r\n")
		if got := c.read(); got != "(error) ERR Protocol error: invalid bulk length" {
			t.Fatalf("got %s", got)
		}
		if !closed(c) || refusals("syntax") != 1 {
			t.Fatalf("not closed or not counted (%v)", refusals("syntax"))
		}
	})
	t.Run("too many args", func(t *testing.T) {
		c := e.dial(t)
		if got := c.do("MSET", "a", "1", "b", "2"); got != "(error) ERR Protocol error: invalid multibulk length" {
			t.Fatalf("got %s", got)
		}
		if !closed(c) || refusals("too_many_args") != 1 {
			t.Fatal("not closed or not counted")
		}
	})
	t.Run("inline too long", func(t *testing.T) {
		c := e.dial(t)
		c.write("PING " + strings.Repeat("x", 100) + "\r\n")
		if got := c.read(); got != "(error) ERR Protocol error: too big inline request" {
			t.Fatalf("got %s", got)
		}
		if !closed(c) || refusals("inline_too_large") != 1 {
			t.Fatal("not closed or not counted")
		}
	})
	t.Run("idle", func(t *testing.T) {
		c := e.dial(t)
		c.run([]step{cmd("PONG", "PING")})
		if !closed(c) || refusals("idle_timeout") < 1 {
			t.Fatal("idle connection not closed or not counted")
		}
	})
	t.Run("client not reading", func(t *testing.T) {
		if err := e.kvd.Put(context.Background(), []byte("big"), make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
		c := e.dial(t)
		for range 64 { // 64 MiB of replies, never read
			c.send("GET", "big")
		}
		wait.For(t, "the connection of a client that reads nothing to be closed", func() bool {
			return refusals("reply_timeout") == 1
		})
	})
	t.Run("max conns", func(t *testing.T) {
		for e.srv.Conns() > 0 { // the connections closed above are let go
			time.Sleep(time.Millisecond)
		}
		a, b := e.dial(t), e.dial(t)
		a.do("PING")
		b.do("PING")
		c := e.dial(t)
		if got := c.read(); got != "(error) ERR max number of clients reached" {
			t.Fatalf("got %s", got)
		}
		if !closed(c) || refusals("max_conns") != 1 {
			t.Fatal("not closed or not counted")
		}
	})
	if n := testutil.CollectAndCount(reg, "kvd_redis_connections"); n != 1 {
		t.Fatalf("kvd_redis_connections: %d series", n)
	}
}

// TestPipelinedCommandsAnsweredInOrder: commands sent in one write are
// answered in order, MaxPipeline replies at a time.
func TestPipelinedCommandsAnsweredInOrder(t *testing.T) {
	e := start(t, 1, redisapi.Config{MaxPipeline: 3})
	c := e.dial(t)
	var b strings.Builder
	for i := range 20 {
		v := strconv.Itoa(i)
		fmt.Fprintf(&b, "*3\r\n$3\r\nSET\r\n$2\r\np%d\r\n$%d\r\n%s\r\n*2\r\n$3\r\nGET\r\n$2\r\np%d\r\n", i%10, len(v), v, i%10)
	}
	b.WriteString("PING\r\n")
	c.write(b.String())
	for i := range 20 {
		if got := c.read(); got != "OK" {
			t.Fatalf("SET %d: %s", i, got)
		}
		if got := c.read(); got != strconv.Quote(strconv.Itoa(i)) {
			t.Fatalf("GET %d: %s", i, got)
		}
	}
	if got := c.read(); got != "PONG" {
		t.Fatalf("inline PING: %s", got)
	}
	c.run([]step{cmd("OK", "QUIT")})
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("after QUIT: %v, want EOF", err)
	}
}

func TestConfigValidate(t *testing.T) {
	kc, err := client.New(client.Config{Endpoints: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	tests := []struct {
		name string
		cfg  redisapi.Config
		ok   bool
	}{
		{"defaults", redisapi.Config{Client: kc}, true},
		{"no client", redisapi.Config{}, false},
		{"negative conns", redisapi.Config{Client: kc, MaxConns: -1}, false},
		{"negative pipeline", redisapi.Config{Client: kc, MaxPipeline: -1}, false},
		{"negative args", redisapi.Config{Client: kc, Limits: respLimits(-1, 0)}, false},
		{"bad role", redisapi.Config{Client: kc, Role: "proxy"}, false},
		{"gateway", redisapi.Config{Client: kc, Role: "gateway"}, true},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, errs.ErrConfig)) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// TestIncrUnderLeaderFailureLosesNoAcknowledgedIncrement: 50 connections
// increment one key while the leader is stopped. Every INCR answered with
// a number was applied; one that failed as "may or may not have been
// applied" might have been; the others were not. The final value must lie
// between the acknowledged count and that plus the maybe-applied.
func TestIncrUnderLeaderFailureLosesNoAcknowledgedIncrement(t *testing.T) {
	if testing.Short() {
		t.Skip("a leader failure takes seconds to recover from")
	}
	e := start(t, 3, redisapi.Config{})
	const conns, each = 50, 20
	var mu sync.Mutex
	acked, maybe, failed := 0, 0, 0
	var wg sync.WaitGroup
	started := make(chan struct{}, conns*each)
	for range conns {
		c := e.dial(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				c.send("INCR", "ctr")
				c.nc.SetReadDeadline(time.Now().Add(60 * time.Second))
				r, err := c.readReply()
				if err != nil {
					t.Error(err)
					return
				}
				started <- struct{}{}
				mu.Lock()
				switch {
				case strings.HasPrefix(r, "(integer) "):
					acked++
				case strings.Contains(r, "may or may not"):
					maybe++
				default:
					failed++
				}
				mu.Unlock()
			}
		}()
	}
	for range conns * each / 4 {
		<-started
	}
	leader := kvdtest.WaitLeader(t, e.nodes, 10*time.Second)
	leader.Stop()
	wg.Wait()
	var rest []*kvdtest.Node
	for _, n := range e.nodes {
		if n != leader {
			rest = append(rest, n)
		}
	}
	kvdtest.WaitLeader(t, rest, 10*time.Second)
	got := e.dial(t).do("GET", "ctr")
	v, err := strconv.Atoi(strings.Trim(got, `"`))
	if err != nil {
		t.Fatalf("GET ctr: %s", got)
	}
	t.Logf("acknowledged %d, maybe applied %d, failed %d, final %d", acked, maybe, failed, v)
	if v < acked || v > acked+maybe {
		t.Fatalf("final value %d outside [acknowledged %d, acknowledged + maybe applied %d]", v, acked, acked+maybe)
	}
}

// TestInfoStatsCountsClientGets: INFO stats reports the kvd client's GETs
// by how they were answered, so an operator (and the RDMA VM's gateway
// test) can see whether a gateway's GETs are one-sided.
func TestInfoStatsCountsClientGets(t *testing.T) {
	e := start(t, 1, redisapi.Config{})
	c := e.dial(t)
	if r := c.do("SET", "k", "v"); r != "OK" {
		t.Fatalf("SET: %s", r)
	}
	before := infoStats(t, c)
	for range 3 {
		if r := c.do("GET", "k"); r != `"v"` {
			t.Fatalf("GET: %s", r)
		}
	}
	after := infoStats(t, c)
	if got := after["kvd_client_gets"] - before["kvd_client_gets"]; got != 3 {
		t.Errorf("kvd_client_gets went up by %d over 3 GETs, want 3 (INFO before %v, after %v)", got, before, after)
	}
	answered := after["kvd_client_gets_one_sided"] + after["kvd_client_gets_rpc"] - before["kvd_client_gets_one_sided"] - before["kvd_client_gets_rpc"]
	if answered != 3 {
		t.Errorf("one-sided + RPC GETs went up by %d over 3 GETs, want 3 (INFO before %v, after %v)", answered, before, after)
	}
	if _, ok := after["kvd_client_gets_fallback"]; !ok {
		t.Errorf("INFO stats has no kvd_client_gets_fallback: %v", after)
	}
}

// infoStats returns INFO stats' kvd_client_ fields.
func infoStats(t *testing.T, c *rconn) map[string]uint64 {
	t.Helper()
	r := c.do("INFO", "stats")
	out := map[string]uint64{}
	for _, line := range strings.Split(strings.Trim(r, `"`), `\r\n`) {
		name, v, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "kvd_client_") {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("INFO stats %s: %q is not a count", name, v)
		}
		out[name] = n
	}
	if len(out) == 0 {
		t.Fatalf("INFO stats has no kvd_client_ fields: %q", r)
	}
	return out
}
