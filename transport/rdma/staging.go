//go:build rdma

package rdma

import (
	"fmt"
	"sync/atomic"
)

// READ staging is the registered memory READ responses land in before Read
// copies them into the callers' buffers: ReadSlots slots of ReadSlotSize
// (2 MiB with the defaults). Only connections that Read need it, and a
// server's accepted connections never do (clients read the server, not the
// reverse), so it is allocated on a connection's first Read, not with the
// connection.
//
// It is a mapping of its own, registered with local write and remote
// write access: iWARP devices require remote write on the sink of an RDMA
// READ (the response is placed like a WRITE). No peer can use that: queue
// pairs never grant remote WRITE (they grant remote READ only), and the
// buffers and regions of this package stay without it.
type staging struct {
	mem  []byte
	mr   mr
	lkey uint32
	base uint64
}

// stagingAccess is what READ staging is registered with.
const stagingAccess = accessLocal | accessRemoteWrite

// staging returns the connection's READ staging, allocating and
// registering it on first use.
func (c *conn) staging() (*staging, error) {
	if c.stageReady.Load() {
		return &c.stage, nil
	}
	c.stageMu.Lock()
	defer c.stageMu.Unlock()
	if c.stageReady.Load() {
		return &c.stage, nil
	}
	// Teardown frees the staging under memMu after setting freed: holding
	// it for reading here means either teardown sees what we allocate, or
	// we see freed.
	c.memMu.RLock()
	defer c.memMu.RUnlock()
	if c.freed {
		return nil, c.closedErr()
	}
	mem, err := offHeap(c.cfg.ReadSlots * c.cfg.ReadSlotSize)
	if err != nil {
		return nil, err
	}
	m, err := c.t.pd.register(mem, stagingAccess)
	if err != nil {
		freeOffHeap(mem)
		return nil, fmt.Errorf("%w (READ staging)", err)
	}
	c.stage = staging{mem: mem, mr: m, lkey: m.lkey(), base: addrOf(mem)}
	c.stageReady.Store(true)
	c.addPinned(int64(cap(mem)))
	c.t.pinned.staging.Add(int64(cap(mem)))
	return &c.stage, nil
}

// freeStaging deregisters and unmaps the staging, if any (teardown, after
// the queue pair is gone and with freed set).
func (c *conn) freeStaging() {
	if !c.stageReady.Load() {
		return
	}
	_ = c.stage.mr.deregister()
	freeOffHeap(c.stage.mem)
	c.t.pinned.staging.Add(-int64(cap(c.stage.mem)))
}

// addPinned counts n more bytes registered by c.
func (c *conn) addPinned(n int64) {
	c.pinned.Add(n)
	c.t.pinned.conns.Add(n)
}

// PinnedBytes is how much registered (pinned) memory the connection holds:
// its receive, send and credit-message buffers, and its READ staging once
// it has read. Memory the device driver allocates for the queue pair itself
// is not counted.
func (c *conn) PinnedBytes() int64 { return c.pinned.Load() }

// pinnedCounters are a Transport's running totals (Pinned).
type pinnedCounters struct {
	conns   atomic.Int64 // bytes, all connections
	staging atomic.Int64 // bytes, of which READ staging
	regions atomic.Int64 // bytes, regions
	nConns  atomic.Int64 // connections holding registered memory
}

// Pinned reports the memory the transport has registered with the device,
// so pinned in RAM: connections' buffers and READ staging, and regions.
func (t *Transport) Pinned() Pinned {
	return Pinned{
		Conns:        t.pinned.nConns.Load(),
		ConnBytes:    t.pinned.conns.Load(),
		StagingBytes: t.pinned.staging.Load(),
		RegionBytes:  t.pinned.regions.Load(),
	}
}
