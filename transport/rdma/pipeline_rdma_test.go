//go:build rdma

package rdma

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvd-project/kvd/internal/kvdtest/wait"
	"github.com/kvd-project/kvd/transport"
)

// A Read larger than a staging slot keeps up to maxPipeline rounds in
// flight, in the slots free when it starts, and copies them out in order;
// every slot is free again afterwards.
func TestReadPipelined(t *testing.T) {
	cases := []struct {
		slots, slotSize, size int
		wantDepth             int32
	}{
		{slots: 1, slotSize: 4096, size: 64 << 10, wantDepth: 1},
		{slots: 2, slotSize: 4096, size: 64 << 10, wantDepth: 2},
		{slots: 8, slotSize: 256 << 10, size: 1 << 20, wantDepth: 4},
		{slots: 8, slotSize: 256 << 10, size: 512<<10 + 1, wantDepth: 3},
		{slots: 8, slotSize: 64 << 10, size: 1 << 20, wantDepth: maxPipeline},
		{slots: 8, slotSize: 256 << 10, size: 100 << 10, wantDepth: 1},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d slots of %d, %d B", tc.slots, tc.slotSize, tc.size), func(t *testing.T) {
			cl, _, _, st := pair(t, Config{ReadSlots: tc.slots, ReadSlotSize: tc.slotSize})
			c := cl.(*conn)
			r := newRegion(t, st, 2<<20)
			copy(r.Bytes(), pattern(2<<20, 5))
			// Three ops, the middle one large and at an odd offset, so
			// rounds mix ops and cut them at slot boundaries.
			ops := []transport.ReadOp{
				{Remote: r.Descriptor(), Offset: 3, Dst: make([]byte, 100)},
				{Remote: r.Descriptor(), Offset: 4097, Dst: make([]byte, tc.size-200)},
				{Remote: r.Descriptor(), Offset: 1 << 20, Dst: make([]byte, 100)},
			}
			if err := c.Read(ctxT(t), ops); err != nil {
				t.Fatalf("Read: %v", err)
			}
			for i, op := range ops {
				if !bytes.Equal(op.Dst, r.Bytes()[op.Offset:int(op.Offset)+len(op.Dst)]) {
					t.Fatalf("op %d: wrong bytes", i)
				}
			}
			if d := c.maxReadDepth.Load(); d != tc.wantDepth {
				t.Fatalf("%d rounds in flight at most; want %d", d, tc.wantDepth)
			}
			if n := len(c.freeSlots); n != tc.slots {
				t.Fatalf("%d of %d READ slots free after the Read", n, tc.slots)
			}
		})
	}
}

// Large Reads canceled at varying points give back every slot (those in
// flight once their completions arrive), and the connection goes on
// reading correctly.
func TestReadPipelineCanceled(t *testing.T) {
	const slots = 8
	cl, _, _, st := pair(t, Config{ReadSlots: slots, ReadSlotSize: 16 << 10})
	c := cl.(*conn)
	r := newRegion(t, st, 1<<20)
	copy(r.Bytes(), pattern(1<<20, 9))
	canceled := 0
	for i := range 40 {
		dst := make([]byte, 1<<20)
		ctx, cancel := context.WithCancel(ctxT(t))
		go func() {
			time.Sleep(time.Duration(i*i*20) * time.Microsecond) // 0 to 30 ms
			cancel()
		}()
		err := c.Read(ctx, []transport.ReadOp{{Remote: r.Descriptor(), Dst: dst}})
		cancel()
		switch {
		case err == nil:
			if !bytes.Equal(dst, r.Bytes()) {
				t.Fatalf("round %d: wrong bytes", i)
			}
		case ctx.Err() != nil:
			canceled++
		default:
			t.Fatalf("round %d: %v", i, err)
		}
	}
	wait.For(t, "every READ slot to be free after the last Read", func() bool { return len(c.freeSlots) == slots })
	dst := make([]byte, 1<<20)
	if err := c.Read(ctxT(t), []transport.ReadOp{{Remote: r.Descriptor(), Dst: dst}}); err != nil || !bytes.Equal(dst, r.Bytes()) {
		t.Fatalf("Read after the canceled ones: %v", err)
	}
	t.Logf("%d of 40 Reads canceled midway", canceled)
}
