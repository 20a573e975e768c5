package transporttest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvd-project/kvd/transport"
)

// readMany posts n batches of 1..4 reads at random places of a region
// filled with pattern(seed), and checks the bytes.
func readMany(ctx context.Context, c transport.Conn, d transport.Descriptor, seed, g, n int) error {
	rng := rand.New(rand.NewPCG(uint64(g), uint64(seed)))
	var ops [4]transport.ReadOp
	for range n {
		k := 1 + rng.IntN(len(ops))
		for i := range k {
			off := rng.Uint64N(d.Len)
			ln := rng.Uint64N(min(d.Len-off, 3000) + 1)
			ops[i] = transport.ReadOp{Remote: d, Offset: off, Dst: make([]byte, ln)}
		}
		if err := c.Read(ctx, ops[:k]); err != nil {
			return fmt.Errorf("Read: %w", err)
		}
		for _, op := range ops[:k] {
			if err := checkPattern(op.Dst, int(op.Offset), seed); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkPattern(b []byte, off, seed int) error {
	for i, x := range b {
		if want := patternByte(off+i, seed); x != want {
			return fmt.Errorf("read byte at region offset %d = %#x, want %#x", off+i, x, want)
		}
	}
	return nil
}

func testRegister(t *testing.T, e *env) {
	sizes := []int{1, 100, 4096, 1 << 20}
	keys := map[uint32]bool{}
	for _, size := range sizes {
		r, err := e.server.Register(size)
		noErr(t, fmt.Sprintf("Register(%d)", size), err)
		t.Cleanup(func() { r.Close() })
		b, d := r.Bytes(), r.Descriptor()
		if len(b) != size || d.Len != uint64(size) {
			t.Errorf("Register(%d): len(Bytes) = %d, Descriptor.Len = %d", size, len(b), d.Len)
		}
		if !bytes.Equal(b, make([]byte, size)) {
			t.Errorf("Register(%d): memory not zeroed", size)
		}
		if d.Key == 0 || keys[d.Key] {
			t.Errorf("Register(%d): key %#x is zero or repeats", size, d.Key)
		}
		keys[d.Key] = true
	}
	r, err := e.server.Register(8)
	noErr(t, "Register", err)
	noErr(t, "Region.Close", r.Close())
	noErr(t, "second Region.Close", r.Close())
}

func testReadBounds(t *testing.T, e *env) {
	const size = 4096 + 13
	r := e.region(e.server, size, 1)
	d := r.Descriptor()
	tests := []struct {
		name   string
		off, n uint64
		want   error
	}{
		{"whole region", 0, size, nil},
		{"first byte", 0, 1, nil},
		{"last byte", size - 1, 1, nil},
		{"unaligned middle", 5, 1000, nil},
		{"zero length", 0, 0, nil},
		{"zero length inside", 100, 0, nil},
		{"offset at end", size, 1, transport.ErrOutOfRange},
		{"offset far past end", 1 << 40, 8, transport.ErrOutOfRange},
		{"length past end", size - 10, 11, transport.ErrOutOfRange},
		{"length of region from 1", 1, size, transport.ErrOutOfRange},
		{"offset wraps around", math.MaxUint64 - 3, 8, transport.ErrOutOfRange},
	}
	ctx := guarded(t)
	c, _ := e.connect()
	for _, tt := range tests {
		if tt.want != nil {
			c, _ = e.connect() // the failure may break the connection
		}
		dst := bytes.Repeat([]byte{sentinel}, int(tt.n))
		err := c.Read(ctx, []transport.ReadOp{{Remote: d, Offset: tt.off, Dst: dst}})
		if tt.want != nil {
			wantErr(t, fmt.Sprintf("%s: Read(off %d, len %d)", tt.name, tt.off, tt.n), err, tt.want)
			c.Close()
			continue
		}
		noErr(t, tt.name, err)
		noErr(t, tt.name, checkPattern(dst, int(tt.off), 1))
	}
}

func testReadBadKey(t *testing.T, e *env) {
	ctx := guarded(t)
	live := e.region(e.server, 1024, 2)
	gone := e.region(e.server, 1024, 3)
	unknown := live.Descriptor()
	for k := unknown.Key ^ 0x5a5a5a5a; ; k++ {
		if k != 0 && k != live.Descriptor().Key && k != gone.Descriptor().Key {
			unknown.Key = k
			break
		}
	}
	c, _ := e.connect()
	dst := make([]byte, 64)
	noErr(t, "Read before Close", c.Read(ctx, []transport.ReadOp{{Remote: gone.Descriptor(), Dst: dst}}))
	noErr(t, "Read before Close", checkPattern(dst, 0, 3))
	noErr(t, "Region.Close", gone.Close())

	tests := []struct {
		name string
		ops  []transport.ReadOp
	}{
		{"unknown key", []transport.ReadOp{{Remote: unknown, Dst: dst}}},
		{"deregistered", []transport.ReadOp{{Remote: gone.Descriptor(), Dst: dst}}},
		{"deregistered after a good op", []transport.ReadOp{
			{Remote: live.Descriptor(), Dst: make([]byte, 8)},
			{Remote: gone.Descriptor(), Offset: 8, Dst: dst},
		}},
	}
	for _, tt := range tests {
		c, _ := e.connect()
		wantErr(t, tt.name, c.Read(ctx, tt.ops), transport.ErrBadKey)
		c.Close()
	}
}

func testReadBatch(t *testing.T, e *env) {
	ctx := guarded(t)
	r1 := e.region(e.server, 10000, 1)
	r2 := e.region(e.server, 3000, 2)
	c, _ := e.connect()

	noErr(t, "empty batch", c.Read(ctx, nil))

	// A full batch mixing regions, offsets and lengths.
	ops := make([]transport.ReadOp, transport.MaxBatch)
	for i := range ops {
		r := r1
		if i%2 == 1 {
			r = r2
		}
		ops[i] = transport.ReadOp{Remote: r.Descriptor(), Offset: uint64(i * 97), Dst: make([]byte, 1+i*50)}
	}
	noErr(t, "MaxBatch reads", c.Read(ctx, ops))
	for i, op := range ops {
		seed := 1 + i%2
		noErr(t, fmt.Sprintf("op %d", i), checkPattern(op.Dst, int(op.Offset), seed))
	}

	tooMany := append(ops, ops[0])
	wantErr(t, "MaxBatch+1 reads", c.Read(ctx, tooMany), transport.ErrBatchTooLarge)
	// The refused batch was not posted: the connection still works.
	noErr(t, "Read after refusal", readMany(ctx, c, r1.Descriptor(), 1, 0, 3))
}

// testReadBatchBytes checks transport.MaxReadBatchBytes: a batch that
// reads exactly that much works; one byte more (every op inside the region)
// is refused with ErrBatchTooLarge before anything is posted, so the
// connection still works.
func testReadBatchBytes(t *testing.T, e *env) {
	ctx := guarded(t)
	const per = transport.MaxReadBatchBytes / transport.MaxBatch
	r := e.region(e.server, per+1, 8)
	c, _ := e.connect()
	ops := make([]transport.ReadOp, transport.MaxBatch)
	for i := range ops {
		ops[i] = transport.ReadOp{Remote: r.Descriptor(), Dst: make([]byte, per)}
	}
	noErr(t, "Read of MaxReadBatchBytes", c.Read(ctx, ops))
	for i, op := range ops {
		noErr(t, fmt.Sprintf("op %d", i), checkPattern(op.Dst, 0, 8))
	}
	ops[3].Dst = make([]byte, per+1)
	wantErr(t, "Read of MaxReadBatchBytes+1", c.Read(ctx, ops), transport.ErrBatchTooLarge)
	// Refused before posting: the connection still works.
	noErr(t, "Read after refusal", readMany(ctx, c, r.Descriptor(), 8, 0, 3))
}

func testReadBothWays(t *testing.T, e *env) {
	ctx := guarded(t)
	rs := e.region(e.server, 5000, 4)
	rc := e.region(e.client, 5000, 6)
	c, s := e.connect()
	// Reads of both ends' regions, over both ends of one connection, at
	// once.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 2 {
		wg.Go(func() { errs <- readMany(ctx, c, rs.Descriptor(), 4, g, 50) })
		wg.Go(func() { errs <- readMany(ctx, s, rc.Descriptor(), 6, g, 50) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		noErr(t, "reads both ways", err)
	}
	// Writes by the owner are visible to later reads.
	copy(rs.Bytes()[10:], "fresh bytes")
	dst := make([]byte, 11)
	noErr(t, "Read", c.Read(ctx, []transport.ReadOp{{Remote: rs.Descriptor(), Offset: 10, Dst: dst}}))
	if string(dst) != "fresh bytes" {
		t.Fatalf("Read after the owner wrote: %q", dst)
	}
}

// testReadCanceled checks that a Read whose context ends returns the
// context's error and that nothing is written to its Dst afterwards. The
// cancellation lands at varying points; whether it beats the response does
// not matter, only what happens to Dst after Read returns.
func testReadCanceled(t *testing.T, e *env) {
	ctx := guarded(t)
	const opLen = 64 << 10
	r := e.region(e.server, transport.MaxBatch*opLen, 7)
	c, _ := e.connect()
	ops := make([]transport.ReadOp, transport.MaxBatch)
	for i := range ops {
		ops[i] = transport.ReadOp{Remote: r.Descriptor(), Offset: uint64(i * opLen), Dst: make([]byte, opLen)}
	}
	reset := func() {
		for _, op := range ops {
			clear(op.Dst)
			op.Dst[0] = sentinel
		}
	}

	reset()
	done, cancel := context.WithCancel(ctx)
	cancel()
	wantErr(t, "Read with a canceled context", c.Read(done, ops), context.Canceled)
	for i, op := range ops {
		if op.Dst[0] != sentinel || !bytes.Equal(op.Dst[1:], make([]byte, opLen-1)) {
			t.Fatalf("Read with a canceled context wrote op %d's Dst", i)
		}
	}

	canceled := 0
	for round := range 30 {
		reset()
		rctx, cancel := context.WithCancel(ctx)
		go func() {
			for range round * 10 {
				runtime.Gosched()
			}
			cancel()
		}()
		err := c.Read(rctx, ops)
		cancel()
		if err == nil {
			continue
		}
		wantErr(t, fmt.Sprintf("round %d: Read canceled midway", round), err, context.Canceled)
		canceled++
		snap := make([][]byte, len(ops))
		for i, op := range ops {
			snap[i] = bytes.Clone(op.Dst)
		}
		// A later Read on the same connection completes after the canceled
		// one's response has come and gone.
		noErr(t, "Read after a canceled one", readMany(ctx, c, r.Descriptor(), 7, round, 1))
		for i, op := range ops {
			if !bytes.Equal(op.Dst, snap[i]) {
				t.Fatalf("round %d: op %d's Dst changed after Read returned %v", round, i, err)
			}
		}
	}
	t.Logf("%d of 30 reads were canceled midway", canceled)
}

// testTornReads reads a region while its owner keeps rewriting it. The
// contract lets such READs return any mix of old and new bytes, torn
// anywhere; they must still succeed, and every byte must be one the owner
// wrote at some point.
func testTornReads(t *testing.T, e *env) {
	ctx := guarded(t)
	const size = 32 << 10
	written := [...]byte{0, 0x11, 0x22, 0x33, 0x44} // 0: freshly registered
	r := e.region(e.server, size, 0)
	clear(r.Bytes())
	c, _ := e.connect()

	var stop atomic.Bool
	var writer sync.WaitGroup
	writer.Go(func() {
		mem := r.Bytes()
		for i := 0; !stop.Load(); i++ {
			v := written[1+i%(len(written)-1)]
			for j := range mem {
				mem[j] = v
			}
		}
	})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for g := range 3 {
		wg.Go(func() {
			ops := []transport.ReadOp{
				{Remote: r.Descriptor(), Dst: make([]byte, size)},
				{Remote: r.Descriptor(), Offset: uint64(g * 1001), Dst: make([]byte, 777)},
			}
			for range 40 {
				if err := c.Read(ctx, ops); err != nil {
					errs <- fmt.Errorf("Read during writes: %w", err)
					return
				}
				for _, op := range ops {
					for i, x := range op.Dst {
						if bytes.IndexByte(written[:], x) < 0 {
							errs <- fmt.Errorf("byte %d read as %#x, which was never written", int(op.Offset)+i, x)
							return
						}
					}
				}
			}
			errs <- nil
		})
	}
	wg.Wait()
	stop.Store(true)
	writer.Wait()
	close(errs)
	for err := range errs {
		noErr(t, "torn reads", err)
	}
}
