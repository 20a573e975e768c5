package respfloor

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReader feeds the parser arbitrary bytes: every command it returns
// is within the bounds, and it ends with the input's end, a cut-off
// command or a protocolError, never a panic. Serving the same bytes
// must not panic either, and leaves only whole replies.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		cmd("SET", "k", "v"), cmd("MSET", "a", "1", "b", "2") + cmd("GET", "a"), "PING\r\n", "*0\r\n\r\n",
		"*1\r\n$-1\r\n", "*2\r\n$3\r\nGET\r\n", "*1\r\n$4\r\nPINGPONG\r\n", "*9999999999\r\n", cmd("INCR", "n") + cmd("INCR", "n"),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := newReader(bytes.NewReader(in))
		for {
			args, err := r.next()
			var pe protocolError
			if err == io.EOF || err == io.ErrUnexpectedEOF || errors.As(err, &pe) {
				break
			}
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if len(args) > maxArgs {
				t.Fatalf("%d arguments", len(args))
			}
			for _, a := range args {
				if len(a) > maxBulk {
					t.Fatalf("an argument of %d bytes", len(a))
				}
			}
		}
		var out bytes.Buffer
		_ = NewServer().serve(bytes.NewReader(in), &out)
		if out.Len() > 0 && !bytes.HasSuffix(out.Bytes(), []byte("\r\n")) {
			t.Fatalf("replies %q end mid-reply", out.Bytes())
		}
	})
}
