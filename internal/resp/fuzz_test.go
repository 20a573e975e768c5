package resp

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzParse feeds the Reader arbitrary bytes: it must return commands
// within its limits, a *ProtocolError or an io error, never panic, and
// a command it returns must encode back to the bytes of an equal one.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"*2\r\n$3\r\nGET\r\n$1\r\na\r\n", "PING\r\n", "SET \"a\\x41\" 'b'\r\n",
		"*1\r\n$-1\r\n", "*-1\r\n", "*3\r\n$3\r\nSET\r\n$1\r\na\r\n", "\r\n\n",
	} {
		f.Add([]byte(s))
	}
	lim := Limits{MaxArgs: 16, MaxInline: 256, MaxRequestBytes: 1024}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in), lim)
		for {
			args, err := r.ReadCommand()
			if err != nil {
				var pe *ProtocolError
				if !errors.As(err, &pe) && err != io.EOF && err != io.ErrUnexpectedEOF {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(args) == 0 || len(args) > lim.MaxArgs {
				t.Fatalf("%d args", len(args))
			}
			var enc bytes.Buffer
			w := NewWriter(&enc)
			w.Array(len(args))
			total := 0
			for _, a := range args {
				total += len(a)
				w.Bulk(a)
			}
			w.Flush()
			if total > lim.MaxRequestBytes {
				t.Fatalf("%d bytes of arguments", total)
			}
			back, err := NewReader(&enc, lim).ReadCommand()
			if err != nil || len(back) != len(args) {
				t.Fatalf("re-read: %v, %d args", err, len(back))
			}
			for i := range args {
				if !bytes.Equal(back[i], args[i]) {
					t.Fatalf("arg %d: %q != %q", i, back[i], args[i])
				}
			}
		}
	})
}
