package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/kvd-project/kvd/internal/kvdtest/peertest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
)

// Storage faults, injected through Pebble's errorfs under the node's data
// directory: the disk fills up (ENOSPC), turns read-only (EROFS), or an
// fsync fails (EIO). Real full and read-only file systems (tmpfs and bind
// mounts) are exercised by cmd/kvd's storage tests where mounts are
// allowed.

// injector is a switchable errorfs.Injector: rule, when set, decides the
// error (or nil) for each operation.
type injector struct {
	mu   sync.Mutex
	rule func(op errorfs.Op) error
	hits atomic.Int64
}

func (in *injector) String() string { return "test injector" }

func (in *injector) MaybeError(op errorfs.Op) error {
	in.mu.Lock()
	rule := in.rule
	in.mu.Unlock()
	if rule == nil {
		return nil
	}
	err := rule(op)
	if err != nil {
		in.hits.Add(1)
	}
	return err
}

func (in *injector) set(rule func(op errorfs.Op) error) {
	in.mu.Lock()
	in.rule = rule
	in.mu.Unlock()
}

func isSync(k errorfs.OpKind) bool {
	return k == errorfs.OpFileSync || k == errorfs.OpFileSyncData || k == errorfs.OpFileSyncTo
}

// isLogSync: an fsync of the file that makes a Ready durable: Pebble's
// WAL (a ".log"), or the raft log's segment (a ".wal", --raft-log=wal).
func isLogSync(op errorfs.Op) bool {
	return isSync(op.Kind) && (strings.HasSuffix(op.Path, ".log") || strings.HasSuffix(op.Path, ".wal"))
}

func isWrite(k errorfs.OpKind) bool {
	return k == errorfs.OpFileWrite || k == errorfs.OpFileWriteAt
}

// isMutation: the operations a full or read-only file system refuses.
func isMutation(k errorfs.OpKind) bool {
	switch k {
	case errorfs.OpCreate, errorfs.OpLink, errorfs.OpRemove, errorfs.OpRemoveAll, errorfs.OpRename,
		errorfs.OpReuseForWrite, errorfs.OpMkdirAll, errorfs.OpLock:
		return true
	}
	return isWrite(k) || isSync(k)
}

func pathErr(op errorfs.Op, errno syscall.Errno) error {
	name := "write"
	switch {
	case isSync(op.Kind):
		name = "sync"
	case op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpLock:
		name = "open"
	case op.Kind == errorfs.OpRename:
		name = "rename"
	case op.Kind == errorfs.OpMkdirAll:
		name = "mkdir"
	}
	return &os.PathError{Op: name, Path: op.Path, Err: errno}
}

// The faults, as rules for the injector. under limits a rule to one node's
// directory.
var storageFaults = []struct {
	name string
	// rule decides each operation's error once the fault is armed.
	rule func(under string) func(errorfs.Op) error
	want string // in the error the client sees
	// valueSize: how big the values written after arming are. Faults that
	// only a flush or a WAL rotation reach need big ones.
	valueSize int
}{
	{
		name: "fsync error on the WAL",
		rule: func(under string) func(errorfs.Op) error {
			return func(op errorfs.Op) error {
				if strings.HasPrefix(op.Path, under) && isLogSync(op) {
					return pathErr(op, syscall.EIO)
				}
				return nil
			}
		},
		want: "sync ", valueSize: 100,
	},
	{
		name: "full disk",
		rule: func(under string) func(errorfs.Op) error {
			return func(op errorfs.Op) error {
				if strings.HasPrefix(op.Path, under) && (isWrite(op.Kind) || op.Kind == errorfs.OpCreate ||
					op.Kind == errorfs.OpReuseForWrite || op.Kind == errorfs.OpFilePreallocate) {
					return pathErr(op, syscall.ENOSPC)
				}
				return nil
			}
		},
		want: "no space left on device", valueSize: 100,
	},
	{
		// The WAL has room (preallocated, recycled), but the memtable's
		// flush to a new table does not. Pebble on its own retries the
		// flush in a loop (thousands of log lines a second) while writes
		// stall until clients time out: the node must fail instead.
		name: "full disk, flush only",
		rule: func(under string) func(errorfs.Op) error {
			return func(op errorfs.Op) error {
				if strings.HasPrefix(op.Path, under) && strings.HasSuffix(op.Path, ".sst") && (isWrite(op.Kind) || op.Kind == errorfs.OpCreate) {
					return pathErr(op, syscall.ENOSPC)
				}
				return nil
			}
		},
		want: "no space left on device", valueSize: 256 << 10,
	},
	{
		// New files cannot be created: the next WAL rotation fails. Pebble
		// can panic there, and unwinding a deferred Unlock of a mutex it
		// had released would crash the process with "sync: unlock of
		// unlocked mutex", hiding the cause.
		name: "read-only directory, WAL rotation",
		rule: func(under string) func(errorfs.Op) error {
			return func(op errorfs.Op) error {
				if strings.HasPrefix(op.Path, under) && (op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpReuseForWrite ||
					op.Kind == errorfs.OpRename || op.Kind == errorfs.OpLink || op.Kind == errorfs.OpRemove) {
					return pathErr(op, syscall.EROFS)
				}
				return nil
			}
		},
		want: "read-only file system", valueSize: 256 << 10,
	},
	{
		name: "read-only file system",
		rule: func(under string) func(errorfs.Op) error {
			return func(op errorfs.Op) error {
				if strings.HasPrefix(op.Path, under) && isMutation(op.Kind) {
					return pathErr(op, syscall.EROFS)
				}
				return nil
			}
		},
		want: "read-only file system", valueSize: 100,
	},
}

// errorCounter counts the Error records logged through it (and prints
// everything with RAFT_DEBUG set).
type errorCounter struct {
	errors *atomic.Int64
	next   slog.Handler
}

func newErrorCounter() (*slog.Logger, *atomic.Int64) {
	n := new(atomic.Int64)
	return slog.New(errorCounter{errors: n, next: peertest.Logger().Handler()}), n
}

func (h errorCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h errorCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.errors.Add(1)
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}
func (h errorCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return errorCounter{h.errors, h.next.WithAttrs(as)}
}
func (h errorCounter) WithGroup(g string) slog.Handler {
	return errorCounter{h.errors, h.next.WithGroup(g)}
}

// TestStorageFaultFailsCleanly runs a single node into each fault and
// checks that: the write that meets it fails promptly with ErrStorage
// naming the cause (not a timeout); the node reports the failure
// (Failure, Failed); every later request fails at once; nothing is
// acknowledged after the fault; the log stays quiet; the process survives
// (no panic); and a restart from what is on disk has every acknowledged
// write.
func TestStorageFaultFailsCleanly(t *testing.T) {
	for _, tc := range storageFaults {
		t.Run(tc.name, func(t *testing.T) {
			inj := &injector{}
			log, errorLines := newErrorCounter()
			cfg := testConfig()
			cfg.Logger = log
			cfg.FS = errorfs.Wrap(vfs.Default, inj)
			c := newCluster(t, 1, cfg)
			tn := c.leader()
			acked := map[string]uint64{}
			put := func(key string, size int) (time.Duration, error) {
				ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				defer cancel()
				start := time.Now()
				v, err := tn.node.Put(ctx, []byte(key), []byte(strings.Repeat(key[:1], size)))
				if err == nil {
					acked[key] = v
				}
				return time.Since(start), err
			}
			for i := range 20 {
				if _, err := put(fmt.Sprintf("before-%d", i), 100); err != nil {
					t.Fatal(err)
				}
			}

			inj.set(tc.rule(tn.dir))
			var failedPut error
			for i := 0; i < 400 && failedPut == nil; i++ {
				took, err := put(fmt.Sprintf("after-%03d", i), tc.valueSize)
				if err == nil {
					continue
				}
				failedPut = err
				t.Logf("put %d after arming the fault failed after %v: %v", i, took, err)
				if took > 5*time.Second {
					t.Errorf("the failing put took %v: not prompt", took)
				}
			}
			if failedPut == nil {
				t.Fatalf("400 puts went through the fault (%d injected errors)", inj.hits.Load())
			}
			checkStorageErr(t, "the put that met the fault", failedPut, tc.want)
			select {
			case <-tn.node.Failed():
			case <-time.After(waitTimeout):
				t.Fatal("Failed() not closed")
			}
			checkStorageErr(t, "Failure()", tn.node.Failure(), tc.want)

			// Everything after fails at once, and nothing is acknowledged.
			start := time.Now()
			var wg sync.WaitGroup
			var lateAcks atomic.Int64
			for i := range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
					defer cancel()
					_, err := tn.node.Put(ctx, fmt.Appendf(nil, "late-%d", i), []byte("x"))
					if err == nil {
						lateAcks.Add(1)
						return
					}
					checkStorageErr(t, "a later put", err, tc.want)
				}()
			}
			wg.Wait()
			if n := lateAcks.Load(); n > 0 {
				t.Errorf("%d puts acknowledged after the storage failure", n)
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			checkStorageErr(t, "ReadIndex", tn.node.ReadIndex(ctx), tc.want)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("requests after the failure took %v to fail", took)
			}
			time.Sleep(500 * time.Millisecond) // let a retry storm show, were there one
			if n := errorLines.Load(); n > 20 {
				t.Errorf("%d error lines logged: want a handful, rate-limited", n)
			}

			// What the disk holds: restart from a copy (the failed store
			// stays open and locked in this process).
			inj.set(nil)
			copyDir := restartFromCopy(t, c, tn)
			tn = c.leader()
			for k, v := range acked {
				got, ver, ok, err := tn.node.Get([]byte(k))
				if err != nil || !ok || ver != v || len(got) == 0 || got[0] != k[0] {
					t.Fatalf("after restart from %s: acknowledged %q (version %d): got %d bytes, version %d, %v, %v",
						copyDir, k, v, len(got), ver, ok, err)
				}
			}
			if _, err := put("restarted", 10); err != nil {
				t.Fatalf("put after the restart: %v", err)
			}
			t.Logf("%d acknowledged writes all there after the restart", len(acked))
		})
	}
}

func checkStorageErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	var se *StorageError
	switch {
	case err == nil:
		t.Errorf("%s: no error", what)
	case !errors.Is(err, ErrStorage) || !errors.As(err, &se):
		t.Errorf("%s: %v (%T), want ErrStorage", what, err, err)
	case !errors.Is(err, ErrStopped):
		t.Errorf("%s: %v does not match ErrStopped", what, err)
	case !strings.HasPrefix(err.Error(), "raft: storage: ") || !strings.Contains(err.Error(), want):
		t.Errorf("%s: %q, want \"raft: storage: ...%s...\"", what, err, want)
	}
}

// restartFromCopy closes tn's failed node, copies its data directory as it
// is on disk, and starts the node again on the copy.
func restartFromCopy(t *testing.T, c *cluster, tn *testNode) string {
	t.Helper()
	if err := tn.node.Close(); err == nil || !strings.Contains(err.Error(), "storage fault") {
		t.Errorf("Close of the failed node = %v, want the storage fault", err)
	}
	tn.cancel()
	tn.tr.Close()
	tn.wg.Wait()
	tn.node = nil
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dst, os.DirFS(tn.dir)); err != nil {
		t.Fatal(err)
	}
	tn.dir = dst
	c.start(tn.id, false)
	return dst
}

// TestStorageFaultLeaderFailover: the leader's disk fills up in a
// three-node cluster. Its clients get ErrStorage at once, the others elect
// a new leader and go on, and the failed node, restarted once there is
// room, catches up; no acknowledged write is lost anywhere.
func TestStorageFaultLeaderFailover(t *testing.T) {
	inj := &injector{}
	cfg := testConfig()
	cfg.FS = errorfs.Wrap(vfs.Default, inj)
	c := newCluster(t, 3, cfg)
	acked := map[string]uint64{}
	for i := range 10 {
		k := fmt.Sprintf("k%d", i)
		acked[k] = c.put(k, k)
	}
	old := c.leader()
	inj.set(storageFaults[1].rule(old.dir)) // full disk
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err := old.node.Put(ctx, []byte("on-the-full-disk"), []byte("x"))
	checkStorageErr(t, "put on the failed leader", err, "no space left on device")
	// The others take over (the failed node no longer heartbeats).
	var others []*testNode
	for _, tn := range c.running() {
		if tn != old {
			others = append(others, tn)
		}
	}
	var lead *testNode
	wait.For(t, "a new leader", func() bool {
		lead = c.leader(others...)
		return lead != old
	})
	// With one node of three down, a stall of an election timeout (the
	// race detector, a busy host) can change the leader again: a write
	// whose outcome that made unknown is written again, at a later index,
	// at the survivors' leader of the moment.
	for i := 10; i < 20; i++ {
		k := fmt.Sprintf("k%d", i)
		wait.For(t, "put "+k, func() bool {
			lead = c.leader(others...)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			v, err := lead.node.Put(ctx, []byte(k), []byte(k))
			if err != nil {
				t.Logf("put %s: %v (trying again)", k, err)
				return false
			}
			acked[k] = v
			return true
		})
	}
	inj.set(nil)
	restartFromCopy(t, c, old)
	for _, tn := range c.running() {
		c.caughtUp(tn)
		for k, v := range acked {
			got, ver, ok, err := tn.node.Get([]byte(k))
			if err != nil || !ok || ver != v || string(got) != k {
				t.Fatalf("node %d: %q = %q, %d, %v, %v; want version %d", tn.id, k, got, ver, ok, err, v)
			}
		}
	}
}

// TestStorageOpenFails: a node that cannot write its data directory at
// start (read-only, full) fails Open at once with ErrStorage and the
// cause, rather than starting, or hanging.
func TestStorageOpenFails(t *testing.T) {
	mutations := func(op errorfs.Op) bool { return isMutation(op.Kind) }
	walSyncs := isLogSync
	for _, tc := range []struct {
		name     string
		existing bool // the directory holds a node's data already
		fails    func(errorfs.Op) bool
		errno    syscall.Errno
		want     string
	}{
		{"read-only, new", false, mutations, syscall.EROFS, "read-only file system"},
		{"read-only, existing", true, mutations, syscall.EROFS, "read-only file system"},
		{"full, new", false, mutations, syscall.ENOSPC, "no space left on device"},
		{"full, existing", true, mutations, syscall.ENOSPC, "no space left on device"},
		{"fsync error, existing", true, walSyncs, syscall.EIO, "input/output error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inj := &injector{}
			cfg := testConfig()
			cfg.FS = errorfs.Wrap(vfs.Default, inj)
			c := newCluster(t, 1, cfg)
			tn := c.leader()
			if tc.existing {
				c.put("a", "1")
			}
			c.stop(1)
			if !tc.existing {
				os.RemoveAll(tn.dir)
			}
			inj.set(func(op errorfs.Op) error {
				if tc.fails(op) {
					return pathErr(op, tc.errno)
				}
				return nil
			})
			run := c.base
			run.ID, run.DataDir, run.InitialCluster, run.Transport = 1, tn.dir, c.peers, newMemNet().endpoint("x")
			start := time.Now()
			n, err := Open(withKV(run, nil))
			if err == nil {
				n.Close()
				t.Fatal("Open succeeded")
			}
			t.Logf("Open failed after %v: %v", time.Since(start), err)
			checkStorageErr(t, "Open", err, tc.want)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("Open took %v to fail", took)
			}
			if tc.existing { // the data is intact once the disk is fixed
				inj.set(nil)
				dst := filepath.Join(t.TempDir(), "copy")
				if err := os.CopyFS(dst, os.DirFS(tn.dir)); err != nil {
					t.Fatal(err)
				}
				tn.dir = dst
				tn = c.start(1, false)
				c.leader()
				if v, _, ok, err := tn.node.Get([]byte("a")); !ok || err != nil || string(v) != "1" {
					t.Fatalf("after the disk is fixed: a = %q, %v, %v", v, ok, err)
				}
			}
		})
	}
}
