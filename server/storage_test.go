package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/table"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/raft"
	"github.com/kvd-project/kvd/transport"
	"github.com/kvd-project/kvd/transport/tcp"
)

// TestErrResponseStorage: a node stopped on its disk answers with
// StatusStorage and the cause alone, which the client reports as
// "kvd: storage: <cause>", at once (not as a timeout, nor as "unavailable").
func TestErrResponseStorage(t *testing.T) {
	cause := &os.PathError{Op: "write", Path: "/data/000012.log", Err: syscall.ENOSPC}
	s := &Server{}
	for _, err := range []error{
		&raft.StorageError{Err: cause},
		fmt.Errorf("put: %w", &raft.StorageError{Err: cause}),
	} {
		r := s.errResponse(err)
		if r.Status != wire.StatusStorage || string(r.Value) != cause.Error() {
			t.Fatalf("errResponse(%v) = status %d %q, want StatusStorage %q", err, r.Status, r.Value, cause.Error())
		}
	}
	// Through a client: a fake node answering everything as errResponse
	// would.
	addr := fakeNode(t, s.errResponse(&raft.StorageError{Err: cause}))
	c, err := client.New(client.Config{Endpoints: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	err = c.Put(ctx, []byte("k"), []byte("v"))
	want := "kvd: storage: write /data/000012.log: no space left on device"
	if !errors.Is(err, client.ErrStorage) || !strings.HasPrefix(err.Error(), want+" [node ") {
		t.Fatalf("Put = %v, want %q", err, want)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Put took %v to fail", took)
	}
}

// fakeNode serves resp (with each request's op and id) to every request
// but OpHello, which names it leader.
func fakeNode(t *testing.T, resp wire.Response) string {
	t.Helper()
	addr := freeAddr(t)
	tr, err := tcp.New(tcp.Config{Node: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	region, err := tr.Register(1 << 20) // the client reads the table's header
	if err != nil {
		t.Fatal(err)
	}
	if _, err := table.Format(region.Bytes(), table.Config{}); err != nil {
		t.Fatal(err)
	}
	ln, err := tr.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for {
			conn, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			go serveFake(ctx, conn, addr, region.Descriptor(), resp)
		}
	}()
	return ln.Addr()
}

func serveFake(ctx context.Context, conn transport.Conn, addr string, d transport.Descriptor, resp wire.Response) {
	defer conn.Close()
	for {
		buf, err := conn.Recv(ctx, nil)
		if err != nil {
			return
		}
		var req wire.Request
		if wire.DecodeRequest(buf, &req) != nil {
			return
		}
		r := resp
		if req.Op == wire.OpHello {
			r = wire.Response{Value: wire.AppendHello(nil, &wire.Hello{NodeID: 1, LeaderID: 1, LeaderAddr: addr,
				RegionAddr: d.Addr, RegionLen: d.Len, RegionKey: d.Key})}
		}
		r.Op, r.ID = req.Op, req.ID
		if conn.Send(ctx, wire.AppendResponse(nil, &r)) != nil {
			return
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// mountTmpfs mounts a tmpfs of the given size on a new directory, or
// returns "" (saying why, loudly) where mounts are not allowed.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Logf("NOT RUN: a real full file system needs root for a tmpfs mount (euid %d); "+
			"the injected-fault tests in raft/storage_test.go cover the node", os.Geteuid())
		return ""
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Logf("NOT RUN: mounts are not allowed here (mount -t tmpfs: %v: %s); "+
			"the injected-fault tests in raft/storage_test.go cover the node", err, out)
		return ""
	}
	// Lazily: the failed store keeps its files open until the process exits.
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fillDisk writes a file into dir until the file system is full, and
// returns its name.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return name
		}
	}
}

// TestStorageFullDisk runs a node on a real, small tmpfs and fills it up:
// a PUT fails promptly with "kvd: storage: ... no space left on device",
// Status and Failure report it, and a node restarted from what is on disk
// once there is room again holds every acknowledged write.
func TestStorageFullDisk(t *testing.T) {
	mnt := mountTmpfs(t, "32m")
	if mnt == "" {
		return // said why above
	}
	addr := freeAddr(t)
	cfg := Config{ID: 1, Listen: addr, DataDir: filepath.Join(mnt, "data"), TableMem: 64 << 20,
		TickInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Knobs: Knobs{WALSegmentSize: 4 << 20}} // the Raft log's segments fit the tmpfs
	start := func(cfg Config) *Server {
		tr, err := tcp.New(tcp.Config{Node: addr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		cfg.Transport = tr
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := start(cfg)
	c, err := client.New(client.Config{Endpoints: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	acked := map[string]string{}
	put := func(k, v string) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		begin := time.Now()
		err := c.Put(ctx, []byte(k), []byte(v))
		if err == nil {
			acked[k] = v
		}
		return time.Since(begin), err
	}
	for i := range 50 {
		if _, err := put(fmt.Sprintf("before-%d", i), strings.Repeat("b", 1000)); err != nil {
			t.Fatal(err)
		}
	}
	filler := fillDisk(t, mnt)
	var failed error
	for i := 0; i < 20000 && failed == nil; i++ {
		took, err := put(fmt.Sprintf("after-%05d", i), strings.Repeat("a", 4000))
		if err != nil {
			failed = err
			t.Logf("put %d on the full disk failed after %v: %v", i, took, err)
			if took > 5*time.Second {
				t.Errorf("the failing put took %v: not prompt", took)
			}
		}
	}
	if !errors.Is(failed, client.ErrStorage) || !strings.HasPrefix(failed.Error(), "kvd: storage: ") ||
		!strings.Contains(failed.Error(), "no space left on device") {
		t.Fatalf("put on the full disk: %v, want \"kvd: storage: ...no space left on device\"", failed)
	}
	if !errors.Is(s.Failure(), raft.ErrStorage) {
		t.Fatalf("Failure() = %v", s.Failure())
	}
	select {
	case <-s.Failed():
	default:
		t.Fatal("Failed() not closed")
	}
	if st := s.Status(); !strings.Contains(st.StorageError, "no space left on device") {
		t.Fatalf("Status().StorageError = %q", st.StorageError)
	}
	if err := s.Close(); err == nil {
		t.Error("Close of the failed server reported no error")
	}

	// Room again; restart from what is on disk (a copy: this process still
	// holds the failed store open).
	os.Remove(filler)
	cfg.DataDir = filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(cfg.DataDir, os.DirFS(filepath.Join(mnt, "data"))); err != nil {
		t.Fatal(err)
	}
	s = start(cfg)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for k, v := range acked {
		got, err := c.Get(ctx, []byte(k))
		if err != nil || string(got) != v {
			t.Fatalf("after the restart: %q = %d bytes, %v", k, len(got), err)
		}
	}
	t.Logf("%d acknowledged writes all there after the restart", len(acked))
}
