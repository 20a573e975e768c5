package redisapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/redisapi"
)

// TestWritesWaitForTheirOutcome: a write waits at a node for as long as
// the command may, whatever the kvd client's attempt bound: with a 1 ms
// bound, every write below would otherwise fail as maybe applied.
func TestWritesWaitForTheirOutcome(t *testing.T) {
	e := startAttempt(t, 1, redisapi.Config{}, time.Millisecond)
	c := e.dial(t)
	big := strings.Repeat("v", 512<<10)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"SET", "big", big}, "OK"},
		{[]string{"SET", "n", "1"}, "OK"},
		{[]string{"INCRBY", "n", "4"}, "(integer) 5"},
		{[]string{"MSET", "a", "1", "b", "2"}, "OK"},
		{[]string{"DEL", "a", "b", "big"}, "(integer) 3"},
	} {
		if got := c.do(tc.args...); got != tc.want {
			t.Errorf("%.20q: %q, want %q", tc.args, got, tc.want)
		}
	}
	c.do("MULTI")
	c.do("INCR", "n")
	if got := c.do("EXEC"); got != "[(integer) 6]" {
		t.Errorf("MULTI INCR EXEC: %q, want [(integer) 6]", got)
	}
}
