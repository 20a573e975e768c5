package main

import (
	"net"
	"os"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest"
)

// TestEtcdFlagsRefused: the etcd API's flags are checked with the node's
// others, each refusal naming the flag and the way out.
func TestEtcdFlagsRefused(t *testing.T) {
	base := []string{"--data-dir", "d", "--listen", "127.0.0.1:7301", "--metrics-listen", "127.0.0.1:9301"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen-client-urls", "127.0.0.1:2379"}, "want http://HOST:PORT or https://HOST:PORT"},
		{[]string{"--listen-client-urls", "unix://x"}, "want http://HOST:PORT or https://HOST:PORT"},
		{[]string{"--listen-client-urls", "http://127.0.0.1"}, "the port too"},
		{[]string{"--listen-client-urls", "http://127.0.0.1:2379/v3"}, "want http://HOST:PORT"},
		{[]string{"--listen-client-urls", "https://127.0.0.1:2379"}, "needs TLS for clients: give --cert-file"},
		{[]string{"--listen-client-urls", "http://127.0.0.1:2379", "--cert-file", "c", "--key-file", "k"}, "client TLS is on, so say https://"},
		{[]string{"--listen-client-urls", "http://127.0.0.1:7301"}, "and --listen \"127.0.0.1:7301\" are one port"},
		{[]string{"--listen-client-urls", "http://0.0.0.0:9301"}, "and --metrics-listen \"127.0.0.1:9301\" are one port"},
		{[]string{"--advertise-client-urls", "http://127.0.0.1:2379"}, "--advertise-client-urls needs --listen-client-urls"},
		{[]string{"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "x:1"}, "--advertise-client-urls \"x:1\""},
		{[]string{"--max-concurrent-streams", "4294967296"}, "--max-concurrent-streams 4294967296: at most 4294967295"},
		{[]string{"--max-txn-ops", "-1"}, "MaxTxnOps -1 is negative"},
		{[]string{"--max-request-bytes", "-1"}, "MaxRequestBytes -1 is negative"},
	} {
		o, err := parseFlags(append(append([]string{}, base...), c.args...))
		if err == nil {
			err = checkNodeEtcd(o)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("kvd %v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}

// TestEtcdZeroLimitsRefused: a 0 for a limit would run with etcd's
// default, not with what was asked.
func TestEtcdZeroLimitsRefused(t *testing.T) {
	for _, name := range etcdZeroIsDefault {
		_, err := parseFlags([]string{"--data-dir", "d", "--" + name, "0"})
		if err == nil || !strings.Contains(err.Error(), "--"+name+" 0: want a positive value") {
			t.Errorf("--%s 0: %v, want it refused", name, err)
		}
		if _, err := parseGatewayFlags([]string{"--endpoints", "127.0.0.1:7301", "--" + name, "0"}); err == nil {
			t.Errorf("kvd gateway --%s 0: accepted", name)
		}
	}
}

// TestEtcdFlagsAccepted: good flags reach etcdapi.Config under the
// library's names.
func TestEtcdFlagsAccepted(t *testing.T) {
	o, err := parseFlags([]string{"--data-dir", "d", "--listen-client-urls", "http://127.0.0.1:2379, http://[::1]:2379/",
		"--max-request-bytes", "1024", "--max-txn-ops", "64", "--max-concurrent-streams", "8"})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkNodeEtcd(o); err != nil {
		t.Fatal(err)
	}
	want := []clientURL{{addr: "127.0.0.1:2379"}, {addr: "[::1]:2379"}}
	if len(o.etcdURLs) != 2 || o.etcdURLs[0] != want[0] || o.etcdURLs[1] != want[1] {
		t.Errorf("URLs %+v, want %+v", o.etcdURLs, want)
	}
	if c := o.etcd.cfg; c.MaxRequestBytes != 1024 || c.MaxTxnOps != 64 || c.MaxConcurrentStreams != 8 {
		t.Errorf("config %+v, want the flags' limits", c)
	}
}

// TestGatewayFlagsRefused: the gateway needs its cluster, somewhere to
// serve, and limits that mean something.
func TestGatewayFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--endpoints is required"},
		{[]string{"--endpoints", "a:1", "--listen-client-urls", ""}, "--listen-client-urls and --redis-listen are both empty"},
		{[]string{"--endpoints", "a:1", "--redis-listen", "6379"}, `--redis-listen "6379": want host:port`},
		{[]string{"--endpoints", "a:1", "--redis-max-conns", "0"}, "--redis-max-conns"},
		{[]string{"--endpoints", "a:1", "extra"}, "unexpected arguments"},
		{[]string{"--endpoints", "a:1", "--gc-percent", "0"}, "--gc-percent 0: want a percentage > 0"},
		{[]string{"--endpoints", "a:1", "--gc-percent", "-1"}, "--gc-percent -1: want a percentage > 0"},
	} {
		if _, err := parseGatewayFlags(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("kvd gateway %v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}

// TestGatewayGCPercent: the gateway collects at --gc-percent, at its
// default unless GOGC is set, and at the flag's value over GOGC when the
// flag is given.
func TestGatewayGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, c := range []struct {
		args []string
		gogc string
		want int // the target after applyGC; 100 stands for "left as it was"
	}{
		{nil, "", defaultGCPercent},
		{nil, "250", 100},
		{[]string{"--gc-percent", "50"}, "", 50},
		{[]string{"--gc-percent", "800"}, "250", 800},
	} {
		o, err := parseGatewayFlags(append([]string{"--endpoints", "a:1"}, c.args...))
		if err != nil {
			t.Fatal(err)
		}
		debug.SetGCPercent(100)
		o.applyGC(c.gogc)
		if got := debug.SetGCPercent(100); got != c.want {
			t.Errorf("args %v, GOGC %q: target %d, want %d", c.args, c.gogc, got, c.want)
		}
	}
}

// TestNodeEtcdEndpoints: the node's etcd API reaches its cluster through
// its own address first (loopback for an unspecified host), then its
// peers' when they share their client address.
func TestNodeEtcdEndpoints(t *testing.T) {
	o, err := parseFlags([]string{"--data-dir", "d", "--id", "2", "--listen", "0.0.0.0:7302",
		"--initial-cluster", "1=10.0.0.1:7301,2=10.0.0.2:7302,3=10.0.0.3:7303"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(nodeEtcdEndpoints(o), ","), "127.0.0.1:7302,10.0.0.1:7301,10.0.0.3:7303"; got != want {
		t.Errorf("endpoints %s, want %s", got, want)
	}
	o.cfg.ListenPeer = "10.0.0.2:7402"
	if got, want := strings.Join(nodeEtcdEndpoints(o), ","), "127.0.0.1:7302"; got != want {
		t.Errorf("with --listen-peer: endpoints %s, want %s", got, want)
	}
}

// TestEtcdListenTakenBeforeDataDir: a --listen-client-urls port already
// taken is found before the node opens its data directory: exit 1, and
// nothing written there.
func TestEtcdListenTakenBeforeDataDir(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the process test in -short mode")
	}
	kvd := buildKVD(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := kvdtest.FreeAddrs(t, 1)[0]
	data := t.TempDir()
	code, out := runKVD(t, kvd, 10*time.Second, "--data-dir", data, "--listen", addr, "--initial-cluster", "1="+addr,
		"--listen-client-urls", "http://"+ln.Addr().String())
	ents, _ := os.ReadDir(data)
	if code != 1 || len(ents) != 0 || !strings.Contains(out, "--listen-client-urls") {
		t.Fatalf("kvd with --listen-client-urls taken: exit %d (want 1), %d entries in --data-dir (want 0): %s", code, len(ents), out)
	}
}
