package wal

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// tornFS is a memory file system that loses unsynced writes at a finer
// grain than vfs.MemFS.CrashClone's 4 KiB blocks: at a crash each write
// since its file's last sync is dropped, kept, or kept torn (a random
// prefix of it, or a random run of whole 512-byte sectors), in a random
// order. Directory operations are taken as durable at once (the crashable
// MemFS test covers losing them).
type tornFS struct {
	vfs.FS
	mu    sync.Mutex
	files map[string]*tornState
}

type tornState struct {
	durable []byte // the content as of the last sync
	pending []tornWrite
}

type tornWrite struct {
	off  int64
	data []byte
}

func newTornFS(base vfs.FS) *tornFS { return &tornFS{FS: base, files: map[string]*tornState{}} }

func (fs *tornFS) state(name string) *tornState {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	st := fs.files[name]
	if st == nil {
		st = &tornState{}
		if f, err := fs.FS.Open(name); err == nil {
			st.durable, _ = io.ReadAll(f)
			f.Close()
		}
		fs.files[name] = st
	}
	return st
}

func (fs *tornFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	st := fs.state(name)
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err
	}
	return &tornFile{File: f, fs: fs, st: st}, nil
}

func (fs *tornFS) Rename(oldname, newname string) error {
	st := fs.state(oldname)
	if err := fs.FS.Rename(oldname, newname); err != nil {
		return err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	delete(fs.files, oldname)
	fs.files[newname] = st
	return nil
}

func (fs *tornFS) Remove(name string) error {
	fs.mu.Lock()
	delete(fs.files, name)
	fs.mu.Unlock()
	return fs.FS.Remove(name)
}

// crash returns a new memory file system holding what survives a power
// cut now.
func (fs *tornFS) crash(t *testing.T, rng *rand.Rand, dir string) *tornFS {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := vfs.NewMem()
	must(t, out.MkdirAll(dir, 0o755))
	for name, st := range fs.files {
		data := slices.Clone(st.durable)
		for _, i := range rng.Perm(len(st.pending)) {
			w := st.pending[i]
			lo, hi := int64(0), int64(len(w.data))
			switch rng.IntN(4) {
			case 0:
				continue
			case 1: // a prefix
				hi = rng.Int64N(hi + 1)
			case 2: // a run of whole sectors
				lo = min(hi, rng.Int64N(hi/512+1)*512)
				hi = min(hi, lo+rng.Int64N(8)*512)
			}
			end := w.off + hi
			if int64(len(data)) < end {
				data = append(data, make([]byte, end-int64(len(data)))...)
			}
			copy(data[w.off+lo:end], w.data[lo:hi])
		}
		f, err := out.Create(name, vfs.WriteCategoryUnspecified)
		must(t, err)
		_, err = f.Write(data)
		must(t, err)
		must(t, f.Close())
	}
	return newTornFS(out)
}

type tornFile struct {
	vfs.File
	fs *tornFS
	st *tornState
}

func (f *tornFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	f.st.pending = append(f.st.pending, tornWrite{off: off, data: slices.Clone(p)})
	f.fs.mu.Unlock()
	return f.File.WriteAt(p, off)
}

func (f *tornFile) Write([]byte) (int, error) {
	panic("tornFS models WriteAt only")
}

func (f *tornFile) Sync() error {
	st, err := f.File.Stat()
	if err != nil {
		return err
	}
	data := make([]byte, st.Size())
	if _, err := f.File.ReadAt(data, 0); err != nil && err != io.EOF {
		return err
	}
	f.fs.mu.Lock()
	f.st.durable, f.st.pending = data, nil
	f.fs.mu.Unlock()
	return nil
}

func (f *tornFile) SyncData() error { return f.Sync() }

// TestCrashWithTornWritesWithinBlocks is the crash test with writes torn
// at any byte or sector and applied out of order, within 4 KiB blocks too.
func TestCrashWithTornWritesWithinBlocks(t *testing.T) {
	seeds := 150
	if testing.Short() {
		seeds = 30
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 64))
			fs := newTornFS(vfs.NewMem())
			segSize := int64(MinSegmentSize) << rng.IntN(3)
			l, _ := mustOpen(t, memConfig(fs, segSize))
			c := &crashRun{t: t, rng: rng, fs: fs, segSize: segSize, maxData: []int{700, 24, 4}[rng.IntN(3)], l: l, durable: newModel(), live: newModel(), term: 1}
			for crash := range 8 {
				for range rng.IntN(300) {
					c.op()
				}
				clone := fs.crash(t, rng, "/wal")
				l2, r, err := Open(memConfig(clone, segSize))
				if err != nil {
					t.Fatalf("crash %d: Open: %v", crash, err)
				}
				got := fromRecovered(r)
				if err := c.check(got); err != nil {
					t.Fatalf("crash %d: %v", crash, err)
				}
				checkLog(t, l2, got)
				fs, c.fs, c.l = clone, clone, l2
				c.live = got.clone()
				c.synced()
				c.soonRestart()
			}
			must(t, c.l.Close())
		})
	}
}
