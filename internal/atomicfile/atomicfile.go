package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with what write puts into the file it is handed. The
// file is a temporary one beside path; it becomes path only if write and
// every step after it succeed, and is removed otherwise. The new file has
// mode 0600 (os.CreateTemp's): chmod it afterwards for another.
func Write(path string, write func(f *os.File) error) error {
	return writeSynced(path, write, SyncDir)
}

// writeSynced is Write with the directory sync given: tests pass one that
// sees when it runs, or fails.
func writeSynced(path string, write func(f *os.File) error, syncDir func(dir string) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".part-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if err := syncDir(dir); err != nil {
		// The file is whole at path; only its durability is in doubt.
		return fmt.Errorf("atomicfile: %s written, but syncing its directory failed: %w", path, err)
	}
	return nil
}

// SyncDir makes the directory's entries (a rename, a creation, a removal
// in it) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
