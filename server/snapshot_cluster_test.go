package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/backup"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/raft"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport/tcp"
)

type kv struct {
	value   string
	version uint64
}

// readBackup decodes a whole backup file.
func readBackup(t *testing.T, path string) (backup.Header, map[string]kv) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := backup.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kv{}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return r.Header(), out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[string(rec.Key)] = kv{string(rec.Value), rec.Version}
	}
}

// saveBackup takes a backup through the client into a file.
func saveBackup(t *testing.T, c *client.Client, dir string) (string, client.SnapshotInfo) {
	t.Helper()
	path := filepath.Join(dir, "backup.kvd")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info, err := c.Snapshot(ctx, f)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return path, info
}

// TestBackupRoundTrip saves a backup of a 3-node cluster while writers
// keep writing, restores it into a new 3-node cluster, and checks that the
// backup holds every write acknowledged before it was asked for, that
// every key of the backup is readable in the new cluster with its value
// and version (and nothing else is there), that new writes get higher
// versions, that the new cluster has an id of its own, and that a
// restarted restored node keeps its state.
func TestBackupRoundTrip(t *testing.T) {
	old := kvdtest.StartCluster(t, 3, kvdtest.Options{SnapshotCount: 300})
	kvdtest.WaitLeader(t, old, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(old), client.Linearizable)
	ctx := context.Background()
	for i := range 400 {
		if err := c.Put(ctx, fmt.Appendf(nil, "k%04d", i), fmt.Appendf(nil, "v%d-0", i)); err != nil {
			t.Fatal(err)
		}
	}

	// Writers overwrite, add and delete keys while the backup streams;
	// acked records each key's latest acknowledged write.
	var (
		mu    sync.Mutex
		acked = map[string]kv{}
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("k%04d", rng.IntN(600))
				if rng.IntN(10) == 0 {
					if err := c.Delete(ctx, []byte(key)); err == nil || errors.Is(err, client.ErrNotFound) {
						mu.Lock()
						delete(acked, key) // a later backup must not show an older write of it
						mu.Unlock()
					}
					continue
				}
				value := fmt.Sprintf("%s-w%d-%d", key, w, n)
				if v, err := c.PutVersion(ctx, []byte(key), []byte(value)); err == nil {
					mu.Lock()
					if v > acked[key].version {
						acked[key] = kv{value, v}
					}
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // let the writers get going (not a timing assertion)
	mu.Lock()
	before := make(map[string]kv, len(acked))
	for k, v := range acked {
		before[k] = v
	}
	mu.Unlock()
	path, info := saveBackup(t, newClient(t, kvdtest.Endpoints(old), client.Linearizable), t.TempDir())
	close(stop)
	wg.Wait()

	h, keys := readBackup(t, path)
	if h.Index != info.Index || h.Keys != info.Keys || uint64(len(keys)) != h.Keys || h.Keys < 300 {
		t.Fatalf("backup header %+v, info %+v, %d records", h, info, len(keys))
	}
	for k, w := range before {
		if got, ok := keys[k]; ok && got.version < w.version {
			t.Errorf("backup has %s at version %d, older than the write at %d acknowledged before the backup was asked for",
				k, got.version, w.version)
		}
	}

	restored := kvdtest.StartCluster(t, 3, kvdtest.Options{Restore: path, Token: "restored"})
	kvdtest.WaitLeader(t, restored, 10*time.Second)
	rc := newClient(t, kvdtest.Endpoints(restored), client.Linearizable)
	checkRestored(t, rc, keys)
	v, err := rc.PutVersion(ctx, []byte("k0000"), []byte("after"))
	if err != nil || v <= h.Index {
		t.Fatalf("first write after the restore: version %d, %v; want above the backup's index %d", v, err, h.Index)
	}
	for _, n := range restored {
		if n.Srv.Node().ClusterID() != restored[0].Srv.Node().ClusterID() || n.Srv.Node().ClusterID() == old[0].Srv.Node().ClusterID() {
			t.Fatalf("node %d of the restored cluster has cluster id %016x (restored node 1: %016x, old: %016x)", n.ID,
				n.Srv.Node().ClusterID(), restored[0].Srv.Node().ClusterID(), old[0].Srv.Node().ClusterID())
		}
	}

	// A restarted member opens its data as it is (no restore again).
	restored[2].Stop()
	if err := restored[2].Start(); err != nil {
		t.Fatalf("restart a restored node: %v", err)
	}
	delete(keys, "k0000")
	waitFor(t, "the restarted node to serve the restored state", func() bool {
		_, ver, err := newClient(t, []string{restored[2].Addr}, client.Serializable).GetVersion(ctx, []byte("k0000"))
		return err == nil && ver == v
	})
}

// checkRestored: the cluster holds exactly keys, with their values and
// versions.
func checkRestored(t *testing.T, c *client.Client, keys map[string]kv) {
	t.Helper()
	ctx := context.Background()
	for k, want := range keys {
		value, version, err := c.GetVersion(ctx, []byte(k))
		if err != nil || string(value) != want.value || version != want.version {
			t.Fatalf("restored %s = %q at version %d, %v; want %q at %d", k, value, version, err, want.value, want.version)
		}
	}
	r, err := c.Range(ctx, nil, nil, client.WithCountOnly())
	if err != nil || r.Count != uint64(len(keys)) {
		t.Fatalf("restored cluster counts %+v keys, %v; want %d", r, err, len(keys))
	}
}

// TestRestoreRefusals: a damaged or truncated backup, a data directory that
// is not empty, and a new cluster that would have the old one's id are all
// refused, and a refused restore leaves the directory empty.
func TestRestoreRefusals(t *testing.T) {
	old := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, old, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(old), client.Linearizable)
	for i := range 20 {
		if err := c.Put(context.Background(), fmt.Appendf(nil, "k%d", i), []byte("some value")); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	path, _ := saveBackup(t, c, dir)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	variant := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x01
	addr := kvdtest.FreeAddrs(t, 1)[0]
	start := func(file, dataDir, token, listen string) error {
		tr, err := newTransport(t)
		if err != nil {
			return err
		}
		defer tr.Close()
		s, err := server.New(server.Config{ID: 1, Listen: listen, DataDir: dataDir, Transport: tr,
			InitialClusterToken: token, Restore: file, Logger: quietLog()})
		if err == nil {
			s.Close()
		}
		return err
	}
	for _, tc := range []struct {
		name, file string
		want       error
	}{
		{"flipped byte", variant("flipped", flipped), backup.ErrChecksum},
		{"truncated", variant("truncated", good[:len(good)-10]), backup.ErrTruncated},
		{"not a backup", variant("junk", []byte("hello")), backup.ErrTruncated},
	} {
		dataDir := t.TempDir()
		if err := start(tc.file, dataDir, "new", addr); !errors.Is(err, tc.want) {
			t.Errorf("%s: start = %v, want %v", tc.name, err, tc.want)
		}
		if ents, _ := os.ReadDir(dataDir); len(ents) != 0 {
			t.Errorf("%s: the refused restore left %d entries in the data directory", tc.name, len(ents))
		}
	}
	if err := start(path, old[0].DataDir, "new", addr); !errors.Is(err, raft.ErrNotEmpty) {
		t.Errorf("restore into a used data directory: %v, want raft.ErrNotEmpty", err)
	}
	// The old cluster's own token and member: the same cluster id.
	if err := start(path, t.TempDir(), "", old[0].Addr); !errors.Is(err, raft.ErrSameCluster) {
		t.Errorf("restore with the old cluster's token and members: %v, want raft.ErrSameCluster", err)
	}
	if err := start(path, t.TempDir(), "new", addr); err != nil {
		t.Errorf("the good backup: %v", err)
	}
}

// TestSnapshotStreamsBounded: with every stream slot taken, a backup is
// refused (and counted), and succeeds once a slot is free.
func TestSnapshotStreamsBounded(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, nodes, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(nodes), client.Linearizable)
	if err := c.Put(context.Background(), []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	release := server.HoldSnapshotSlots(nodes[0].Srv)
	_, err := c.Snapshot(context.Background(), io.Discard)
	release()
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("snapshot with every stream slot taken: %v, want ErrUnavailable", err)
	}
	if n := server.SnapshotStreams(nodes[0].Srv, "refused_busy"); n != 1 {
		t.Fatalf("refused_busy = %v, want 1", n)
	}
	info, err := c.Snapshot(context.Background(), io.Discard)
	if err != nil || info.Keys != 1 {
		t.Fatalf("snapshot once a slot is free: %+v, %v", info, err)
	}
	// The server counts the stream after its last chunk has gone.
	waitFor(t, "sent to count the backup", func() bool { return server.SnapshotStreams(nodes[0].Srv, "sent") == 1 })
}

func newTransport(t *testing.T) (*tcp.Transport, error) {
	t.Helper()
	return tcp.New(tcp.Config{})
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestDeposedLeaderSnapshotNeedsReadIndex: a leader cut off from the others
// is deposed and the new leader writes a key. Asked for a backup, the old
// leader must fail or not answer: streamed without a ReadIndex, the backup
// would miss an acknowledged write.
func TestDeposedLeaderSnapshotNeedsReadIndex(t *testing.T) {
	nodes := kvdtest.StartCluster(t, 3, kvdtest.Options{})
	old := kvdtest.WaitLeader(t, nodes, 10*time.Second)
	rest := othersThan(nodes, old)
	old.Isolate(rest...)
	t.Cleanup(func() { old.Rejoin(rest...) })
	leader := kvdtest.WaitLeader(t, rest, 20*time.Second)
	if err := newClient(t, []string{leader.Addr}, client.Linearizable).Put(context.Background(), []byte("new"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	resp, err := askRequest(t, old.Addr, &wire.Request{Op: wire.OpSnapshot}, 3*time.Second)
	if err == nil && resp.Status == wire.StatusOK {
		t.Fatalf("deposed leader %d streamed a backup after the new leader %d wrote a key: "+
			"it did not confirm its leadership (ReadIndex)", old.ID, leader.ID)
	}
}
