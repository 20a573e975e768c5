package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestMoveLeader: move-leader ID makes follower ID the leader and prints
// etcdctl's line; -w json names both as ID strings; a learner target is
// refused (exit 1, saying why) and a malformed ID is a usage error.
func TestMoveLeader(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	old := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	var target *kvdtest.Node
	for _, n := range nodes {
		if n != old {
			target = n
		}
	}
	ep := strings.Join(kvdtest.Endpoints(nodes), ",")
	id := strconv.FormatUint(target.ID, 10)
	if got, want := mustKvctl(t, ep, "move-leader", id), fmt.Sprintf("Leadership transferred from %d to %d\n", old.ID, target.ID); got != want {
		t.Fatalf("move-leader %s: %q, want %q", id, got, want)
	}
	if got := jq(t, mustKvctl(t, ep, "-w", "json", "status"), "-r", ".[0].leader_id"); got != id {
		t.Errorf("status after move-leader: leader %s, want %s", got, id)
	}
	back := strconv.FormatUint(old.ID, 10)
	if got, want := jq(t, mustKvctl(t, ep, "-w", "json", "move-leader", back), "-c", "."), fmt.Sprintf(`{"from":"%s","to":"%s"}`, id, back); got != want {
		t.Errorf("-w json move-leader %s: %s, want %s", back, got, want)
	}
	mustKvctl(t, ep, "member", "add", "9", kvdtest.FreeAddrs(t, 1)[0])
	if _, errOut, code := kvctlAt(ep, "", "move-leader", "9"); code != 1 || !strings.Contains(errOut, "learner") {
		t.Errorf("move-leader to a learner: exit %d, %q; want 1 naming the learner", code, errOut)
	}
	for _, args := range [][]string{{"move-leader"}, {"move-leader", "x"}, {"move-leader", "0"}, {"move-leader", "1", "2"}} {
		if _, errOut, code := kvctlAt(ep, "", args...); code != 2 {
			t.Errorf("kvctl %v: exit %d, %q; want 2", args, code, errOut)
		}
	}
}
