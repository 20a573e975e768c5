package tcp

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"unsafe"

	"github.com/kvd-project/kvd/internal/mmap"
	"github.com/kvd-project/kvd/transport"
)

// region is registered memory. Serving a READ copies out of mem under
// mu.RLock, which only keeps Close from unmapping mid-copy: the owner writes
// mem with no lock at all, so readers can see torn bytes, as over RDMA.
type region struct {
	reg  *registry
	mem  []byte
	desc transport.Descriptor

	mu    sync.RWMutex
	freed bool // guarded by mu: mem is unmapped

	closeOnce sync.Once
	closeErr  error
}

var _ transport.Region = (*region)(nil)

func (r *region) Bytes() []byte                    { return r.mem }
func (r *region) Descriptor() transport.Descriptor { return r.desc }

// Close deregisters the region (later READs fail with ErrBadKey), waits for
// copies out of it to finish, and unmaps it.
func (r *region) Close() error {
	r.closeOnce.Do(func() {
		r.reg.remove(r.desc.Key)
		r.mu.Lock()
		r.freed = true
		r.closeErr = mmap.Free(r.mem)
		r.mu.Unlock()
	})
	return r.closeErr
}

// copyTo appends mem[off:off+n] to dst, the part of a buffer the caller owns.
// It reports false, copying nothing, if the region has been freed.
func (r *region) copyTo(dst []byte, off uint64) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.freed {
		return false
	}
	copy(dst, r.mem[off:off+uint64(len(dst))])
	return true
}

// registry maps keys to a transport's regions.
type registry struct {
	mu      sync.RWMutex
	regions map[uint32]*region
	closed  bool // by closeAll: no more regions
	// newKey draws candidate keys; tests replace it to get known keys.
	newKey func() uint32
}

func (g *registry) init() {
	g.regions = map[uint32]*region{}
	g.newKey = rand.Uint32
}

func (g *registry) add(size int) (*region, error) {
	mem, err := mmap.Alloc(size)
	if err != nil {
		return nil, fmt.Errorf("tcp: register %d bytes: %w", size, err)
	}
	r := &region{reg: g, mem: mem}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		mmap.Free(mem)
		return nil, fmt.Errorf("tcp: register: transport %w", transport.ErrClosed)
	}
	key := g.newKey()
	for key == 0 || g.regions[key] != nil {
		key = g.newKey()
	}
	r.desc = transport.Descriptor{
		Addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))),
		Len:  uint64(size),
		Key:  key,
	}
	g.regions[key] = r
	return r, nil
}

func (g *registry) remove(key uint32) {
	g.mu.Lock()
	delete(g.regions, key)
	g.mu.Unlock()
}

// resolve checks one op against the registry: on statusOK it returns the
// region and the offset into it.
func (g *registry) resolve(op wireOp) (*region, uint64, status) {
	g.mu.RLock()
	r := g.regions[op.key]
	g.mu.RUnlock()
	if r == nil {
		return nil, 0, statusBadKey
	}
	if op.addr < r.desc.Addr {
		return nil, 0, statusOutOfRange
	}
	off := op.addr - r.desc.Addr
	if off > r.desc.Len || uint64(op.n) > r.desc.Len-off {
		return nil, 0, statusOutOfRange
	}
	return r, off, statusOK
}

func (g *registry) closeAll() {
	g.mu.Lock()
	g.closed = true
	rs := make([]*region, 0, len(g.regions))
	for _, r := range g.regions {
		rs = append(rs, r)
	}
	g.mu.Unlock()
	for _, r := range rs {
		r.Close()
	}
}
