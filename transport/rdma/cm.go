//go:build rdma

package rdma

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/kvd-project/kvd/transport"
)

// This file wraps the connection-manager half of the shim: event channels
// (waited on through the Go netpoller, so no thread blocks in
// rdma_get_cm_event), ids, addresses and the connect/accept calls.

const (
	evAddrResolved   = C.RDMA_CM_EVENT_ADDR_RESOLVED
	evAddrError      = C.RDMA_CM_EVENT_ADDR_ERROR
	evRouteResolved  = C.RDMA_CM_EVENT_ROUTE_RESOLVED
	evRouteError     = C.RDMA_CM_EVENT_ROUTE_ERROR
	evConnectRequest = C.RDMA_CM_EVENT_CONNECT_REQUEST
	evConnectResp    = C.RDMA_CM_EVENT_CONNECT_RESPONSE
	evConnectError   = C.RDMA_CM_EVENT_CONNECT_ERROR
	evUnreachable    = C.RDMA_CM_EVENT_UNREACHABLE
	evRejected       = C.RDMA_CM_EVENT_REJECTED
	evEstablished    = C.RDMA_CM_EVENT_ESTABLISHED
	evDisconnected   = C.RDMA_CM_EVENT_DISCONNECTED
	evDeviceRemoval  = C.RDMA_CM_EVENT_DEVICE_REMOVAL
	evTimewaitExit   = C.RDMA_CM_EVENT_TIMEWAIT_EXIT
)

// cmEvent is an event copied out of librdmacm (already acknowledged).
type cmEvent struct {
	kind          int
	status        int
	id            cmID
	pdata         []byte
	respResources int
	initDepth     int
}

func (e cmEvent) String() string {
	return fmt.Sprintf("%s (status %d)", C.GoString(C.rdma_event_str(uint32(e.kind))), e.status)
}

// eventChannel is an rdma_cm event channel in non-blocking mode. The file is
// a dup of its descriptor, registered with the netpoller; closing the file
// wakes a waiter, and the channel itself is destroyed after that.
type eventChannel struct {
	ch   *C.struct_rdma_event_channel
	file *os.File
	mu   sync.Mutex // serialises waits

	dlMu  sync.Mutex // guards dlGen and the file's read deadline
	dlGen uint64
}

func newEventChannel() (*eventChannel, error) {
	ch, err := C.rdma_create_event_channel()
	if ch == nil {
		return nil, fmt.Errorf("rdma: rdma_create_event_channel: %w", errnoOr(err))
	}
	f, err := pollable(int(ch.fd), "rdma_cm")
	if err != nil {
		C.rdma_destroy_event_channel(ch)
		return nil, err
	}
	return &eventChannel{ch: ch, file: f}, nil
}

// pollable makes fd non-blocking and returns a dup of it as a file the Go
// netpoller waits on.
func pollable(fd int, name string) (*os.File, error) {
	if rc := C.kvd_set_nonblock(C.int(fd)); rc != 0 {
		return nil, fmt.Errorf("rdma: %s non-blocking: %w", name, syscall.Errno(-rc))
	}
	dup, err := syscall.Dup(fd)
	if err != nil {
		return nil, fmt.Errorf("rdma: dup %s fd: %w", name, err)
	}
	syscall.CloseOnExec(dup)
	return os.NewFile(uintptr(dup), name), nil
}

// wakeUp makes a current or later wait return an error.
func (e *eventChannel) wakeUp() { _ = e.file.Close() }

// destroy frees the channel; call only after wakeUp and once no wait runs.
func (e *eventChannel) destroy() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ch != nil {
		C.rdma_destroy_event_channel(e.ch)
		e.ch = nil
	}
}

// wait returns the next event. It fails with ErrClosed after wakeUp and with
// ctx's error when ctx ends.
func (e *eventChannel) wait(ctx context.Context) (cmEvent, error) {
	// The deadline below is set asynchronously; an event already queued
	// must not win over a context that has already ended.
	if err := ctx.Err(); err != nil {
		return cmEvent{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ch == nil {
		return cmEvent{}, transport.ErrClosed
	}
	raw, err := e.file.SyscallConn()
	if err != nil {
		return cmEvent{}, fmt.Errorf("rdma: cm channel: %w", transport.ErrClosed)
	}
	if ctx.Done() != nil {
		// The generation keeps a late-running cancel from poisoning the
		// next wait with a stale deadline.
		e.dlMu.Lock()
		gen := e.dlGen
		e.dlMu.Unlock()
		stop := context.AfterFunc(ctx, func() {
			e.dlMu.Lock()
			if e.dlGen == gen {
				_ = e.file.SetReadDeadline(time.Unix(1, 0))
			}
			e.dlMu.Unlock()
		})
		defer func() {
			stop()
			e.dlMu.Lock()
			e.dlGen++
			_ = e.file.SetReadDeadline(time.Time{})
			e.dlMu.Unlock()
		}()
	}
	var ev C.struct_kvd_cm_event
	var rc C.int
	err = raw.Read(func(uintptr) bool {
		rc = C.kvd_cm_get(e.ch, &ev)
		return rc != -C.EAGAIN
	})
	if err != nil {
		if ctx.Err() != nil {
			return cmEvent{}, ctx.Err()
		}
		return cmEvent{}, fmt.Errorf("rdma: cm channel: %w", transport.ErrClosed)
	}
	if rc != 0 {
		return cmEvent{}, fmt.Errorf("rdma: rdma_get_cm_event: %w", syscall.Errno(-rc))
	}
	return cmEvent{
		kind:          int(ev.event),
		status:        int(ev.status),
		id:            cmID{ev.id},
		pdata:         C.GoBytes(unsafe.Pointer(&ev.pdata[0]), C.int(ev.pdata_len)),
		respResources: int(ev.responder_resources),
		initDepth:     int(ev.initiator_depth),
	}, nil
}

// expect waits for an event of kind want and turns any other into an error.
func (e *eventChannel) expect(ctx context.Context, want int, what string) (cmEvent, error) {
	ev, err := e.wait(ctx)
	if err != nil {
		return ev, fmt.Errorf("rdma: %s: %w", what, err)
	}
	if ev.kind != want || ev.status != 0 {
		return ev, fmt.Errorf("rdma: %s: %v: %w", what, ev, errConnect)
	}
	return ev, nil
}

var errConnect = errors.New("rdma: connection failed")

// cmID is an rdma_cm identifier (the RDMA analogue of a socket).
type cmID struct{ id *C.struct_rdma_cm_id }

func createID(ch *eventChannel) (cmID, error) {
	var id *C.struct_rdma_cm_id
	if rc, err := C.rdma_create_id(ch.ch, &id, nil, C.RDMA_PS_TCP); rc != 0 {
		return cmID{}, fmt.Errorf("rdma: rdma_create_id: %w", errnoOr(err))
	}
	return cmID{id}, nil
}

func (c cmID) valid() bool { return c.id != nil }

func (c cmID) destroy() {
	if c.id != nil {
		C.rdma_destroy_id(c.id)
	}
}

func (c cmID) verbs() *devContext { return c.id.verbs }

func (c cmID) migrate(ch *eventChannel) error {
	if rc, err := C.rdma_migrate_id(c.id, ch.ch); rc != 0 {
		return fmt.Errorf("rdma: rdma_migrate_id: %w", errnoOr(err))
	}
	return nil
}

// resolveAddr resolves the destination; a non-nil src binds the source
// address first.
func (c cmID) resolveAddr(src, ip net.IP, port int, timeout time.Duration) error {
	var ss, sss C.struct_sockaddr_storage
	if err := setAddr(&ss, ip, port); err != nil {
		return err
	}
	var srcp *C.struct_sockaddr
	if src != nil {
		if err := setAddr(&sss, src, 0); err != nil {
			return err
		}
		srcp = (*C.struct_sockaddr)(unsafe.Pointer(&sss))
	}
	if rc, err := C.rdma_resolve_addr(c.id, srcp, (*C.struct_sockaddr)(unsafe.Pointer(&ss)), timeoutMS(timeout)); rc != 0 {
		return fmt.Errorf("rdma: rdma_resolve_addr: %w", errnoOr(err))
	}
	return nil
}

func (c cmID) resolveRoute(timeout time.Duration) error {
	if rc, err := C.rdma_resolve_route(c.id, timeoutMS(timeout)); rc != 0 {
		return fmt.Errorf("rdma: rdma_resolve_route: %w", errnoOr(err))
	}
	return nil
}

// timeoutMS converts a resolution timeout for librdmacm's int milliseconds:
// Config.ResolveTimeout has no upper bound, and from 2^31 ms (24.8 days) on
// the plain conversion wraps to a negative timeout.
func timeoutMS(d time.Duration) C.int {
	return C.int(min(d/time.Millisecond, math.MaxInt32))
}

func (c cmID) bind(ip net.IP, port int) error {
	var ss C.struct_sockaddr_storage
	if err := setAddr(&ss, ip, port); err != nil {
		return err
	}
	if rc, err := C.rdma_bind_addr(c.id, (*C.struct_sockaddr)(unsafe.Pointer(&ss))); rc != 0 {
		return fmt.Errorf("rdma: rdma_bind_addr: %w", errnoOr(err))
	}
	return nil
}

func (c cmID) listen(backlog int) error {
	if rc, err := C.rdma_listen(c.id, C.int(backlog)); rc != 0 {
		return fmt.Errorf("rdma: rdma_listen: %w", errnoOr(err))
	}
	return nil
}

// createQP creates the id's queue pair, asking for inline SENDs of up to
// inline bytes and settling for less (halving) if the device refuses; it
// returns the inline size the device granted.
func (c cmID) createQP(p pd, cq cqHandle, sendWR, recvWR, inline int) (qpHandle, int, error) {
	for {
		var got C.int
		q, err := C.kvd_create_qp(c.id, p.p, cq.c, C.int(sendWR), C.int(recvWR), C.int(inline), &got)
		if q != nil {
			return qpHandle{q}, int(got), nil
		}
		if inline == 0 {
			return qpHandle{}, 0, fmt.Errorf("rdma: rdma_create_qp: %w", errnoOr(err))
		}
		inline /= 2
	}
}

// destroyQP destroys q, the id's queue pair (attached to it again first:
// kvd_connect leaves it detached until establish).
func (c cmID) destroyQP(q qpHandle) { C.kvd_destroy_qp(c.id, q.q) }

// setOptions sets the id's type of service (tos, if not negative) and
// local ACK timeout exponent (ackExp, if positive).
func (c cmID) setOptions(tos, ackExp int) error {
	if rc := C.kvd_id_options(c.id, C.int(tos), C.int(ackExp)); rc != 0 {
		return fmt.Errorf("rdma: rdma_set_option(tos %d, ack timeout exponent %d): %w", tos, ackExp, syscall.Errno(-rc))
	}
	return nil
}

func (c cmID) connect(pdata []byte, respRes, initDepth, retry int) error {
	if rc := C.kvd_connect(c.id, (*C.uint8_t)(unsafe.Pointer(&pdata[0])), C.int(len(pdata)),
		C.int(respRes), C.int(initDepth), C.int(retry)); rc != 0 {
		return fmt.Errorf("rdma: rdma_connect: %w", syscall.Errno(-rc))
	}
	return nil
}

// establish completes the active side after evConnectResp: q to RTS with
// remote access rights access (no more), then the connection manager's RTU.
// It returns the remote queue pair's number.
func (c cmID) establish(q qpHandle, access, retry int) (uint32, error) {
	var dest C.uint32_t
	if rc := C.kvd_establish(c.id, q.q, C.int(access), C.int(retry), &dest); rc != 0 {
		return 0, fmt.Errorf("rdma: rdma_establish: %w", syscall.Errno(-rc))
	}
	return uint32(dest), nil
}

// accept moves the id's queue pair to RTS with remote access rights access
// (no more) and accepts. It returns the remote queue pair's number.
func (c cmID) accept(pdata []byte, respRes, initDepth, access, retry int) (uint32, error) {
	var dest C.uint32_t
	if rc := C.kvd_accept(c.id, (*C.uint8_t)(unsafe.Pointer(&pdata[0])), C.int(len(pdata)),
		C.int(respRes), C.int(initDepth), C.int(access), C.int(retry), &dest); rc != 0 {
		return 0, fmt.Errorf("rdma: rdma_accept: %w", syscall.Errno(-rc))
	}
	return uint32(dest), nil
}

func (c cmID) reject() { C.rdma_reject(c.id, nil, 0) }

func (c cmID) disconnect() { C.rdma_disconnect(c.id) }

func (c cmID) localAddr() string { return sockaddrString(C.rdma_get_local_addr(c.id)) }
func (c cmID) peerAddr() string  { return sockaddrString(C.rdma_get_peer_addr(c.id)) }

func sockaddrString(sa *C.struct_sockaddr) string {
	var ip [16]byte
	var n, port C.int
	if sa == nil || C.kvd_get_addr(sa, (*C.uint8_t)(unsafe.Pointer(&ip[0])), &n, &port) != 0 {
		return "?"
	}
	return net.JoinHostPort(net.IP(ip[:n]).String(), strconv.Itoa(int(port)))
}

func setAddr(ss *C.struct_sockaddr_storage, ip net.IP, port int) error {
	if ip4 := ip.To4(); ip4 != nil {
		ip = ip4
	}
	if len(ip) == 0 {
		ip = net.IPv4zero.To4()
	}
	if rc := C.kvd_set_addr(ss, (*C.uint8_t)(unsafe.Pointer(&ip[0])), C.int(len(ip)), C.int(port)); rc != 0 {
		return fmt.Errorf("rdma: bad address %v:%d", ip, port)
	}
	return nil
}

// deviceList is librdmacm's list of opened devices. The contexts it holds are
// the ones rdma_cm ids bind to, so comparing pointers tells whether an id is
// on our device.
type deviceList struct {
	list **devContext
	n    int
}

func openDevices() (deviceList, error) {
	var n C.int
	l, err := C.rdma_get_devices(&n)
	if l == nil {
		return deviceList{}, fmt.Errorf("%w: rdma_get_devices: %v", ErrNoDevice, errnoOr(err))
	}
	return deviceList{l, int(n)}, nil
}

func (d deviceList) contexts() []*devContext { return unsafe.Slice(d.list, d.n) }
func (d deviceList) free()                   { C.rdma_free_devices(d.list) }
