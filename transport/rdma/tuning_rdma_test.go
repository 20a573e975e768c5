//go:build rdma

package rdma

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/internal/mmap"
	"github.com/kvd-project/kvd/transport"
)

// pairCfg is pair with a configuration for each end.
func pairCfg(t testing.TB, ccfg, scfg Config) (c, s *conn, ct, st *Transport) {
	t.Helper()
	st = newTransport(t, scfg)
	ct = newTransport(t, ccfg)
	l, err := st.Listen(testAddr())
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, err := ct.Dial(ctx, l.Addr())
	if err != nil {
		t.Fatalf("Dial %s: %v", l.Addr(), err)
	}
	server, err := l.Accept(ctx)
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return client.(*conn), server.(*conn), ct, st
}

func qpInfoOf(t *testing.T, c *conn) qpInfo {
	t.Helper()
	q, err := c.qpInfo()
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// The type of service reaches the dialer's queue pair (through the route),
// and both ends' queue pairs get the ACK timeout and retry count; the READ
// depths agree (each end issues no more READs than the other serves).
func TestQPTuning(t *testing.T) {
	cfg := Config{TOS: 0x60, AckTimeout: 10 * time.Millisecond, RetryCount: 5}
	c, s, _, _ := pairCfg(t, cfg, cfg)
	ci, si := qpInfoOf(t, c), qpInfoOf(t, s)
	t.Logf("dialer %+v; acceptor %+v", ci, si)
	if ci.trafficClass != 0x60 {
		t.Errorf("dialer's traffic class %#x, want 0x60", ci.trafficClass)
	}
	for name, q := range map[string]qpInfo{"dialer": ci, "acceptor": si} {
		if q.timeout != 12 || q.retryCnt != 5 || q.rnrRetry != 0 {
			t.Errorf("%s: ACK timeout exponent %d, retries %d, RNR retries %d; want 12, 5, 0", name, q.timeout, q.retryCnt, q.rnrRetry)
		}
		if q.access != accessRemoteRead {
			t.Errorf("%s: QP access %#x, want remote READ only", name, q.access)
		}
	}
	if ci.maxRdAtomic > si.maxDestRdAtomic || si.maxRdAtomic > ci.maxDestRdAtomic || ci.maxRdAtomic == 0 || si.maxRdAtomic == 0 {
		t.Errorf("READ depths: dialer issues %d, serves %d; acceptor issues %d, serves %d",
			ci.maxRdAtomic, ci.maxDestRdAtomic, si.maxRdAtomic, si.maxDestRdAtomic)
	}
	// The defaults: DefaultAckTimeout, DefaultRetryCount.
	c, s, _, _ = pairCfg(t, Config{}, Config{})
	for name, q := range map[string]qpInfo{"dialer": qpInfoOf(t, c), "acceptor": qpInfoOf(t, s)} {
		if q.timeout != defaultAckExp || q.retryCnt != DefaultRetryCount {
			t.Errorf("defaults, %s: ACK timeout exponent %d, retries %d; want %d, %d", name, q.timeout, q.retryCnt, defaultAckExp, DefaultRetryCount)
		}
	}
}

// An accepted connection that never reads registers no READ staging; a
// dialled one registers it on its first Read. Pinned reports both, and
// drops to zero when the connections close.
func TestReadStagingLazy(t *testing.T) {
	c, s, ct, st := pairCfg(t, Config{}, Config{})
	buffers := (connBufferBytes(Config{}) + 4095) / 4096 * 4096
	for name, n := range map[string]int64{"accepted": s.PinnedBytes(), "dialled": c.PinnedBytes()} {
		if n != buffers {
			t.Errorf("%s connection pins %d bytes before any Read, want %d", name, n, buffers)
		}
	}
	if s.PinnedBytes() > 1<<20 {
		t.Errorf("accepted connection pins %d bytes, want at most 1 MiB", s.PinnedBytes())
	}
	t.Logf("RDMA pinned per accepted connection: %d bytes", s.PinnedBytes())
	r := newRegion(t, st, 4096)
	op := []transport.ReadOp{{Remote: r.Descriptor(), Offset: 8, Dst: make([]byte, 100)}}
	if err := c.Read(ctxT(t), op); err != nil || !bytes.Equal(op[0].Dst, r.Bytes()[8:108]) {
		t.Fatalf("Read: %v", err)
	}
	if want := buffers + stagingBytes(Config{}); c.PinnedBytes() != want {
		t.Errorf("dialled connection pins %d bytes after a Read, want %d", c.PinnedBytes(), want)
	}
	if p := st.Pinned(); p.Conns != 1 || p.ConnBytes != buffers || p.StagingBytes != 0 || p.RegionBytes != 4096 {
		t.Errorf("server transport Pinned = %+v", p)
	}
	if p := ct.Pinned(); p.Conns != 1 || p.ConnBytes != buffers+stagingBytes(Config{}) || p.StagingBytes != stagingBytes(Config{}) {
		t.Errorf("client transport Pinned = %+v", p)
	}
	_ = c.Close()
	_ = s.Close()
	<-s.done
	if p := ct.Pinned(); p != (Pinned{}) {
		t.Errorf("client Pinned after Close = %+v", p)
	}
	if p := st.Pinned(); p.Conns != 0 || p.ConnBytes != 0 {
		t.Errorf("server Pinned after Close = %+v", p)
	}
}

// READ responses land in memory registered with remote write, as iWARP
// requires: a WRITE into the staging from the peer (allowed here only
// because the test grants it on the queue pair, which the transport never
// does) succeeds; one into the connection's buffers, which stay
// local-only, is refused.
func TestReadStagingAccess(t *testing.T) {
	c, s, _, st := pairCfg(t, Config{}, Config{})
	ctx := ctxT(t)
	r := newRegion(t, st, 4096)
	if err := c.Read(ctx, []transport.ReadOp{{Remote: r.Descriptor(), Dst: make([]byte, 8)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.qp.setAccess(accessRemoteRead | accessRemoteWrite); err != nil {
		t.Fatal(err)
	}
	copy(c.stage.mem, bytes.Repeat([]byte{0xff}, 64))
	d := transport.Descriptor{Addr: c.stage.base, Len: uint64(len(c.stage.mem)), Key: c.stage.mr.rkey()}
	if err := s.writeProbe(ctx, d, 64); err != nil {
		t.Fatalf("WRITE into READ staging: %v (registered without remote write?)", err)
	}
	if !bytes.Equal(c.stage.mem[:64], make([]byte, 64)) {
		t.Fatalf("WRITE into READ staging did not land: % x", c.stage.mem[:8])
	}
	d = transport.Descriptor{Addr: c.base, Len: uint64(len(c.mem)), Key: c.mr.rkey()}
	if err := s.writeProbe(ctx, d, 64); !errors.Is(err, transport.ErrBadKey) {
		t.Fatalf("WRITE into the connection's buffers = %v, want ErrBadKey", err)
	}
}

// A peer that dies without a word (its queue pair drops everything, as a
// dead host's would) is noticed within Config.DeadPeerBound: at once by
// outstanding work, and by the keepalive when the connection is idle. The
// silenced end runs without keepalives, so it cannot give itself away.
func TestDeadPeer(t *testing.T) {
	busy, idle, worst := Config{}.DeadPeerBound()
	slack := time.Second // the VM's timers
	t.Run("busy", func(t *testing.T) {
		c, s, _, st := pairCfg(t, Config{}, Config{KeepAlive: -1})
		r := newRegion(t, st, 4096)
		if err := s.silence(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := c.Read(ctxT(t), []transport.ReadOp{{Remote: r.Descriptor(), Dst: make([]byte, 8)}})
		took := time.Since(start)
		t.Logf("Read to a dead peer failed after %v (bound %v, worst %v): %v", took, busy, worst, err)
		if !errors.Is(err, transport.ErrClosed) {
			t.Fatalf("Read = %v, want ErrClosed", err)
		}
		if took > 4*busy+slack {
			t.Fatalf("took %v, more than %v", took, 4*busy+slack)
		}
	})
	t.Run("idle", func(t *testing.T) {
		c, s, _, _ := pairCfg(t, Config{}, Config{KeepAlive: -1})
		if err := s.silence(); err != nil {
			t.Fatal(err)
		}
		awaitClosed(t, c, worst+slack, fmt.Sprintf("idle connection to a dead peer (bound %v)", idle))
	})
	// Idle for a few keepalive periods first: every keepalive must be
	// reaped although its completion raises no event (poller.go,
	// "Arming"), or the first one would stay outstanding and none would
	// follow to notice the peer's death. The waiting Recv does not spin:
	// its polls would reap them.
	t.Run("idle, then dead", func(t *testing.T) {
		c, s, _, _ := pairCfg(t, Config{SpinPoll: -1}, Config{KeepAlive: -1})
		time.Sleep(3 * DefaultKeepAlive)
		if err := s.silence(); err != nil {
			t.Fatal(err)
		}
		awaitClosed(t, c, worst+slack, fmt.Sprintf("connection idle for %v, then its peer died", 3*DefaultKeepAlive))
	})
}

// awaitClosed waits in Recv for c to fail with ErrClosed within limit.
func awaitClosed(t *testing.T, c transport.Conn, limit time.Duration, what string) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	_, err := c.Recv(ctx, nil)
	took := time.Since(start)
	t.Logf("%s: closed after %v: %v", what, took, err)
	if !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Recv = %v after %v, want ErrClosed within %v", err, took, limit)
	}
}

// With reserved huge pages (reserved here when running as root in the test
// VM), a region of 2 MiB or more is backed by them; it reads like any
// other, and Close gives the pages back.
func TestRegionHugePages(t *testing.T) {
	tr := newTransport(t, Config{})
	const path = "/proc/sys/vm/nr_hugepages"
	reserve(t, path, 4)
	free := hugePagesFree(t)
	r, err := tr.Register(3 << 20)
	if err != nil {
		t.Fatal(err)
	}
	rg := r.(*region)
	if rg.backing != mmap.HugeTLB || r.Descriptor().Addr%(2<<20) != 0 {
		t.Fatalf("region of 3 MiB with %d huge pages free: %v at %#x", free, rg.backing, r.Descriptor().Addr)
	}
	if got := hugePagesFree(t); got != free-2 {
		t.Errorf("HugePages_Free %d after Register, want %d", got, free-2)
	}
	copy(r.Bytes()[3<<20-5:], "tail!")
	// READ it from another transport.
	ct := newTransport(t, Config{})
	l, err := tr.Listen(testAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cc, err := ct.Dial(ctxT(t), l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	op := []transport.ReadOp{{Remote: r.Descriptor(), Offset: 3<<20 - 5, Dst: make([]byte, 5)}}
	if err := cc.Read(ctxT(t), op); err != nil || string(op[0].Dst) != "tail!" {
		t.Fatalf("Read of a huge-page region = %q, %v", op[0].Dst, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := hugePagesFree(t); got != free {
		t.Errorf("HugePages_Free %d after Close, want %d", got, free)
	}
}

// reserve makes at least n huge pages free, restoring the pool size at the
// end; it skips the test where it cannot (not root, outside the VM).
func reserve(t *testing.T, path string, n int) {
	t.Helper()
	if hugePagesFree(t) >= n {
		return
	}
	old, err := os.ReadFile(path)
	if err == nil {
		have, _ := strconv.Atoi(strings.TrimSpace(string(old)))
		err = os.WriteFile(path, []byte(strconv.Itoa(have+n)), 0)
		t.Cleanup(func() { _ = os.WriteFile(path, old, 0) })
	}
	if err != nil || hugePagesFree(t) < n {
		if os.Getenv("RDMAVM") != "" {
			t.Fatalf("cannot reserve %d huge pages: %v", n, err)
		}
		t.Skipf("cannot reserve %d huge pages: %v", n, err)
	}
}

func hugePagesFree(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var n int
		if _, err := fmt.Sscanf(line, "HugePages_Free: %d", &n); err == nil {
			return n
		}
	}
	t.Fatal("no HugePages_Free in /proc/meminfo")
	return 0
}

// Small SENDs go inline, and the device really takes their bytes from the
// work request: one posted with a wrong memory key still arrives.
func TestInlineSends(t *testing.T) {
	c, s, _, _ := pairCfg(t, Config{}, Config{})
	ctx := ctxT(t)
	if c.maxInline < DefaultMaxInline || qpInfoOf(t, c).maxInline < c.maxInline {
		t.Fatalf("inline size %d (QP reports %d), asked for %d", c.maxInline, qpInfoOf(t, c).maxInline, DefaultMaxInline)
	}
	var bufs [1]uint16
	n, h, err := c.takeSendBuffers(ctx, 1, bufs[:])
	if err != nil || n != 1 {
		t.Fatal(n, err)
	}
	if !c.takeMsgCreditNow() {
		t.Fatal("no message credit")
	}
	c.memMu.RLock()
	b := c.sendBuf(int(bufs[0]))
	h.flags, h.total = flagFirst|flagLast, 5
	h.put(b)
	copy(b[headerSize:], "small")
	var sd [1]sendWR
	setSend(&sd[0], c.base+uint64(c.sendAt+int(bufs[0])*c.cfg.BufSize), headerSize+5, wrID(c.id, kindSend, 0, int(bufs[0])))
	err = c.postSendsKey(c.lkey^0x5a5a5a, sd[:], bufs[:])
	c.memMu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Recv(ctx, nil); err != nil || string(got) != "small" {
		t.Fatalf("inline SEND with a wrong memory key: Recv = %q, %v", got, err)
	}
	before := c.inlined.Load()
	big := pattern(c.maxInline+1-headerSize, 1)
	if err := c.Send(ctx, big); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Recv(ctx, nil); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Recv of a SEND just over the inline size: %v", err)
	}
	if c.inlined.Load() != before {
		t.Fatal("a SEND over the inline size went inline")
	}
}

// While SENDs overlap, one in SignalEvery is signalled; the others'
// buffers come back with it, and an idle connection's last unsignalled ones
// come back with its keepalive, so every buffer is free again.
func TestSelectiveSignalling(t *testing.T) {
	cfg := Config{KeepAlive: 100 * time.Millisecond}
	c, s, _, _ := pairCfg(t, cfg, cfg)
	ctx := ctxT(t)
	const msgs = 400
	recvd := make(chan error, 1)
	go func() {
		for i := range msgs {
			got, err := s.Recv(ctx, nil)
			if err == nil && !bytes.Equal(got, pattern(i%300, i)) {
				err = fmt.Errorf("message %d: wrong bytes", i)
			}
			if err != nil {
				recvd <- err
				return
			}
		}
		recvd <- nil
	}()
	for i := range msgs {
		if err := c.Send(ctx, pattern(i%300, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-recvd; err != nil {
		t.Fatal(err)
	}
	got := c.signalled.Load()
	t.Logf("%d SENDs streamed, %d signalled, %d inline", msgs, got, c.inlined.Load())
	if got < msgs/DefaultSignalEvery-1 || got > msgs/3 {
		t.Fatalf("%d of %d streamed SENDs signalled, want from %d to %d", got, msgs, msgs/DefaultSignalEvery-1, msgs/3)
	}
	wait.For(t, "the idle connection's send buffers to be all free, none in flight", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.sendFree) == c.cfg.SendBuffers && c.inflight == 0
	})
	// A Close right after unsignalled SENDs lingers only until its fence
	// completes, not closeLinger. (Without keepalives, which would retire
	// them too; send until the last one posted is unsignalled, posted while
	// an earlier signalled one was outstanding.)
	c, s, _, _ = pairCfg(t, Config{KeepAlive: -1}, Config{KeepAlive: -1})
	sent, tail := 0, 0
	for tail == 0 && sent < 60 {
		if err := c.Send(ctx, []byte{byte(sent)}); err != nil {
			t.Fatal(err)
		}
		sent++
		c.sqMu.Lock()
		tail = c.sq.unsigData
		c.sqMu.Unlock()
	}
	if tail == 0 {
		t.Fatalf("%d SENDs in a row, all signalled", sent)
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > closeLinger/2 {
		t.Fatalf("Close after %d unsignalled SENDs took %v", tail, d)
	}
	for i := range sent {
		if got, err := s.Recv(ctx, nil); err != nil || got[0] != byte(i) {
			t.Fatalf("message %d sent before Close: %v, %v", i, got, err)
		}
	}
}
