package main

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestBusyPortOnFirstStart: a first start whose client or peer port is
// taken fails (exit 1, naming the address) before anything is written to
// --data-dir, so the same data directory then starts with the corrected
// address. When the node initialised the directory first, the corrected
// --initial-cluster was refused as another cluster's.
func TestBusyPortOnFirstStart(t *testing.T) {
	kvd := buildKVD(t)
	for _, busy := range []string{"listen", "listen-peer"} {
		t.Run(busy, func(t *testing.T) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			free := kvdtest.FreeAddrs(t, 3)
			data := t.TempDir()
			args := func(client, peer string) []string {
				return []string{"--data-dir", data, "--listen", client, "--listen-peer", peer, "--initial-cluster", "1=" + peer}
			}
			first := args(taken.Addr().String(), free[0])
			if busy == "listen-peer" {
				first = args(free[0], taken.Addr().String())
			}
			code, out := runKVD(t, kvd, 30*time.Second, first...)
			if code != 1 || !strings.Contains(out, "address already in use") || !strings.Contains(out, taken.Addr().String()) {
				t.Fatalf("kvd with --%s taken: exit %d (want 1), output:\n%s", busy, code, out)
			}
			if ents, _ := os.ReadDir(data); len(ents) != 0 {
				t.Errorf("kvd with --%s taken left %d entries in --data-dir (want none)", busy, len(ents))
			}
			p := startKVD(t, kvd, append(args(free[1], free[2]), "--metrics-listen", free[0])...)
			waitHealthy(t, p, free[0])
		})
	}
}

// TestPeerListenFlags: --listen-peer and its etcd spelling
// --listen-peer-urls (one URL; its scheme must agree with the peer TLS
// flags) set the same address; conflicting or malformed settings are
// refused before the node starts.
func TestPeerListenFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // the address, or the error's text
		ok   bool
	}{
		{[]string{"--listen-peer", "127.0.0.1:7302"}, "127.0.0.1:7302", true},
		{[]string{"--listen-peer-urls", "http://127.0.0.1:7302"}, "127.0.0.1:7302", true},
		{[]string{"--listen-peer-urls", "127.0.0.1:7302"}, "127.0.0.1:7302", true},
		{[]string{"--listen-peer-urls", "http://a:1,http://b:2"}, "one URL", false},
		{[]string{"--listen-peer-urls", "unix://x"}, "want http://", false},
		{[]string{"--listen-peer", "127.0.0.1:7302", "--listen-peer-urls", "http://127.0.0.1:7302"}, "give one", false},
		{[]string{"--listen-peer", "127.0.0.1:7301"}, "one port", false},
		{[]string{"--listen-peer", "127.0.0.1"}, "want host:port", false},
		{[]string{"--listen-peer-urls", "https://127.0.0.1:7302"}, "needs peer TLS", false},
	} {
		o, err := parseFlags(append([]string{"--data-dir", t.TempDir(), "--listen", "127.0.0.1:7301"}, tc.args...))
		if err == nil {
			err = checkRunFlags(o)
		}
		switch {
		case tc.ok && (err != nil || o.cfg.ListenPeer != tc.want):
			t.Errorf("%q: ListenPeer %q, %v; want %q", tc.args, o.cfg.ListenPeer, err, tc.want)
		case !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v; want an error mentioning %q", tc.args, err, tc.want)
		}
	}
}
