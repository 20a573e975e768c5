package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestRemovedMemberProcessExits: a kvd process whose member is removed
// exits with status 1 naming the removal, as etcd's does, and exits the
// same way when started again on its data directory. Without the exit
// path (failureExit on srv.Failed) it ran on, refused by every member.
func TestRemovedMemberProcessExits(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	const want = "the member has been permanently removed from the cluster"
	bin := buildKVD(t)
	addrs := kvdtest.FreeAddrs(t, 6)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	var cluster []string
	for i := range 3 {
		cluster = append(cluster, fmt.Sprintf("%d=%s", i+1, addrs[i]))
	}
	args := func(i int) []string {
		return []string{"--id", fmt.Sprint(i + 1), "--listen", addrs[i], "--metrics-listen", addrs[3+i],
			"--initial-cluster", strings.Join(cluster, ","), "--data-dir", dirs[i], "--tick", "20ms"}
	}
	procs := make([]*kvdProc, 3)
	for i := range procs {
		procs[i] = startKVD(t, bin, args(i)...)
	}
	for i, p := range procs { // a client fails at once while every node refuses connections
		waitHealthy(t, p, addrs[3+i])
	}
	c, err := client.New(client.Config{Endpoints: addrs[:3], RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Put(ctx, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveMember(ctx, 3); err != nil {
		t.Fatal(err)
	}
	check := func(what string, p *kvdProc) {
		t.Helper()
		code := p.exited(t, 30*time.Second)
		if out := p.output(); code != 1 || !strings.Contains(out, "raft: member 3: "+want) {
			t.Fatalf("%s exited %d, want 1 with %q:\n%s", what, code, want, out)
		}
	}
	check("removed member", procs[2])
	check("removed member restarted", startKVD(t, bin, args(2)...))
}
