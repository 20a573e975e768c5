package floor

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestMain runs a node process when the test binary is re-executed as one
// (Run's Command in TestRun).
func TestMain(m *testing.M) {
	if os.Getenv("FLOOR_TEST_NODE") == "1" {
		if err := RunNode(context.Background(), os.Args[1:], os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// nodeCommand runs one node process: this test binary, re-executed.
func nodeCommand(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "FLOOR_TEST_NODE=1")
	cmd.Stderr = os.Stderr
	return cmd
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{
		Clients: 4, Warmup: 100 * time.Millisecond, Duration: 500 * time.Millisecond, Dir: dir,
		Command: nodeCommand,
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops == 0 || res.Batches == 0 || res.Batches > res.Ops {
		t.Fatalf("ops %d, batches %d: want 0 < batches <= ops", res.Ops, res.Batches)
	}
	if res.ServerCPU < res.LeaderCPU {
		t.Fatalf("server CPU %v below the leader's %v", res.ServerCPU, res.LeaderCPU)
	}
	// Every node's log starts with the same first batch: whole requests,
	// each one client's letter.
	var first []byte
	for i := range 3 {
		b, err := os.ReadFile(filepath.Join(dir, "log"+string(rune('0'+i))))
		if err != nil {
			t.Fatal(err)
		}
		n := binary.BigEndian.Uint32(b)
		if n != 16+256 {
			t.Fatalf("log%d: first request of %d bytes, want %d", i, n, 16+256)
		}
		req := b[4 : 4+n]
		if req[0] < 'a' || req[0] > 'z' || !bytes.Equal(req, bytes.Repeat(req[:1], int(n))) {
			t.Fatalf("log%d: first request %q is not one client's", i, req[:8])
		}
		if first == nil {
			first = b[:4+n]
		} else if !bytes.Equal(first, b[:4+n]) {
			t.Fatalf("log%d's first request differs from log0's", i)
		}
	}
}

// cluster starts a leader over real loopback connections to followers,
// each of which either follows (acks) or stays silent.
func cluster(t *testing.T, acking ...bool) net.Conn {
	t.Helper()
	var conns []net.Conn
	for _, ack := range acking {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			if ack {
				log, err := OpenLog(filepath.Join(t.TempDir(), "log"), false)
				if err != nil {
					t.Error(err)
					return
				}
				t.Cleanup(func() { log.Close() })
				Follow(c, log)
			}
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	log, err := OpenLog(filepath.Join(t.TempDir(), "log"), false)
	if err != nil {
		t.Fatal(err)
	}
	l := NewLeader(log, conns)
	t.Cleanup(func() { l.Close(); log.Close() })
	go l.Serve()
	cl, srv := net.Pipe()
	go l.ServeClient(srv)
	t.Cleanup(func() { cl.Close() })
	return cl
}

// put sends one request and waits up to d for its reply.
func put(c net.Conn, d time.Duration) error {
	c.SetDeadline(time.Now().Add(d))
	req := binary.BigEndian.AppendUint32(nil, 3)
	if _, err := c.Write(append(req, "abc"...)); err != nil {
		return err
	}
	var reply [4]byte
	_, err := io.ReadFull(c, reply[:])
	return err
}

func TestLeaderWaitsForMajority(t *testing.T) {
	for _, tc := range []struct {
		name    string
		acking  []bool
		replies bool
	}{
		{"one of two followers", []bool{true, false}, true},
		{"none of two followers", []bool{false, false}, false},
		{"two of four followers", []bool{true, false, true, false}, true},
		{"one of four followers", []bool{false, false, true, false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster(t, tc.acking...)
			// A reply must come (generous wait), or must not come within a
			// window (absence cannot be proven; the window only bounds the test).
			wait := 30 * time.Second
			if !tc.replies {
				wait = 300 * time.Millisecond
			}
			err := put(c, wait)
			if tc.replies && err != nil {
				t.Fatalf("no reply with a majority: %v", err)
			}
			if !tc.replies && err == nil {
				t.Fatal("replied without a majority")
			}
		})
	}
}

func TestOversizedFramesRefused(t *testing.T) {
	log, err := OpenLog(filepath.Join(t.TempDir(), "log"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	l := NewLeader(log, nil)
	defer l.Close()

	cl, srv := net.Pipe()
	go func() {
		cl.Write(binary.BigEndian.AppendUint32(nil, MaxRequest+1))
		cl.Close()
	}()
	if err := l.ServeClient(srv); !errors.Is(err, errBadFrame) {
		t.Fatalf("client request over MaxRequest: %v, want errBadFrame", err)
	}

	leader, follower := net.Pipe()
	go func() {
		hdr := binary.BigEndian.AppendUint32(nil, maxBatch+1)
		leader.Write(binary.BigEndian.AppendUint32(hdr, 1))
		leader.Close()
	}()
	if err := Follow(follower, log); !errors.Is(err, errBadFrame) {
		t.Fatalf("batch over maxBatch: %v, want errBadFrame", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	cmd := func([]string) *exec.Cmd { return nil }
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults", Config{Dir: "d", Command: cmd}, true},
		{"no dir", Config{Command: cmd}, false},
		{"no command", Config{Dir: "d"}, false},
		{"ten nodes", Config{Nodes: 10, Dir: "d", Command: cmd}, false},
		{"negative clients", Config{Clients: -1, Dir: "d", Command: cmd}, false},
		{"huge request", Config{ValueSize: MaxRequest, Dir: "d", Command: cmd}, false},
		{"negative duration", Config{Duration: -time.Second, Dir: "d", Command: cmd}, false},
		{"negative keys", Config{Keys: -1, Pebble: true, Dir: "d", Command: cmd}, false},
		{"state", Config{State: true, Dir: "d", Command: cmd}, true},
		{"Pebble log and state", Config{Pebble: true, State: true, Dir: "d", Command: cmd}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate: %v, want ok=%t", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrConfig) {
				t.Fatalf("%v is not ErrConfig", err)
			}
		})
	}
}
