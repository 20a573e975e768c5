//go:build unix

package mmap

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Alloc returns size bytes of zeroed, private, anonymous memory, page
// aligned. The slice's capacity is the mapping's length (size rounded up to
// whole pages); keep the slice, or one with the same start and capacity, to
// Free it.
func Alloc(size int) ([]byte, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: %d", ErrSize, size)
	}
	page := unix.Getpagesize()
	n := (size + page - 1) / page * page
	if n < size { // rounding overflowed
		return nil, fmt.Errorf("%w: %d is too large", ErrSize, size)
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("mmap: map %d bytes: %w", n, err)
	}
	return b[:size], nil
}

// Free unmaps memory returned by Alloc. The memory must not be touched
// afterwards: doing so faults.
func Free(b []byte) error {
	if cap(b) == 0 {
		return fmt.Errorf("%w: empty slice", ErrNotMapped)
	}
	// x/sys/unix tracks mappings by their last byte, so hand back the whole
	// mapping.
	if err := unix.Munmap(b[:cap(b)]); err != nil {
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("%w: %v", ErrNotMapped, err)
		}
		return fmt.Errorf("mmap: unmap %d bytes: %w", cap(b), err)
	}
	return nil
}
