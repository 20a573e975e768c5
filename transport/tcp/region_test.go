package tcp

import (
	"bufio"
	"bytes"
	"errors"
	"sync"
	"testing"
	"unsafe"

	"github.com/kvd-project/kvd/internal/mmap"
	"github.com/kvd-project/kvd/transport"
)

func TestRegisterDescriptor(t *testing.T) {
	tr := newTestTransport(t, Config{})
	r, err := tr.Register(5000)
	if err != nil {
		t.Fatal(err)
	}
	d := r.Descriptor()
	if base := uint64(uintptr(unsafe.Pointer(&r.Bytes()[0]))); d.Addr != base || d.Len != 5000 || d.Key == 0 {
		t.Errorf("Descriptor = %v, want addr %#x (the memory's), len 5000, non-zero key", d, base)
	}
	for _, size := range []int{0, -1} {
		if _, err := tr.Register(size); !errors.Is(err, mmap.ErrSize) {
			t.Errorf("Register(%d) = %v, want mmap.ErrSize", size, err)
		}
	}
}

func TestRegisterSkipsTakenKeys(t *testing.T) {
	tr := newTestTransport(t, Config{})
	draws := []uint32{0, 5, 0, 5, 5, 6}
	tr.regions.newKey = func() uint32 { k := draws[0]; draws = draws[1:]; return k }
	var keys []uint32
	for range 2 {
		r, err := tr.Register(10)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, r.Descriptor().Key)
	}
	if keys[0] != 5 || keys[1] != 6 {
		t.Errorf("keys %v, want [5 6]: never 0, never one in use", keys)
	}
}

// TestRegionCloseWhileServing closes a region under a stream of READs of
// it: each must succeed or fail with ErrBadKey, nothing may crash, and the
// connection must survive.
func TestRegionCloseWhileServing(t *testing.T) {
	srv := newTestTransport(t, Config{})
	cli := newTestTransport(t, Config{})
	ln, _ := srv.Listen("127.0.0.1:0")
	ctx := testCtx(t)
	c, err := cli.Dial(ctx, ln.Addr())
	if err != nil {
		t.Fatal(err)
	}
	keep, _ := srv.Register(64)
	for round := range 10 {
		r, err := srv.Register(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		started := make(chan struct{}, 4)
		for range 4 {
			wg.Go(func() {
				ops := []transport.ReadOp{{Remote: r.Descriptor(), Dst: make([]byte, 1<<20)}}
				for i := 0; ; i++ {
					err := c.Read(ctx, ops)
					if i == 0 {
						started <- struct{}{}
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		for range 4 {
			<-started
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, transport.ErrBadKey) {
				t.Fatalf("round %d: Read of a region being closed: %v, want ErrBadKey", round, err)
			}
		}
	}
	if err := c.Read(ctx, []transport.ReadOp{{Remote: keep.Descriptor(), Dst: make([]byte, 64)}}); err != nil {
		t.Fatalf("Read after the closes: %v", err)
	}
}

// TestCopyOut checks the serving copy: in buffer-sized pieces, and zeros
// with ok false once the region is gone.
func TestCopyOut(t *testing.T) {
	tr := newTestTransport(t, Config{})
	rr, err := tr.Register(1000)
	if err != nil {
		t.Fatal(err)
	}
	r := rr.(*region)
	fillBytes(r.mem)
	var out bytes.Buffer
	c := &conn{bw: bufio.NewWriterSize(&out, 64)} // many pieces
	ok, err := c.copyOut(r, 10, 900, true)
	c.bw.Flush()
	if !ok || err != nil || !bytes.Equal(out.Bytes(), r.mem[10:910]) {
		t.Fatalf("copyOut = %v, %v; bytes equal: %v", ok, err, bytes.Equal(out.Bytes(), r.mem[10:910]))
	}
	r.Close()
	out.Reset()
	ok, err = c.copyOut(r, 0, 300, true)
	c.bw.Flush()
	if ok || err != nil || !bytes.Equal(out.Bytes(), make([]byte, 300)) {
		t.Fatalf("copyOut of a closed region = %v, %v, %d bytes; want false and 300 zeros", ok, err, out.Len())
	}
}
