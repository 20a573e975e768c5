package mmap

import "errors"

// Sentinel errors, on every platform.
var (
	// ErrSize: Alloc was asked for a size that is not positive.
	ErrSize = errors.New("mmap: size must be positive")
	// ErrNotMapped: Free was given a slice that Alloc did not return, or one
	// already freed.
	ErrNotMapped = errors.New("mmap: not an Alloc'd slice")
)
