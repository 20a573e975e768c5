package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestMoveLeader: MoveLeader, sent through a follower given first, makes
// the other follower the leader and names the old one; every node then
// names the new leader, and writes and linearizable reads go on, one-
// sided ones too once the new leader has its lease. Moving it to the
// leader is a no-op; a learner or a stranger is a bad request.
func TestMoveLeader(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	old := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	followers := othersThan(nodes, old)
	target := followers[1]
	c := newClient(t, []string{followers[0].Addr, old.Addr, target.Addr}, client.Linearizable)
	ctx := context.Background()
	if err := c.Put(ctx, []byte("k"), []byte("before")); err != nil {
		t.Fatal(err)
	}
	from, err := c.MoveLeader(ctx, target.ID)
	if err != nil || from != old.ID {
		t.Fatalf("MoveLeader(%d): from %d, %v; want from %d", target.ID, from, err, old.ID)
	}
	for _, n := range nodes {
		wait.For(t, "every node to name the new leader", func() bool {
			st, err := c.Status(ctx, n.Addr)
			return err == nil && st.LeaderID == target.ID && st.IsLeader == (n == target)
		})
	}
	if err := c.Put(ctx, []byte("k"), []byte("after")); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, []byte("k")); err != nil || string(v) != "after" {
		t.Fatalf("get after the move: %q, %v", v, err)
	}
	wait.For(t, "the new leader's read lease", func() bool {
		st, err := c.Status(ctx, target.Addr)
		return err == nil && st.LeaseValid
	})
	if from, err := c.MoveLeader(ctx, target.ID); err != nil || from != target.ID {
		t.Fatalf("MoveLeader to the leader: from %d, %v; want a no-op", from, err)
	}
	if err := c.AddMember(ctx, 9, kvdtest.FreeAddrs(t, 1)[0]); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[uint64]string{9: "learner", 42: "does not exist"} {
		if _, err := c.MoveLeader(ctx, id); !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), want) {
			t.Errorf("MoveLeader(%d): %v, want a bad request naming %q", id, err, want)
		}
	}
}
