package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// TestMembership adds a fourth node (learner, then voter) and removes one of
// the originals, with kvctl, while the data stays readable.
func TestMembership(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	pc := startCluster(t)
	c := newClient(t, pc.Endpoints(), client.Linearizable)
	for i := 0; i < 20; i++ {
		if err := c.Put(ctxFor(5*time.Second), []byte(fmt.Sprintf("m%d", i)), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	eps := strings.Join(pc.Endpoints(), ",")
	n4 := pc.Join(t, 4)
	if out, err := kvctl(eps, "member", "add", "4", n4.Addr); err != nil {
		t.Fatalf("member add: %v\n%s", err, out)
	}
	if err := n4.Start(); err != nil {
		t.Fatal(err)
	}
	if out, err := kvctl(eps, "--timeout", "30s", "member", "promote", "4"); err != nil {
		t.Fatalf("member promote: %v\n%s\n%s", err, out, n4.Logs())
	}
	ms, err := c.Members(ctxFor(5 * time.Second))
	if err != nil || len(ms) != 4 || ms[3].ID != 4 || ms[3].IsLearner {
		t.Fatalf("members after add+promote: %+v, %v", ms, err)
	}
	// The new node serves reads from its own region once it has caught up
	// (serializable reads may lag).
	only4 := newClient(t, []string{n4.Addr}, client.Serializable)
	wait.NoError(t, "the new member to serve m19", func() error {
		_, err := only4.Get(ctxFor(2*time.Second), []byte("m19"))
		return err
	})
	if out, err := kvctl(eps, "member", "remove", "2"); err != nil {
		t.Fatalf("member remove: %v\n%s", err, out)
	}
	ms, err = c.Members(ctxFor(5 * time.Second))
	if err != nil || len(ms) != 3 {
		t.Fatalf("members after remove: %+v, %v", ms, err)
	}
	for _, m := range ms {
		if m.ID == 2 {
			t.Fatalf("node 2 still a member: %+v", ms)
		}
	}
	if err := c.Put(ctxFor(10*time.Second), []byte("after-remove"), []byte("v")); err != nil {
		t.Fatalf("write after removing a member: %v", err)
	}
	if out, err := kvctl(eps, "member", "add", "0", "x:1"); err == nil {
		t.Fatalf("member add with id 0 accepted: %s", out)
	}
}
