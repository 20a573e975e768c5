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
	"syscall"
	"testing"
	"time"

	"github.com/kvd-project/kvd/client"
	"github.com/kvd-project/kvd/internal/backup"
	"github.com/kvd-project/kvd/internal/kvdtest"
	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/revision"
	"github.com/kvd-project/kvd/internal/wire"
	"github.com/kvd-project/kvd/raft"
	"github.com/kvd-project/kvd/server"
	"github.com/kvd-project/kvd/transport/tcp"
)

// Backups (OpSnapshot) and restores: round trips, refusals, bounded
// streams, and restores from mixed or changing backup files.

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
		out[string(rec.Key)] = kv{string(rec.Value), rec.Meta.Mod}
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
	skipShort(t)
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
				if v, err := c.PutRevision(ctx, []byte(key), []byte(value)); err == nil {
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
	v, err := rc.PutRevision(ctx, []byte("k0000"), []byte("after"))
	if err != nil || v != h.Revision+1 {
		t.Fatalf("first write after the restore: revision %d, %v; want the one after the backup's revision %d", v, err, h.Revision)
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
	wait.For(t, "the restarted node to serve the restored state", func() bool {
		_, ver, err := newClient(t, []string{restored[2].Addr}, client.Serializable).GetModRevision(ctx, []byte("k0000"))
		return err == nil && ver == v
	})
}

// checkRestored: the cluster holds exactly keys, with their values and
// versions.
func checkRestored(t *testing.T, c *client.Client, keys map[string]kv) {
	t.Helper()
	ctx := context.Background()
	for k, want := range keys {
		value, version, err := c.GetModRevision(ctx, []byte(k))
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
	flipped[len(flipped)-backup.TrailerLen-1] ^= 0x01 // the last value's last byte: damage only the checksum sees
	addr := kvdtest.FreeAddrs(t, 1)[0]
	// member is node 1's address in the initial cluster; it listens at
	// addr (the old cluster's node holds its own address).
	start := func(file, dataDir, token, member string) error {
		tr, err := newTransport(t)
		if err != nil {
			return err
		}
		defer tr.Close()
		s, err := server.New(server.Config{ID: 1, Listen: addr, InitialCluster: map[uint64]string{1: member}, DataDir: dataDir,
			Transport: tr, InitialClusterToken: token, Restore: file, Logger: quietLog()})
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
	wait.For(t, "sent to count the backup", func() bool { return server.SnapshotStreams(nodes[0].Srv, "sent") == 1 })
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
	skipShort(t)
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

// TestRestoreFromMixedBackupsRefusedOrConverge: the members of a new cluster are
// restored from two different backups of the same cluster (an operator
// copies backup.kvd to node 1 after a newer save replaced it). Nodes 2 and
// 3 (the older backup) elect a leader before node 1 (the newer) starts.
// Either node 1 must be refused (at start, or by its peers as another
// cluster), or the cluster must converge on one state:
// it must never serve a state of its own that the others do not have.
func TestRestoreFromMixedBackupsRefusedOrConverge(t *testing.T) {
	skipShort(t)
	old := kvdtest.StartCluster(t, 1, kvdtest.Options{})
	kvdtest.WaitLeader(t, old, 10*time.Second)
	c := newClient(t, kvdtest.Endpoints(old), client.Linearizable)
	ctx := context.Background()
	if err := c.Put(ctx, []byte("k"), []byte("old")); err != nil {
		t.Fatal(err)
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	pathA, infoA := saveBackup(t, c, dirA)
	for i := range 50 {
		if err := c.Put(ctx, []byte("k"), fmt.Appendf(nil, "new-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Put(ctx, []byte("only-in-b"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	pathB, infoB := saveBackup(t, c, dirB)
	if infoB.Index <= infoA.Index {
		t.Fatalf("backups at %d and %d", infoA.Index, infoB.Index)
	}

	addrs := kvdtest.FreeAddrs(t, 3)
	cluster := map[uint64]string{1: addrs[0], 2: addrs[1], 3: addrs[2]}
	files := map[uint64]string{1: pathB, 2: pathA, 3: pathA}
	srvs := map[uint64]*server.Server{}
	start := func(id uint64) error {
		tr, err := tcp.New(tcp.Config{Node: cluster[id]})
		if err != nil {
			return err
		}
		s, err := server.New(server.Config{ID: id, Listen: cluster[id], DataDir: filepath.Join(t.TempDir(), "d"),
			InitialCluster: cluster, InitialClusterToken: "restored", Restore: files[id], Transport: tr, Logger: quietLog()})
		if err != nil {
			tr.Close()
			return err
		}
		srvs[id] = s
		t.Cleanup(func() { s.Close(); tr.Close() })
		return nil
	}
	for _, id := range []uint64{2, 3} {
		if err := start(id); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "a leader among 2 and 3", func() bool {
		return srvs[2].Status().IsLeader || srvs[3].Status().IsLeader
	})
	if err := start(1); err != nil {
		t.Logf("node 1 refused at start: %v", err)
		return // a clear error: fine
	}
	if id1, id2 := srvs[1].Node().ClusterID(), srvs[2].Node().ClusterID(); id1 != id2 {
		t.Logf("node 1 is of cluster %016x, nodes 2 and 3 of %016x: they refuse each other", id1, id2)
		return // a clear refusal (logged and counted on both sides): fine
	}
	rc := newPatientClient(t, []string{addrs[1], addrs[2]}, client.Linearizable)
	for i := range 20 {
		if err := rc.Put(ctx, fmt.Appendf(nil, "after-%d", i), []byte("y")); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "every node to apply what the leader committed", func() bool {
		var commit uint64
		for _, s := range srvs {
			if st := s.Node().Status(); st.IsLeader {
				commit = st.Commit
			}
		}
		for _, s := range srvs {
			if commit == 0 || s.Node().Status().Applied < commit {
				return false
			}
		}
		return true
	})
	read := func(id uint64, key string) string {
		v, ver, err := newClient(t, []string{cluster[id]}, client.Serializable).GetModRevision(ctx, []byte(key))
		return fmt.Sprintf("%q@%d err=%v", v, ver, err)
	}
	for _, key := range []string{"k", "only-in-b", "after-19"} {
		a, b, c3 := read(1, key), read(2, key), read(3, key)
		t.Logf("%s: node1 %s node2 %s node3 %s", key, a, b, c3)
		if a != b || b != c3 {
			t.Errorf("nodes disagree on %s: node 1 %s, node 2 %s, node 3 %s", key, a, b, c3)
		}
	}
	t.Logf("applied: 1=%d 2=%d 3=%d", srvs[1].Status().Applied, srvs[2].Status().Applied, srvs[3].Status().Applied)
}

func writeBackup(t *testing.T, h backup.Header, recs [][3]any) []byte {
	t.Helper()
	var buf fileBuf
	w, err := backup.NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Add([]byte(r[0].(string)), []byte(r[1].(string)), revision.Meta{Create: r[2].(uint64), Mod: r[2].(uint64), Version: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.b
}

type fileBuf struct{ b []byte }

func (f *fileBuf) Write(p []byte) (int, error) { f.b = append(f.b, p...); return len(p), nil }

// TestRestoreFileReplacedWhileRestoring: kvd --restore reads the backup
// file twice, once to check it and once to write it. If the path names
// another backup by the second read (a backup job renaming this hour's
// backup over the same name; here a named pipe makes the timing sure),
// the node must not install one file's records under the other's index:
// restored versions above the restored index break "new writes get higher
// versions" (IfVersion conditions, watches).
func TestRestoreFileReplacedWhileRestoring(t *testing.T) {
	older := writeBackup(t, backup.Header{Index: 10, Keys: 1, Revision: 10}, [][3]any{{"a", "old", uint64(5)}})
	newer := writeBackup(t, backup.Header{Index: 1000, Keys: 2, Revision: 1000}, [][3]any{{"a", "new", uint64(900)}, {"b", "new", uint64(999)}})
	path := filepath.Join(t.TempDir(), "backup.kvd")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	// inotify tells when a reader closed the pipe: the next writer then
	// meets the next reader, not the one still draining the first file.
	ino, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		t.Skip("inotify:", err)
	}
	defer syscall.Close(ino)
	if _, err := syscall.InotifyAddWatch(ino, path, syscall.IN_CLOSE_NOWRITE); err != nil {
		t.Skip("inotify:", err)
	}
	go func() {
		for i, b := range [][]byte{older, newer} {
			if i > 0 {
				ev := make([]byte, 4096)
				if _, err := syscall.Read(ino, ev); err != nil {
					return
				}
			}
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			f.Write(b)
			f.Close()
		}
	}()
	addr := kvdtest.FreeAddrs(t, 1)[0]
	tr, err := tcp.New(tcp.Config{Node: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	s, err := server.New(server.Config{ID: 1, Listen: addr, DataDir: t.TempDir(), Transport: tr,
		InitialClusterToken: "restored", Restore: path, Logger: quietLog()})
	if err != nil {
		t.Logf("restore refused: %v", err)
		return // refusing is right
	}
	t.Cleanup(func() { s.Close() })
	c := newClient(t, []string{addr}, client.Linearizable)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var maxRestored uint64
	for _, k := range []string{"a", "b"} {
		if _, v, err := c.GetModRevision(ctx, []byte(k)); err == nil {
			maxRestored = max(maxRestored, v)
		}
	}
	v, err := c.PutRevision(ctx, []byte("c"), []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	if v <= maxRestored {
		t.Fatalf("first write after the restore got version %d, below a restored key's version %d (restored index %d)",
			v, maxRestored, s.Node().Status().Applied)
	}
}
