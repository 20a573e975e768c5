package rdma

// Host tests of the wire format (no build tag: they need no RDMA device and
// run in every build). `go test -fuzz FuzzX ./transport/rdma` fuzzes one.

import (
	"bytes"
	"errors"
	"testing"

	"github.com/kvd-project/kvd/transport"
)

func validHello() hello {
	cfg := Config{}.withDefaults()
	return hello{ctl: ctlBuffers, bufSize: cfg.BufSize, recvBuffers: cfg.RecvBuffers,
		credits: cfg.Credits, maxMessage: cfg.MaxMessage}
}

func TestHelloRoundTrip(t *testing.T) {
	h := validHello()
	b := h.encode()
	if len(b) != helloSize {
		t.Fatalf("encoded %d bytes, want %d", len(b), helloSize)
	}
	// The connection manager may pad private data.
	got, err := parseHello(append(b, make([]byte, 40)...))
	if err != nil || got != h {
		t.Fatalf("parseHello(encode(%+v)) = %+v, %v", h, got, err)
	}
}

func TestParseHelloRejects(t *testing.T) {
	mod := func(f func(b []byte)) []byte {
		b := validHello().encode()
		f(b)
		return b
	}
	cases := map[string][]byte{
		"empty":              nil,
		"short":              validHello().encode()[:helloSize-1],
		"bad magic":          mod(func(b []byte) { b[0] ^= 1 }),
		"version 2":          mod(func(b []byte) { le.PutUint16(b[4:], 2) }),
		"no ctl buffers":     mod(func(b []byte) { le.PutUint16(b[6:], 0) }),
		"tiny buffers":       mod(func(b []byte) { le.PutUint32(b[8:], minBufSize-1) }),
		"huge buffers":       mod(func(b []byte) { le.PutUint32(b[8:], maxBufSize+1) }),
		"negative buffers":   mod(func(b []byte) { le.PutUint32(b[8:], 1<<31) }),
		"no recv buffers":    mod(func(b []byte) { le.PutUint32(b[12:], 0) }),
		"too many buffers":   mod(func(b []byte) { le.PutUint32(b[12:], maxBuffers) }),
		"no credits":         mod(func(b []byte) { le.PutUint32(b[16:], 0) }),
		"too many credits":   mod(func(b []byte) { le.PutUint32(b[16:], maxCredits+1) }),
		"huge max message":   mod(func(b []byte) { le.PutUint32(b[20:], maxMaxMessage+1) }),
		"max message 2^32-1": mod(func(b []byte) { le.PutUint32(b[20:], 1<<32-1) }),
	}
	for name, b := range cases {
		if h, err := parseHello(b); !errors.Is(err, transport.ErrProtocol) {
			t.Errorf("%s: parseHello = %+v, %v; want ErrProtocol", name, h, err)
		}
	}
}

// FuzzParseHello: parseHello never panics, refuses only with ErrProtocol,
// and whatever it accepts re-encodes to the same bytes.
func FuzzParseHello(f *testing.F) {
	f.Add(validHello().encode())
	f.Add(append(validHello().encode(), 1, 2, 3))
	f.Add(hello{ctl: 1, bufSize: minBufSize, recvBuffers: 1, credits: 1}.encode())
	f.Add(hello{ctl: maxBuffers, bufSize: maxBufSize, recvBuffers: maxBuffers - ctlBuffers,
		credits: maxCredits, maxMessage: maxMaxMessage}.encode())
	f.Add([]byte("KVDR"))
	f.Add(make([]byte, helloSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHello(b)
		if err != nil {
			if !errors.Is(err, transport.ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		enc := h.encode()
		if !bytes.Equal(enc, b[:helloSize]) {
			t.Fatalf("accepted %x, re-encodes as %x", b[:helloSize], enc)
		}
		if h2, err := parseHello(enc); err != nil || h2 != h {
			t.Fatalf("re-parse = %+v, %v; want %+v", h2, err, h)
		}
		// What it accepts is what a valid Config could say.
		cfg := Config{BufSize: h.bufSize, RecvBuffers: h.recvBuffers, Credits: h.credits, MaxMessage: h.maxMessage}
		if h.maxMessage == 0 {
			cfg.MaxMessage = 1
		}
		if err := cfg.Validate(); err != nil || h.ctl < 1 || h.ctl > maxBuffers {
			t.Fatalf("accepted %+v: %v", h, err)
		}
	})
}

// FuzzHeader: a header survives put and parse, and put zeroes the reserved
// bytes.
func FuzzHeader(f *testing.F) {
	var b [headerSize]byte
	header{kind: msgData, flags: flagFirst | flagLast, retBuf: 3, retCtl: 1, retMsg: 7, total: 12345}.put(b[:])
	f.Add(b[:])
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < headerSize {
			return
		}
		h := parseHeader(in)
		var out [headerSize + 4]byte
		for i := range out {
			out[i] = 0xee
		}
		h.put(out[:])
		if !bytes.Equal(out[:12], in[:12]) || le.Uint32(out[12:]) != 0 || le.Uint32(out[16:]) != 0xeeeeeeee {
			t.Fatalf("put(parse(%x)) = %x", in[:headerSize], out)
		}
		if parseHeader(out[:]) != h {
			t.Fatalf("parse(put(%+v)) = %+v", h, parseHeader(out[:]))
		}
	})
}

func bytesOf(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13 + seed)
	}
	return b
}

// frag builds a received SEND: a header, then n payload bytes, in a buffer
// of bufSize.
func frag(bufSize int, h header, n int) ([]byte, int) {
	b := make([]byte, bufSize)
	h.put(b)
	for i := range n {
		b[headerSize+i] = byte(i)
	}
	return b, headerSize + n
}

func TestCheckFragment(t *testing.T) {
	lim := rxLimits{bufSize: 1024, maxMessage: 5000}
	idle := asmState{}
	mid := asmState{active: true, have: 2016, total: 3000} // two full fragments in
	const full = 1024 - headerSize
	data := func(flags uint8, total uint32) header { return header{kind: msgData, flags: flags, total: total} }
	fl := uint8(flagFirst | flagLast)
	cases := []struct {
		name string
		h    header
		n    int // payload bytes; -1: a SEND shorter than a header
		asm  asmState
		ok   bool
	}{
		{"whole", data(fl, 10), 10, idle, true},
		{"empty", data(fl, 0), 0, idle, true},
		{"whole, full buffer", data(fl, full), full, idle, true},
		{"whole, total too small", data(fl, 9), 10, idle, false},
		{"whole, total too large", data(fl, 11), 10, idle, false},
		{"whole, total 2^32-1", data(fl, 1<<32-1), 10, idle, false},
		{"whole inside another", data(fl, 10), 10, mid, false},
		{"first", data(flagFirst, 3000), full, idle, true},
		{"first of max", data(flagFirst, 5000), full, idle, true},
		{"first over max", data(flagFirst, 5001), full, idle, false},
		{"first, total 2^32-1", data(flagFirst, 1<<32-1), full, idle, false},
		{"first holds total", data(flagFirst, full), full, idle, false},
		{"first inside another", data(flagFirst, 3000), full, mid, false},
		{"middle", data(0, 0), 500, mid, true},
		{"middle ignores total", data(0, 1<<32-1), 500, mid, true},
		{"middle without first", data(0, 0), 500, idle, false},
		{"middle reaching total", data(0, 0), 984, mid, false},
		{"middle overrun", data(0, 0), 985, mid, false},
		{"last", data(flagLast, 0), 984, mid, true},
		{"last short", data(flagLast, 0), 983, mid, false},
		{"last overrun", data(flagLast, 0), 985, mid, false},
		{"last without first", data(flagLast, 0), 10, idle, false},
		{"unknown flag", data(4|fl, 10), 10, idle, false},
		{"credits", header{kind: msgCtl, retBuf: 5, retMsg: 2}, 0, idle, true},
		{"credits mid-message", header{kind: msgCtl, retCtl: 1}, 0, mid, true},
		{"credits with payload", header{kind: msgCtl}, 1, idle, false},
		{"credits with flags", header{kind: msgCtl, flags: flagFirst}, 0, idle, false},
		{"credits with total", header{kind: msgCtl, total: 1}, 0, idle, false},
		{"kind 0", header{kind: 0, flags: fl}, 0, idle, false},
		{"kind 3", header{kind: 3, flags: fl}, 0, idle, false},
		{"shorter than a header", data(fl, 0), -1, idle, false},
	}
	for _, tc := range cases {
		b, n := frag(lim.bufSize, tc.h, max(tc.n, 0))
		if tc.n < 0 {
			n = headerSize - 1
		}
		h, payload, err := checkFragment(b, n, lim, tc.asm)
		if tc.ok != (err == nil) {
			t.Errorf("%s: err = %v, want ok %v", tc.name, err, tc.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, transport.ErrProtocol) {
				t.Errorf("%s: %v does not wrap ErrProtocol", tc.name, err)
			}
			continue
		}
		if h != tc.h || len(payload) != tc.n {
			t.Errorf("%s: got %+v and %d bytes", tc.name, h, len(payload))
		}
	}
	// The message limit applies to whole messages too.
	small := rxLimits{bufSize: 1024, maxMessage: 9}
	b, n := frag(1024, data(fl, 10), 10)
	if _, _, err := checkFragment(b, n, small, idle); !errors.Is(err, transport.ErrProtocol) {
		t.Errorf("whole message over the limit: %v", err)
	}
	// Lengths beyond the buffer (the completion's byte count is the peer's
	// to choose only up to the posted length, but check anyway).
	b, _ = frag(lim.bufSize, data(fl, 0), 0)
	for _, n := range []int{-1, 0, headerSize - 1, lim.bufSize + 1, 1 << 30} {
		if _, _, err := checkFragment(b, n, lim, idle); !errors.Is(err, transport.ErrProtocol) {
			t.Errorf("byte count %d: %v", n, err)
		}
	}
	if _, _, err := checkFragment(b[:100], 200, lim, idle); !errors.Is(err, transport.ErrProtocol) {
		t.Errorf("byte count beyond the slice: %v", err)
	}
}

// reassembler is a model of the receive side of a connection (received,
// reassemble, afterBatch's credit accounting) over checkFragment and
// addReturned.
type reassembler struct {
	lim      rxLimits
	granted  credits
	have     credits
	asm      []byte
	asmTotal int
	got      [][]byte
}

func (r *reassembler) receive(b []byte, n int) error {
	h, payload, err := checkFragment(b, n, r.lim, asmState{active: r.asm != nil, have: len(r.asm), total: r.asmTotal})
	if err != nil {
		return err
	}
	if err := addReturned(&r.have, h.returned(), r.granted); err != nil {
		return err
	}
	if h.kind == msgCtl {
		return nil
	}
	if h.flags&flagFirst != 0 {
		r.asm, r.asmTotal = make([]byte, 0, h.total), int(h.total)
	}
	r.asm = append(r.asm, payload...)
	if h.flags&flagLast != 0 {
		r.got = append(r.got, r.asm)
		r.asm = nil
	}
	return nil
}

// sendAll fragments msgs as conn.sendFragments does (chains of up to
// chain SENDs, the header reused within a chain) into SENDs of at most
// bufSize bytes.
func sendAll(msgs [][]byte, bufSize, chain int) (sends [][]byte) {
	frag := bufSize - headerSize
	for _, msg := range msgs {
		off, first := 0, true
		for first || off < len(msg) {
			h := header{kind: msgData}
			for range chain {
				if !first && off == len(msg) {
					break
				}
				k := min(len(msg)-off, frag)
				h.flags = 0
				if first {
					h.flags, h.total = flagFirst, uint32(len(msg))
				}
				if off+k == len(msg) {
					h.flags |= flagLast
				}
				b := make([]byte, headerSize+k)
				h.put(b)
				copy(b[headerSize:], msg[off:off+k])
				sends = append(sends, b)
				off += k
				first = false
			}
		}
	}
	return sends
}

// An honest sender's fragments all pass and reassemble to its messages.
func TestCheckFragmentHonestSender(t *testing.T) {
	for _, bufSize := range []int{minBufSize, 1024, 16 << 10} {
		frag := bufSize - headerSize
		var msgs [][]byte
		for _, n := range []int{0, 1, frag - 1, frag, frag + 1, 2 * frag, 3*frag + 7, 40 * frag, 100000} {
			msgs = append(msgs, bytesOf(n, n))
		}
		for _, chain := range []int{1, 3, 16} {
			r := &reassembler{lim: rxLimits{bufSize: bufSize, maxMessage: 1 << 20}}
			for i, s := range sendAll(msgs, bufSize, chain) {
				b := make([]byte, bufSize)
				copy(b, s)
				if err := r.receive(b, len(s)); err != nil {
					t.Fatalf("buf %d chain %d: SEND %d: %v", bufSize, chain, i, err)
				}
			}
			if len(r.got) != len(msgs) || r.asm != nil {
				t.Fatalf("buf %d chain %d: %d messages, want %d", bufSize, chain, len(r.got), len(msgs))
			}
			for i := range msgs {
				if !bytes.Equal(r.got[i], msgs[i]) {
					t.Fatalf("buf %d chain %d: message %d differs", bufSize, chain, i)
				}
			}
		}
	}
}

// FuzzFragments feeds a stream of arbitrary SENDs through the receive-side
// checks: nothing panics, every refusal wraps ErrProtocol, and whatever is
// accepted respects the buffer size, the message limit and the credits
// granted.
func FuzzFragments(f *testing.F) {
	enc := func(sends [][]byte) []byte {
		var b []byte
		for _, s := range sends {
			b = le.AppendUint16(b, uint16(len(s)))
			b = append(b, s...)
		}
		return b
	}
	f.Add(uint16(300), uint32(2000), enc(sendAll([][]byte{bytesOf(1000, 1), nil, bytesOf(5, 2)}, 300, 2)))
	var ctl [headerSize]byte
	header{kind: msgCtl, retBuf: 2, retMsg: 1}.put(ctl[:])
	f.Add(uint16(256), uint32(100), enc([][]byte{ctl[:], ctl[:], ctl[:]}))
	f.Add(uint16(0), uint32(0), []byte{16, 0, 1, 1, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, bufSize uint16, maxMessage uint32, stream []byte) {
		lim := rxLimits{bufSize: minBufSize + int(bufSize)%(4<<10), maxMessage: int(maxMessage % (1 << 20))}
		r := &reassembler{lim: lim, granted: credits{buf: 4, ctl: 2, msg: 3}}
		buf := make([]byte, lim.bufSize)
		for len(stream) >= 2 {
			n := int(le.Uint16(stream))
			stream = stream[2:]
			clear(buf)
			copy(buf, stream[:min(n, len(stream))])
			stream = stream[min(n, len(stream)):]
			before := len(r.got)
			err := r.receive(buf, n)
			if err != nil {
				if !errors.Is(err, transport.ErrProtocol) {
					t.Fatalf("error %v does not wrap ErrProtocol", err)
				}
				return // the connection would be closed
			}
			if n > lim.bufSize {
				t.Fatalf("accepted a SEND of %d bytes into buffers of %d", n, lim.bufSize)
			}
			if r.have.buf > r.granted.buf || r.have.ctl > r.granted.ctl || r.have.msg > r.granted.msg {
				t.Fatalf("holding credits %+v of %+v", r.have, r.granted)
			}
			if r.asm != nil && (len(r.asm) >= r.asmTotal || r.asmTotal > lim.maxMessage) {
				t.Fatalf("reassembling %d of %d bytes (limit %d)", len(r.asm), r.asmTotal, lim.maxMessage)
			}
			if len(r.got) > before && len(r.got[len(r.got)-1]) > lim.maxMessage {
				t.Fatalf("delivered %d bytes (limit %d)", len(r.got[len(r.got)-1]), lim.maxMessage)
			}
		}
	})
}

func TestAddReturned(t *testing.T) {
	granted := credits{buf: 10, ctl: 8, msg: 4}
	cases := []struct {
		have, ret credits
		ok        bool
	}{
		{credits{}, credits{}, true},
		{credits{0, 0, 0}, granted, true},
		{credits{5, 7, 3}, credits{5, 1, 1}, true},
		{credits{5, 7, 3}, credits{6, 0, 0}, false},
		{credits{0, 8, 0}, credits{0, 1, 0}, false},
		{credits{0, 0, 4}, credits{0, 0, 1}, false},
		{credits{}, credits{buf: 0xffff}, false},
		{credits{}, credits{buf: -1}, false},
	}
	for _, tc := range cases {
		have := tc.have
		err := addReturned(&have, tc.ret, granted)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, transport.ErrProtocol)) {
			t.Errorf("addReturned(%+v, %+v) = %v, want ok %v", tc.have, tc.ret, err, tc.ok)
			continue
		}
		want := tc.have
		if tc.ok {
			want = credits{tc.have.buf + tc.ret.buf, tc.have.ctl + tc.ret.ctl, tc.have.msg + tc.ret.msg}
		}
		if have != want {
			t.Errorf("addReturned(%+v, %+v) left %+v, want %+v", tc.have, tc.ret, have, want)
		}
	}
}
