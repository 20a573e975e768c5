//go:build linux || darwin

package main

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// lockHolder returns the pid of the process holding an fcntl lock on path
// (as Pebble holds its LOCK file), 0 if none does or the file does not
// exist.
func lockHolder(path string) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return 0, err
	}
	if lk.Type == syscall.F_UNLCK {
		return 0, nil
	}
	return int(lk.Pid), nil
}
