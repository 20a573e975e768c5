package redisapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/redisapi"
)

// TestPipelinedGetsReadAsRuns sends each script in one write (read whole)
// and checks the replies, in order, and, where runs make the difference,
// the round trips the server's kvd client spent reading
// (client.Stats.OneSidedRounds): a run's GETs are read with one GetMany,
// whose batches of up to 7 keys take at most 2 round trips each, where
// GETs read one by one take at least one each.
func TestPipelinedGetsReadAsRuns(t *testing.T) {
	long := strings.Repeat("k", 5000) // over client.MaxKey
	tests := []struct {
		name        string
		maxPipeline int
		cmds        [][]string
		replies     []string
		maxRounds   uint64 // 0: not checked
	}{
		{
			name:    "one run, hits and misses in order",
			cmds:    [][]string{{"GET", "a"}, {"GET", "missing"}, {"GET", "b"}, {"get", "a"}},
			replies: []string{`"1"`, "(nil)", `"2"`, `"1"`}, maxRounds: 2,
		},
		{
			name:    "more keys than a GetMany, in order",
			cmds:    getsOf(300, "a"),
			replies: repeat(`"1"`, 300), maxRounds: 2 * 43,
		},
		{
			name:    "split by other commands: a GET after a SET sees it",
			cmds:    [][]string{{"GET", "c"}, {"GET", "a"}, {"SET", "c", "3"}, {"GET", "c"}, {"GET", "b"}},
			replies: []string{"(nil)", `"1"`, "OK", `"3"`, `"2"`},
		},
		{
			name:    "a key kvd refuses runs alone, in its place",
			cmds:    [][]string{{"GET", "a"}, {"GET", ""}, {"GET", long}, {"GET", "b"}},
			replies: []string{`"1"`, "(error) ERR kvd: empty keys are not supported", "", `"2"`},
		},
		{
			name:    "inside MULTI the GETs queue",
			cmds:    [][]string{{"MULTI"}, {"GET", "a"}, {"GET", "b"}, {"EXEC"}},
			replies: []string{"OK", "QUEUED", "QUEUED", `["1", "2"]`},
		},
		{
			name: "a run holds at most MaxPipeline replies", maxPipeline: 4,
			cmds: getsOf(10, "b"), replies: repeat(`"2"`, 10), maxRounds: 2 * 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t, 1, redisapi.Config{MaxPipeline: tt.maxPipeline})
			c := e.dial(t)
			for _, kv := range [][2]string{{"a", "1"}, {"b", "2"}} {
				if got := c.do("SET", kv[0], kv[1]); got != "OK" {
					t.Fatalf("SET %s: %s", kv[0], got)
				}
			}
			// A first GET loads the client's view of the node (its
			// table's geometry, its clock), which a GetMany does not.
			if got := c.do("GET", "a"); got != `"1"` {
				t.Fatalf("GET a: %s", got)
			}
			before := e.kvd.Stats().OneSidedRounds
			c.write(encode(tt.cmds))
			for i, want := range tt.replies {
				got := c.read()
				if want == "" { // an error whose text names the key's size
					want, got = "(error)", strings.SplitN(got, " ", 2)[0]
				}
				if got != want {
					t.Errorf("%s: %s, want %s", clipArgs(tt.cmds[i]), got, want)
				}
			}
			if got := e.kvd.Stats().OneSidedRounds - before; tt.maxRounds > 0 && got > tt.maxRounds {
				t.Errorf("%d round trips for %d GETs, want at most %d", got, len(tt.cmds), tt.maxRounds)
			}
		})
	}
}

func getsOf(n int, key string) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = []string{"GET", key}
	}
	return out
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestPipelinedGetsFailOneByOne: when a run's read fails (the cluster is
// gone), each GET of the run is answered by its own attempt, an error in
// its place, and the connection serves on.
func TestPipelinedGetsFailOneByOne(t *testing.T) {
	e := startAttempt(t, 1, redisapi.Config{CommandTimeout: 2 * time.Second}, 200*time.Millisecond)
	c := e.dial(t)
	if got := c.do("SET", "a", "1"); got != "OK" {
		t.Fatalf("SET a: %s", got)
	}
	if got := c.do("GET", "a"); got != `"1"` {
		t.Fatalf("GET a: %s", got)
	}
	e.nodes[0].Stop()
	c.write(encode(append(getsOf(3, "a"), []string{"PING"})))
	for i := range 3 {
		if got := c.read(); !strings.HasPrefix(got, "(error) ERR kvd: ") {
			t.Errorf("GET %d: %s, want kvd's error", i, got)
		}
	}
	if got := c.read(); got != "PONG" {
		t.Errorf("PING after the failed GETs: %s", got)
	}
}
