package redisapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvd-project/kvd/internal/redisapi"
)

// encode renders commands as one pipelined write of multibulk arrays.
func encode(cmds [][]string) string {
	var b strings.Builder
	for _, args := range cmds {
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	return b.String()
}

// setsOf is n plain SETs of key prefix+i (or of prefix alone, with
// sameKey) to value i.
func setsOf(n int, prefix string, sameKey bool) [][]string {
	out := make([][]string, n)
	for i := range out {
		k := prefix
		if !sameKey {
			k = fmt.Sprint(prefix, i)
		}
		out[i] = []string{"SET", k, fmt.Sprint(i)}
	}
	return out
}

func oks(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "OK"
	}
	return out
}

// TestPipelinedSetsCommitAsRuns sends each script in one write (well
// under the server's 16 KiB read buffer, so it is read whole) and checks
// the replies, the groups the plain SETs were committed in, and what the
// keys hold after.
func TestPipelinedSetsCommitAsRuns(t *testing.T) {
	tests := []struct {
		name        string
		maxPipeline int
		cmds        [][]string
		replies     []string
		groups      []int
		check       [][2]string
		sameRev     []string // keys one transaction put
	}{
		{
			name: "distinct keys, one transaction", cmds: setsOf(10, "a", false),
			replies: oks(10), groups: []int{10},
			check:   [][2]string{{"GET a0", `"0"`}, {"GET a9", `"9"`}},
			sameRev: []string{"a0", "a5", "a9"},
		},
		{
			name: "more than a transaction's operations, in order", cmds: setsOf(300, "b", true),
			replies: oks(300), groups: []int{128, 128, 44},
			check: [][2]string{{"GET b", `"299"`}},
		},
		{
			name:    "split by other commands",
			cmds:    [][]string{{"SET", "c1", "x"}, {"SET", "c2", "y"}, {"GET", "c1"}, {"SET", "c3", "z"}, {"SET", "c3", "w", "NX"}, {"SET", "c4", "v"}},
			replies: []string{"OK", "OK", `"x"`, "OK", "(nil)", "OK"},
			groups:  []int{2, 1, 1},
			check:   [][2]string{{"GET c3", `"z"`}, {"GET c4", `"v"`}},
		},
		{
			name:    "a key kvd refuses fails alone, in its place",
			cmds:    [][]string{{"SET", "d1", "v"}, {"SET", "", "v"}, {"SET", "d2", "v"}},
			replies: []string{"OK", "(error) ERR kvd: empty keys are not supported", "OK"},
			groups:  []int{1, 1},
			check:   [][2]string{{"GET d1", `"v"`}, {"GET d2", `"v"`}},
		},
		{
			name:    "inside MULTI the SETs queue",
			cmds:    [][]string{{"MULTI"}, {"SET", "e1", "v"}, {"SET", "e2", "w"}, {"EXEC"}},
			replies: []string{"OK", "QUEUED", "QUEUED", "[OK, OK]"},
			check:   [][2]string{{"GET e2", `"w"`}},
		},
		{
			name: "a run holds at most MaxPipeline replies", maxPipeline: 4, cmds: setsOf(10, "f", false),
			replies: oks(10), groups: []int{4, 4, 2},
			check: [][2]string{{"GET f9", `"9"`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGroupGate()
			g.held.Store(true) // record only
			e := startGated(t, g, redisapi.Config{MaxPipeline: tt.maxPipeline})
			c := e.dial(t)
			c.write(encode(tt.cmds))
			for i, want := range tt.replies {
				if got := c.read(); got != want {
					t.Errorf("%s: %s, want %s", clipArgs(tt.cmds[i]), got, want)
				}
			}
			checkGroupsAndKeys(t, e, c, g, tt.groups, tt.check, tt.sameRev)
		})
	}
}
