package cluster

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/tlsutil"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{Config{}, false}, {Config{Bin: "b"}, true}, {Config{Bin: "b", Nodes: 10}, false}, {Config{Bin: "b", Nodes: -1}, false},
		{Config{Bin: "b", Nodes: 2, NodeArgs: [][]string{{"-a"}, {"-b"}}}, true}, {Config{Bin: "b", Nodes: 2, NodeArgs: [][]string{{"-a"}, {"-b"}, {"-c"}}}, false},
	} {
		err := tc.cfg.Validate()
		c := tc.cfg.withDefaults()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrConfig)) {
			t.Errorf("Validate(%+v) = %v", tc.cfg, err)
		}
		if err == nil && tc.cfg.Nodes == 0 && (c.Nodes != 3 || c.Transport != "tcp" || c.Host != "127.0.0.1" || c.ReadyTimeout != DefaultReadyTimeout) {
			t.Errorf("defaults: %+v", c)
		}
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	tl := &tail{max: 8}
	for _, s := range []string{"hello ", "world", "!"} {
		if n, err := tl.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatal(n, err)
		}
	}
	if got := tl.String(); got != "o world!"[len("o world!")-8:] {
		t.Errorf("tail = %q", got)
	}
}

// TestNodeExits: a "kvd" that dies at once makes Start fail fast with its
// output, and leaves no temporary directory behind.
func TestNodeExits(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\necho \"kvd: cannot start: $*\" >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(bin, "kvd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	_, err := Start(context.Background(), Config{Bin: bin, Nodes: 2, Dir: data, TableMem: "1MiB", ReadyTimeout: 20 * time.Second})
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "cannot start") || !strings.Contains(err.Error(), "--table-mem 1MiB") {
		t.Fatalf("Start = %v", err)
	}
	if _, err := Start(context.Background(), Config{Bin: t.TempDir()}); !errors.Is(err, ErrConfig) {
		t.Errorf("Start without a kvd binary = %v", err)
	}
}

// TestRedisListenerPerNode: with Config.Redis every node is started with
// a --redis-listen of its own on Host.
func TestRedisListenerPerNode(t *testing.T) {
	for _, redis := range []bool{true, false} {
		bin, args := t.TempDir(), t.TempDir()
		// Each stand-in node records its arguments, one a line, and waits
		// to be stopped; Start gives up on the cluster after ReadyTimeout.
		script := "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done >" + args + "/\"$2\"\nexec /bin/sleep 60\n"
		if err := os.WriteFile(filepath.Join(bin, "kvd"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := Start(context.Background(), Config{Bin: bin, Nodes: 3, Dir: t.TempDir(), Redis: redis, ReadyTimeout: time.Second})
		if !errors.Is(err, ErrNotReady) {
			t.Fatalf("Start = %v", err)
		}
		seen := map[string]bool{}
		for id := 1; id <= 3; id++ {
			b, err := os.ReadFile(filepath.Join(args, strconv.Itoa(id)))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			i := slices.Index(lines, "--redis-listen")
			if (i >= 0) != redis {
				t.Fatalf("node %d (Redis %v) args %q", id, redis, lines)
			}
			if !redis {
				continue
			}
			if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "127.0.0.1:") || seen[lines[i+1]] {
				t.Errorf("node %d --redis-listen in %q: want an address of its own on 127.0.0.1", id, lines)
			} else {
				seen[lines[i+1]] = true
			}
		}
	}
}

// TestExited: a node that dies after the cluster is up is reported with its
// output.
// TestNodeArgsGoToTheirNode: NodeArgs[i] reaches node i+1 alone, after
// the flags every node gets.
func TestNodeArgsGoToTheirNode(t *testing.T) {
	bin, data := t.TempDir(), t.TempDir()
	// The stand-in records its arguments in a file named by its --id and
	// exits once both nodes have.
	script := "#!/bin/sh\ncd " + data + "\necho \"$*\" >args.$2.tmp && mv args.$2.tmp args.$2\n" +
		"while [ ! -e args.1 ] || [ ! -e args.2 ]; do sleep 0.05; done\nexit 3\n"
	if err := os.WriteFile(filepath.Join(bin, "kvd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Config{Bin: bin, Nodes: 2, Dir: data, Args: []string{"--all"},
		NodeArgs: [][]string{nil, {"--only", "two"}}, ReadyTimeout: 20 * time.Second})
	if !errors.Is(err, ErrNotReady) {
		t.Fatalf("Start = %v, want ErrNotReady", err)
	}
	for _, tc := range []struct{ id, suffix string }{{"1", "--all"}, {"2", "--all --only two"}} {
		b, err := os.ReadFile(filepath.Join(data, "args."+tc.id))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); !strings.HasSuffix(got, tc.suffix) {
			t.Errorf("node %s args %q, want them to end in %q", tc.id, got, tc.suffix)
		}
	}
}

func TestExited(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "kvd"), []byte("#!/bin/sh\necho bye\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	n, err := StartProcess(filepath.Join(bin, "kvd"), nil)
	if err != nil {
		t.Fatal(err)
	}
	<-n.done
	c := &Cluster{nodes: []*Process{n}}
	if got := c.Exited(); !strings.Contains(got, "node 1") || !strings.Contains(got, "bye") {
		t.Errorf("Exited = %q", got)
	}
}

// TestGenerateCerts: the files load as kvd's and a client's TLS material,
// and each certificate chains to the CA that the other side trusts.
func TestGenerateCerts(t *testing.T) {
	dir := t.TempDir()
	c, err := GenerateCerts(dir, "127.1.0.1")
	if err != nil {
		t.Fatal(err)
	}
	args := c.ServerArgs()
	sf := tlsutil.ServerFiles{CertFile: args[1], KeyFile: args[3], TrustedCAFile: args[5], ClientCertAuth: true,
		PeerCertFile: args[8], PeerKeyFile: args[10], PeerTrustedCAFile: args[12], PeerClientCertAuth: true}
	if err := sf.Check(); err != nil {
		t.Fatal(err)
	}
	if _, err := tlsutil.NewServer(sf, nil); err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	if _, err := tlsutil.NewClient(c.ClientFiles()); err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	for _, v := range []struct {
		cert, ca, name string
		usage          x509.ExtKeyUsage
	}{
		{c.ServerCert, c.ClientCA, "127.1.0.1", x509.ExtKeyUsageServerAuth},
		{c.PeerCert, c.PeerCA, "127.0.0.1", x509.ExtKeyUsageServerAuth},
		{c.PeerCert, c.PeerCA, "", x509.ExtKeyUsageClientAuth},
		{c.ClientCert, c.ClientCA, "", x509.ExtKeyUsageClientAuth},
	} {
		pool := x509.NewCertPool()
		pool.AddCert(readCert(t, v.ca))
		if _, err := readCert(t, v.cert).Verify(x509.VerifyOptions{DNSName: v.name, Roots: pool, KeyUsages: []x509.ExtKeyUsage{v.usage}}); err != nil {
			t.Errorf("%s under %s: %v", filepath.Base(v.cert), filepath.Base(v.ca), err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, c.PeerCA))
	if _, err := readCert(t, c.ClientCert).Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("the client certificate passes as a peer's")
	}
	if err := (&Config{Bin: "b", Transport: "rdma", TLS: true}).Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("TLS over rdma: Validate = %v", err)
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
