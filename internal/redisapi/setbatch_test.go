package redisapi_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/redisapi"
)

// groupGate holds the first group of plain SETs a server commits until
// release, and records the size of every group.
type groupGate struct {
	sizes   chan int
	hold    chan struct{}
	held    atomic.Bool
	release func()
}

func newGroupGate() *groupGate {
	g := &groupGate{sizes: make(chan int, 1000), hold: make(chan struct{})}
	g.release = sync.OnceFunc(func() { close(g.hold) })
	return g
}

// startGated starts a server behind gate g, which is released when the
// test ends, before the server closes: a failed test must not leave a
// SET held.
func startGated(t *testing.T, g *groupGate, cfg redisapi.Config) *env {
	cfg.Knobs.BeforeSetGroup = g.beforeGroup
	e := start(t, 3, cfg)
	t.Cleanup(g.release)
	return e
}

func (g *groupGate) beforeGroup(n int) {
	g.sizes <- n
	if g.held.CompareAndSwap(false, true) {
		<-g.hold
	}
}

// drain returns the group sizes recorded so far.
func (g *groupGate) drain() []int {
	var out []int
	for {
		select {
		case n := <-g.sizes:
			out = append(out, n)
		default:
			return out
		}
	}
}

// queuedSet is a SET sent while the first group is held: queued says
// whether it waits for a group (else its reply comes at once).
type queuedSet struct {
	args   []string
	queued bool
	want   string
}

// clipArgs shows a command with its long arguments cut.
func clipArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 20 {
			a = a[:20] + "..."
		}
		out[i] = a
	}
	return fmt.Sprintf("%q", out)
}

func plainSets(n int, prefix string, value string) []queuedSet {
	out := make([]queuedSet, n)
	for i := range out {
		out[i] = queuedSet{args: []string{"SET", fmt.Sprintf("%s%d", prefix, i), value}, queued: true, want: "OK"}
	}
	return out
}

// TestConcurrentPlainSetsCommitInGroups queues SETs of other connections
// behind a SET whose commit is held, then checks the groups they were
// committed in, their replies and what the keys hold after.
func TestConcurrentPlainSetsCommitInGroups(t *testing.T) {
	big := strings.Repeat("v", 400<<10)
	tests := []struct {
		name   string
		before [][]string // run on one connection first
		sets   []queuedSet
		groups []int
		check  [][2]string // commands after, and their replies
		// sameRev lists keys that must have one mod revision: one
		// transaction put them.
		sameRev []string
	}{
		{
			name:    "distinct keys, one transaction",
			sets:    plainSets(5, "k", "v"),
			groups:  []int{1, 5},
			check:   [][2]string{{"GET k0", `"v"`}, {"GET k4", `"v"`}},
			sameRev: []string{"k0", "k1", "k2", "k3", "k4"},
		},
		{
			name:   "one key twice: the later value, and no expiry",
			before: [][]string{{"SET", "d", "old", "EX", "100"}},
			sets: []queuedSet{
				{args: []string{"SET", "d", "v1"}, queued: true, want: "OK"},
				{args: []string{"SET", "e", "w"}, queued: true, want: "OK"},
				{args: []string{"SET", "d", "v2"}, queued: true, want: "OK"},
			},
			groups: []int{1, 3},
			check:  [][2]string{{"GET d", `"v2"`}, {"TTL d", "(integer) -1"}, {"GET e", `"w"`}},
		},
		{
			name:   "more SETs than one transaction's operations",
			sets:   plainSets(130, "m", "v"),
			groups: []int{1, 128, 2},
			check:  [][2]string{{"GET m0", `"v"`}, {"GET m129", `"v"`}},
		},
		{
			name:   "more bytes than one transaction's",
			sets:   plainSets(3, "b", big),
			groups: []int{1, 2, 1},
			check:  [][2]string{{"STRLEN b0", "(integer) 409600"}, {"STRLEN b2", "(integer) 409600"}},
		},
		{
			name: "a key kvd refuses fails alone",
			sets: []queuedSet{
				{args: []string{"SET", "ok1", "v"}, queued: true, want: "OK"},
				{args: []string{"SET", "", "v"}, want: "(error) ERR kvd: empty keys are not supported"},
				{args: []string{"SET", "ok2", "v"}, queued: true, want: "OK"},
			},
			groups: []int{1, 2},
			check:  [][2]string{{"GET ok1", `"v"`}, {"GET ok2", `"v"`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGroupGate()
			e := startGated(t, g, redisapi.Config{})
			first := e.dial(t)
			for _, b := range tt.before {
				if got := first.do(b...); got != "OK" {
					t.Fatalf("%q: %s", b, got)
				}
			}
			g.drain()
			first.send("SET", "held", "x")
			wait.For(t, "the first SET's group to be held", func() bool { return g.held.Load() })
			conns := make([]*rconn, len(tt.sets))
			queued := 0
			for i, s := range tt.sets {
				conns[i] = e.dial(t)
				conns[i].send(s.args...)
				if !s.queued {
					if got := conns[i].read(); got != s.want {
						t.Errorf("%s: %s, want %s", clipArgs(s.args), got, s.want)
					}
					continue
				}
				queued++
				wait.For(t, fmt.Sprintf("%d SETs waiting", queued), func() bool { return e.srv.WaitingSets() == queued })
			}
			g.release()
			if got := first.read(); got != "OK" {
				t.Errorf("held SET: %s", got)
			}
			for i, s := range tt.sets {
				if !s.queued {
					continue
				}
				if got := conns[i].read(); got != s.want {
					t.Errorf("%s: %s, want %s", clipArgs(s.args), got, s.want)
				}
			}
			checkGroupsAndKeys(t, e, first, g, tt.groups, tt.check, tt.sameRev)
		})
	}
}

// TestFailedGroupFailsEachSet: when the cluster cannot commit a group,
// every SET in it gets the error, none is left waiting.
func TestFailedGroupFailsEachSet(t *testing.T) {
	g := newGroupGate()
	e := startGated(t, g, redisapi.Config{CommandTimeout: 2 * time.Second})
	first := e.dial(t)
	first.send("SET", "held", "x")
	wait.For(t, "the first SET's group to be held", func() bool { return g.held.Load() })
	conns := make([]*rconn, 3)
	for i := range conns {
		conns[i] = e.dial(t)
		conns[i].send("SET", fmt.Sprint("f", i), "v")
		wait.For(t, "SETs waiting", func() bool { return e.srv.WaitingSets() == i+1 })
	}
	for _, n := range e.nodes {
		n.Stop()
	}
	g.release()
	for i, c := range append([]*rconn{first}, conns...) {
		if got := c.read(); !strings.HasPrefix(got, "(error) ") || !strings.Contains(got, "kvd: unavailable") {
			t.Errorf("SET %d: %s, want kvd's unavailable error", i, got)
		}
	}
	if got := g.drain(); !slices.Equal(got, []int{1, 3}) {
		t.Errorf("groups %v, want [1 3]", got)
	}
}

// TestGroupedSetsReadOwnWrites runs many connections that each SET a key
// of their own and a shared one, then read their own back: grouping
// never answers a SET before its value is stored.
func TestGroupedSetsReadOwnWrites(t *testing.T) {
	e := start(t, 3, redisapi.Config{})
	const conns, rounds = 16, 20
	var wg sync.WaitGroup
	for c := range conns {
		rc := e.dial(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprint("own", c)
			for i := range rounds {
				val := fmt.Sprint(i)
				for _, s := range []step{cmd("OK", "SET", key, val), cmd("OK", "SET", "shared", key), cmd(`"`+val+`"`, "GET", key)} {
					rc.send(s.args...)
					got, err := rc.readReply()
					if err != nil || got != s.want {
						t.Errorf("conn %d: %q: %q (%v), want %s", c, s.args, got, err, s.want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// checkGroupsAndKeys checks the groups g recorded, the replies of the
// check commands run on c, and that the sameRev keys share one mod
// revision (one transaction put them).
func checkGroupsAndKeys(t *testing.T, e *env, c *rconn, g *groupGate, groups []int, check [][2]string, sameRev []string) {
	t.Helper()
	if got := g.drain(); !slices.Equal(got, groups) {
		t.Errorf("groups %v, want %v", got, groups)
	}
	for _, ch := range check {
		if got := c.do(strings.Fields(ch[0])...); got != ch[1] {
			t.Errorf("%s: %s, want %s", ch[0], got, ch[1])
		}
	}
	revs := map[uint64]bool{}
	for _, k := range sameRev {
		_, rev, err := e.kvd.GetModRevision(context.Background(), []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		revs[rev] = true
	}
	if len(revs) > 1 {
		t.Errorf("keys %v have mod revisions %v, want one", sameRev, revs)
	}
}
