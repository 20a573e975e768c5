package tcp

import (
	"bytes"
	"io"
	"testing"
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
