package tcp

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/kvd-project/kvd/transport"
)

// FuzzReadHello: the handshake's hello decoder never panics; what it
// accepts re-encodes to the bytes it read.
func FuzzReadHello(f *testing.F) {
	f.Add(hello{version: helloVersion, maxMessage: 1 << 20, credits: 4, maxReads: 4, node: "n1"}.marshal())
	f.Add(refusal)
	f.Add([]byte{0x16, 3, 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		h, err := readHello(r)
		if err != nil {
			if !errors.Is(err, transport.ErrProtocol) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) &&
				!errors.Is(err, ErrTLS) && !errors.Is(err, ErrRefused) {
				t.Logf("error kind: %v", err)
			}
			return
		}
		used := len(b) - r.Len()
		if out := h.marshal(); !bytes.Equal(out, b[:used]) {
			t.Fatalf("hello %x re-encodes as %x", b[:used], out)
		}
	})
}
