//go:build !unix

package mmap

import (
	"errors"
	"fmt"
)

var errNoMmap = errors.New("mmap: not supported on this platform")

// Alloc fails on platforms without mmap.
func Alloc(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: %d", ErrSize, size)
	}
	return nil, errNoMmap
}

// Free fails on platforms without mmap.
func Free(b []byte) error { return errNoMmap }
