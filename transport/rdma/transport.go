//go:build rdma

package rdma

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvd-project/kvd/transport"
)

// Transport is one RDMA device context: a protection domain, the completion
// queues its connections share, and the goroutine that reaps them. It
// implements transport.Transport; all methods are safe for concurrent use.
type Transport struct {
	cfg  Config
	devs deviceList
	dev  *devContext
	name string // device name
	attr devAttr
	pd   pd

	// Event mode: one completion channel for all CQs, watched through the
	// netpoller via compFile (a dup of its descriptor).
	comp     compChannel
	compFile *os.File

	closed   atomic.Bool
	stopPoll atomic.Bool
	pollDone chan struct{}
	kaStop   chan struct{} // stops the keepalive goroutine
	kaDone   chan struct{}

	// spin is the adaptive polling window (Config.SpinPoll in PollEvents
	// mode; 0: off). Goroutines polling a CQ for their own completions
	// read-hold cqLife (TryRLock only); Close write-locks it before
	// destroying the CQs.
	spin   time.Duration
	cqLife sync.RWMutex

	// cqEvents counts completion events the reaper took (tests).
	cqEvents atomic.Uint64

	// live counts connections whose teardown has not finished; Close waits
	// for zero before freeing the CQs their teardown still polls.
	liveMu   sync.Mutex
	liveCond sync.Cond
	live     int

	connsMu sync.RWMutex // held for reading while completions are handled
	conns   map[uint32]*conn
	nextID  uint32

	cqMu   sync.Mutex
	cqs    []*cq
	cqList atomic.Pointer[[]*cq] // snapshot for the busy poller

	mu        sync.Mutex
	listeners map[*listener]struct{}
	regions   map[*region]struct{}

	auth transportAuth // Config.Auth, loaded (auth_conn.go)

	pinned pinnedCounters // registered memory (staging.go)

	// asmHook, in tests, runs before the assembler copies a fragment
	// (atomic, as auth.dropEstablished, for the same reason).
	asmHook atomic.Pointer[func(*conn)]
	// acceptHook, in tests, runs when the listener has accepted a
	// connection and not yet started its event watcher.
	acceptHook atomic.Pointer[func(*conn)]
	// takeHook, in tests, runs when Recv has taken a message off the queue
	// and not yet copied it.
	takeHook func(*conn)
}

var _ transport.Transport = (*Transport)(nil)

// blank is a Transport's Go state, before any device object.
func blank(cfg Config) *Transport {
	t := &Transport{
		cfg:       cfg,
		conns:     make(map[uint32]*conn),
		listeners: make(map[*listener]struct{}),
		regions:   make(map[*region]struct{}),
		pollDone:  make(chan struct{}),
		kaStop:    make(chan struct{}),
		kaDone:    make(chan struct{}),
	}
	t.liveCond.L = &t.liveMu
	return t
}

// New opens the configured RDMA device and starts reaping its completions.
// It fails with ErrNoDevice (wrapping transport.ErrUnsupported) when there
// is no RDMA device.
func New(cfg Config) (*Transport, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := blank(cfg)
	if cfg.Auth != nil {
		var err error
		if t.auth.keys, err = cfg.Auth.load(); err != nil {
			return nil, err
		}
	}
	if t.cfg.Poll == PollEvents && t.cfg.SpinPoll > 0 {
		t.spin = t.cfg.SpinPoll
	}
	if err := t.open(); err != nil {
		t.release()
		return nil, err
	}
	empty := []*cq{}
	t.cqList.Store(&empty)
	go t.poll()
	if t.cfg.KeepAlive > 0 {
		go t.keepAlive()
	} else {
		close(t.kaDone)
	}
	return t, nil
}

func (t *Transport) open() error {
	devs, err := openDevices()
	if err != nil {
		return err
	}
	t.devs = devs
	for _, ctx := range devs.contexts() {
		if name := deviceName(ctx); t.cfg.Device == "" || name == t.cfg.Device {
			t.dev, t.name = ctx, name
			break
		}
	}
	if t.dev == nil {
		if t.cfg.Device != "" {
			return fmt.Errorf("%w: device %q not found", ErrNoDevice, t.cfg.Device)
		}
		return ErrNoDevice
	}
	if t.attr, err = queryDevice(t.dev); err != nil {
		return err
	}
	if t.pd, err = allocPD(t.dev); err != nil {
		return err
	}
	if t.cfg.Poll == PollEvents {
		comp, fd, err := newCompChannel(t.dev)
		if err != nil {
			return err
		}
		t.comp = comp
		if t.compFile, err = pollable(fd, "ibv_comp_channel"); err != nil {
			return err
		}
	}
	return nil
}

// release frees device resources in dependency order: CQs, completion
// channel, PD, device list. Connections and regions must be gone.
func (t *Transport) release() {
	for _, q := range t.cqs {
		q.h.destroy()
		freeWCArray(q.wcs)
	}
	t.cqs = nil
	if t.compFile != nil {
		_ = t.compFile.Close()
	}
	t.comp.destroy()
	if t.pd.p != nil {
		t.pd.free()
	}
	if t.devs.list != nil {
		t.devs.free()
	}
}

// Name returns "rdma".
func (t *Transport) Name() string { return "rdma" }

// Device returns the name of the RDMA device in use.
func (t *Transport) Device() string { return t.name }

// Close closes every listener, connection and region, then frees the device
// context. It is idempotent.
func (t *Transport) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	t.mu.Lock()
	ls := make([]*listener, 0, len(t.listeners))
	for l := range t.listeners {
		ls = append(ls, l)
	}
	t.mu.Unlock()
	for _, l := range ls {
		_ = l.Close()
	}
	close(t.kaStop)
	<-t.kaDone
	t.connsMu.RLock()
	cs := make([]*conn, 0, len(t.conns))
	for _, c := range t.conns {
		cs = append(cs, c)
	}
	t.connsMu.RUnlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Close() }()
	}
	wg.Wait()
	t.liveMu.Lock()
	for t.live > 0 {
		t.liveCond.Wait()
	}
	t.liveMu.Unlock()
	t.mu.Lock()
	rs := make([]*region, 0, len(t.regions))
	for r := range t.regions {
		rs = append(rs, r)
	}
	t.mu.Unlock()
	for _, r := range rs {
		_ = r.Close()
	}
	t.stopPoll.Store(true)
	if t.compFile != nil {
		_ = t.compFile.Close()
	}
	<-t.pollDone
	t.compFile = nil
	t.cqLife.Lock() // waits out goroutines polling for themselves; later ones see stopPoll
	t.release()
	t.cqLife.Unlock()
	return nil
}

// connStarted counts a connection (or a Register) about to use the device's
// PD and CQs, unless Close has already stopped waiting for them: it
// reports false then, and nothing may touch the device. Close sets closed
// before it waits on liveMu, so whoever gets liveMu after that wait sees
// closed.
func (t *Transport) connStarted() bool {
	t.liveMu.Lock()
	defer t.liveMu.Unlock()
	if t.closed.Load() {
		return false
	}
	t.live++
	return true
}

func (t *Transport) connDone() {
	t.liveMu.Lock()
	t.live--
	t.liveCond.Broadcast()
	t.liveMu.Unlock()
}

var errClosedTransport = fmt.Errorf("rdma: transport closed: %w", transport.ErrClosed)

// addConn gives c an id (the top half of its work-request ids) and makes its
// completions reachable.
func (t *Transport) addConn(c *conn) error {
	t.connsMu.Lock()
	defer t.connsMu.Unlock()
	if t.closed.Load() {
		return errClosedTransport
	}
	for {
		t.nextID++
		if _, dup := t.conns[t.nextID]; !dup && t.nextID != 0 {
			break
		}
	}
	c.id = t.nextID
	t.conns[c.id] = c
	return nil
}

// removeConn waits for any completion handling to finish; afterwards no
// completion reaches c.
func (t *Transport) removeConn(c *conn) {
	t.connsMu.Lock()
	if t.conns[c.id] == c {
		delete(t.conns, c.id)
	}
	t.connsMu.Unlock()
}

// Listen accepts connections at addr ("ip:port"; port 0 picks one; the IP
// must belong to the transport's device, or be unspecified).
func (t *Transport) Listen(addr string) (transport.Listener, error) {
	if t.closed.Load() {
		return nil, errClosedTransport
	}
	return t.listen(addr)
}

// Dial connects to a listener at addr.
func (t *Transport) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	if t.closed.Load() {
		return nil, errClosedTransport
	}
	c, err := t.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return c, nil
}
