//go:build unix

package mmap

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestAllocZeroedAndAligned(t *testing.T) {
	page := unix.Getpagesize()
	for _, size := range []int{1, 7, page - 1, page, page + 1, 3 * page} {
		b, err := Alloc(size)
		if err != nil {
			t.Fatalf("Alloc(%d): %v", size, err)
		}
		if len(b) != size || cap(b)%page != 0 || cap(b) < size {
			t.Errorf("Alloc(%d): len %d cap %d, want len %d and cap a multiple of %d", size, len(b), cap(b), size, page)
		}
		for i, c := range b[:cap(b)] {
			if c != 0 {
				t.Fatalf("Alloc(%d): byte %d = %d, want 0", size, i, c)
			}
		}
		b[0], b[size-1] = 1, 2 // writable
		if err := Free(b); err != nil {
			t.Fatalf("Free: %v", err)
		}
	}
}

func TestAllocBadSize(t *testing.T) {
	for _, size := range []int{0, -1} {
		if _, err := Alloc(size); !errors.Is(err, ErrSize) {
			t.Errorf("Alloc(%d) = %v, want ErrSize", size, err)
		}
	}
}

func TestFreeNotMapped(t *testing.T) {
	b, err := Alloc(10)
	if err != nil {
		t.Fatal(err)
	}
	if err := Free(b); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"twice", b},
		{"nil", nil},
		{"heap", make([]byte, 10)},
	}
	for _, tt := range tests {
		if err := Free(tt.b); !errors.Is(err, ErrNotMapped) {
			t.Errorf("Free(%s) = %v, want ErrNotMapped", tt.name, err)
		}
	}
}
