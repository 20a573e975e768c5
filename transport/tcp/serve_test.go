package tcp

import (
	"bytes"
	"io"
	"runtime"
	"sync"
	"testing"

	"github.com/kvd-project/kvd/transport"
)

// TestServeCoalescesQueuedResponses checks that a READ response served
// while more READ batches wait stays in the write buffer, and that the
// next response's flush sends both: under load one socket write answers
// many batches. Each case serves two batches; the second never has more.
func TestServeCoalescesQueuedResponses(t *testing.T) {
	for _, tc := range []struct {
		name         string
		more         bool
		wantBuffered bool
	}{
		{"queued batch behind it: left for the next flush", true, true},
		{"none queued: flushed at once", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, ac, nc := rawPair(t, Config{}, okHello())
			c := ac.(*conn)
			r, err := tr.Register(64)
			if err != nil {
				t.Fatal(err)
			}
			copy(r.Bytes(), "abcdefgh")
			d := r.Descriptor()
			batch := func(id uint32, off uint64) *job {
				j := &job{id: id, n: 1}
				j.ops[0] = wireOp{addr: d.Addr + off, n: 4, key: d.Key}
				return j
			}
			if err := c.serveOne(batch(0, 0), tc.more); err != nil {
				t.Fatal(err)
			}
			c.wmu.Lock()
			buffered := c.bw != nil && c.bw.Buffered() > 0
			c.wmu.Unlock()
			if buffered != tc.wantBuffered {
				t.Fatalf("after serving with more=%v: response buffered %v, want %v", tc.more, buffered, tc.wantBuffered)
			}
			if err := c.serveOne(batch(1, 4), false); err != nil {
				t.Fatal(err)
			}
			for i, want := range []string{"abcd", "efgh"} {
				h := readFrameHeader(t, nc)
				if h.typ != frameReadResp || h.id != uint32(i) || h.length != 4+trailerSize {
					t.Fatalf("response %d: header %+v", i, h)
				}
				b := make([]byte, h.length)
				if _, err := io.ReadFull(nc, b); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b[:4], []byte(want)) {
					t.Fatalf("response %d: %q, want %q", i, b[:4], want)
				}
			}
		})
	}
}

// TestReadsReadyTogetherShareAWrite checks that READ requests posted by
// goroutines that are ready to run at the same time leave in fewer socket
// writes than there are requests (serveLoop flushes them after letting
// the others post), and that every Read still gets its own answer. With
// one P the goroutines cannot overlap at the writer's lock, so without the
// deferred flush each Read would write on its own.
func TestReadsReadyTogetherShareAWrite(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const reads = 4 // okHello's maxReads
	_, ac, nc := rawPair(t, Config{}, okHello())
	c := ac.(*conn)
	ctx := testCtx(t)
	w0 := c.wprog.Load()
	var wg sync.WaitGroup
	errc := make(chan error, reads)
	bufs := make([][]byte, reads)
	for i := range reads {
		bufs[i] = make([]byte, 8)
		wg.Add(1)
		go func() {
			defer wg.Done()
			op := transport.ReadOp{Remote: transport.Descriptor{Addr: uint64(i+1) << 12, Len: 1 << 20, Key: 7}, Dst: bufs[i]}
			errc <- ac.Read(ctx, []transport.ReadOp{op})
		}()
	}
	ids := make([]uint32, reads)
	for i := range reads {
		h := readFrameHeader(t, nc)
		if h.typ != frameReadReq || h.a != 1 {
			t.Fatalf("request %d: header %+v", i, h)
		}
		p := make([]byte, h.length)
		if _, err := io.ReadFull(nc, p); err != nil {
			t.Fatal(err)
		}
		ids[i] = h.id
	}
	// Each socket write counts twice in wprog (before and after).
	if writes := (c.wprog.Load() - w0) / 2; writes >= reads {
		t.Errorf("%d READ requests took %d socket writes, want fewer", reads, writes)
	}
	for _, id := range ids {
		resp := frame(header{typ: frameReadResp, id: id, length: 8 + trailerSize}, append([]byte("answer-"+string(rune('0'+id))), 0, 0))
		if _, err := nc.Write(resp); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	for _, b := range bufs {
		got[string(b)] = true
	}
	if len(got) != reads {
		t.Fatalf("answers %q: want %d distinct ones", bufs, reads)
	}
}
