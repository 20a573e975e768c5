//go:build linux

package mmap

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// mapHugeTLB maps n bytes of reserved huge pages.
func mapHugeTLB(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_HUGETLB|unix.MAP_HUGE_2MB)
}

// AllocHuge is Alloc for large memory a device translates (an RDMA
// region): huge pages mean a 2 MiB translation per entry instead of 4 KiB,
// so a NIC's translation cache covers 512 times more. If size is at least
// HugePageSize it first asks for reserved huge pages (MAP_HUGETLB), the
// mapping then rounded up to whole huge pages (at most 2 MiB - 1 byte
// more, reported by the slice's capacity). When that fails (no huge pages
// reserved, as by default, or too few free) or size is smaller, it falls
// back to Alloc's ordinary pages advised with MADV_HUGEPAGE (Transparent),
// or to plain pages if the kernel refuses the advice. The memory is zeroed
// and must be given back to Free, exactly once, whatever backs it.
func AllocHuge(size int) ([]byte, Backing, error) { return allocHuge(size, mapHugeTLB) }

// allocHuge is AllocHuge with the MAP_HUGETLB mapping given: tests pass
// one that fails, as on a host without reserved huge pages.
func allocHuge(size int, mapHugeTLB func(n int) ([]byte, error)) ([]byte, Backing, error) {
	if size <= 0 {
		return nil, Pages, fmt.Errorf("%w: %d", ErrSize, size)
	}
	if size >= HugePageSize {
		n := (size + HugePageSize - 1) / HugePageSize * HugePageSize
		if n >= size { // else rounding overflowed: Alloc reports it
			if b, err := mapHugeTLB(n); err == nil {
				return b[:size], HugeTLB, nil
			}
		}
	}
	b, err := Alloc(size)
	if err != nil {
		return nil, Pages, err
	}
	if err := unix.Madvise(b[:cap(b)], unix.MADV_HUGEPAGE); err != nil {
		if errors.Is(err, unix.EINVAL) { // no THP in this kernel
			return b, Pages, nil
		}
		_ = Free(b)
		return nil, Pages, fmt.Errorf("mmap: madvise(MADV_HUGEPAGE): %w", err)
	}
	return b, Transparent, nil
}
