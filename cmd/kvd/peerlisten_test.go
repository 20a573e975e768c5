package main_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/tlsutil/tlstest"
)

// TestProcessClientTLSOnly: three kvd processes with a peer listener
// each and etcd's client TLS flags alone (no peer TLS) start, elect over
// plaintext peer connections, and serve TLS clients at their client
// addresses; kvctl given any one endpoint writes through it (a follower
// sends it to the leader's client address) and member list shows each
// member's peer and client addresses. With one address, these flags were
// refused ("TLS is on for both or neither").
func TestProcessClientTLSOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	bin := buildBinaries(t)
	f := newTLSFiles(t)
	aliceCert, aliceKey := f.clientCA.Issue(t, "alice", tlstest.Options{}).Write(t, f.dir, "alice")
	clients, peers := kvdtest.FreeAddrs(t, 3), kvdtest.FreeAddrs(t, 3)
	cluster := fmt.Sprintf("1=%s,2=%s,3=%s", peers[0], peers[1], peers[2])
	for i := range 3 {
		kvd := exec.Command(filepath.Join(bin, "kvd"), "--id", fmt.Sprint(i+1), "--data-dir", t.TempDir(),
			"--listen", clients[i], "--listen-peer", peers[i], "--initial-cluster", cluster, "--table-mem", "8MiB",
			"--cert-file", f.cert, "--key-file", f.key, "--trusted-ca-file", f.caFile, "--client-cert-auth")
		logs := &syncBuffer{}
		kvd.Stderr = logs
		if err := kvd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			kvd.Process.Signal(syscall.SIGTERM)
			if err := kvd.Wait(); err != nil {
				t.Errorf("kvd %d did not exit cleanly on SIGTERM: %v\n%s", i+1, err, logs.String())
			}
		})
	}
	kvctl := func(endpoint string, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "kvctl"), append([]string{"--endpoints", endpoint, "--timeout", "5s",
			"--cacert", f.caFile, "--cert", aliceCert, "--key", aliceKey}, args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return out.String(), fmt.Errorf("%v: %s", err, errOut.String())
		}
		return out.String(), nil
	}
	// Through each endpoint alone: two of them are followers.
	for i, ep := range clients {
		wait.NoError(t, "a put over TLS through "+ep, func() error {
			_, err := kvctl(ep, "put", fmt.Sprint("k", i), "v")
			return err
		})
	}
	for _, ep := range clients {
		if out, err := kvctl(ep, "get", "k2"); err != nil || out != "v\n" {
			t.Errorf("get k2 through %s = %q, %v", ep, out, err)
		}
	}
	// Every member opens a session to the leader, which so knows every
	// client address; a follower shows "-" for a member that has not
	// connected to it, never a wrong address.
	complete := 0
	for _, ep := range clients {
		out, err := kvctl(ep, "member", "list")
		if err != nil {
			t.Fatal(err)
		}
		shown := 0
		for i := range 3 {
			switch {
			case strings.Contains(out, peers[i]+"  "+clients[i]):
				shown++
			case !strings.Contains(out, peers[i]+"  -"):
				t.Errorf("member list through %s: member %d is not at peer address %s, client address %s or -:\n%s",
					ep, i+1, peers[i], clients[i], out)
			}
		}
		if shown == 3 {
			complete++
		}
	}
	if complete == 0 {
		t.Errorf("no member list (not even the leader's) shows every client address")
	}
}
