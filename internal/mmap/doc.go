// Package mmap allocates memory outside the Go heap, for buffers that are
// handed to a device or read concurrently with no Go-level synchronisation
// (registered RDMA regions, the TCP transport's emulation of them).
//
// It owns nothing but the mapping calls: the caller owns every slice it gets
// from Alloc and must give it back to Free exactly once. The garbage
// collector never moves or frees this memory, and the race detector does not
// watch it.
package mmap
