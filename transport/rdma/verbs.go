//go:build rdma

package rdma

// #cgo LDFLAGS: -libverbs -lrdmacm
// #cgo noescape kvd_poll
// #cgo nocallback kvd_poll
// #cgo noescape kvd_cq_events
// #cgo nocallback kvd_cq_events
// #cgo noescape kvd_post_reads
// #cgo nocallback kvd_post_reads
// #cgo noescape kvd_post_sends
// #cgo nocallback kvd_post_sends
// #cgo noescape kvd_post_keepalive
// #cgo nocallback kvd_post_keepalive
// #cgo noescape kvd_post_recvs
// #cgo nocallback kvd_post_recvs
// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file wraps the verbs half of the shim. Every wrapper is one cgo
// crossing; callers batch.

type (
	devContext = C.struct_ibv_context
	cqEvents   = C.struct_ibv_comp_channel
	wc         = C.struct_kvd_wc
	readWR     = C.struct_kvd_rd
	sendWR     = C.struct_kvd_sd
)

const (
	wcSuccess        = C.IBV_WC_SUCCESS
	wcFlushErr       = C.IBV_WC_WR_FLUSH_ERR
	wcRemAccessErr   = C.IBV_WC_REM_ACCESS_ERR
	wcRemInvReqErr   = C.IBV_WC_REM_INV_REQ_ERR
	wcRetryExcErr    = C.IBV_WC_RETRY_EXC_ERR
	wcRnrRetryExcErr = C.IBV_WC_RNR_RETRY_EXC_ERR
)

type devAttr struct {
	maxQPWR, maxCQE, maxRdAtom, maxInitRdAtom int
}

func deviceName(ctx *devContext) string {
	return C.GoString(C.ibv_get_device_name(ctx.device))
}

func queryDevice(ctx *devContext) (devAttr, error) {
	var a C.struct_kvd_dev_attr
	if rc := C.kvd_query_device(ctx, &a); rc != 0 {
		return devAttr{}, fmt.Errorf("rdma: ibv_query_device: %w", syscall.Errno(-rc))
	}
	return devAttr{int(a.max_qp_wr), int(a.max_cqe), int(a.max_qp_rd_atom), int(a.max_qp_init_rd_atom)}, nil
}

type pd struct{ p *C.struct_ibv_pd }

func allocPD(ctx *devContext) (pd, error) {
	p, err := C.ibv_alloc_pd(ctx)
	if p == nil {
		return pd{}, fmt.Errorf("rdma: ibv_alloc_pd: %w", errnoOr(err))
	}
	return pd{p}, nil
}

func (p pd) free() { C.ibv_dealloc_pd(p.p) }

// mr is a memory registration of off-heap memory.
type mr struct{ m *C.struct_ibv_mr }

const (
	accessLocal       = C.IBV_ACCESS_LOCAL_WRITE
	accessRemoteRead  = C.IBV_ACCESS_REMOTE_READ
	accessRemoteWrite = C.IBV_ACCESS_REMOTE_WRITE // tests only: nothing here grants it
	accessNone        = 0
)

func (p pd) register(mem []byte, access C.int) (mr, error) {
	m, err := C.ibv_reg_mr(p.p, unsafe.Pointer(unsafe.SliceData(mem)), C.size_t(len(mem)), access)
	if m == nil {
		return mr{}, fmt.Errorf("rdma: ibv_reg_mr(%d bytes): %w", len(mem), errnoOr(err))
	}
	return mr{m}, nil
}

func (m mr) lkey() uint32 { return uint32(m.m.lkey) }
func (m mr) rkey() uint32 { return uint32(m.m.rkey) }

func (m mr) deregister() error {
	if rc := C.ibv_dereg_mr(m.m); rc != 0 {
		return fmt.Errorf("rdma: ibv_dereg_mr: %w", syscall.Errno(rc))
	}
	return nil
}

// offHeap maps size zeroed bytes outside the Go heap.
func offHeap(size int) ([]byte, error) {
	pg := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, (size+pg-1)/pg*pg, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("rdma: mmap %d bytes: %w", size, err)
	}
	return mem, nil
}

func freeOffHeap(mem []byte) { _ = unix.Munmap(mem[:cap(mem)]) }

func addrOf(mem []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))) }

// compChannel is the completion channel shared by a transport's CQs.
type compChannel struct{ ch *cqEvents }

func newCompChannel(ctx *devContext) (compChannel, int, error) {
	ch, err := C.ibv_create_comp_channel(ctx)
	if ch == nil {
		return compChannel{}, -1, fmt.Errorf("rdma: ibv_create_comp_channel: %w", errnoOr(err))
	}
	if rc := C.kvd_set_nonblock(ch.fd); rc != 0 {
		C.ibv_destroy_comp_channel(ch)
		return compChannel{}, -1, fmt.Errorf("rdma: completion channel non-blocking: %w", syscall.Errno(-rc))
	}
	return compChannel{ch}, int(ch.fd), nil
}

func (c compChannel) destroy() {
	if c.ch != nil {
		C.ibv_destroy_comp_channel(c.ch)
	}
}

// events takes pending completion events and returns the contexts (CQ
// indexes) of the CQs they name; ok is false when there were none.
func (c compChannel) events(out []uint64) (int, error) {
	n := C.kvd_cq_events(c.ch, (*C.uint64_t)(unsafe.Pointer(&out[0])), C.int(len(out)))
	if n < 0 {
		if syscall.Errno(-n) == syscall.EAGAIN {
			return 0, nil
		}
		return 0, fmt.Errorf("rdma: ibv_get_cq_event: %w", syscall.Errno(-n))
	}
	return int(n), nil
}

type cqHandle struct{ c *C.struct_ibv_cq }

func createCQ(ctx *devContext, size int, ch compChannel, index int) (cqHandle, error) {
	c, err := C.kvd_create_cq(ctx, C.int(size), C.uint64_t(index), ch.ch)
	if c == nil {
		return cqHandle{}, fmt.Errorf("rdma: ibv_create_cq(%d): %w", size, errnoOr(err))
	}
	if ch.ch != nil {
		if rc := C.ibv_req_notify_cq(c, 1); rc != 0 {
			C.ibv_destroy_cq(c)
			return cqHandle{}, fmt.Errorf("rdma: ibv_req_notify_cq: %w", syscall.Errno(rc))
		}
	}
	return cqHandle{c}, nil
}

func (c cqHandle) destroy() { C.ibv_destroy_cq(c.c) }

// armNext asks for an event on the CQ's next completion of any kind.
func (c cqHandle) armNext() error {
	if rc := C.ibv_req_notify_cq(c.c, 0); rc != 0 {
		return fmt.Errorf("rdma: ibv_req_notify_cq: %w", syscall.Errno(rc))
	}
	return nil
}

// poll reaps up to len(out) completions into out (C memory).
func (c cqHandle) poll(out []wc) (int, error) {
	n := C.kvd_poll(c.c, &out[0], C.int(len(out)))
	if n < 0 {
		return 0, fmt.Errorf("rdma: ibv_poll_cq: %w", syscall.Errno(-n))
	}
	return int(n), nil
}

// wcArray allocates n completion records in C memory.
func wcArray(n int) []wc {
	p := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(wc{})))
	return unsafe.Slice((*wc)(p), n)
}

func freeWCArray(a []wc) { C.free(unsafe.Pointer(&a[0])) }

type qpHandle struct{ q *C.struct_ibv_qp }

func (q qpHandle) num() uint32 { return uint32(q.q.qp_num) }

// setAccess sets the queue pair's remote access rights (it is in RTS).
func (q qpHandle) setAccess(access int) error {
	if rc := C.kvd_qp_access(q.q, C.int(access)); rc != 0 {
		return fmt.Errorf("rdma: ibv_modify_qp(access %#x): %w", access, syscall.Errno(-rc))
	}
	return nil
}

func (q qpHandle) postReads(lkey uint32, rds []readWR, wrID uint64) error {
	if rc := C.kvd_post_reads(q.q, C.uint32_t(lkey), &rds[0], C.int(len(rds)), C.uint64_t(wrID)); rc != 0 {
		return fmt.Errorf("rdma: post READ: %w", syscall.Errno(rc))
	}
	return nil
}

func (q qpHandle) postKeepAlive(wrID uint64) error {
	if rc := C.kvd_post_keepalive(q.q, C.uint64_t(wrID)); rc != 0 {
		return fmt.Errorf("rdma: post keepalive READ: %w", syscall.Errno(rc))
	}
	return nil
}

func (q qpHandle) postSends(lkey uint32, sds []sendWR) error {
	if rc := C.kvd_post_sends(q.q, C.uint32_t(lkey), &sds[0], C.int(len(sds))); rc != 0 {
		return fmt.Errorf("rdma: post SEND: %w", syscall.Errno(rc))
	}
	return nil
}

func (q qpHandle) postRecvs(lkey uint32, base uint64, size int, idx []uint16, wrBase uint64) error {
	if rc := C.kvd_post_recvs(q.q, C.uint32_t(lkey), C.uint64_t(base), C.uint32_t(size),
		(*C.uint16_t)(unsafe.Pointer(&idx[0])), C.int(len(idx)), C.uint64_t(wrBase)); rc != 0 {
		return fmt.Errorf("rdma: post RECV: %w", syscall.Errno(rc))
	}
	return nil
}

func setRead(w *readWR, raddr, laddr uint64, n int, rkey uint32) {
	w.raddr, w.laddr, w.len, w.rkey = C.uint64_t(raddr), C.uint64_t(laddr), C.uint32_t(n), C.uint32_t(rkey)
}

func setSend(w *sendWR, laddr uint64, n int, wrID uint64) {
	w.laddr, w.len, w.wr_id, w.flags = C.uint64_t(laddr), C.uint32_t(n), C.uint64_t(wrID), 0
}

const (
	sendSignaled = C.KVD_SD_SIGNALED
	sendInline   = C.KVD_SD_INLINE
)

func setSendFlags(w *sendWR, flags int) { w.flags = C.uint32_t(flags) }

func sendLen(w *sendWR) int { return int(w.len) }

func wcFields(w *wc) (wrID uint64, status int, byteLen int) {
	return uint64(w.wr_id), int(w.status), int(w.byte_len)
}

func wcStatusString(status int) string {
	return C.GoString(C.ibv_wc_status_str(uint32(status)))
}

// errnoOr returns err, or EIO if a failing C call left errno unset.
func errnoOr(err error) error {
	if err == nil || errors.Is(err, syscall.Errno(0)) {
		return syscall.EIO
	}
	return err
}
