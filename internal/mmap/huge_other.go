//go:build !linux

package mmap

// AllocHuge is Alloc on platforms without huge pages.
func AllocHuge(size int) ([]byte, Backing, error) {
	b, err := Alloc(size)
	return b, Pages, err
}
