package mmap

import "fmt"

// HugePageSize is the size of the huge pages AllocHuge asks for.
const HugePageSize = 2 << 20

// Backing says what backs memory from AllocHuge.
type Backing int

const (
	// Pages: ordinary pages (the kernel refused the MADV_HUGEPAGE advice,
	// or the platform has no huge pages).
	Pages Backing = iota
	// Transparent: ordinary pages, advised with MADV_HUGEPAGE, so the
	// kernel backs what it can of the range with transparent huge pages
	// (when /sys/kernel/mm/transparent_hugepage/enabled is "always" or
	// "madvise", and only for the 2 MiB-aligned parts of the range).
	Transparent
	// HugeTLB: reserved 2 MiB huge pages (MAP_HUGETLB), from the pool that
	// /proc/sys/vm/nr_hugepages sizes.
	HugeTLB
)

func (b Backing) String() string {
	switch b {
	case Pages:
		return "pages"
	case Transparent:
		return "transparent huge pages (advised)"
	case HugeTLB:
		return "hugetlb 2MiB pages"
	}
	return fmt.Sprintf("Backing(%d)", int(b))
}
