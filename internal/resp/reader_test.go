package resp

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReadCommandParsesMultibulkAndInline(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"multibulk", "*2\r\n$3\r\nGET\r\n$1\r\na\r\n", []string{"GET", "a"}},
		{"empty bulk", "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", []string{"ECHO", ""}},
		{"binary bulk", "*2\r\n$4\r\nECHO\r\n$4\r\n\r\n\x00\xff\r\n", []string{"ECHO", "\r\n\x00\xff"}},
		{"empty multibulk skipped", "*0\r\n*1\r\n$4\r\nPING\r\n", []string{"PING"}},
		{"inline", "SET a b\r\n", []string{"SET", "a", "b"}},
		{"inline LF only", "PING\n", []string{"PING"}},
		{"inline blanks", "  GET \t a  \r\n", []string{"GET", "a"}},
		{"inline empty line skipped", "\r\n\r\nPING\r\n", []string{"PING"}},
		{"inline double quotes", `SET "a b" "x\ny\x41"` + "\r\n", []string{"SET", "a b", "x\nyA"}},
		{"inline single quotes", `SET 'a\'b' ''` + "\r\n", []string{"SET", "a'b", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in), Limits{})
			args, err := r.ReadCommand()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range args {
				got = append(got, string(a))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadCommandRefusesWithRedisProtocolErrors(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		lim    Limits
		msg    string
		reason string
	}{
		{"bad multibulk length", "*x\r\n", Limits{}, "invalid multibulk length", ReasonSyntax},
		{"too many args", "*3\r\n", Limits{MaxArgs: 2}, "invalid multibulk length", ReasonArgs},
		{"not a bulk", "*1\r\n:1\r\n", Limits{}, "expected '$', got ':'", ReasonSyntax},
		{"negative bulk", "*1\r\n$-1\r\n", Limits{}, "invalid bulk length", ReasonSyntax},
		{"bulk over the value limit", "*1\r\n$1048577\r\n", Limits{}, "invalid bulk length", ReasonBulk},
		{"request over its bound", "*2\r\n$3\r\nabc\r\n$3\r\nabc\r\n", Limits{MaxRequestBytes: 5}, "request too large", ReasonRequest},
		{"bulk without CRLF", "*1\r\n$1\r\nab\r\n", Limits{}, "invalid bulk format", ReasonSyntax},
		{"long count line", "*" + strings.Repeat("1", 40) + "\r\n", Limits{}, "too big mbulk count string", ReasonSyntax},
		{"inline too long", strings.Repeat("a", 100) + "\r\n", Limits{MaxInline: 50}, "too big inline request", ReasonInline},
		{"inline unterminated", strings.Repeat("a", 100), Limits{MaxInline: 50}, "too big inline request", ReasonInline},
		{"unbalanced quotes", "SET \"a b\r\n", Limits{}, "unbalanced quotes in request", ReasonQuotes},
		{"quote then text", "SET \"a\"b\r\n", Limits{}, "unbalanced quotes in request", ReasonQuotes},
		{"inline too many args", "a b c\r\n", Limits{MaxArgs: 2}, "invalid multibulk length", ReasonArgs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReader(strings.NewReader(tt.in), tt.lim).ReadCommand()
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("err %v, want a protocol error", err)
			}
			if pe.Msg != tt.msg || pe.Reason != tt.reason {
				t.Fatalf("got %q (%s), want %q (%s)", pe.Msg, pe.Reason, tt.msg, tt.reason)
			}
			if pe.Error() != "Protocol error: "+tt.msg {
				t.Fatalf("Error() %q", pe.Error())
			}
		})
	}
}

func TestReadCommandTruncatedIsUnexpectedEOF(t *testing.T) {
	for _, in := range []string{"*2\r\n$3\r\nGET\r\n", "*1\r\n$3\r\nGE", "PIN"} {
		_, err := NewReader(strings.NewReader(in), Limits{}).ReadCommand()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%q: err %v, want unexpected EOF", in, err)
		}
	}
	if _, err := NewReader(strings.NewReader(""), Limits{}).ReadCommand(); err != io.EOF {
		t.Errorf("empty input: err %v, want EOF", err)
	}
}

func TestWriterEncodesPerProtocol(t *testing.T) {
	tests := []struct {
		name   string
		write  func(w *Writer)
		r2, r3 string
	}{
		{"null", (*Writer).Null, "$-1\r\n", "_\r\n"},
		{"null array", (*Writer).NullArray, "*-1\r\n", "_\r\n"},
		{"map", func(w *Writer) { w.Map(1); w.BulkString("a"); w.Int(1) }, "*2\r\n$1\r\na\r\n:1\r\n", "%1\r\n$1\r\na\r\n:1\r\n"},
		{"set", func(w *Writer) { w.Set(0) }, "*0\r\n", "~0\r\n"},
		{"double", func(w *Writer) { w.Double(10.5) }, "$4\r\n10.5\r\n", ",10.5\r\n"},
		{"verbatim", func(w *Writer) { w.Verbatim("x") }, "$1\r\nx\r\n", "=5\r\ntxt:x\r\n"},
		{"error strips newlines", func(w *Writer) { w.Error("ERR a\r\nb") }, "-ERR a  b\r\n", "-ERR a  b\r\n"},
		{"simple", func(w *Writer) { w.Simple("OK") }, "+OK\r\n", "+OK\r\n"},
		{"bulk", func(w *Writer) { w.Bulk([]byte("ab")) }, "$2\r\nab\r\n", "$2\r\nab\r\n"},
	}
	for _, tt := range tests {
		for proto, want := range map[int]string{2: tt.r2, 3: tt.r3} {
			var b bytes.Buffer
			w := NewWriter(&b)
			w.Proto = proto
			tt.write(w)
			w.Flush()
			if b.String() != want {
				t.Errorf("%s RESP%d: %q, want %q", tt.name, proto, b.String(), want)
			}
		}
	}
}

// TestReadCommandAllocatesOnlyItsArguments checks that a multibulk
// command costs the argument slice and one buffer per argument and
// nothing per length line: a GET is parsed for every request the Redis
// listener serves.
func TestReadCommandAllocatesOnlyItsArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  string
		want float64 // the slice of arguments, and each argument
	}{
		{"GET", "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n", 3},
		{"SET", "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const runs = 100
			r := NewReader(strings.NewReader(strings.Repeat(tc.cmd, runs+1)), Limits{})
			got := testing.AllocsPerRun(runs, func() {
				if _, err := r.ReadCommand(); err != nil {
					t.Fatal(err)
				}
			})
			if got > tc.want {
				t.Fatalf("%.1f allocations per command, want at most %.0f", got, tc.want)
			}
		})
	}
}
