//go:build rdma

package rdma

import (
	"fmt"
	"sync"

	"github.com/kvd-project/kvd/internal/mmap"
	"github.com/kvd-project/kvd/transport"
)

// region is mmap'ed memory registered for remote READ only.
type region struct {
	t       *Transport
	mem     []byte // the whole mapping
	backing mmap.Backing
	size    int
	mr      mr
	desc    transport.Descriptor
	once    sync.Once
}

// Register allocates size zeroed bytes off the Go heap and registers them
// for remote READ. Remote WRITE and atomics are never granted. The memory
// is backed by huge pages when it can be (mmap.AllocHuge: reserved 2 MiB
// pages if size is at least 2 MiB and enough are free, else ordinary pages
// advised for transparent huge pages), so that the device needs fewer
// translations for a large table.
func (t *Transport) Register(size int) (transport.Region, error) {
	if t.closed.Load() {
		return nil, errClosedTransport
	}
	if size <= 0 {
		return nil, fmt.Errorf("rdma: register %d bytes: size must be positive", size)
	}
	// Close frees the PD once nothing counted in live remains: hold it
	// while registering, or a Close between the check above and
	// ibv_reg_mr would free the PD under us.
	if !t.connStarted() {
		return nil, errClosedTransport
	}
	defer t.connDone()
	mem, backing, err := mmap.AllocHuge(size)
	if err != nil {
		return nil, fmt.Errorf("rdma: register %d bytes: %w", size, err)
	}
	mem = mem[:cap(mem)]
	m, err := t.pd.register(mem, accessRemoteRead)
	if err != nil {
		_ = mmap.Free(mem)
		return nil, err
	}
	r := &region{t: t, mem: mem, backing: backing, size: size, mr: m}
	r.desc = transport.Descriptor{Addr: addrOf(mem), Len: uint64(size), Key: m.rkey()}
	t.mu.Lock()
	if t.closed.Load() {
		t.mu.Unlock()
		_ = m.deregister()
		_ = mmap.Free(mem)
		return nil, errClosedTransport
	}
	t.regions[r] = struct{}{}
	t.mu.Unlock()
	t.pinned.regions.Add(int64(cap(mem)))
	return r, nil
}

func (r *region) Bytes() []byte                    { return r.mem[:r.size:r.size] }
func (r *region) Descriptor() transport.Descriptor { return r.desc }

// Close deregisters the region (the device finishes READs in progress
// first; later ones fail with a remote access error, reported to the reader
// as ErrBadKey) and unmaps it.
func (r *region) Close() error {
	var err error
	r.once.Do(func() {
		r.t.mu.Lock()
		delete(r.t.regions, r)
		r.t.mu.Unlock()
		err = r.mr.deregister()
		if ferr := mmap.Free(r.mem); err == nil {
			err = ferr
		}
		r.t.pinned.regions.Add(-int64(cap(r.mem)))
	})
	return err
}
